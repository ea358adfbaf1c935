// Package sysfile is the one file-safety core under the packages that read and write files
// through descriptors (store, stablefile, input): system calls retried on EINTR, a whole-buffer
// write that cannot loop on a zero-byte write, a directory resolved without following any
// symlink, and a held directory reopened for reading or synced. It raises no refusal: each
// package above it turns an error into its own reason code.
package sysfile

import (
	"errors"
	"io"
	"strings"
	"sync/atomic"

	"golang.org/x/sys/unix"
)

// DirFlags open a directory for lookups only: O_PATH needs search permission, not read, so a
// directory of the wrong mode or owner is refused by its caller's check rather than by EACCES.
const DirFlags = unix.O_PATH | unix.O_DIRECTORY | unix.O_CLOEXEC

// RetryEINTR calls f until it returns anything but EINTR: a signal that interrupts a system call
// (Go's runtime sends SIGURG to preempt) is not a failure of the call.
func RetryEINTR(f func() (int, error)) (int, error) {
	for {
		n, err := f()
		if !errors.Is(err, unix.EINTR) {
			return n, err
		}
	}
}

// WriteAll writes all of b to fd, retrying on EINTR. A write that returns 0 bytes and no error
// is io.ErrShortWrite: looping on it would never end.
func WriteAll(fd int, b []byte) error {
	for len(b) > 0 {
		n, err := RetryEINTR(func() (int, error) { return write(fd, b) })
		if err != nil {
			return err
		}
		if n == 0 {
			return io.ErrShortWrite
		}
		b = b[n:]
	}
	return nil
}

// Test hooks. Production code never changes them; other packages' tests change the resolver
// only through SetResolverForTest.
var (
	write      = unix.Write // this package's tests make a write return 0 bytes, or EINTR
	useOpenat2 = true
	openat2    = unix.Openat2
)

// openat2Missing is set once openat2 turns out to be unavailable, so the walk is used from then on.
var openat2Missing atomic.Bool

// ResolveDir opens the directory name relative to dirfd (AT_FDCWD with an absolute name) as an
// O_PATH descriptor, following no symlink in any component, the last one included:
// openat2(RESOLVE_NO_SYMLINKS), or, where openat2 is missing (before Linux 5.6, or under a
// seccomp filter that does not know it), a walk that opens one component at a time with
// O_NOFOLLOW relative to its parent's descriptor. Both report a symlink component as ELOOP.
// The caller closes the descriptor.
func ResolveDir(dirfd int, name string) (int, error) {
	if useOpenat2 && !openat2Missing.Load() {
		fd, err := RetryEINTR(func() (int, error) {
			return openat2(dirfd, name, &unix.OpenHow{Flags: DirFlags, Resolve: unix.RESOLVE_NO_SYMLINKS | unix.RESOLVE_NO_MAGICLINKS})
		})
		if !errors.Is(err, unix.ENOSYS) && !errors.Is(err, unix.EPERM) {
			return fd, err
		}
		openat2Missing.Store(true)
	}
	return walk(dirfd, name)
}

// walk is ResolveDir without openat2. With O_PATH|O_NOFOLLOW|O_DIRECTORY a symlink component
// fails with ENOTDIR; fstatat tells it apart from a component that is a file.
func walk(dirfd int, name string) (int, error) {
	start, rest := ".", name
	if strings.HasPrefix(name, "/") {
		start, rest = "/", name[1:]
	}
	fd, err := RetryEINTR(func() (int, error) { return unix.Openat(dirfd, start, DirFlags, 0) })
	if err != nil {
		return -1, err
	}
	for _, c := range strings.Split(rest, "/") {
		if c == "" {
			continue
		}
		next, err := RetryEINTR(func() (int, error) { return unix.Openat(fd, c, DirFlags|unix.O_NOFOLLOW, 0) })
		if err != nil {
			var st unix.Stat_t
			if unix.Fstatat(fd, c, &st, unix.AT_SYMLINK_NOFOLLOW) == nil && st.Mode&unix.S_IFMT == unix.S_IFLNK {
				err = unix.ELOOP
			}
			unix.Close(fd)
			return -1, err
		}
		unix.Close(fd)
		fd = next
	}
	return fd, nil
}

// ReopenDir opens the very directory dirfd holds (an O_PATH descriptor included) for reading:
// listing, and fsync, need a readable descriptor. A fresh descriptor also has its own read
// offset, which a held one shared by concurrent listings would not.
func ReopenDir(dirfd int) (int, error) {
	return RetryEINTR(func() (int, error) {
		return unix.Openat(dirfd, ".", unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	})
}

// SyncDir fsyncs the directory dirfd holds, through a readable descriptor of it.
func SyncDir(dirfd int) error {
	fd, err := ReopenDir(dirfd)
	if err != nil {
		return err
	}
	defer unix.Close(fd)
	return unix.Fsync(fd)
}

// Cause sorts a failed open or stat into the cases the packages above refuse differently.
type Cause int

const (
	CauseOther    Cause = iota // any other failure: an i/o error, a permission
	CauseSymlink               // a component is a symbolic link (ELOOP)
	CauseNotFound              // a component does not exist or is not a directory
)

// CauseOf sorts err, a failed open, openat2 or stat.
func CauseOf(err error) Cause {
	switch {
	case errors.Is(err, unix.ELOOP):
		return CauseSymlink
	case errors.Is(err, unix.ENOENT), errors.Is(err, unix.ENOTDIR):
		return CauseNotFound
	}
	return CauseOther
}

// ResolverForTest selects how ResolveDir resolves, for the tests of the packages built on it.
type ResolverForTest struct {
	Walk    bool                                          // never call openat2: the walk an old kernel gets
	Openat2 func(int, string, *unix.OpenHow) (int, error) // replaces openat2 (nil: the real one)
}

// SetResolverForTest installs r until the returned restore runs, which also forgets that openat2
// was found missing. Production code never calls it; tests that change it must not run in parallel.
func SetResolverForTest(r ResolverForTest) (restore func()) {
	oldUse, oldAt2 := useOpenat2, openat2
	useOpenat2 = !r.Walk
	if r.Openat2 != nil {
		openat2 = r.Openat2
	}
	return func() {
		useOpenat2, openat2 = oldUse, oldAt2
		openat2Missing.Store(false)
	}
}

// Openat2Missing reports whether openat2 turned out to be unavailable, so that ResolveDir walks.
func Openat2Missing() bool { return openat2Missing.Load() }
