package kubectl

import (
	"flag"
	"fmt"
	"os"
	"testing"

	"github.com/qinglong/ql3/internal/testbed/testcluster"
)

var cluster *testcluster.Cluster

// TestMain starts one real cluster and points every run directory at a private root, so that the
// end of the suite can prove no run left its directory (and its kubeconfig copy) behind.
func TestMain(m *testing.M) {
	flag.Parse()
	if os.Getenv(killedRunEnv) != "" {
		killedRunChild() // never returns
	}
	if os.Getenv(exitChildEnv) != "" {
		exitChild() // never returns
	}
	root, err := os.MkdirTemp("", "ql3-kubectl-test-")
	if err != nil {
		fmt.Fprintln(os.Stderr, "FAIL:", err)
		os.Exit(1)
	}
	tempRoot = root
	code := testcluster.Main(m, &cluster)
	if left, err := os.ReadDir(root); err != nil || len(left) != 0 {
		fmt.Fprintf(os.Stderr, "FAIL: run directories left behind under %s: %d (%v)\n", root, len(left), err)
		code = 1
	}
	_ = os.RemoveAll(root)
	os.Exit(code)
}
