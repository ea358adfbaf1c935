// Package rundir makes, holds and removes kubectl's private per-run directories (docs/kubectl.md,
// "The run directory"). A run directory holds a copy of the kubeconfig, a credential, so:
//
//   - its root ($TMPDIR when set, else /dev/shm when it is a tmpfs, else /tmp) must be reached
//     without a symlink and be safe from other users: every component owned by the current uid
//     or root, none writable by group or others without the sticky bit;
//   - the root is held by a descriptor and everything below it is made relative to descriptors
//     (mkdirat, openat with O_EXCL|O_NOFOLLOW), never by resolving a path again;
//   - each run directory holds a lock file, flocked for the directory's whole life, so that a
//     later run can remove the directory of a run that was killed (SIGKILL leaves it behind)
//     without ever touching one that a live run uses.
package rundir

import (
	"os"
	"path/filepath"

	"golang.org/x/sys/unix"

	"github.com/qinglong/ql3/internal/stablefile"
	"github.com/qinglong/ql3/refuse"
)

// Reason codes of the root ($TMPDIR) of the run directories.
const (
	// CodeTmpdirSymlink: the temporary directory is reached through a symlink in some component.
	CodeTmpdirSymlink refuse.Code = "KUBECTL_TMPDIR_SYMLINK"
	// CodeTmpdirOwner: the temporary directory or one of its parents is owned by neither the
	// current uid nor root.
	CodeTmpdirOwner refuse.Code = "KUBECTL_TMPDIR_OWNER"
	// CodeTmpdirWritable: the temporary directory or one of its parents is writable by its group
	// or by others without the sticky bit.
	CodeTmpdirWritable refuse.Code = "KUBECTL_TMPDIR_WRITABLE"
	// CodeTmpdirInvalid: the temporary directory is empty, missing, not a directory, or cannot be
	// opened or stated.
	CodeTmpdirInvalid refuse.Code = "KUBECTL_TMPDIR_INVALID"
)

// geteuid is the owner every run directory gets and every check compares against (a test hook).
var geteuid = os.Geteuid

// shmRoot is the memory-backed root that openDefaultRoot tries first (a test hook).
var shmRoot = "/dev/shm"

// openDefaultRoot opens the root of the run directories when the caller names none. $TMPDIR,
// when set, is the user's choice and is used as it is. Otherwise /dev/shm is used when it is a
// memory filesystem (tmpfs or ramfs, by fstatfs of the held descriptor) and passes every check
// of openRoot, and /tmp when it is not (missing, another filesystem, or refused: a root that was
// not asked for is never a reason to refuse the run, and /tmp is checked in its turn).
//
// Why memory: a run directory holds a copy of the kubeconfig, a credential, which on a memory
// filesystem never reaches a disk, nor outlives a reboot when a killed run leaves it behind;
// and making and removing the run directory of each kubectl run costs about 3 to 5 ms of
// system time on the ext4 /tmp of the test machines, against 0.4 to 0.5 ms on tmpfs (six
// runs per apply; docs/kubectl.md).
func openDefaultRoot() (int, string, error) {
	if os.Getenv("TMPDIR") == "" {
		if fd, p, err := openRoot(shmRoot); err == nil {
			if inMemory(fd) {
				return fd, p, nil
			}
			unix.Close(fd)
		}
	}
	return openRoot(os.TempDir())
}

// inMemory reports whether the directory open on fd is on a memory filesystem.
func inMemory(fd int) bool {
	var fs unix.Statfs_t
	if err := unix.Fstatfs(fd, &fs); err != nil {
		return false
	}
	return fs.Type == unix.TMPFS_MAGIC || fs.Type == unix.RAMFS_MAGIC
}

// openRoot opens the root of the run directories and checks it and every parent of it. It
// returns the held O_PATH descriptor and the root's absolute, clean path: the one spelling that
// both the descriptor and the path strings kubectl gets are derived from.
func openRoot(root string) (int, string, error) {
	if root == "" {
		return -1, "", refuse.New(CodeTmpdirInvalid, "the temporary directory is empty")
	}
	abs, err := filepath.Abs(root)
	if err != nil {
		return -1, "", refuse.Wrap(CodeTmpdirInvalid, err, "temporary directory %s", root)
	}
	fd, st, err := stablefile.OpenDir(abs)
	if err != nil {
		if refuse.CodeOf(err) == stablefile.CodeSymlink {
			return -1, "", refuse.Wrap(CodeTmpdirSymlink, err, "temporary directory %s is reached through a symlink", abs).
				WithHint("set TMPDIR to the directory's real path (realpath), or to a private directory of your own")
		}
		return -1, "", refuse.Wrap(CodeTmpdirInvalid, err, "temporary directory %s", abs)
	}
	// The parents are checked as well: one that another user may write without the sticky bit
	// lets that user rename the root away and put another in its place, under the same path
	// that kubectl is given. A checked component cannot be changed by another (non-root) user,
	// so checking each once suffices.
	for p := abs; ; p = filepath.Dir(p) {
		pst := st
		if p != abs {
			pfd, s, err := stablefile.OpenDir(p)
			if err != nil {
				unix.Close(fd)
				return -1, "", refuse.Wrap(CodeTmpdirInvalid, err, "temporary directory %s: parent %s", abs, p)
			}
			unix.Close(pfd)
			pst = s
		}
		if err := trusted(abs, p, &pst); err != nil {
			unix.Close(fd)
			return -1, "", err
		}
		if p == "/" {
			break
		}
	}
	return fd, abs, nil
}

// trusted refuses a component p of the root that another user could change: owned by neither
// the current uid nor root, or writable by group or others without the sticky bit (the sticky
// bit stops others from renaming or removing entries they do not own).
func trusted(root, p string, st *unix.Stat_t) error {
	what := "temporary directory " + root
	if p != root {
		what += ": its parent " + p
	}
	if uid := geteuid(); int(st.Uid) != uid && st.Uid != 0 {
		return refuse.New(CodeTmpdirOwner, "%s is owned by uid %d, neither the current uid %d nor root", what, st.Uid, uid).
			WithHint("set TMPDIR to a private directory of your own (mode 0700)")
	}
	if st.Mode&0o022 != 0 && st.Mode&unix.S_ISVTX == 0 {
		return refuse.New(CodeTmpdirWritable, "%s has mode %04o: writable by group or others without the sticky bit", what, st.Mode&0o7777).
			WithHint("set TMPDIR to a private directory of your own (mode 0700), or add the sticky bit")
	}
	return nil
}
