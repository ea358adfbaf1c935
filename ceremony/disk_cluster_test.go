package ceremony_test

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"syscall"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/qinglong/ql3/ceremony"
	"github.com/qinglong/ql3/evidence"
	"github.com/qinglong/ql3/internal/testbed/ceremonytest"
	"github.com/qinglong/ql3/internal/testbed/testcluster"
	"github.com/qinglong/ql3/refuse"
	"github.com/qinglong/ql3/store"
)

// tmpfsStore mounts a small tmpfs (the tests run as root) and returns the path of a store root on
// it, not yet created; the mount is removed when the test ends.
func tmpfsStore(t *testing.T, size string) (mnt, root string) {
	t.Helper()
	if os.Getuid() != 0 {
		t.Skip("mounting a tmpfs needs root")
	}
	mnt = ceremonytest.PrivateDir(t)
	if err := unix.Mount("tmpfs", mnt, "tmpfs", 0, "size="+size+",mode=0700"); err != nil {
		t.Fatalf("mount tmpfs: %v", err)
	}
	t.Cleanup(func() {
		if err := unix.Unmount(mnt, unix.MNT_DETACH); err != nil {
			t.Errorf("unmount %s: %v", mnt, err)
		}
	})
	return mnt, filepath.Join(mnt, "store")
}

// fill writes to mnt/filler until the file system has no space left.
func fill(t *testing.T, mnt string) {
	f, err := os.OpenFile(filepath.Join(mnt, "filler"), os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o600)
	if err != nil {
		t.Errorf("filler: %v", err)
		return
	}
	defer f.Close()
	chunk := make([]byte, 4096)
	for {
		if _, err := f.Write(chunk); err != nil {
			if !errors.Is(err, syscall.ENOSPC) {
				t.Errorf("filling: %v", err)
			}
			return
		}
	}
}

func free(t *testing.T, mnt string) {
	t.Helper()
	if err := os.Remove(filepath.Join(mnt, "filler")); err != nil && !os.IsNotExist(err) {
		t.Fatal(err)
	}
}

// diskBed is a bed whose store lives on a tmpfs of its own.
func diskBed(t *testing.T) (*bed, string) {
	t.Helper()
	mnt, root := tmpfsStore(t, "4m")
	b := &bed{t: t, Release: ceremonytest.NewRelease(t, cluster, ceremonytest.ReleaseOptions{
		Namespace: fmt.Sprintf("ql3-ceremony-%d", namespaces.Add(1)), NamespaceMode: ceremonytest.CreateNamespace, Store: root})}
	t.Cleanup(b.check)
	return b, mnt
}

// wantFull asserts a refusal of the store's space and a store that verifies with nothing half
// written: no object fails its checks and no staging file is left in tmp/.
func (b *bed) wantFull(err error) {
	b.t.Helper()
	if code := refuse.CodeOf(err); code != store.CodeStoreIO {
		b.t.Fatalf("code %q, want %s (%v)", code, store.CodeStoreIO, err)
	}
	st, err := store.Open(b.Store)
	if err != nil {
		b.t.Fatal(err)
	}
	defer st.Close()
	rep, err := st.Verify()
	if err != nil || !rep.OK() {
		b.t.Fatalf("store verify after a full disk: %v %+v", err, rep)
	}
	ents, err := os.ReadDir(filepath.Join(b.Store, "tmp"))
	if err != nil || len(ents) != 0 {
		b.t.Fatalf("staging left in tmp/: %v %v", ents, err)
	}
}

// TestDiskFullBeforePreflightReport: the disk fills during the dry-run; the report cannot be
// published, nothing half-written remains, and once space is freed the rerun publishes it.
func TestDiskFullBeforePreflightReport(t *testing.T) {
	testcluster.Need(t)
	b, mnt := diskBed(t)
	restore := ceremony.SetAfterStep(func(step string) {
		if step == evidence.StepDryRun {
			fill(t, mnt)
		}
	})
	_, err := b.preflight()
	restore()
	b.wantFull(err)
	if n := b.Count(evidence.IndexPreflights); n != 0 {
		t.Fatalf("%d preflights published on a full disk", n)
	}
	free(t, mnt)
	if _, err := b.preflight(); err != nil {
		t.Fatalf("preflight after freeing space: %v", err)
	}
}

// TestDiskFullBeforeIntent: the disk fills during the apply's dry-run; no intent, no mutation;
// the rerun is a fresh apply.
func TestDiskFullBeforeIntent(t *testing.T) {
	testcluster.Need(t)
	b, mnt := diskBed(t)
	pre, err := b.preflight()
	if err != nil {
		t.Fatal(err)
	}
	af := b.applyFile(string(pre.Preflight))
	applied := 0
	restore := ceremony.SetAfterStep(func(step string) {
		switch step {
		case evidence.StepDryRun:
			fill(t, mnt)
		case evidence.StepApply:
			applied++
		}
	})
	_, err = b.apply(af)
	restore()
	b.wantFull(err)
	b.wantNoIntent()
	if applied != 0 {
		t.Fatal("the apply step ran although the intent could not be written")
	}
	free(t, mnt)
	rc, err := b.apply(af)
	if err != nil {
		t.Fatalf("apply after freeing space: %v", err)
	}
	if rc.Recovered {
		t.Fatal("an apply refused before its intent reran as a recovery")
	}
}

// TestDiskFullAfterApplyStep: the disk fills once the mutation happened; the receipt cannot be
// published, the intent stays, and the rerun recovers from it exactly as after a kill.
func TestDiskFullAfterApplyStep(t *testing.T) {
	testcluster.Need(t)
	b, mnt := diskBed(t)
	pre, err := b.preflight()
	if err != nil {
		t.Fatal(err)
	}
	af := b.applyFile(string(pre.Preflight))
	restore := ceremony.SetAfterStep(func(step string) {
		if step == evidence.StepApply {
			fill(t, mnt)
		}
	})
	_, err = b.apply(af)
	restore()
	b.wantFull(err)
	if n := b.Count(evidence.IndexIntents); n != 1 {
		t.Fatalf("%d intents after the mutation, want 1", n)
	}
	if n := b.Count(evidence.IndexReceipts); n != 0 {
		t.Fatalf("a receipt was published on a full disk")
	}
	free(t, mnt)
	rc, err := b.apply(af)
	if err != nil {
		t.Fatalf("apply after freeing space: %v", err)
	}
	if !rc.Recovered {
		t.Fatal("the rerun after a mutation did not recover from its intent")
	}
}

// TestReadOnlyStore: a store on a read-only bind mount from the start is refused before any
// network step; nothing is written.
func TestReadOnlyStore(t *testing.T) {
	testcluster.Need(t)
	mnt, root := tmpfsStore(t, "4m")
	b := &bed{t: t, Release: ceremonytest.NewRelease(t, cluster, ceremonytest.ReleaseOptions{
		Namespace: fmt.Sprintf("ql3-ceremony-%d", namespaces.Add(1)), NamespaceMode: ceremonytest.CreateNamespace, Store: root})}
	t.Cleanup(b.check)
	_ = mnt
	if err := unix.Mount(root, root, "", unix.MS_BIND, ""); err != nil {
		t.Fatal(err)
	}
	if err := unix.Mount("", root, "", unix.MS_REMOUNT|unix.MS_BIND|unix.MS_RDONLY, ""); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = unix.Unmount(root, unix.MNT_DETACH) })
	runs := 0
	restore := ceremony.SetRunHook(func(string) { runs++ })
	_, err := b.preflight()
	restore()
	if code := refuse.CodeOf(err); code != store.CodeStoreIO {
		t.Fatalf("code %q, want %s (%v)", code, store.CodeStoreIO, err)
	}
	if runs != 0 {
		t.Fatalf("%d kubectl runs against a read-only store", runs)
	}
}
