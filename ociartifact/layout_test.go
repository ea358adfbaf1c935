package ociartifact_test

import (
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/qinglong/ql3/evidence"
	"github.com/qinglong/ql3/ociartifact"
	"github.com/qinglong/ql3/refuse"
	"github.com/qinglong/ql3/store"
)

// exportedLayout exports the 1,000-resource receipt's artifact into a new directory; its files
// are made writable so that the tests can replace them.
func exportedLayout(t *testing.T) (string, *ociartifact.Collected) {
	t.Helper()
	_, _, c := collect(t)
	dir := filepath.Join(t.TempDir(), "layout")
	if _, err := ociartifact.Export(c, dir, ""); err != nil {
		t.Fatal(err)
	}
	return dir, c
}

// within runs f and fails the test if it has not returned after limit: a layout reader that
// blocks on a FIFO would hang here.
func within(t *testing.T, limit time.Duration, f func() error) error {
	t.Helper()
	done := make(chan error, 1)
	go func() { done <- f() }()
	select {
	case err := <-done:
		return err
	case <-time.After(limit):
		t.Fatalf("the layout reader blocked for %s", limit)
	}
	return nil
}

func openVerify(dir string) error {
	l, err := ociartifact.OpenLayout(dir)
	if err != nil {
		return err
	}
	defer l.Close()
	rep, err := l.Verify()
	if err != nil {
		return err
	}
	if !rep.OK() {
		return refuse.New(rep.Corruption[0].Code, "%s", rep.Corruption[0].Msg)
	}
	return nil
}

// TestLayoutNonBlocking: every file of a layout is opened without blocking and without following
// a link, and judged by the fstat of that descriptor: a FIFO or a symlink in place of index.json,
// oci-layout, a blob or the blobs directory is refused at once with its code.
func TestLayoutNonBlocking(t *testing.T) {
	replace := func(t *testing.T, path string, mk func(string) error) {
		t.Helper()
		os.Chmod(filepath.Dir(path), 0o700)
		if err := os.RemoveAll(path); err != nil {
			t.Fatal(err)
		}
		if err := mk(path); err != nil {
			t.Fatal(err)
		}
	}
	fifo := func(p string) error { return unix.Mkfifo(p, 0o600) }
	for _, v := range []struct {
		name, path string
		mk         func(string) error
		code       refuse.Code
	}{
		{"index.json a FIFO", "index.json", fifo, ociartifact.CodeLayout},
		{"oci-layout a FIFO", "oci-layout", fifo, ociartifact.CodeLayout},
		{"index.json a symlink", "index.json", func(p string) error { return os.Symlink("/etc/hostname", p) }, ociartifact.CodeLayout},
		{"blobs a symlink", "blobs", func(p string) error { return os.Symlink(t.TempDir(), p) }, ociartifact.CodeLayout},
		{"the manifest blob a FIFO", "manifest", fifo, store.CodeObjectNotRegular},
		{"an object a symlink", "object", func(p string) error { return os.Symlink("/etc/hostname", p) }, store.CodeObjectNotRegular},
	} {
		t.Run(v.name, func(t *testing.T) {
			dir, c := exportedLayout(t)
			path := filepath.Join(dir, v.path)
			switch v.path {
			case "manifest":
				path = filepath.Join(dir, "blobs/sha256", c.Desc.Digest.Encoded())
			case "object":
				path = filepath.Join(dir, "blobs/sha256", c.Closure[len(c.Closure)-1].Digest.Encoded())
			}
			replace(t, path, v.mk)
			err := within(t, 5*time.Second, func() error { return openVerify(dir) })
			if refuse.CodeOf(err) != v.code {
				t.Fatalf("got %v, want %s", err, v.code)
			}
		})
	}
	// The race of finding 3: index.json swapped for a FIFO (and back) while it is read. A reader
	// that looks by name and then opens by name meets the FIFO in its open and blocks there.
	t.Run("index.json swapped with a FIFO while read", func(t *testing.T) {
		dir, _ := exportedLayout(t)
		os.Chmod(dir, 0o700)
		idx := filepath.Join(dir, "index.json")
		good, err := os.ReadFile(idx)
		if err != nil {
			t.Fatal(err)
		}
		regular, pipe := filepath.Join(dir, ".regular"), filepath.Join(dir, ".fifo")
		stop := make(chan struct{})
		defer close(stop)
		go func() {
			for i := 0; ; i++ {
				select {
				case <-stop:
					return
				default:
				}
				if i%2 == 0 {
					unix.Mkfifo(pipe, 0o600)
					os.Rename(pipe, idx)
				} else {
					os.WriteFile(regular, good, 0o400)
					os.Rename(regular, idx)
				}
			}
		}()
		for range 300 {
			err := within(t, 5*time.Second, func() error { return openVerify(dir) })
			if err != nil && refuse.CodeOf(err) != ociartifact.CodeLayout {
				t.Fatalf("got %v, want success or %s", err, ociartifact.CodeLayout)
			}
		}
	})
}

// TestLayoutVerifyStreams: twelve stray sparse 1 GiB blobs (finding 13: 57 s and 5.3 GB) are
// refused by their fstat, unread, and Verify's memory does not grow with them.
func TestLayoutVerifyStreams(t *testing.T) {
	dir, _ := exportedLayout(t)
	blobs := filepath.Join(dir, "blobs/sha256")
	os.Chmod(blobs, 0o700)
	for i := range 12 {
		f, err := os.Create(filepath.Join(blobs, evidence.FromBytes([]byte(fmt.Sprint("stray ", i))).Encoded()))
		if err != nil {
			t.Fatal(err)
		}
		if err := f.Truncate(1 << 30); err != nil {
			t.Fatal(err)
		}
		f.Close()
	}
	l, err := ociartifact.OpenLayout(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	start := time.Now()
	rep, err := l.Verify()
	took := time.Since(start)
	runtime.ReadMemStats(&after)
	if err != nil {
		t.Fatal(err)
	}
	tooLarge := 0
	for _, f := range rep.Corruption {
		if f.Code == ociartifact.CodeTooLarge {
			tooLarge++
		}
	}
	if tooLarge != 12 || len(rep.Corruption) != 12 {
		t.Fatalf("corruption %+v", rep.Corruption)
	}
	alloc := after.TotalAlloc - before.TotalAlloc
	if alloc > 64<<20 {
		t.Fatalf("verify allocated %d MiB", alloc>>20)
	}
	t.Logf("verify of a layout with 12 sparse 1 GiB blobs: %s, %d KiB allocated", took, alloc>>10)
}
