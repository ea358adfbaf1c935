package store

import (
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"

	"github.com/qinglong/ql3/deploylog"
	"github.com/qinglong/ql3/evidence"
	"github.com/qinglong/ql3/refuse"
)

// childCrashLog publishes one intent (or runs log init) and dies by SIGKILL at the named step
// (docs/log.md, "Order of writes"): QL3_LOG_KILL_AT is "leaf", "tiles" or "entry" for an
// append, "partial:K" (before the K-th partial tile's rename), "lookups" or "checkpoint" for log
// sign, "backfill:K" (before the K-th backfilled leaf's rename), "init-lookups" or "origin" for
// log init.
func childCrashLog(root, at string) int {
	s, err := Open(root)
	if err != nil {
		return 3
	}
	step, nth, _ := strings.Cut(at, ":")
	count, _ := strconv.Atoi(nth)
	calls := 0
	logHook = func(name string) {
		if name != step {
			return
		}
		if calls++; calls > count {
			syscall.Kill(os.Getpid(), syscall.SIGKILL)
		}
	}
	if step == "partial" || step == "lookups" || step == "checkpoint" {
		sg, _ := logKey(panicTB{}, testOrigin)
		s.SignCheckpoint(sg)
		return 4
	}
	if step == "backfill" || step == "init-lookups" || step == "origin" {
		s.InitLog(testOrigin)
		return 4
	}
	publishIntent(panicTB{}, s, 100000)
	return 4
}

// panicTB is the testing.TB of a child process: a failure exits it, which the parent reports.
type panicTB struct{ testing.TB }

func (panicTB) Helper()               {}
func (panicTB) Fatal(args ...any)     { os.Exit(6) }
func (panicTB) Fatalf(string, ...any) { os.Exit(6) }
func (panicTB) TempDir() string       { return os.TempDir() }
func (panicTB) Cleanup(func())        {}
func (panicTB) Errorf(string, ...any) { os.Exit(6) }
func (panicTB) Logf(string, ...any)   {}
func (panicTB) Skip(...any)           {}
func (panicTB) Name() string          { return "child" }
func (panicTB) Setenv(string, string) {}
func (panicTB) Failed() bool          { return false }
func (panicTB) Log(...any)            {}
func (panicTB) Skipf(string, ...any)  {}
func (panicTB) SkipNow()              {}
func (panicTB) Skipped() bool         { return false }
func (panicTB) FailNow()              { os.Exit(6) }
func (panicTB) Fail()                 { os.Exit(6) }
func (panicTB) Error(...any)          { os.Exit(6) }

func copyStore(t *testing.T, from string) *Store {
	t.Helper()
	root := filepath.Join(t.TempDir(), "copy")
	if r, err := filepath.EvalSymlinks(filepath.Dir(root)); err == nil {
		root = filepath.Join(r, "copy")
	}
	if out, err := exec.Command("cp", "-a", from, root).CombinedOutput(); err != nil {
		t.Fatalf("cp -a: %v %s", err, out)
	}
	s, err := Open(root)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

func runKilled(t *testing.T, root, at string) {
	t.Helper()
	c := child(t, "crash-log", root)
	c.Env = append(c.Env, "QL3_LOG_KILL_AT="+at)
	err := c.Run()
	var ee *exec.ExitError
	if !errors.As(err, &ee) || ee.Sys().(syscall.WaitStatus).Signal() != syscall.SIGKILL {
		t.Fatalf("child did not die by SIGKILL at %s: %v", at, err)
	}
}

// TestCrashMidAppend kills a publication at every step of its append, on a log of 255 leaves so
// that the append also completes a tile: after each, store verify and log verify accept the
// store (a leaf without its entry is reported as pending, a missing tile as a hint), and the
// next publication repairs it: the interrupted entry is completed from its leaf, the tile
// written, and the log verifies with one leaf per entry and no hint of either.
func TestCrashMidAppend(t *testing.T) {
	base := newLogStore(t)
	for i := 0; i < 255; i++ {
		publishIntent(t, base, i)
	}
	for _, at := range []string{"leaf", "tiles", "entry"} {
		t.Run(at, func(t *testing.T) {
			s := copyStore(t, base.Root())
			runKilled(t, s.Root(), at)
			sr, err := s.Verify()
			if err != nil || !sr.OK() {
				t.Fatalf("store verify after the crash: %+v %v", sr.Corruption, err)
			}
			r := verifyLog(t, s, LogVerifyOptions{})
			wantLogOK(t, r)
			wantSize := int64(255)
			if at != "leaf" {
				wantSize = 256
				if codes(r.Hints)[CodeLogPending] != 1 {
					t.Fatalf("hints %+v, want the pending leaf", r.Hints)
				}
			}
			if r.Size != wantSize {
				t.Fatalf("log of %d leaves after a crash at %s", r.Size, at)
			}
			if at == "tiles" && codes(r.Hints)[CodeLogTileMissing] != 1 {
				t.Fatalf("hints %+v, want the missing tile", r.Hints)
			}
			publishIntent(t, s, 5000) // the next run
			r = verifyLog(t, s, LogVerifyOptions{})
			wantLogOK(t, r)
			if c := codes(r.Hints); c[CodeLogPending] != 0 || c[CodeLogTileMissing] != 0 {
				t.Fatalf("hints after the repair: %+v", r.Hints)
			}
			es, err := s.ListIndex(evidence.IndexIntents)
			if err != nil || int64(len(es)) != r.Size {
				t.Fatalf("%d entries, %d leaves: %v", len(es), r.Size, err)
			}
			sr, err = s.Verify()
			if err != nil || !sr.OK() {
				t.Fatalf("store verify after the repair: %+v %v", sr.Corruption, err)
			}
		})
	}
}

// TestCrashMidLogInit kills log init while it backfills (after 0 and after 200 leaves renamed,
// before the record lookups and before log/origin): the store has no log yet
// (LOG_NOT_INITIALIZED), store verify accepts it, and init run again completes the same log,
// every record's lookup included.
func TestCrashMidLogInit(t *testing.T) {
	base := newStore(t)
	for i := 0; i < 260; i++ {
		publishIntent(t, base, i)
	}
	for _, at := range []string{"backfill:0", "backfill:200", "init-lookups", "origin"} {
		t.Run(at, func(t *testing.T) {
			s := copyStore(t, base.Root())
			runKilled(t, s.Root(), at)
			if _, err := s.LogOrigin(); refuse.CodeOf(err) != CodeLogNotInitialized {
				t.Fatalf("origin after a crashed init: %v", err)
			}
			sr, err := s.Verify()
			if err != nil || !sr.OK() {
				t.Fatalf("store verify after the crash: %+v %v", sr.Corruption, err)
			}
			publishIntent(t, s, 7000) // published while the log does not exist: backfilled last
			if _, err := s.InitLog(testOrigin); err != nil {
				t.Fatal(err)
			}
			r := verifyLog(t, s, LogVerifyOptions{})
			wantLogOK(t, r)
			if r.Size != 261 {
				t.Fatalf("log of %d leaves", r.Size)
			}
			wantLookups(t, s)
		})
	}
}

// TestCrashMidSign kills log sign before each partial tile of its size is renamed into place,
// before the record lookups of the leaves it signs and before its checkpoint note, on a log of
// 300 leaves signed at 257 (so both the previous right edge and the new one are in play): store
// verify and log verify accept the store (a partial tile without its checkpoint is a correct
// cache, a missing lookup is nobody's finding), the signed size is still 257, and sign run again
// completes it: the checkpoint of 300 with its right edge and every record's lookup, every proof
// against it checked.
func TestCrashMidSign(t *testing.T) {
	base := newLogStore(t)
	sg, kv := logKey(t, testOrigin)
	for i := 0; i < 300; i++ {
		publishIntent(t, base, i)
		if i == 256 {
			if _, _, err := base.SignCheckpoint(sg); err != nil {
				t.Fatal(err)
			}
		}
	}
	for _, at := range []string{"partial:0", "partial:1", "lookups", "checkpoint"} {
		t.Run(at, func(t *testing.T) {
			s := copyStore(t, base.Root())
			runKilled(t, s.Root(), at)
			sr, err := s.Verify()
			if err != nil || !sr.OK() {
				t.Fatalf("store verify after the crash: %+v %v", sr.Corruption, err)
			}
			r := verifyLog(t, s, LogVerifyOptions{Verifier: kv})
			wantLogOK(t, r)
			if r.SignedSize != 257 {
				t.Fatalf("signed size %d after a crashed sign", r.SignedSize)
			}
			_, lerr := os.Stat(lookupPath(s, intentRecord(t, s, 299)))
			if (lerr == nil) != (at == "checkpoint") {
				t.Fatalf("after a crash at %s, the lookup of leaf 299's record: %v", at, lerr)
			}
			if _, _, err := s.SignCheckpoint(sg); err != nil {
				t.Fatal(err)
			}
			r = verifyLog(t, s, LogVerifyOptions{Verifier: kv})
			wantLogOK(t, r)
			if r.SignedSize != 300 || codes(r.Hints)[CodeLogTileMissing] != 0 {
				t.Fatalf("after the rerun: signed %d, hints %+v", r.SignedSize, r.Hints)
			}
			for _, pt := range deploylog.PartialTilesAt(300) {
				if _, err := os.Stat(filepath.Join(s.Root(), tilesRel, partialTileName(pt.Level, pt.Index, pt.Width))); err != nil {
					t.Fatalf("the right edge of 300: %v", err)
				}
			}
			wantLookups(t, s)
		})
	}
}
