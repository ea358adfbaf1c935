package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/qinglong/ql3/internal/testbed/testcluster"
)

// run runs the built ql3-cluster with stateDir as QL3_CLUSTER_DIR from the checkout.
func run(t *testing.T, bin, stateDir string, args ...string) (string, error) {
	t.Helper()
	cmd := exec.Command(bin, args...)
	cmd.Env = append(os.Environ(), "QL3_CLUSTER_DIR="+stateDir)
	out, err := cmd.CombinedOutput()
	return string(out), err
}

func envValue(out, key string) string {
	for _, l := range strings.Split(out, "\n") {
		if v, ok := strings.CutPrefix(l, key+"="); ok {
			return v
		}
	}
	return ""
}

// TestStateDirsIsolateClusters: two state directories on one machine are two clusters, and
// `down` of one leaves the other serving (docs/issues.md#issue-13, finding 6: one cluster per $HOME used to be
// stopped by any other checkout's cluster-down).
func TestStateDirsIsolateClusters(t *testing.T) {
	testcluster.NeedTools(t)
	bin := filepath.Join(t.TempDir(), "ql3-cluster")
	if out, err := exec.Command("go", "build", "-o", bin, ".").CombinedOutput(); err != nil {
		t.Fatalf("build: %v\n%s", err, out)
	}
	base := t.TempDir()
	a, b := filepath.Join(base, "a"), filepath.Join(base, "b")
	for _, d := range []string{a, b} {
		d := d
		t.Cleanup(func() { _, _ = run(t, bin, d, "down") })
		if out, err := run(t, bin, d, "up"); err != nil {
			t.Fatalf("up %s: %v\n%s", d, err, out)
		}
	}
	outA, err := run(t, bin, a, "env")
	if err != nil {
		t.Fatalf("env a: %v\n%s", err, outA)
	}
	outB, err := run(t, bin, b, "env")
	if err != nil {
		t.Fatalf("env b: %v\n%s", err, outB)
	}
	if envValue(outA, "QL3_SERVER") == "" || envValue(outA, "QL3_SERVER") == envValue(outB, "QL3_SERVER") {
		t.Fatalf("the two state dirs share a server: %q and %q", envValue(outA, "QL3_SERVER"), envValue(outB, "QL3_SERVER"))
	}
	if envValue(outA, "QL3_CLUSTER_UID") == envValue(outB, "QL3_CLUSTER_UID") {
		t.Fatal("the two state dirs share a kube-system uid")
	}
	if out, err := run(t, bin, a, "down"); err != nil {
		t.Fatalf("down a: %v\n%s", err, out)
	}
	if out, err := run(t, bin, a, "env"); err == nil {
		t.Fatalf("env a after its down succeeded:\n%s", out)
	}
	again, err := run(t, bin, b, "env")
	if err != nil {
		t.Fatalf("cluster b stopped by a's down: %v\n%s", err, again)
	}
	if envValue(again, "QL3_CLUSTER_UID") != envValue(outB, "QL3_CLUSTER_UID") {
		t.Fatal("cluster b changed identity after a's down")
	}
}

// TestStateDirPerCheckout: without QL3_CLUSTER_DIR the state is keyed by the checkout's path, and a
// relative QL3_CLUSTER_DIR is refused rather than resolved against whatever directory make ran in.
func TestStateDirPerCheckout(t *testing.T) {
	t.Setenv("QL3_CLUSTER_DIR", "")
	home := t.TempDir()
	t.Setenv("HOME", home)
	d1, err := stateDir()
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(d1, filepath.Join(home, ".cache", "ql3", "clusters")+"/") {
		t.Fatalf("state dir %s is not under the per-checkout cache", d1)
	}
	other := t.TempDir()
	if err := os.WriteFile(filepath.Join(other, "go.mod"), []byte("module x\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	wd, _ := os.Getwd()
	t.Chdir(other)
	d2, err := stateDir()
	if err != nil {
		t.Fatal(err)
	}
	t.Chdir(wd)
	if d1 == d2 {
		t.Fatalf("two checkouts share state dir %s", d1)
	}
	for _, bad := range []string{"rel/dir", "/a/../b", "/a/"} {
		t.Setenv("QL3_CLUSTER_DIR", bad)
		if _, err := stateDir(); err == nil {
			t.Errorf("QL3_CLUSTER_DIR=%q accepted", bad)
		}
	}
}
