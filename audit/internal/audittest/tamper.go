package audittest

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/qinglong/ql3/evidence"
	"github.com/qinglong/ql3/refuse"
	"github.com/qinglong/ql3/store"
)

// ExhaustiveLimit is the size up to which every byte of an object is flipped; a larger object is
// flipped at Positions.
const ExhaustiveLimit = 4 << 10

// Positions returns the byte positions flipped in an object of n bytes: all of them up to limit
// (and up to 66 bytes whatever the limit), else the first and the last byte and 64 positions
// spread evenly between.
func Positions(n, limit int) []int {
	var ps []int
	if n <= max(limit, 66) {
		for i := range n {
			ps = append(ps, i)
		}
		return ps
	}
	ps = append(ps, 0)
	for k := 1; k <= 64; k++ {
		ps = append(ps, k*(n-1)/65)
	}
	return append(ps, n-1)
}

// ObjectTamper is one way of damaging one stored object on disk, and the code the store (and so
// the audit) must report for it.
type ObjectTamper struct {
	Class string
	Code  refuse.Code
	// Apply damages the object at path, whose intact bytes are b; spare is a private directory
	// on the same file system, outside the store, for copies and extra links.
	Apply func(path string, b []byte, spare string) error
}

// ObjectTampers are the on-disk tamper classes, with their codes. Single-byte flips are
// separate (FlipTamper) because they are many per object.
func ObjectTampers() []ObjectTamper {
	ts := []ObjectTamper{
		{"truncate by one byte", store.CodeObjectCorrupt, func(p string, b []byte, _ string) error {
			if len(b) == 0 {
				return errSkip
			}
			return rewrite(p, b[:len(b)-1])
		}},
		{"truncate to zero", store.CodeObjectCorrupt, func(p string, b []byte, _ string) error {
			if len(b) == 0 {
				return errSkip
			}
			return rewrite(p, nil)
		}},
		{"extend by one byte", store.CodeObjectCorrupt, func(p string, b []byte, _ string) error {
			return rewrite(p, append(append([]byte(nil), b...), '\n'))
		}},
		{"delete", store.CodeObjectNotFound, func(p string, _ []byte, _ string) error { return os.Remove(p) }},
		{"symlink to a copy of the same bytes", store.CodeObjectNotRegular, func(p string, b []byte, spare string) error {
			cp := filepath.Join(spare, "copy")
			if err := WriteObject(cp, b); err != nil {
				return err
			}
			if err := os.Remove(p); err != nil {
				return err
			}
			return os.Symlink(cp, p)
		}},
		{"hard link added", store.CodeObjectLinkCount, func(p string, _ []byte, spare string) error {
			return os.Link(p, filepath.Join(spare, "link"))
		}},
		{"mode 0644", store.CodeObjectMode, func(p string, _ []byte, _ string) error { return os.Chmod(p, 0o644) }},
		{"replaced by a directory", store.CodeObjectNotRegular, func(p string, _ []byte, _ string) error {
			if err := os.Remove(p); err != nil {
				return err
			}
			return os.Mkdir(p, 0o700)
		}},
		{"replaced by a fifo", store.CodeObjectNotRegular, func(p string, _ []byte, _ string) error {
			if err := os.Remove(p); err != nil {
				return err
			}
			return unix.Mkfifo(p, 0o400)
		}},
	}
	if os.Getuid() == 0 {
		ts = append(ts, ObjectTamper{"owned by another uid", store.CodeObjectOwner, func(p string, _ []byte, _ string) error {
			return os.Lchown(p, 65534, 65534)
		}})
	}
	return ts
}

// FlipTamper flips every bit of the byte at i.
func FlipTamper(i int) ObjectTamper {
	return ObjectTamper{fmt.Sprintf("flip byte %d", i), store.CodeObjectCorrupt, func(p string, b []byte, _ string) error {
		c := append([]byte(nil), b...)
		c[i] ^= 0xff
		return rewrite(p, c)
	}}
}

var errSkip = fmt.Errorf("audittest: tamper class does not apply")

func rewrite(p string, b []byte) error {
	if err := os.Chmod(p, 0o600); err != nil {
		return err
	}
	if err := os.WriteFile(p, b, 0o600); err != nil {
		return err
	}
	return os.Chmod(p, store.ObjectMode)
}

// Restore puts the intact bytes b back at p as the store wrote them and empties spare.
func Restore(t testing.TB, p string, b []byte, spare string) {
	t.Helper()
	if err := WriteObject(p, b); err != nil {
		t.Fatal(err)
	}
	if err := os.RemoveAll(spare); err != nil {
		t.Fatal(err)
	}
	if err := os.Mkdir(spare, 0o700); err != nil {
		t.Fatal(err)
	}
}

// Ends returns the first and the last byte position of an object of n bytes: the flips of a run
// under the race detector, which makes each audit about ten times slower.
func Ends(n int) []int {
	switch n {
	case 0:
		return nil
	case 1:
		return []int{0}
	}
	return []int{0, n - 1}
}

// Exhaustive is Positions with ExhaustiveLimit; Sampled is Positions with no exhaustive range.
func Exhaustive(n int) []int { return Positions(n, ExhaustiveLimit) }

// Sampled: see Exhaustive.
func Sampled(n int) []int { return Positions(n, 0) }

// TamperEveryObject damages every object of subject's closure in every class and at every flip
// position that positions returns for its size (no flips when positions is nil), one damage at a
// time in one private copy of snap per object, and requires the audit of subject to fail with the
// class's code each time. It returns the number of audits run.
func TamperEveryObject(t *testing.T, snap Snapshot, subject evidence.Descriptor, positions func(n int) []int) int {
	st := Open(t, snap.Materialize(t))
	objects := Closure(t, st, subject)
	counts := make([]int, len(objects))
	t.Run("objects", func(t *testing.T) {
		for i, d := range objects {
			t.Run(fmt.Sprintf("%02d-%s", i, d.Digest.Encoded()[:12]), func(t *testing.T) {
				t.Parallel()
				root := snap.Materialize(t)
				spare := filepath.Join(filepath.Dir(root), "spare")
				if err := os.Mkdir(spare, 0o700); err != nil {
					t.Fatal(err)
				}
				p := BlobPath(root, d.Digest)
				b, err := os.ReadFile(p)
				if err != nil {
					t.Fatal(err)
				}
				ts := ObjectTampers()
				if positions != nil {
					for _, pos := range positions(len(b)) {
						ts = append(ts, FlipTamper(pos))
					}
				}
				for _, tm := range ts {
					err := tm.Apply(p, b, spare)
					if err == errSkip {
						continue
					}
					if err != nil {
						t.Fatalf("%s: %v", tm.Class, err)
					}
					rep := Audit(t, root, subject.Digest)
					if rep.OK || rep.Code != tm.Code {
						t.Fatalf("object %s (%s, %d bytes), %s: audit ok %v code %s, want %s\n%s",
							d.Digest, d.MediaType, len(b), tm.Class, rep.OK, rep.Code, tm.Code, Failed(rep))
					}
					Restore(t, p, b, spare)
					counts[i]++
				}
				// Every damage was undone: the next one was judged alone.
				WantPass(t, Audit(t, root, subject.Digest))
			})
		}
	})
	n := 0
	for _, c := range counts {
		n += c
	}
	return n
}
