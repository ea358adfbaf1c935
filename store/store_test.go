package store

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/opencontainers/go-digest"

	"github.com/qinglong/ql3/evidence"
	"github.com/qinglong/ql3/refuse"
)

func newStore(t *testing.T) *Store {
	t.Helper()
	root := filepath.Join(t.TempDir(), "s")
	if r, err := filepath.EvalSymlinks(filepath.Dir(root)); err == nil {
		root = filepath.Join(r, "s")
	}
	s, err := Init(root)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { closeStore(t, s) })
	return s
}

func closeStore(t testing.TB, s *Store) {
	t.Helper()
	if err := s.Close(); err != nil {
		t.Errorf("close store: %v", err)
	}
}

// blobPath is where object d lives in the store at s.Root(), for tests that damage it by path.
func blobPath(s *Store, d digest.Digest) string {
	return filepath.Join(s.Root(), "blobs", "sha256", d.Encoded())
}

func TestPutGetIdempotent(t *testing.T) {
	s := newStore(t)
	d, err := s.PutBlob(evidence.MediaTypeOctets, []byte("hello"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.PutBlob(evidence.MediaTypeOctets, []byte("hello")); err != nil {
		t.Fatalf("second put: %v", err)
	}
	b, err := s.GetDescriptor(d)
	if err != nil || string(b) != "hello" {
		t.Fatalf("get: %q %v", b, err)
	}
	again, err := Init(s.Root())
	if err != nil {
		t.Fatalf("re-init: %v", err)
	}
	closeStore(t, again)
	d.Size++
	if _, err := s.GetDescriptor(d); refuse.CodeOf(err) != CodeObjectSize {
		t.Fatalf("size: %v", err)
	}
}

func TestObjectViolations(t *testing.T) {
	vectors := []struct {
		name   string               // what is done to the object
		break_ func(p string) error // damages the object at p
		code   refuse.Code          // what Get must report, and Verify among its corruption findings
	}{
		{"flipped byte", func(p string) error {
			os.Chmod(p, 0o600)
			os.WriteFile(p, []byte("hellp"), 0o400)
			return os.Chmod(p, 0o400)
		}, CodeObjectCorrupt},
		{"truncated", func(p string) error { return os.Truncate(p, 2) }, CodeObjectCorrupt},
		{"grown", func(p string) error {
			os.Chmod(p, 0o600)
			f, err := os.OpenFile(p, os.O_WRONLY|os.O_APPEND, 0)
			if err != nil {
				return err
			}
			f.Write([]byte("!"))
			f.Close()
			return os.Chmod(p, 0o400)
		}, CodeObjectCorrupt},
		{"mode", func(p string) error { return os.Chmod(p, 0o644) }, CodeObjectMode},
		{"owner", func(p string) error { return os.Chown(p, 4242, 4242) }, CodeObjectOwner},
		{"hardlink", func(p string) error { return os.Link(p, p+".x") }, CodeObjectLinkCount},
		{"symlink", func(p string) error {
			os.Rename(p, p+".real")
			return os.Symlink(p+".real", p)
		}, CodeObjectNotRegular},
		{"missing", func(p string) error { return os.Remove(p) }, CodeObjectNotFound},
	}
	for _, v := range vectors {
		t.Run(v.name, func(t *testing.T) {
			s := newStore(t)
			d, err := s.PutBlob(evidence.MediaTypeOctets, []byte("hello"))
			if err != nil {
				t.Fatal(err)
			}
			if err := s.PutIndex(evidence.IndexPreflights, d.Digest, d); err != nil {
				t.Fatal(err)
			}
			if err := v.break_(blobPath(s, d.Digest)); err != nil {
				t.Fatal(err)
			}
			if _, err := s.Get(d.Digest); refuse.CodeOf(err) != v.code {
				t.Fatalf("get: got %v, want %s", err, v.code)
			}
			called := false
			if err := s.View(d.Digest, func([]byte) error { called = true; return nil }); refuse.CodeOf(err) != v.code || called {
				t.Fatalf("view: got %v (fn called: %v), want %s", err, called, v.code)
			}
			r, err := s.Verify()
			if err != nil {
				t.Fatal(err)
			}
			want := v.code
			if want == CodeObjectNotFound {
				want = CodeDanglingRef // Verify walks files, so a missing object shows as the index's dangling reference
			}
			found := false
			for _, f := range r.Corruption {
				found = found || f.Code == want
			}
			if r.OK() || !found {
				t.Fatalf("verify after %s: findings %+v, want one %s", v.name, r.Corruption, want)
			}
			if v.code == CodeObjectNotFound {
				return
			}
			// Putting the same content again finds the damaged object under its name: refused,
			// never overwritten, by a single put and by a batch alike.
			if _, err := s.PutBlob(evidence.MediaTypeOctets, []byte("hello")); refuse.CodeOf(err) != v.code {
				t.Fatalf("put over a damaged object: got %v, want %s", err, v.code)
			}
			if _, err := s.NewBatch().PutBlob(evidence.MediaTypeOctets, []byte("hello")); refuse.CodeOf(err) != v.code {
				t.Fatalf("batch put over a damaged object: got %v, want %s", err, v.code)
			}
		})
	}
}

func TestOpenRefusals(t *testing.T) {
	vectors := []struct {
		name   string                  // the violation
		damage func(root string) error // applied to a fresh store
		code   refuse.Code             // Open's code
	}{
		{"root mode", func(r string) error { return os.Chmod(r, 0o755) }, CodeStoreMode},
		{"root owner", func(r string) error { return os.Chown(r, 4242, 4242) }, CodeStoreOwner},
		{"subdir mode", func(r string) error { return os.Chmod(filepath.Join(r, "blobs/sha256"), 0o750) }, CodeStoreMode},
		{"subdir owner", func(r string) error { return os.Chown(filepath.Join(r, "tmp"), 4242, 4242) }, CodeStoreOwner},
		{"marker", func(r string) error { return os.Remove(filepath.Join(r, markerName)) }, CodeStoreMarker},
		{"subdir missing", func(r string) error { return os.Remove(filepath.Join(r, "locks")) }, CodeStoreRoot},
	}
	for _, v := range vectors {
		t.Run(v.name, func(t *testing.T) {
			s := newStore(t)
			if err := v.damage(s.Root()); err != nil {
				t.Fatal(err)
			}
			if o, err := Open(s.Root()); refuse.CodeOf(err) != v.code {
				if o != nil {
					o.Close()
				}
				t.Fatalf("got %v, want %s", err, v.code)
			}
		})
	}
	if _, err := Open("rel/path"); refuse.CodeOf(err) != CodeStoreRoot {
		t.Fatalf("relative: %v", err)
	}
}

func TestIndexConflict(t *testing.T) {
	s := newStore(t)
	a, _ := s.PutBlob(evidence.MediaTypeOctets, []byte("a"))
	b, _ := s.PutBlob(evidence.MediaTypeOctets, []byte("b"))
	if err := s.PutIndex(evidence.IndexPreflights, a.Digest, a); err != nil {
		t.Fatal(err)
	}
	if err := s.PutIndex(evidence.IndexPreflights, a.Digest, a); err != nil {
		t.Fatalf("same: %v", err)
	}
	if err := s.PutIndex(evidence.IndexPreflights, a.Digest, b); refuse.CodeOf(err) != CodeIndexConflict {
		t.Fatalf("conflict: %v", err)
	}
	if err := s.PutIndex("nope", a.Digest, b); refuse.CodeOf(err) != CodeIndexKind {
		t.Fatalf("kind: %v", err)
	}
	es, err := s.ListIndex(evidence.IndexPreflights)
	if err != nil || len(es) != 1 || es[0].Descriptor != a {
		t.Fatalf("list: %v %v", es, err)
	}
}

func TestConcurrentPuts(t *testing.T) {
	s := newStore(t)
	var wg sync.WaitGroup
	for g := 0; g < 8; g++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < 50; i++ {
				if _, err := s.PutBlob(evidence.MediaTypeOctets, []byte{byte(i), byte(g % 2)}); err != nil {
					t.Error(err)
				}
			}
		}()
	}
	wg.Wait()
	r, err := s.Verify()
	if err != nil || !r.OK() {
		t.Fatalf("verify: %+v %v", r, err)
	}
}

func TestLock(t *testing.T) {
	s := newStore(t)
	k := evidence.FromBytes([]byte("cmd"))
	unlock, err := s.Lock(context.Background(), k)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	if _, err := s.Lock(ctx, k); refuse.CodeOf(err) != CodeStoreLocked {
		t.Fatalf("second lock: %v", err)
	}
	if err := unlock(); err != nil {
		t.Fatal(err)
	}
	u2, err := s.Lock(context.Background(), k)
	if err != nil {
		t.Fatal(err)
	}
	u2()
}

func TestVerifyStrayAndHints(t *testing.T) {
	s := newStore(t)
	if err := os.WriteFile(filepath.Join(s.Root(), "blobs", "stray"), nil, 0o400); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(s.Root(), "tmp", "stage-x"), nil, 0o400); err != nil {
		t.Fatal(err)
	}
	s.PutBlob(evidence.MediaTypeOctets, []byte("unref"))
	r, err := s.Verify()
	if err != nil {
		t.Fatal(err)
	}
	if len(r.Corruption) != 1 || r.Corruption[0].Code != CodeStrayFile {
		t.Fatalf("corruption: %+v", r.Corruption)
	}
	if len(r.Hints) != 2 {
		t.Fatalf("hints: %+v", r.Hints)
	}
}

// TestVerifyReachability: verify lists the published roots, finds the intent that has no receipt
// (a possibly partial apply) and the objects no root reaches.
func TestVerifyReachability(t *testing.T) {
	s := newStore(t)
	out, err := s.PutBlob(evidence.MediaTypeStdout, []byte("stdout"))
	if err != nil {
		t.Fatal(err)
	}
	cmdA, cmdB := evidence.FromBytes([]byte("apply command a")), evidence.FromBytes([]byte("apply command b"))
	intent := func(cmd string) evidence.Descriptor {
		d, _, err := s.PutRecord(evidence.MediaTypeIntent, evidence.Intent{Schema: evidence.SchemaIntent,
			Command: out, Preflight: out, Target: evidence.FromBytes([]byte(cmd)), ClusterUID: "u",
			Execs: []evidence.Descriptor{out}, CreatedAt: "2026-01-01T00:00:00Z"})
		if err != nil {
			t.Fatal(err)
		}
		return d
	}
	ia, ib := intent("a"), intent("b")
	for _, e := range []struct {
		kind string
		key  digest.Digest
		d    evidence.Descriptor
	}{{evidence.IndexIntents, cmdA, ia}, {evidence.IndexIntents, cmdB, ib}, {evidence.IndexReceipts, cmdA, out}} {
		if err := s.PutIndex(e.kind, e.key, e.d); err != nil {
			t.Fatal(err)
		}
	}
	orphan, err := s.PutBlob(evidence.MediaTypeStderr, []byte("from a refused run"))
	if err != nil {
		t.Fatal(err)
	}
	r, err := s.Verify()
	if err != nil || !r.OK() {
		t.Fatalf("verify: %v %+v", err, r)
	}
	if len(r.Receipts) != 1 || r.Receipts[0].Key != cmdA || len(r.Intents) != 2 || len(r.Preflights) != 0 {
		t.Fatalf("roots: receipts %+v intents %+v preflights %+v", r.Receipts, r.Intents, r.Preflights)
	}
	if len(r.Unfinished) != 1 || r.Unfinished[0].Key != cmdB || r.Unfinished[0].Descriptor != ib {
		t.Fatalf("unfinished: %+v", r.Unfinished)
	}
	if len(r.Unreferenced) != 1 || r.Unreferenced[0] != orphan.Digest {
		t.Fatalf("unreferenced: %v, want %s", r.Unreferenced, orphan.Digest)
	}
	codes := map[refuse.Code]int{}
	for _, h := range r.Hints {
		codes[h.Code]++
	}
	if codes[CodeIntentNoReceipt] != 1 || codes[CodeUnreferenced] != 1 || r.Objects != 4 {
		t.Fatalf("hints %+v, objects %d", r.Hints, r.Objects)
	}
}

// TestIndexEntryViolations: an index entry is held to an object's file rules, so it cannot be
// swapped for a symlink to a file outside the store, made writable, linked or given away.
func TestIndexEntryViolations(t *testing.T) {
	vectors := []struct {
		name   string                        // what is done to the entry
		break_ func(p, outside string) error // damages the entry at p; outside holds a copy of its bytes
	}{
		{"symlink outside the store", func(p, outside string) error {
			os.Remove(p)
			return os.Symlink(outside, p)
		}},
		{"mode 0644", func(p, _ string) error { return os.Chmod(p, 0o644) }},
		{"hard link from outside the index", func(p, outside string) error {
			os.Remove(outside)
			return os.Link(p, outside)
		}},
		{"owner", func(p, _ string) error { return os.Chown(p, 4242, 4242) }},
		{"directory", func(p, _ string) error { os.Remove(p); return os.Mkdir(p, 0o700) }},
		{"fifo", func(p, _ string) error { os.Remove(p); return syscall.Mkfifo(p, 0o400) }},
		{"too large", func(p, _ string) error {
			os.Chmod(p, 0o600)
			os.WriteFile(p, make([]byte, maxIndexEntry+1), 0o400)
			return os.Chmod(p, 0o400)
		}},
	}
	for _, v := range vectors {
		t.Run(v.name, func(t *testing.T) {
			s := newStore(t)
			d, err := s.PutBlob(evidence.MediaTypeOctets, []byte("entry"))
			if err != nil {
				t.Fatal(err)
			}
			if err := s.PutIndex(evidence.IndexPreflights, d.Digest, d); err != nil {
				t.Fatal(err)
			}
			p := filepath.Join(s.Root(), "index", evidence.IndexPreflights, d.Digest.Encoded())
			raw, err := os.ReadFile(p)
			if err != nil {
				t.Fatal(err)
			}
			outside := filepath.Join(filepath.Dir(s.Root()), "outside")
			if err := os.WriteFile(outside, raw, 0o400); err != nil {
				t.Fatal(err)
			}
			if err := v.break_(p, outside); err != nil {
				t.Fatal(err)
			}
			if _, _, err := s.GetIndex(evidence.IndexPreflights, d.Digest); refuse.CodeOf(err) != CodeIndexCorrupt {
				t.Fatalf("GetIndex: %v, want %s", err, CodeIndexCorrupt)
			}
			r, err := s.Verify()
			if err != nil {
				t.Fatal(err)
			}
			if r.OK() || r.Corruption[0].Code != CodeIndexCorrupt {
				t.Fatalf("verify after %s: %+v, want %s", v.name, r.Corruption, CodeIndexCorrupt)
			}
		})
	}
}

// TestView: View lends exactly Get's bytes, returns fn's error, reuses its buffer across calls
// of other sizes without leaking one object's bytes into another's, and refuses a bad digest.
func TestView(t *testing.T) {
	s := newStore(t)
	objs := [][]byte{[]byte("a longer object of some bytes"), []byte("short"), {}, bytes.Repeat([]byte{7}, 1<<20)}
	for round := range 2 {
		for _, o := range objs {
			d, err := s.PutBlob(evidence.MediaTypeOctets, o)
			if err != nil {
				t.Fatal(err)
			}
			var seen []byte
			if err := s.View(d.Digest, func(b []byte) error { seen = bytes.Clone(b); return nil }); err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(seen, o) {
				t.Fatalf("round %d: view gave %d bytes, want %d", round, len(seen), len(o))
			}
		}
	}
	d := evidence.FromBytes([]byte("short"))
	sentinel := errors.New("fn")
	if err := s.View(d, func([]byte) error { return sentinel }); err != sentinel {
		t.Fatalf("fn's error: %v", err)
	}
	if err := s.View("sha256:00", func([]byte) error { return nil }); refuse.CodeOf(err) != evidence.CodeDigestInvalid {
		t.Fatalf("bad digest: %v", err)
	}
	closeStore(t, s)
	if err := s.View(d, func([]byte) error { return nil }); refuse.CodeOf(err) != CodeStoreIO {
		t.Fatalf("closed store: %v", err)
	}
}
