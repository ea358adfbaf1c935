package stablefile

import (
	"bytes"
	"crypto/sha256"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"golang.org/x/sys/unix"
)

// TestHashFD hashes files of sizes around the read buffer and the yield interval three ways: from
// the page cache (raw reads only), with their pages dropped first (ordinary reads for what the
// cache lacks), and as on a filesystem without RWF_NOWAIT (ordinary reads only). Every way must
// give the bytes' SHA-256 and length, and each must have taken the reads it names.
func TestHashFD(t *testing.T) {
	dir := t.TempDir()
	sizes := []int{0, 1, hashBuffer - 1, hashBuffer, hashBuffer + 1, yieldEvery + 3}
	for _, size := range sizes {
		content := bytes.Repeat([]byte("0123456789abcdefghijklmnopqrstuvwxyz!"), size/37+1)[:size]
		p := filepath.Join(dir, "f")
		writeFile(t, p, content, 0o600)
		want := sha256.Sum256(content)
		// chunks is how many reads return bytes; one more finds the end.
		chunks := (size + hashBuffer - 1) / hashBuffer
		for _, mode := range []string{"cached", "dropped", "no-nowait"} {
			t.Run(fmt.Sprintf("%s/%d", mode, size), func(t *testing.T) {
				f, err := os.Open(p)
				must(t, err)
				defer f.Close()
				fd := int(f.Fd())
				var raw, plain int
				cached, wait := preadCached, preadWait
				t.Cleanup(func() { preadCached, preadWait = cached, wait })
				preadCached = func(fd int, b []byte, off int64) (int, error) {
					if mode == "no-nowait" {
						return 0, unix.EOPNOTSUPP
					}
					k, err := cached(fd, b, off)
					if err == nil {
						raw++
					}
					return k, err
				}
				preadWait = func(fd int, b []byte, off int64) (int, error) {
					plain++
					return wait(fd, b, off)
				}
				if mode == "dropped" {
					dropPages(t, fd, size)
				}
				buf := new([hashBuffer]byte)
				h := sha256.New()
				n, err := hashFD(fd, h, buf[:])
				must(t, err)
				if n != int64(size) || !bytes.Equal(h.Sum(nil), want[:]) {
					t.Fatalf("size %d: read %d bytes, sum %x; want %x", size, n, h.Sum(nil), want)
				}
				switch mode {
				case "cached":
					if raw != chunks+1 || plain != 0 {
						t.Errorf("size %d: %d raw and %d ordinary reads; want %d and 0", size, raw, plain, chunks+1)
					}
				case "dropped":
					if size > 0 && plain == 0 {
						t.Errorf("size %d: no ordinary read of a file whose pages were dropped (%d raw)", size, raw)
					}
				case "no-nowait":
					if raw != 0 || plain != chunks+1 {
						t.Errorf("size %d: %d raw and %d ordinary reads; want 0 and %d", size, raw, plain, chunks+1)
					}
				}
			})
		}
	}
}

// dropPages writes back and evicts fd's pages from the page cache, and skips t (fails it under
// CI=true) on tmpfs, whose pages are the file itself. (It does not probe with a read: a read that
// misses the cache starts a read-ahead.)
func dropPages(t *testing.T, fd, size int) {
	t.Helper()
	var fs unix.Statfs_t
	must(t, unix.Fstatfs(fd, &fs))
	if fs.Type == unix.TMPFS_MAGIC || fs.Type == unix.RAMFS_MAGIC {
		msg := "TMPDIR is on tmpfs, which keeps a file's pages: no read can miss the cache"
		if os.Getenv("CI") == "true" {
			t.Fatal(msg)
		}
		t.Skip(msg)
	}
	if size > 0 {
		must(t, unix.Fsync(fd))
		must(t, unix.Fadvise(fd, 0, 0, unix.FADV_DONTNEED))
	}
}

// TestHashFDError: a read that fails fails the hash, whichever read it was.
func TestHashFDError(t *testing.T) {
	cached, wait := preadCached, preadWait
	t.Cleanup(func() { preadCached, preadWait = cached, wait })
	preadCached = func(int, []byte, int64) (int, error) { return 0, unix.EIO }
	if _, err := hashFD(-1, sha256.New(), make([]byte, 8)); !errors.Is(err, unix.EIO) {
		t.Errorf("raw read failing with EIO: %v", err)
	}
	preadCached = func(int, []byte, int64) (int, error) { return 0, unix.EAGAIN }
	preadWait = func(int, []byte, int64) (int, error) { return 0, unix.EIO }
	if _, err := hashFD(-1, sha256.New(), make([]byte, 8)); !errors.Is(err, unix.EIO) {
		t.Errorf("ordinary read failing with EIO: %v", err)
	}
}
