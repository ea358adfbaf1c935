package testcluster

import (
	"context"
	"fmt"
	"os"
	"sync"
	"testing"
)

// ciEnv, set to "true", turns every skip for missing tools into a failure: CI builds the tools, so
// a test that could not run there is a test that did not pass.
const ciEnv = "CI"

// pkg is the one cluster of a test package. Main registers where it goes; the first Need starts it.
var pkg struct {
	once    sync.Once
	dst     **Cluster
	cluster *Cluster
	missing error // the tools are absent: cluster tests skip (fail under CI=true)
	err     error // the tools are there but the cluster did not start: cluster tests fail
}

// Main runs a test package whose cluster tests share one cluster: use it as
// os.Exit(testcluster.Main(m, &cluster)) and begin every test that uses the cluster with Need.
//
// Main always runs the tests. The cluster starts at the first Need, not here, so that the tests
// that need no cluster run, and pass or fail on their own, with or without the Kubernetes tools;
// only the tests that need it skip (or fail under CI=true). A binary that exits 0 having run
// nothing would tell its reader that tests passed which never ran. Listing, fuzzing and
// building start no cluster either, for none of them calls Need.
func Main(m *testing.M, c **Cluster) int {
	pkg.dst = c
	code := m.Run()
	if cl := pkg.cluster; cl != nil {
		if code != 0 {
			fmt.Fprint(os.Stderr, cl.Logs())
		}
		if err := cl.Stop(); err != nil && code == 0 {
			fmt.Fprintln(os.Stderr, "FAIL: stop cluster:", err)
			code = 1
		}
	}
	return code
}

// Need returns the package's cluster, starting it on first use. Without the Kubernetes tools it
// skips the test, saying why and how to get them, or fails it under CI=true; a cluster that does
// not start fails every test that needs it.
func Need(t testing.TB) *Cluster {
	t.Helper()
	if pkg.dst == nil {
		t.Fatal("testcluster.Need without testcluster.Main in the package's TestMain")
	}
	pkg.once.Do(func() {
		tools, err := FindTools()
		if err != nil {
			pkg.missing = err
			return
		}
		cl, err := Start(context.Background(), tools, Options{})
		if err != nil {
			pkg.err = fmt.Errorf("start cluster: %w", err)
			return
		}
		pkg.cluster, *pkg.dst = cl, cl
	})
	switch {
	case pkg.missing != nil:
		missing(t, pkg.missing)
	case pkg.err != nil:
		t.Fatal(pkg.err)
	}
	return pkg.cluster
}

// NeedTools returns the Kubernetes tools for a test that starts a cluster of its own, or skips
// it (fails it under CI=true) as Need does.
func NeedTools(t testing.TB) *Tools {
	t.Helper()
	tools, err := FindTools()
	if err != nil {
		missing(t, err)
	}
	return tools
}

func missing(t testing.TB, err error) {
	t.Helper()
	if os.Getenv(ciEnv) == "true" {
		t.Fatalf("needs a cluster, and under CI=true missing tools are a failure: %v", err)
	}
	t.Skipf("needs a cluster: %v", err)
}
