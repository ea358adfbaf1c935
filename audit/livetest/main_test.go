// Package livetest audits receipts and preflight reports that the real ceremony has just produced
// against the real kube-apiserver, etcd and kubectl of internal/testbed/testcluster: a straight apply, an
// apply killed after its server-side apply and recovered on the rerun, and a preflight of another
// target; then every tamper class on them. With -update it rewrites the stores the offline tests
// (package audit) replay: ../testdata/store and ../testdata/store-1000.
package livetest

import (
	"context"
	"flag"
	"os"
	"testing"

	"github.com/qinglong/ql3/audit/internal/audittest"
	"github.com/qinglong/ql3/ceremony"
	"github.com/qinglong/ql3/internal/testbed/testcluster"
)

var (
	cluster *testcluster.Cluster
	update  = flag.Bool("update", false, "rewrite ../testdata/store and ../testdata/store-1000 from real ceremonies")
)

// childEnv names the apply command file a re-executed test binary applies, to be killed by its
// parent after the server-side apply (see killAfterApply).
const childEnv = "QL3_AUDIT_LIVETEST_CHILD"

func TestMain(m *testing.M) {
	if cf := os.Getenv(childEnv); cf != "" {
		if _, err := ceremony.Apply(context.Background(), ceremony.Options{CommandFile: cf}); err != nil {
			os.Exit(3)
		}
		os.Exit(0)
	}
	code := testcluster.Main(m, &cluster)
	audittest.RemoveBuilt()
	os.Exit(code)
}
