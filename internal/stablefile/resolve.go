package stablefile

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"golang.org/x/sys/unix"

	"github.com/qinglong/ql3/internal/input"
	"github.com/qinglong/ql3/internal/sysfile"
	"github.com/qinglong/ql3/refuse"
)

// Reason codes for naming and resolving a path, shared by private files and the executable.
const (
	// CodePathInvalid: the path is empty, relative, "/", holds a NUL byte, or is not in the one
	// canonical spelling (no ".", "..", "//" or trailing slash).
	CodePathInvalid refuse.Code = "INPUT_PATH_INVALID"
	// CodeSymlink: some component of the path, the last one included, is a symbolic link.
	CodeSymlink = input.CodeSymlink
	// CodeNotFound: a component of the path does not exist or is not a directory (usage class).
	CodeNotFound = input.CodeNotFound
	// CodeIO: opening, stating or reading failed for another reason (usage class).
	CodeIO refuse.Code = "INPUT_IO"
)

// Test hooks. Production code never changes them.
var (
	getuid         = os.Getuid // lets tests act as a non-root operator
	hookBeforeOpen = func() {} // runs between the leaf's fstatat and its open
)

// leafFlags opens the final component: O_NOFOLLOW refuses a symlink, O_NONBLOCK keeps a FIFO
// swapped in after the type check from blocking the open, O_NOCTTY keeps a terminal from
// becoming ours.
const leafFlags = unix.O_RDONLY | unix.O_NOFOLLOW | unix.O_CLOEXEC | unix.O_NONBLOCK | unix.O_NOCTTY

// identity is what one stat says about an inode. Two stats of an unchanged file compare equal.
type identity struct {
	dev, ino     uint64
	mode         uint32 // st_mode: file type and all permission bits
	uid          uint32
	nlink        uint64
	size         int64
	mtime, ctime unix.Timespec
}

func identityOf(st *unix.Stat_t) identity {
	return identity{dev: uint64(st.Dev), ino: st.Ino, mode: st.Mode, uid: st.Uid, nlink: uint64(st.Nlink),
		size: st.Size, mtime: st.Mtim, ctime: st.Ctim}
}

// diff names the first field in which b differs from a, or "" when they are equal.
func (a identity) diff(b identity) string {
	switch {
	case a.dev != b.dev || a.ino != b.ino:
		return fmt.Sprintf("inode %d:%d is now %d:%d", a.dev, a.ino, b.dev, b.ino)
	case a.mode != b.mode:
		return fmt.Sprintf("mode %07o is now %07o", a.mode, b.mode)
	case a.uid != b.uid:
		return fmt.Sprintf("owner uid %d is now %d", a.uid, b.uid)
	case a.nlink != b.nlink:
		return fmt.Sprintf("link count %d is now %d", a.nlink, b.nlink)
	case a.size != b.size:
		return fmt.Sprintf("size %d is now %d", a.size, b.size)
	case a.mtime != b.mtime:
		return "mtime changed"
	case a.ctime != b.ctime:
		return "ctime changed"
	}
	return ""
}

// checkPath accepts only an absolute path in its one canonical spelling, so that the path a
// record names is the path that was opened.
func checkPath(p string) error {
	if p == "" || p[0] != '/' || p == "/" || filepath.Clean(p) != p || strings.IndexByte(p, 0) >= 0 {
		return refuse.New(CodePathInvalid, "path %q is not absolute and canonical", p).
			WithHint("name the file by its absolute path without '.', '..', '//' or a trailing slash")
	}
	return nil
}

// openParent opens the directory part of the (checked) path p without following any symlink and
// returns the O_PATH descriptor with its fstat.
func openParent(p string) (int, unix.Stat_t, error) {
	fd, st, err := openDir(filepath.Dir(p))
	if err != nil {
		return -1, st, resolveErr(p, err)
	}
	return fd, st, nil
}

// OpenDir opens the directory at p, an absolute canonical path or "/", as an O_PATH descriptor
// without following a symlink in any component, and returns it with its fstat. The caller
// closes the descriptor. Refusals: INPUT_PATH_INVALID, INPUT_SYMLINK, INPUT_NOT_FOUND (also for
// a last component that is not a directory), INPUT_IO.
func OpenDir(p string) (int, unix.Stat_t, error) {
	if p != "/" {
		if err := checkPath(p); err != nil {
			return -1, unix.Stat_t{}, err
		}
	}
	fd, st, err := openDir(p)
	if err != nil {
		return -1, st, resolveErr(p, err)
	}
	return fd, st, nil
}

// openDir opens dir symlink-free (sysfile.ResolveDir) and states it.
func openDir(dir string) (int, unix.Stat_t, error) {
	fd, err := sysfile.ResolveDir(unix.AT_FDCWD, dir)
	if err != nil {
		return -1, unix.Stat_t{}, err
	}
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		unix.Close(fd)
		return -1, st, fmt.Errorf("stat directory: %w", err)
	}
	return fd, st, nil
}

// openLeaf opens the last component of p relative to dirfd. A file that is not regular when
// first looked at is never opened at all: opening a device can have side effects (a tape
// rewinds). The fstat of the opened descriptor is what counts; the caller checks the rest of it.
func openLeaf(dirfd int, p string, notRegular refuse.Code) (int, unix.Stat_t, error) {
	base := filepath.Base(p)
	var st unix.Stat_t
	if err := unix.Fstatat(dirfd, base, &st, unix.AT_SYMLINK_NOFOLLOW); err != nil {
		return -1, st, resolveErr(p, err)
	}
	if err := checkRegular(p, &st, notRegular); err != nil {
		return -1, st, err
	}
	hookBeforeOpen()
	fd, err := sysfile.RetryEINTR(func() (int, error) { return unix.Openat(dirfd, base, leafFlags, 0) })
	if err != nil {
		return -1, st, resolveErr(p, err)
	}
	if err := unix.Fstat(fd, &st); err != nil {
		unix.Close(fd)
		return -1, st, refuse.Wrap(CodeIO, err, "%s cannot be stated", p)
	}
	if err := checkRegular(p, &st, notRegular); err != nil {
		unix.Close(fd)
		return -1, st, err
	}
	return fd, st, nil
}

func checkRegular(p string, st *unix.Stat_t, notRegular refuse.Code) error {
	switch st.Mode & unix.S_IFMT {
	case unix.S_IFREG:
		return nil
	case unix.S_IFLNK:
		return symlinkErr(p)
	}
	return refuse.New(notRegular, "%s is a %s, not a regular file", p, input.Kind(st.Mode))
}

// resolveErr turns a failed open or stat of p into its refusal.
func resolveErr(p string, err error) error {
	switch sysfile.CauseOf(err) {
	case sysfile.CauseSymlink:
		return symlinkErr(p)
	case sysfile.CauseNotFound:
		return refuse.Wrap(CodeNotFound, err, "%s does not exist (or a component is not a directory)", p)
	}
	return refuse.Wrap(CodeIO, err, "%s cannot be opened", p)
}

// symlinkErr names the first symlink component of p when it can find one. The lstat walk is a
// diagnosis for the message only; the refusal itself came from the kernel.
func symlinkErr(p string) error {
	at := p
	for i := 1; i <= len(p); i++ {
		if i == len(p) || p[i] == '/' {
			if fi, err := os.Lstat(p[:i]); err == nil && fi.Mode()&os.ModeSymlink != 0 {
				at = p[:i]
				break
			}
		}
	}
	return refuse.New(CodeSymlink, "%s has a symlink component %s", p, at).
		WithHint("name the file by its canonical path (realpath) with no symbolic link in it")
}

// labeled puts the input's role in front of a refusal's message, which starts with the path.
func labeled(role string, err error) error {
	var r *refuse.Error
	if errors.As(err, &r) {
		r.Msg = role + " " + r.Msg
	}
	return err
}
