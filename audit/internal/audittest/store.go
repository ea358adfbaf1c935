// Package audittest holds what the auditor's tests share: stores captured from real ceremonies,
// laid out again with the modes git does not keep; the closure walk; the tamper classes and the
// forger that rewrites records and re-points every reference to them; and the assertions every
// audit report must satisfy. The offline tests (package audit) run it on the committed stores,
// the live tests (audit/livetest) on receipts the ceremony has just produced on the real cluster.
package audittest

import (
	"bytes"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	"github.com/opencontainers/go-digest"

	"github.com/qinglong/ql3/evidence"
	"github.com/qinglong/ql3/internal/testbed/ceremonytest"
	"github.com/qinglong/ql3/store"
)

// Dirs are the directories of a store (docs/rationale.md#7-the-evidence-store). A captured store keeps files only: git keeps
// neither empty directories nor modes, so Materialize creates every one of them 0700.
var Dirs = []string{"blobs", "blobs/sha256", "index", "index/" + evidence.IndexReceipts,
	"index/" + evidence.IndexIntents, "index/" + evidence.IndexPreflights, "tmp", "locks"}

// Snapshot is the content of a store: the marker, every object and every index entry, keyed by
// slash-separated path relative to the root. Lock files and staging leftovers are not evidence.
type Snapshot map[string][]byte

// Capture reads the store at root.
func Capture(t testing.TB, root string) Snapshot {
	t.Helper()
	s := Snapshot{}
	for _, sub := range []string{"ql3-store.json", "blobs", "index"} {
		err := filepath.WalkDir(filepath.Join(root, sub), func(p string, e fs.DirEntry, err error) error {
			if err != nil || e.IsDir() {
				return err
			}
			if !e.Type().IsRegular() {
				t.Fatalf("audittest: %s is not a regular file", p)
			}
			b, err := os.ReadFile(p)
			if err != nil {
				return err
			}
			rel, err := filepath.Rel(root, p)
			if err != nil {
				return err
			}
			s[filepath.ToSlash(rel)] = b
			return nil
		})
		if err != nil {
			t.Fatalf("audittest: capture %s: %v", root, err)
		}
	}
	return s
}

// Load reads a snapshot committed under dir (written by WriteTo).
func Load(t testing.TB, dir string) Snapshot {
	t.Helper()
	s := Capture(t, dir)
	if len(s) == 0 {
		t.Fatalf("audittest: no captured store under %s", dir)
	}
	return s
}

// Paths returns the snapshot's paths in sorted order.
func (s Snapshot) Paths() []string {
	ps := make([]string, 0, len(s))
	for p := range s {
		ps = append(ps, p)
	}
	sort.Strings(ps)
	return ps
}

// WriteTo replaces dir with the snapshot as plain files, for committing under testdata.
func (s Snapshot) WriteTo(t testing.TB, dir string) {
	t.Helper()
	if err := os.RemoveAll(dir); err != nil {
		t.Fatal(err)
	}
	for _, p := range s.Paths() {
		full := filepath.Join(dir, filepath.FromSlash(p))
		if err := os.MkdirAll(filepath.Dir(full), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(full, s[p], 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

// Materialize lays the snapshot out as a store in a fresh private directory, with the modes the
// store requires (directories 0700, objects and index entries 0400), and returns its root.
func (s Snapshot) Materialize(t testing.TB) string {
	t.Helper()
	return s.MaterializeAt(t, filepath.Join(PrivateDir(t), "store"))
}

// MaterializeAt is Materialize at root, which must not exist.
func (s Snapshot) MaterializeAt(t testing.TB, root string) string {
	t.Helper()
	if err := os.Mkdir(root, 0o700); err != nil {
		t.Fatal(err)
	}
	for _, d := range Dirs {
		if err := os.Mkdir(filepath.Join(root, d), 0o700); err != nil {
			t.Fatal(err)
		}
	}
	for p, b := range s {
		if err := WriteObject(filepath.Join(root, filepath.FromSlash(p)), b); err != nil {
			t.Fatal(err)
		}
	}
	return root
}

// PrivateDir is ceremonytest.PrivateDir: a fresh 0700 directory with a canonical path.
func PrivateDir(t testing.TB) string {
	t.Helper()
	return ceremonytest.PrivateDir(t)
}

// WriteObject writes b at p with the store's object mode, replacing whatever is there.
func WriteObject(p string, b []byte) error {
	if err := os.RemoveAll(p); err != nil {
		return err
	}
	if err := os.WriteFile(p, b, store.ObjectMode); err != nil {
		return err
	}
	return os.Chmod(p, store.ObjectMode)
}

// BlobPath is the path of object d in the store at root.
func BlobPath(root string, d digest.Digest) string {
	return filepath.Join(root, "blobs", "sha256", d.Encoded())
}

// Open opens the store at root; it is closed when the test ends.
func Open(t testing.TB, root string) *store.Store {
	t.Helper()
	st, err := store.Open(root)
	if err != nil {
		t.Fatalf("audittest: open store %s: %v", root, err)
	}
	t.Cleanup(func() {
		if err := st.Close(); err != nil {
			t.Errorf("audittest: close store %s: %v", root, err)
		}
	})
	return st
}

// Closure returns every object reachable from root by descriptors, root first, each once, in the
// order a depth-first walk meets them.
func Closure(t testing.TB, st *store.Store, root evidence.Descriptor) []evidence.Descriptor {
	t.Helper()
	seen := map[digest.Digest]bool{}
	var out []evidence.Descriptor
	var walk func(d evidence.Descriptor)
	walk = func(d evidence.Descriptor) {
		if seen[d.Digest] {
			return
		}
		seen[d.Digest] = true
		out = append(out, d)
		b, err := st.GetDescriptor(d)
		if err != nil {
			t.Fatalf("audittest: closure object %s: %v", d.Digest, err)
		}
		if _, ok := evidence.RecordSchema(d.MediaType); !ok {
			return
		}
		children, err := evidence.Descriptors(b)
		if err != nil {
			t.Fatalf("audittest: descriptors of %s: %v", d.Digest, err)
		}
		for _, c := range children {
			walk(c)
		}
	}
	walk(root)
	return out
}

// Secretless reports the first marker of key material or a bearer token in the snapshot: a PEM
// block, a BEGIN line, or the word token (case-sensitive: field names such as
// automountServiceAccountToken are not credentials).
func (s Snapshot) Secretless() (string, bool) {
	for _, p := range s.Paths() {
		for _, m := range []string{"-----", "BEGIN", "token", "PRIVATE", "client-key", "client-certificate", "password"} {
			if bytes.Contains(s[p], []byte(m)) {
				return p + " contains " + strings.ToLower(m), false
			}
		}
	}
	return "", true
}
