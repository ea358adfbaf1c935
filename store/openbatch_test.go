package store

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/opencontainers/go-digest"
	"golang.org/x/sys/unix"

	"github.com/qinglong/ql3/evidence"
	"github.com/qinglong/ql3/internal/uring"
	"github.com/qinglong/ql3/internal/uring/uringtest"
	"github.com/qinglong/ql3/refuse"
)

// judged is what one judge made of a file: its code and what it read.
type judged struct {
	code refuse.Code
	size int64
	data string
}

func (j judged) String() string {
	return fmt.Sprintf("code %q size %d data %.20q", j.code, j.size, j.data)
}

// judgeAll judges every name in dir as an object, an index entry, a viewed object and a leaf,
// through openedFiles as a chunk of the bulk readers does.
func judgeAll(t *testing.T, dirfd int, names []string) (map[string][4]judged, int) {
	t.Helper()
	var files openedFiles
	defer files.closeAll()
	for _, name := range names {
		files.add(dirfd, name)
	}
	files.openAll()
	out := map[string][4]judged{}
	ahead := 0
	for slot, name := range names {
		d := digest.Digest("sha256:" + name)
		var j [4]judged
		f, err := files.file(slot)
		if f.pre != nil {
			ahead++
		}
		size, err := checkObjectFD(f, err, d)
		j[0] = judged{refuse.CodeOf(err), size, ""}
		f, err = files.file(slot)
		e, ok, err := readEntryFD(f, err, "receipts", d)
		j[1] = judged{refuse.CodeOf(err), 0, fmt.Sprint(ok, e)}
		f, err = files.file(slot)
		err = viewObjectFD(f, err, d, func(b []byte) error { j[2].data = string(b); return nil })
		j[2].code = refuse.CodeOf(err)
		f, err = files.file(slot)
		var buf [maxLeafTest + 1]byte
		m, err := readLeafFD(f, err, 7, buf[:])
		j[3] = judged{refuse.CodeOf(err), int64(m), string(buf[:m])}
		files.release(slot)
		out[name] = j
	}
	return out, ahead
}

const maxLeafTest = 1 << 10

// TestOpenedFilesJudgeAsPlain: every kind of file a store directory can hold is judged the same
// through the ring (read ahead) as by the plain calls: a good object, one too large to read
// ahead, an empty file, a file of the wrong mode, one hard-linked, a symlink, a FIFO, a
// directory, a missing name, an object that does not hash to its name, and a name too long for
// the ring. Then no descriptor is left open.
func TestOpenedFilesJudgeAsPlain(t *testing.T) {
	dir := t.TempDir()
	put := func(content []byte, mode os.FileMode) string {
		name := digest.FromBytes(content).Encoded()
		if err := os.WriteFile(filepath.Join(dir, name), content, mode); err != nil {
			t.Fatal(err)
		}
		return name
	}
	entry := []byte(`{"digest":"sha256:` + strings.Repeat("a", 64) + `","mediaType":"application/vnd.qinglong.ql3.receipt.v1+json","size":3}`)
	names := []string{
		put([]byte("a small object"), 0o400),
		put(bytes.Repeat([]byte("large "), maxPrefetch/3), 0o400), // more than maxPrefetch
		put(nil, 0o400),
		put(entry, 0o400),
		put([]byte("wrong mode"), 0o644),
	}
	linked := put([]byte("hard-linked"), 0o400)
	if err := os.Link(filepath.Join(dir, linked), filepath.Join(dir, "other-name")); err != nil {
		t.Fatal(err)
	}
	names = append(names, linked)
	special := func(name string, make func(p string) error) {
		if err := make(filepath.Join(dir, name)); err != nil {
			t.Fatal(err)
		}
		names = append(names, name)
	}
	special(strings.Repeat("1", 64), func(p string) error { return os.Symlink(filepath.Join(dir, names[0]), p) })
	special(strings.Repeat("2", 64), func(p string) error { return unix.Mkfifo(p, 0o400) })
	special(strings.Repeat("3", 64), func(p string) error { return os.Mkdir(p, 0o700) })
	special(strings.Repeat("4", 64), func(p string) error { return os.WriteFile(p, []byte("not its hash"), 0o400) })
	names = append(names, strings.Repeat("5", 64), strings.Repeat("6", uring.MaxName+1))

	dirfd, err := unix.Open(dir, unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Close(dirfd)
	var got [2]map[string][4]judged
	uringtest.Require(t) // its ring is kept for the process's life: opened before the count
	fds := openFDs(t)
	var ahead [2]int
	got[0], ahead[0] = judgeAll(t, dirfd, names)
	uring.Disable()
	got[1], ahead[1] = judgeAll(t, dirfd, names)
	uring.Enable()
	// Read ahead: the small regular files (good, empty, entry, wrong mode, linked, not its
	// hash); not the large one, the symlink, the FIFO, the directory or the missing names.
	if ahead != [2]int{6, 0} {
		t.Errorf("files read ahead (ring, plain): %v, want [6 0]", ahead)
	}
	if after := openFDs(t); after != fds {
		t.Errorf("%d descriptors open before, %d after", fds, after)
	}
	codes := map[refuse.Code]bool{}
	for _, name := range names {
		ring, plain := got[0][name], got[1][name]
		if ring != plain {
			t.Errorf("%.16s: ring %v, plain %v", name, ring, plain)
		}
		for _, j := range plain {
			codes[j.code] = true
		}
	}
	// The set is what it claims: each rule is met somewhere (a test of nothing would agree too).
	for _, c := range []refuse.Code{"", CodeObjectNotFound, CodeObjectNotRegular, CodeObjectMode, CodeObjectLinkCount, CodeObjectCorrupt, CodeIndexCorrupt, CodeLogFile} {
		if !codes[c] {
			t.Errorf("no file was judged %q: %v", c, got[1])
		}
	}
	if j := got[0][names[1]][2]; j.code != "" || len(j.data) != 6*(maxPrefetch/3) {
		t.Errorf("the object larger than the read-ahead: %v", j)
	}
}

// TestViewAll: ViewAll hands each object exactly what View does, and refuses each with View's
// code, over more objects than a chunk (so that the workers share them), on both read paths.
func TestViewAll(t *testing.T) {
	uringtest.BothPaths(t, func(t *testing.T) {
		s := newStore(t)
		var ds []digest.Digest
		for i := range 3*chunkSize + 5 {
			d, err := s.PutBlob("application/octet-stream", []byte(strings.Repeat(fmt.Sprint(i), 1+i)))
			if err != nil {
				t.Fatal(err)
			}
			ds = append(ds, d.Digest)
		}
		ds[7] = digest.FromString("never stored")
		ds[9] = "sha256:not-a-digest"
		p := filepath.Join(s.Root(), "blobs", "sha256", ds[11].Encoded())
		_ = os.Chmod(p, 0o600)
		if err := os.WriteFile(p, []byte("changed"), 0o400); err != nil {
			t.Fatal(err)
		}
		_ = os.Chmod(p, 0o400)
		if err := os.Chmod(filepath.Join(s.Root(), "blobs", "sha256", ds[13].Encoded()), 0o644); err != nil {
			t.Fatal(err)
		}
		got := make([][]byte, len(ds))
		errs := s.ViewAll(ds, func(i int, b []byte) error {
			got[i] = bytes.Clone(b)
			if i == 20 {
				return refuse.New("TEST_FN", "fn's own error")
			}
			return nil
		})
		codes := map[refuse.Code]int{}
		for i, d := range ds {
			var want []byte
			werr := s.View(d, func(b []byte) error {
				want = bytes.Clone(b)
				if i == 20 {
					return refuse.New("TEST_FN", "fn's own error")
				}
				return nil
			})
			if refuse.CodeOf(errs[i]) != refuse.CodeOf(werr) || !bytes.Equal(got[i], want) {
				t.Errorf("object %d: ViewAll %v %.20q, View %v %.20q", i, errs[i], got[i], werr, want)
			}
			codes[refuse.CodeOf(errs[i])]++
		}
		want := map[refuse.Code]int{"": len(ds) - 5, CodeObjectNotFound: 1, evidence.CodeDigestInvalid: 1, CodeObjectCorrupt: 1, CodeObjectMode: 1, "TEST_FN": 1}
		if fmt.Sprint(codes) != fmt.Sprint(want) {
			t.Errorf("codes %v, want %v", codes, want)
		}
	})
}
