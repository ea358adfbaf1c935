package sysfile

import (
	"bytes"
	"errors"
	"io"
	"os"
	"path/filepath"
	"testing"

	"golang.org/x/sys/unix"
)

// resolvers runs f with openat2 and again with the walk an old kernel gets.
func resolvers(t *testing.T, f func(t *testing.T)) {
	t.Run("openat2", f)
	t.Run("walk", func(t *testing.T) {
		t.Cleanup(SetResolverForTest(ResolverForTest{Walk: true}))
		f(t)
	})
}

// tree makes dir/a/b, dir/file and the symlinks dir/link -> a and dir/a/blink -> b.
func tree(t *testing.T) string {
	t.Helper()
	dir, err := filepath.EvalSymlinks(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	for _, err := range []error{
		os.MkdirAll(filepath.Join(dir, "a", "b"), 0o700),
		os.WriteFile(filepath.Join(dir, "file"), nil, 0o600),
		os.Symlink("a", filepath.Join(dir, "link")),
		os.Symlink("b", filepath.Join(dir, "a", "blink")),
	} {
		if err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

// TestResolveDir: both resolvers open a symlink-free directory, absolute or relative to a held
// one, to the same inode, and refuse a symlink in any component with ELOOP, a file with ENOTDIR
// and a missing name with ENOENT.
func TestResolveDir(t *testing.T) {
	resolvers(t, func(t *testing.T) {
		dir := tree(t)
		root, err := ResolveDir(unix.AT_FDCWD, dir)
		if err != nil {
			t.Fatal(err)
		}
		defer unix.Close(root)
		vectors := []struct {
			name  string // what is resolved
			dirfd int    // relative to what
			want  error  // nil: opens dir/a/b
		}{
			{dir + "/a/b", unix.AT_FDCWD, nil},
			{"a/b", root, nil},
			{"a//b/", root, nil},
			{dir + "/link/b", unix.AT_FDCWD, unix.ELOOP},
			{"link/b", root, unix.ELOOP},
			{"a/blink", root, unix.ELOOP},
			{dir + "/a/blink", unix.AT_FDCWD, unix.ELOOP},
			{"file", root, unix.ENOTDIR},
			{"file/x", root, unix.ENOTDIR},
			{"missing/b", root, unix.ENOENT},
		}
		var want unix.Stat_t
		if err := unix.Stat(filepath.Join(dir, "a", "b"), &want); err != nil {
			t.Fatal(err)
		}
		for _, v := range vectors {
			fd, err := ResolveDir(v.dirfd, v.name)
			if v.want != nil {
				if !errors.Is(err, v.want) {
					t.Errorf("%s: %v, want %v", v.name, err, v.want)
				}
				if err == nil {
					unix.Close(fd)
				}
				continue
			}
			if err != nil {
				t.Errorf("%s: %v", v.name, err)
				continue
			}
			var st unix.Stat_t
			if err := unix.Fstat(fd, &st); err != nil || st.Ino != want.Ino || st.Dev != want.Dev {
				t.Errorf("%s opened %d:%d (%v), want %d:%d", v.name, st.Dev, st.Ino, err, want.Dev, want.Ino)
			}
			unix.Close(fd)
		}
	})
}

// TestOpenat2Missing: an openat2 that fails as before Linux 5.6 (ENOSYS) or under a seccomp
// filter (EPERM) is tried once; the walk serves from then on and still refuses a symlink.
func TestOpenat2Missing(t *testing.T) {
	for _, errno := range []unix.Errno{unix.ENOSYS, unix.EPERM} {
		t.Run(errno.Error(), func(t *testing.T) {
			calls := 0
			t.Cleanup(SetResolverForTest(ResolverForTest{
				Openat2: func(int, string, *unix.OpenHow) (int, error) { calls++; return -1, errno }}))
			dir := tree(t)
			for range 2 {
				fd, err := ResolveDir(unix.AT_FDCWD, dir+"/a/b")
				if err != nil {
					t.Fatal(err)
				}
				unix.Close(fd)
			}
			if _, err := ResolveDir(unix.AT_FDCWD, dir+"/link/b"); !errors.Is(err, unix.ELOOP) {
				t.Fatalf("symlink through the walk: %v", err)
			}
			if calls != 1 || !Openat2Missing() {
				t.Fatalf("openat2 called %d times, missing %v: the fallback is not remembered", calls, Openat2Missing())
			}
		})
	}
}

// TestWriteAll: a short write continues where it stopped, EINTR is retried, and a write of zero
// bytes without an error ends the loop with io.ErrShortWrite instead of spinning.
func TestWriteAll(t *testing.T) {
	data := bytes.Repeat([]byte("0123456789"), 1000)
	vectors := []struct {
		name  string                              // the kernel's behaviour
		write func(fd int, b []byte) (int, error) // stands in for write(2)
		want  error                               // WriteAll's result
		wrote func(got []byte) bool               // what reached the file
	}{
		{"whole", unix.Write, nil, func(got []byte) bool { return bytes.Equal(got, data) }},
		{"short writes and EINTR", func() func(int, []byte) (int, error) {
			n := 0
			return func(fd int, b []byte) (int, error) {
				if n++; n%2 == 0 {
					return 0, unix.EINTR
				}
				return unix.Write(fd, b[:min(len(b), 7)])
			}
		}(), nil, func(got []byte) bool { return bytes.Equal(got, data) }},
		{"zero bytes", func(fd int, b []byte) (int, error) { return 0, nil }, io.ErrShortWrite,
			func(got []byte) bool { return len(got) == 0 }},
		{"error", func(fd int, b []byte) (int, error) { return -1, unix.ENOSPC }, unix.ENOSPC,
			func(got []byte) bool { return len(got) == 0 }},
	}
	for _, v := range vectors {
		t.Run(v.name, func(t *testing.T) {
			old := write
			write = v.write
			t.Cleanup(func() { write = old })
			p := filepath.Join(t.TempDir(), "f")
			f, err := os.Create(p)
			if err != nil {
				t.Fatal(err)
			}
			defer f.Close()
			if err := WriteAll(int(f.Fd()), data); !errors.Is(err, v.want) {
				t.Fatalf("WriteAll: %v, want %v", err, v.want)
			}
			got, err := os.ReadFile(p)
			if err != nil || !v.wrote(got) {
				t.Fatalf("the file holds %d bytes (%v)", len(got), err)
			}
		})
	}
}

// TestReopenAndSyncDir: an O_PATH descriptor, which can neither list nor fsync, is reopened as
// the same directory for reading, and synced through it.
func TestReopenAndSyncDir(t *testing.T) {
	dir := tree(t)
	pfd, err := ResolveDir(unix.AT_FDCWD, dir)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Close(pfd)
	if err := unix.Fsync(pfd); !errors.Is(err, unix.EBADF) {
		t.Fatalf("fsync of an O_PATH descriptor: %v, want EBADF (else the reopen is needless)", err)
	}
	fd, err := ReopenDir(pfd)
	if err != nil {
		t.Fatal(err)
	}
	f := os.NewFile(uintptr(fd), dir)
	defer f.Close()
	names, err := f.Readdirnames(-1)
	if err != nil || len(names) != 3 {
		t.Fatalf("listing %v (%v), want a, file, link", names, err)
	}
	if err := SyncDir(pfd); err != nil {
		t.Fatal(err)
	}
}

// TestCauseOf sorts the errors the packages above refuse differently.
func TestCauseOf(t *testing.T) {
	for err, want := range map[error]Cause{
		unix.ELOOP: CauseSymlink, &os.PathError{Op: "open", Err: unix.ELOOP}: CauseSymlink,
		unix.ENOENT: CauseNotFound, unix.ENOTDIR: CauseNotFound,
		unix.EACCES: CauseOther, unix.EIO: CauseOther,
	} {
		if got := CauseOf(err); got != want {
			t.Errorf("CauseOf(%v) = %d, want %d", err, got, want)
		}
	}
}
