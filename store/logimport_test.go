package store

import (
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"testing"

	"github.com/qinglong/ql3/deploylog"
	"github.com/qinglong/ql3/refuse"
)

// importOf is the log of src as a pull carries it: every leaf up to its largest checkpoint, and
// that checkpoint.
func importOf(t testing.TB, src *Store) *LogImport {
	t.Helper()
	cps, err := src.Checkpoints()
	if err != nil || len(cps) == 0 {
		t.Fatalf("checkpoints: %v", err)
	}
	cpb := cps[len(cps)-1]
	cp, _, err := deploylog.ParseSignedCheckpoint(cpb)
	if err != nil {
		t.Fatal(err)
	}
	raws, err := src.LogLeaves(cp.Size)
	if err != nil {
		t.Fatal(err)
	}
	li := &LogImport{Origin: cp.Origin, Raws: raws, Tree: &deploylog.Tree{}, Checkpoint: cpb}
	for _, r := range raws {
		l, err := deploylog.ParseLeaf(r)
		if err != nil {
			t.Fatal(err)
		}
		li.Leaves = append(li.Leaves, l)
		if err := li.Tree.Append(r); err != nil {
			t.Fatal(err)
		}
	}
	return li
}

func allLeaves(li *LogImport) []int64 {
	out := make([]int64, len(li.Raws))
	for i := range out {
		out[i] = int64(i)
	}
	return out
}

// objectsOnly is a copy of src's objects: no log, no index entry (what a pull has written when it
// reaches the log).
func objectsOnly(t *testing.T, src *Store) *Store {
	t.Helper()
	s := copyStore(t, src.Root())
	if err := os.RemoveAll(filepath.Join(s.Root(), "log")); err != nil {
		t.Fatal(err)
	}
	ents, err := filepath.Glob(filepath.Join(s.Root(), "index", "*", "*"))
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range ents {
		if err := os.Remove(e); err != nil {
			t.Fatal(err)
		}
	}
	return s
}

// loggedBase is a store of 300 intents (a full tile and a partial one) with a signed checkpoint.
func loggedBase(t *testing.T) (*Store, deploylog.KeyVerifier) {
	t.Helper()
	base := newLogStore(t)
	for i := 0; i < 300; i++ {
		publishIntent(t, base, i)
	}
	sg, v := logKey(t, testOrigin)
	if _, _, err := base.SignCheckpoint(sg); err != nil {
		t.Fatal(err)
	}
	return base, v
}

// childCrashImport imports the log of the store at src into the store at root and dies by
// SIGKILL at the named step of ImportLog.
func childCrashImport(root, src, at string) int {
	dst, err := Open(root)
	if err != nil {
		return 3
	}
	s, err := Open(src)
	if err != nil {
		return 3
	}
	li := importOf(panicTB{}, s)
	importHook = func(step string) {
		if step == at {
			syscall.Kill(os.Getpid(), syscall.SIGKILL)
		}
	}
	dst.ImportLog(li, allLeaves(li))
	return 4
}

// TestImportLog: a carried log installed into a store holding the objects: log verify with the
// key passes; importing again is a no-op; a shorter prefix of it is accepted and changes nothing.
func TestImportLog(t *testing.T) {
	base, v := loggedBase(t)
	dst := objectsOnly(t, base)
	li := importOf(t, base)
	if err := dst.CheckLogImport(li); err != nil {
		t.Fatal(err)
	}
	if err := dst.ImportLog(li, allLeaves(li)); err != nil {
		t.Fatal(err)
	}
	wantLogOK(t, verifyLog(t, dst, LogVerifyOptions{Verifier: v, Since: li.Checkpoint}))
	if err := dst.ImportLog(li, allLeaves(li)); err != nil {
		t.Fatalf("again: %v", err)
	}
	if sr, err := dst.Verify(); err != nil || !sr.OK() {
		t.Fatalf("store verify: %v %+v", err, sr)
	}
}

// TestImportLogRefusals: a store with publications and no log, a log of another origin and a
// forked log of the same size each refuse the import, and nothing is written.
func TestImportLogRefusals(t *testing.T) {
	base, _ := loggedBase(t)
	li := importOf(t, base)

	unlogged := copyStore(t, base.Root())
	if err := os.RemoveAll(filepath.Join(unlogged.Root(), "log")); err != nil {
		t.Fatal(err)
	}
	other := objectsOnly(t, base)
	if _, err := other.InitLog("example.com/ql3/other"); err != nil {
		t.Fatal(err)
	}
	// A fork: the same intents published in another order, under the same origin and key.
	fork := objectsOnly(t, base)
	if _, err := fork.InitLog(testOrigin); err != nil {
		t.Fatal(err)
	}
	publishIntent(t, fork, 1)
	publishIntent(t, fork, 0)
	for _, tc := range []struct {
		name string
		s    *Store
		want refuse.Code
	}{
		{"publications without a log", unlogged, CodeLogImportUnlogged},
		{"another origin", other, deploylog.CodeOrigin},
		{"fork", fork, deploylog.CodeFork},
	} {
		t.Run(tc.name, func(t *testing.T) {
			before := snapshotFiles(t, tc.s.Root())
			if err := tc.s.CheckLogImport(li); refuse.CodeOf(err) != tc.want {
				t.Fatalf("check: %v, want %s", err, tc.want)
			}
			if err := tc.s.ImportLog(li, allLeaves(li)); refuse.CodeOf(err) != tc.want {
				t.Fatalf("import: %v, want %s", err, tc.want)
			}
			if after := snapshotFiles(t, tc.s.Root()); after != before {
				t.Fatalf("a refused import changed the store:\n%s\n%s", before, after)
			}
		})
	}
}

func snapshotFiles(t *testing.T, root string) string {
	t.Helper()
	var out string
	err := filepath.Walk(root, func(p string, fi os.FileInfo, err error) error {
		if err != nil {
			return err
		}
		if rel, _ := filepath.Rel(root, p); rel != "tmp" && filepath.Dir(rel) != "tmp" {
			out += rel + "\n"
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// TestCrashMidImport kills an import at each of its steps: the store still verifies, and the
// import run again completes it into a log that verifies with the key, with every record's
// lookup.
func TestCrashMidImport(t *testing.T) {
	base, v := loggedBase(t)
	for _, at := range []string{"leaves", "lookups", "checkpoint", "origin", "entries"} {
		t.Run(at, func(t *testing.T) {
			dst := objectsOnly(t, base)
			c := child(t, "crash-import", dst.Root())
			c.Env = append(c.Env, "QL3_LOG_KILL_AT="+at, "QL3_IMPORT_SRC="+base.Root())
			err := c.Run()
			var ee *exec.ExitError
			if !errors.As(err, &ee) || ee.Sys().(syscall.WaitStatus).Signal() != syscall.SIGKILL {
				t.Fatalf("child did not die by SIGKILL at %s: %v", at, err)
			}
			if sr, err := dst.Verify(); err != nil || !sr.OK() {
				t.Fatalf("store verify after the crash: %v %+v", err, sr)
			}
			if _, err := dst.LogOrigin(); at != "entries" && refuse.CodeOf(err) != CodeLogNotInitialized {
				t.Fatalf("a log before its origin: %v", err)
			}
			if at == "entries" {
				r := verifyLog(t, dst, LogVerifyOptions{Verifier: v})
				if codes(r.Errors)[CodeLogEntryMissing] != 300 {
					t.Fatalf("after a kill before the entries: %+v", codes(r.Errors))
				}
			}
			li := importOf(t, base)
			if err := dst.ImportLog(li, allLeaves(li)); err != nil {
				t.Fatalf("import again: %v", err)
			}
			wantLogOK(t, verifyLog(t, dst, LogVerifyOptions{Verifier: v, Since: li.Checkpoint}))
			if sr, err := dst.Verify(); err != nil || !sr.OK() {
				t.Fatalf("store verify: %v %+v", err, sr)
			}
			wantLookups(t, dst)
		})
	}
}
