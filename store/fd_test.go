package store

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/qinglong/ql3/evidence"
	"github.com/qinglong/ql3/internal/sysfile"
	"github.com/qinglong/ql3/refuse"
)

// resolvers runs f once with openat2 and once with the O_NOFOLLOW walk an old kernel gets.
func resolvers(t *testing.T, f func(t *testing.T)) {
	t.Run("openat2", f)
	t.Run("walk", func(t *testing.T) {
		t.Cleanup(sysfile.SetResolverForTest(sysfile.ResolverForTest{Walk: true}))
		f(t)
	})
}

// swaps are the ways a store path is changed under a running command; each returns where the
// directory the store held now is, and where the other store is.
var swaps = []struct {
	name string
	swap func(t *testing.T, root, other string) (held, otherNow string)
}{
	{"symlink to another store", func(t *testing.T, root, other string) (string, string) {
		must(t, os.Rename(root, root+".held"))
		must(t, os.Symlink(other, root))
		return root + ".held", other
	}},
	{"symlink to itself after a rename", func(t *testing.T, root, other string) (string, string) {
		must(t, os.Rename(root, root+".held"))
		must(t, os.Symlink(root+".held", root))
		return root + ".held", other
	}},
	{"another store renamed into its place", func(t *testing.T, root, other string) (string, string) {
		must(t, os.Rename(root, root+".held"))
		must(t, os.Rename(other, root))
		return root + ".held", root
	}},
	{"renamed away", func(t *testing.T, root, other string) (string, string) {
		must(t, os.Rename(root, root+".held"))
		return root + ".held", other
	}},
	{"a parent swapped for a symlink to itself", func(t *testing.T, root, other string) (string, string) {
		parent := filepath.Dir(root)
		must(t, os.Rename(parent, parent+".held"))
		must(t, os.Symlink(parent+".held", parent))
		return filepath.Join(parent+".held", filepath.Base(root)), other
	}},
	{"index subdirectory replaced", func(t *testing.T, root, other string) (string, string) {
		for _, k := range []string{evidence.IndexPreflights, evidence.IndexIntents, evidence.IndexReceipts} {
			p := filepath.Join(root, "index", k)
			must(t, os.Rename(p, p+".held"))
			must(t, os.Mkdir(p, 0o700))
		}
		return root, other
	}},
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

// names lists a directory of the store at dir; a missing directory is empty.
func names(t *testing.T, dir, sub string) []string {
	t.Helper()
	es, err := os.ReadDir(filepath.Join(dir, sub))
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		t.Fatal(err)
	}
	var out []string
	for _, e := range es {
		out = append(out, e.Name())
	}
	return out
}

func has(t *testing.T, dir, sub, name string) bool {
	t.Helper()
	for _, n := range names(t, dir, sub) {
		if n == name {
			return true
		}
	}
	return false
}

func testIntent(d evidence.Descriptor) any {
	return evidence.Intent{Schema: evidence.SchemaIntent, Command: d, Preflight: d, Target: d.Digest,
		ClusterUID: "u", Execs: []evidence.Descriptor{d}, CreatedAt: "2026-01-01T00:00:00Z"}
}

// TestRootSwappedBetweenOpenAndWrite: whatever is done to the store path after Open, every write
// lands in the directory Open held (never in another store), reads still see that directory, and
// every publication (a root record, an index entry) is refused with STORE_ROOT_MOVED and leaves
// nothing behind in either directory.
func TestRootSwappedBetweenOpenAndWrite(t *testing.T) {
	resolvers(t, func(t *testing.T) {
		for _, sw := range swaps {
			t.Run(sw.name, func(t *testing.T) {
				s := newStore(t)
				other := newStore(t)
				before, err := s.PutBlob(evidence.MediaTypeOctets, []byte("before the swap"))
				must(t, err)
				must(t, s.PutIndex(evidence.IndexPreflights, before.Digest, before))
				held, otherRoot := sw.swap(t, s.Root(), other.Root())

				// A blob is no publication: it is written, in the held directory only.
				blob, err := s.PutBlob(evidence.MediaTypeStdout, []byte("after the swap"))
				if err != nil {
					t.Fatalf("PutBlob after the swap: %v", err)
				}
				if !has(t, held, "blobs/sha256", blob.Digest.Encoded()) || has(t, otherRoot, "blobs/sha256", blob.Digest.Encoded()) {
					t.Fatal("the blob did not land in the held directory alone")
				}
				// A root record and index entries are publications: refused, nothing written.
				in := testIntent(blob)
				if _, _, err := s.PutRecord(evidence.MediaTypeIntent, in); refuse.CodeOf(err) != CodeRootMoved {
					t.Fatalf("PutRecord of an intent: %v, want %s", err, CodeRootMoved)
				}
				raw, err := evidence.MarshalRecord(in)
				must(t, err)
				batch := s.NewBatch()
				_, err = batch.PutBlob(evidence.MediaTypeStdout, []byte("batched"))
				must(t, err)
				if _, _, err := batch.PutRecord(evidence.MediaTypeIntent, in); refuse.CodeOf(err) != CodeRootMoved {
					t.Fatalf("Batch.PutRecord of an intent: %v, want %s", err, CodeRootMoved)
				}
				batch.Discard()
				if bd := evidence.FromBytes([]byte("batched")).Encoded(); has(t, held, "blobs/sha256", bd) {
					t.Fatal("a refused batch wrote an object")
				}
				if rd := evidence.FromBytes(raw).Encoded(); has(t, held, "blobs/sha256", rd) || has(t, otherRoot, "blobs/sha256", rd) {
					t.Fatal("a refused root record was written")
				}
				for _, kind := range []string{evidence.IndexPreflights, evidence.IndexIntents, evidence.IndexReceipts} {
					if err := s.PutIndex(kind, blob.Digest, blob); refuse.CodeOf(err) != CodeRootMoved {
						t.Fatalf("PutIndex %s: %v, want %s", kind, err, CodeRootMoved)
					}
				}
				for _, dir := range []string{held, otherRoot} {
					for _, kind := range []string{evidence.IndexPreflights, evidence.IndexIntents, evidence.IndexReceipts} {
						if has(t, dir, "index/"+kind, blob.Digest.Encoded()) {
							t.Fatalf("index %s entry published in %s", kind, dir)
						}
					}
				}
				// The lock is taken in the held directory.
				unlock, err := s.Lock(context.Background(), blob.Digest)
				must(t, err)
				must(t, unlock())
				if !has(t, held, "locks", blob.Digest.Encoded()+".lock") || has(t, otherRoot, "locks", blob.Digest.Encoded()+".lock") {
					t.Fatal("the lock file is not in the held directory alone")
				}
				// Reads go through the held descriptors.
				if b, err := s.Get(blob.Digest); err != nil || string(b) != "after the swap" {
					t.Fatalf("Get: %q %v", b, err)
				}
				if d, ok, err := s.GetIndex(evidence.IndexPreflights, before.Digest); err != nil || !ok || d != before {
					t.Fatalf("GetIndex: %v %v %v", d, ok, err)
				}
				es, err := s.ListIndex(evidence.IndexPreflights)
				must(t, err)
				rep, err := s.Verify()
				must(t, err)
				if !rep.OK() || rep.Objects != 2 || len(rep.Preflights) != len(es) {
					t.Fatalf("verify through the held descriptors: %+v", rep)
				}
				// Both directories verify clean on their own, and the other store got nothing.
				for _, dir := range []string{held, otherRoot} {
					o, err := Open(dir)
					if err != nil {
						t.Fatalf("open %s: %v", dir, err)
					}
					r, err := o.Verify()
					closeStore(t, o)
					if err != nil || !r.OK() {
						t.Fatalf("verify %s: %v %+v", dir, err, r)
					}
				}
				if n := names(t, otherRoot, "blobs/sha256"); len(n) != 0 {
					t.Fatalf("the other store holds %v", n)
				}
			})
		}
	})
}

// TestRootRestored: once the path names the held directory again, publishing works.
func TestRootRestored(t *testing.T) {
	s := newStore(t)
	d, err := s.PutBlob(evidence.MediaTypeOctets, []byte("x"))
	must(t, err)
	root := s.Root()
	must(t, os.Rename(root, root+".held"))
	must(t, os.Symlink(root+".held", root))
	if err := s.PutIndex(evidence.IndexPreflights, d.Digest, d); refuse.CodeOf(err) != CodeRootMoved {
		t.Fatalf("swapped: %v", err)
	}
	must(t, os.Remove(root))
	must(t, os.Rename(root+".held", root))
	if err := s.PutIndex(evidence.IndexPreflights, d.Digest, d); err != nil {
		t.Fatalf("restored: %v", err)
	}
	if _, _, err := s.PutRecord(evidence.MediaTypeIntent, testIntent(d)); err != nil {
		t.Fatalf("restored: %v", err)
	}
}

// TestRootSwappedDuringIndexCommit: the path swapped after PutIndex's check and before its
// rename (the entry is then in the held directory) is caught by the check after it: the entry is
// removed again and the call refused, so neither directory publishes it.
func TestRootSwappedDuringIndexCommit(t *testing.T) {
	for _, sw := range swaps[:2] {
		t.Run(sw.name, func(t *testing.T) {
			s := newStore(t)
			other := newStore(t)
			d, err := s.PutBlob(evidence.MediaTypeOctets, []byte("entry"))
			must(t, err)
			var held string
			var otherNow string
			commitHook = func() { commitHook = nil; held, otherNow = sw.swap(t, s.Root(), other.Root()) }
			t.Cleanup(func() { commitHook = nil })
			if err := s.PutIndex(evidence.IndexReceipts, d.Digest, d); refuse.CodeOf(err) != CodeRootMoved {
				t.Fatalf("PutIndex: %v, want %s", err, CodeRootMoved)
			}
			if held == "" {
				t.Fatal("the hook did not run")
			}
			for _, dir := range []string{held, otherNow} {
				if n := names(t, dir, "index/"+evidence.IndexReceipts); len(n) != 0 {
					t.Fatalf("%s publishes %v", dir, n)
				}
			}
			if _, ok, err := s.GetIndex(evidence.IndexReceipts, d.Digest); ok || err != nil {
				t.Fatalf("GetIndex: %v %v", ok, err)
			}
		})
	}
}

// TestOpenSymlinkRefused: a symlink as the root or as any component of its path is refused at
// Open and at Init, with either resolver.
func TestOpenSymlinkRefused(t *testing.T) {
	resolvers(t, func(t *testing.T) {
		s := newStore(t)
		base := filepath.Dir(s.Root())
		must(t, os.Symlink(s.Root(), filepath.Join(base, "link")))
		must(t, os.Symlink(base, filepath.Join(base, "dirlink")))
		for _, p := range []string{filepath.Join(base, "link"), filepath.Join(base, "dirlink", "s"), filepath.Join(base, "dirlink", "new")} {
			if o, err := Open(p); refuse.CodeOf(err) != CodeStoreRoot {
				t.Fatalf("Open %s: %v, want %s", p, err, CodeStoreRoot)
			} else if o != nil {
				o.Close()
			}
			if o, err := Init(p); refuse.CodeOf(err) != CodeStoreRoot {
				t.Fatalf("Init %s: %v, want %s", p, err, CodeStoreRoot)
			} else if o != nil {
				o.Close()
			}
		}
		if _, err := os.Lstat(filepath.Join(base, "new")); !errors.Is(err, os.ErrNotExist) {
			t.Fatalf("Init through a symlinked parent created a directory: %v", err)
		}
		must(t, os.Remove(filepath.Join(s.Root(), "tmp")))
		must(t, os.Symlink(filepath.Join(s.Root(), "locks"), filepath.Join(s.Root(), "tmp")))
		if _, err := Open(s.Root()); refuse.CodeOf(err) != CodeStoreRoot {
			t.Fatalf("Open with a symlinked subdirectory: %v", err)
		}
		if _, err := Init(s.Root()); refuse.CodeOf(err) != CodeStoreRoot {
			t.Fatalf("Init with a symlinked subdirectory: %v", err)
		}
	})
}

// TestOpenat2Unavailable: an openat2 that fails as on a kernel before 5.6 switches to the walk,
// which resolves and refuses the same way.
func TestOpenat2Unavailable(t *testing.T) {
	calls := 0
	t.Cleanup(sysfile.SetResolverForTest(sysfile.ResolverForTest{
		Openat2: func(int, string, *unix.OpenHow) (int, error) { calls++; return -1, unix.ENOSYS }}))
	s := newStore(t)
	if calls != 1 || !sysfile.Openat2Missing() {
		t.Fatalf("openat2 called %d times, missing %v", calls, sysfile.Openat2Missing())
	}
	d, err := s.PutBlob(evidence.MediaTypeOctets, []byte("walk"))
	must(t, err)
	must(t, s.PutIndex(evidence.IndexPreflights, d.Digest, d))
	must(t, os.Rename(s.Root(), s.Root()+".held"))
	must(t, os.Symlink(s.Root()+".held", s.Root()))
	if err := s.PutIndex(evidence.IndexIntents, d.Digest, d); refuse.CodeOf(err) != CodeRootMoved {
		t.Fatalf("PutIndex: %v", err)
	}
	if _, err := Open(s.Root()); refuse.CodeOf(err) != CodeStoreRoot {
		t.Fatalf("Open: %v", err)
	}
}

// TestClose: Close releases the descriptors; every later operation is refused and a second Close
// is a no-op.
func TestClose(t *testing.T) {
	s := newStore(t)
	d, err := s.PutBlob(evidence.MediaTypeOctets, []byte("c"))
	must(t, err)
	must(t, s.Close())
	must(t, s.Close())
	ops := map[string]error{}
	_, ops["PutBlob"] = s.PutBlob(evidence.MediaTypeOctets, []byte("c"))
	_, _, ops["PutRecord"] = s.PutRecord(evidence.MediaTypeIntent, testIntent(d))
	_, ops["Get"] = s.Get(d.Digest)
	_, ops["GetDescriptor"] = s.GetDescriptor(d)
	ops["PutIndex"] = s.PutIndex(evidence.IndexPreflights, d.Digest, d)
	_, _, ops["GetIndex"] = s.GetIndex(evidence.IndexPreflights, d.Digest)
	_, ops["ListIndex"] = s.ListIndex(evidence.IndexPreflights)
	_, ops["Verify"] = s.Verify()
	_, ops["Lock"] = s.Lock(context.Background(), d.Digest)
	for op, err := range ops {
		if refuse.CodeOf(err) != CodeStoreIO {
			t.Errorf("%s after Close: %v, want %s", op, err, CodeStoreIO)
		}
	}
}

// TestOpenHoldsNoPath: the descriptors Open holds are the store's directories, and a store
// opened and closed leaves no descriptor behind.
func TestOpenHoldsNoPath(t *testing.T) {
	s := newStore(t)
	count := func() int { return len(names(t, "/proc/self", "fd")) }
	n := count()
	o, err := Open(s.Root())
	must(t, err)
	if got := count() - n; got != nDirs {
		t.Fatalf("Open holds %d descriptors, want %d", got, nDirs)
	}
	for i, d := range o.dirs {
		var st unix.Stat_t
		must(t, unix.Lstat(filepath.Join(s.Root(), layout[i].rel), &st))
		if uint64(st.Dev) != d.dev || st.Ino != d.ino {
			t.Fatalf("descriptor %d is not %s", i, layout[i].rel)
		}
	}
	closeStore(t, o)
	if got := count(); got != n {
		t.Fatalf("%d descriptors after Close, want %d", got, n)
	}
}
