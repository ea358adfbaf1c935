package stablefile

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"path/filepath"

	"golang.org/x/sys/unix"

	"github.com/qinglong/ql3/internal/sysfile"
	"github.com/qinglong/ql3/refuse"
)

// CodeCreate: a private file could not be created: it exists already, its directory is not a
// private directory of ours, or a write failed.
const CodeCreate refuse.Code = "PRIVATE_FILE_CREATE"

// hookBeforeCommit runs after the staged file is written and synced, before it is renamed into
// place (tests kill or race the writer there).
var hookBeforeCommit = func() {}

// CheckCreatable checks, without writing anything, that Create(path, ...) can commit a file there
// now: path absolute and canonical, its directory reached without a symlink, owned by the current
// uid with mode 0700, and no entry of that name. A caller runs it before any work whose result the
// file records, so that a bad path is refused first.
func CheckCreatable(role, path string) error {
	dirfd, err := openPrivateDir(role, path)
	if err != nil {
		return err
	}
	unix.Close(dirfd)
	return nil
}

// Create writes b as a new private file at path (mode 0600 in a 0700 directory of the current
// uid), never replacing anything: staged under a random name in the same directory, synced,
// renamed into place with RENAME_NOREPLACE relative to the directory's descriptor, and the
// directory synced. A crash at any point leaves either no file or the whole file (and perhaps a
// staging file whose name starts with ".ql3-stage-").
func Create(role, path string, b []byte) error {
	dirfd, err := openPrivateDir(role, path)
	if err != nil {
		return err
	}
	defer unix.Close(dirfd)
	fail := func(err error, what string) error {
		return refuse.Wrap(CodeCreate, err, "%s %s: %s", role, path, what)
	}
	var rnd [8]byte
	if _, err := rand.Read(rnd[:]); err != nil {
		return fail(err, "staging name")
	}
	stage := ".ql3-stage-" + hex.EncodeToString(rnd[:])
	fd, err := sysfile.RetryEINTR(func() (int, error) {
		return unix.Openat(dirfd, stage, unix.O_WRONLY|unix.O_CREAT|unix.O_EXCL|unix.O_NOFOLLOW|unix.O_CLOEXEC, privateFileMode)
	})
	if err != nil {
		return fail(err, "create staging file")
	}
	committed := false
	defer func() {
		if !committed {
			_ = unix.Unlinkat(dirfd, stage, 0)
		}
	}()
	werr := sysfile.WriteAll(fd, b)
	if werr == nil {
		werr = unix.Fchmod(fd, privateFileMode) // the umask may have cleared bits; exactly 0600
	}
	if werr == nil {
		werr = unix.Fsync(fd)
	}
	if cerr := unix.Close(fd); werr == nil {
		werr = cerr
	}
	if werr != nil {
		return fail(werr, "write staging file")
	}
	hookBeforeCommit()
	if err := unix.Renameat2(dirfd, stage, dirfd, filepath.Base(path), unix.RENAME_NOREPLACE); err != nil {
		if errors.Is(err, unix.EEXIST) {
			return refuse.New(CodeCreate, "%s %s exists already; ql3 never replaces it", role, path).
				WithHint("choose another path, or remove the old file if it is no longer wanted")
		}
		return fail(err, "rename into place")
	}
	committed = true
	// The file is in place; a failed directory sync is reported, the file stays.
	if err := sysfile.SyncDir(dirfd); err != nil {
		return fail(err, "sync directory")
	}
	return nil
}

// openPrivateDir opens path's directory without following a symlink, requires it to be a 0700
// directory of the current uid, and requires path's name to be free. The descriptor is O_PATH.
func openPrivateDir(role, path string) (int, error) {
	if err := checkPath(path); err != nil {
		return -1, labeled(role, err)
	}
	dirfd, st, err := openParent(path)
	if err != nil {
		return -1, labeled(role, err)
	}
	if err := checkPrivate(role, path, "its directory", &st, privateDirMode); err != nil {
		unix.Close(dirfd)
		return -1, err
	}
	var leaf unix.Stat_t
	switch err := unix.Fstatat(dirfd, filepath.Base(path), &leaf, unix.AT_SYMLINK_NOFOLLOW); {
	case err == nil:
		unix.Close(dirfd)
		return -1, refuse.New(CodeCreate, "%s %s exists already; ql3 never replaces it", role, path).
			WithHint("choose another path, or remove the old file if it is no longer wanted")
	case !errors.Is(err, unix.ENOENT):
		unix.Close(dirfd)
		return -1, refuse.Wrap(CodeCreate, err, "%s %s cannot be looked up", role, path)
	}
	return dirfd, nil
}
