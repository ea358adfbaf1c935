package audit_test

import (
	"os"
	"sync"
	"testing"

	"github.com/qinglong/ql3/audit/internal/audittest"
	"github.com/qinglong/ql3/evidence"
)

// The committed stores are captures of real ceremonies on the real cluster, written by
// `go test ./audit/livetest -update` (with QL3_K8S_TOOLS set): testdata/store holds the synthetic
// 3.4.1 release applied straight through (namespace qinglong) and applied into a second namespace
// with a kill after the server-side apply and a recovering rerun; testdata/store-1000 holds the
// receipt of a 1,000-resource release. Git keeps neither modes nor empty directories, so every
// test lays a store out afresh (audittest.Snapshot.Materialize).
const (
	storeDir     = "testdata/store"
	store1000Dir = "testdata/store-1000"
)

func TestMain(m *testing.M) {
	code := m.Run()
	audittest.RemoveBuilt()
	os.Exit(code)
}

var (
	fixtureOnce sync.Once
	fixture     *audittest.Fixture
)

// committed returns the fixture of testdata/store. Its snapshot is shared: tests must not change it.
func committed(t testing.TB) *audittest.Fixture {
	t.Helper()
	fixtureOnce.Do(func() {
		snap := audittest.Load(t, storeDir)
		fixture = &audittest.Fixture{Snap: snap, Roots: audittest.FindRoots(t, audittest.Open(t, snap.Materialize(t)))}
	})
	if fixture == nil {
		t.Fatal("no committed fixture")
	}
	return fixture
}

// receipt1000 lays out testdata/store-1000 and returns its root and its receipt.
func receipt1000(t testing.TB) (string, evidence.Descriptor) {
	t.Helper()
	root := audittest.Load(t, store1000Dir).Materialize(t)
	rep, err := audittest.Open(t, root).Verify()
	if err != nil || len(rep.Receipts) != 1 {
		t.Fatalf("store-1000: %v %+v", err, rep)
	}
	return root, rep.Receipts[0].Descriptor
}
