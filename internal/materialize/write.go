package materialize

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"io"
	"os"
	"path/filepath"

	"golang.org/x/sys/unix"

	"github.com/qinglong/ql3/refuse"
)

// Reason codes of the output directory. The input files are read by internal/input.
const (
	CodeOutDir    refuse.Code = "MATERIALIZE_OUT_DIR"
	CodeOutMode   refuse.Code = "MATERIALIZE_OUT_MODE"
	CodeOutOwner  refuse.Code = "MATERIALIZE_OUT_OWNER"
	CodeOutExists refuse.Code = "MATERIALIZE_OUT_EXISTS"
	CodeOutIO     refuse.Code = "MATERIALIZE_OUT_IO"
)

// Written names the two committed files.
type Written struct {
	Dir, Manifest, Report string
}

// renameHook, when set by tests, runs between the two renames of WriteDir.
var renameHook func() error

// WriteDir commits r's manifest and report as ManifestName and ReportName, mode 0600, in dir.
// dir is created with mode 0700 when absent (its parent must exist); an existing dir must be a
// directory of mode 0700 owned by the current uid. It never replaces a file: when either name
// exists it refuses with nothing written. Each file is staged under a temporary name in dir,
// fsynced and renamed into place with RENAME_NOREPLACE; if the second rename fails, the first file
// is removed again, so a failed call leaves neither file (a crash between the two renames can leave
// the manifest alone; a later run then refuses until it is removed).
func WriteDir(dir string, r *Result) (*Written, error) {
	created := true
	if err := os.Mkdir(dir, 0o700); errors.Is(err, os.ErrExist) {
		created = false
	} else if err != nil {
		return nil, refuse.Wrap(CodeOutDir, err, "cannot create output directory %s", dir)
	}
	dfd, err := unix.Open(dir, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, refuse.Wrap(CodeOutDir, err, "output %s is not a directory (or is a symlink)", dir)
	}
	defer unix.Close(dfd)
	var st unix.Stat_t
	if err := unix.Fstat(dfd, &st); err != nil {
		return nil, refuse.Wrap(CodeOutIO, err, "stat output directory %s", dir)
	}
	if int(st.Uid) != os.Getuid() {
		return nil, refuse.New(CodeOutOwner, "output directory %s is owned by uid %d, not %d", dir, st.Uid, os.Getuid())
	}
	if created && st.Mode&0o7777 != 0o700 {
		// The umask may have taken bits from 0700; a directory this call made gets its exact mode.
		if err := unix.Fchmod(dfd, 0o700); err != nil {
			return nil, refuse.Wrap(CodeOutIO, err, "chmod output directory %s", dir)
		}
		st.Mode = st.Mode&^0o7777 | 0o700
	}
	if st.Mode&0o7777 != 0o700 {
		return nil, refuse.New(CodeOutMode, "output directory %s has mode %04o, want 0700", dir, st.Mode&0o7777).
			WithHint("the lock files are release inputs: keep them in a private directory (chmod 0700)")
	}
	files := []struct {
		name string
		b    []byte
	}{{ManifestName, r.Manifest}, {ReportName, r.Report}}
	for _, f := range files {
		if err := unix.Fstatat(dfd, f.name, &st, unix.AT_SYMLINK_NOFOLLOW); err == nil || !errors.Is(err, unix.ENOENT) {
			return nil, refuse.New(CodeOutExists, "%s already exists in %s", f.name, dir).
				WithHint("materialize into a new directory; existing lock files are never replaced")
		}
	}
	var staged [2]string
	defer func() {
		for _, s := range staged {
			if s != "" {
				_ = unix.Unlinkat(dfd, s, 0)
			}
		}
	}()
	for i, f := range files {
		if staged[i], err = stage(dfd, f.name, f.b); err != nil {
			return nil, refuse.Wrap(CodeOutIO, err, "stage %s in %s", f.name, dir)
		}
	}
	if err := commit(dfd, staged[0], ManifestName); err != nil {
		return nil, refuse.Wrap(codeOf(err), err, "commit %s in %s", ManifestName, dir)
	}
	staged[0] = ""
	err = nil
	if renameHook != nil {
		err = renameHook()
	}
	if err == nil {
		err = commit(dfd, staged[1], ReportName)
	}
	if err != nil {
		// Roll back: the manifest was renamed from a name only this call knew, in a directory
		// only this uid can write, so the file under ManifestName is the one just committed.
		_ = unix.Unlinkat(dfd, ManifestName, 0)
		_ = unix.Fsync(dfd)
		return nil, refuse.Wrap(codeOf(err), err, "commit %s in %s (%s removed again)", ReportName, dir, ManifestName)
	}
	staged[1] = ""
	if err := unix.Fsync(dfd); err != nil {
		// Past the commit point: both files are in place; the directory entry may not be durable.
		return nil, refuse.Wrap(CodeOutIO, err, "fsync output directory %s after committing both files", dir)
	}
	return &Written{Dir: dir, Manifest: filepath.Join(dir, ManifestName), Report: filepath.Join(dir, ReportName)}, nil
}

// stage writes b to a new 0600 file with a random name in dfd, fsyncs and closes it.
func stage(dfd int, name string, b []byte) (string, error) {
	var rnd [8]byte
	if _, err := rand.Read(rnd[:]); err != nil {
		return "", err
	}
	tmp := "." + name + ".tmp-" + hex.EncodeToString(rnd[:])
	fd, err := unix.Openat(dfd, tmp, unix.O_WRONLY|unix.O_CREAT|unix.O_EXCL|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0o600)
	if err != nil {
		return "", err
	}
	f := os.NewFile(uintptr(fd), tmp)
	n, err := f.Write(b)
	if err == nil && n != len(b) {
		err = io.ErrShortWrite
	}
	if err == nil {
		err = f.Chmod(0o600) // the umask may have taken bits from 0600; make the mode exact
	}
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		_ = unix.Unlinkat(dfd, tmp, 0)
		return "", err
	}
	return tmp, nil
}

// commit renames tmp to name without ever replacing name. Where the file system lacks
// RENAME_NOREPLACE it links instead, which also fails on an existing name.
func commit(dfd int, tmp, name string) error {
	err := unix.Renameat2(dfd, tmp, dfd, name, unix.RENAME_NOREPLACE)
	if errors.Is(err, unix.EINVAL) || errors.Is(err, unix.ENOSYS) {
		if err = unix.Linkat(dfd, tmp, dfd, name, 0); err == nil {
			err = unix.Unlinkat(dfd, tmp, 0)
		}
	}
	return err
}

func codeOf(err error) refuse.Code {
	if errors.Is(err, unix.EEXIST) {
		return CodeOutExists
	}
	return CodeOutIO
}
