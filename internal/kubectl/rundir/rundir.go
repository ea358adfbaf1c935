package rundir

import (
	"crypto/rand"
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strconv"

	"golang.org/x/sys/unix"

	"github.com/qinglong/ql3/refuse"
)

// Reason codes of one run directory.
const (
	// CodeCreate: the run directory, a subdirectory, its lock or a file in it could not be made,
	// or the directory made is not a 0700 directory of the current uid.
	CodeCreate refuse.Code = "KUBECTL_WORKDIR_FAILED"
	// CodeCleanup: a run directory (holding a kubeconfig copy) could not be removed, this run's
	// or one left behind by an earlier run that was killed.
	CodeCleanup refuse.Code = "KUBECTL_CLEANUP_FAILED"
)

// createHint is the advice on a run directory that could not be made or written: most often its
// root is full or not writable, and the root is chosen (docs/kubectl.md), so it says how.
const createHint = "run directories are made in $TMPDIR when it is set, else in /dev/shm when it is a tmpfs, else in /tmp: free space there, or set TMPDIR to a directory of your own (mode 0700)"

// LockName is the lock file in every run directory, flocked (LOCK_EX) while its run lives.
const LockName = "ql3.lock"

// maxDepth bounds the removal's recursion (and so the descriptors it holds); kubectl's cache
// is a few levels deep.
const maxDepth = 64

// Test hooks.
var (
	useTmpfile = true          // false: the lock is made with O_CREAT|O_EXCL, as on a filesystem without O_TMPFILE
	unlinkat   = unix.Unlinkat // tests make a removal fail
)

// Dir is one run directory, held by descriptors and locked until Remove.
type Dir struct {
	// Path is the root's path and the directory's name, for kubectl (HOME, --kubeconfig, ...).
	// It names the held directory because the root and its parents are checked to be
	// changeable by no other user, and the directory itself is ours with mode 0700.
	Path string

	root int    // O_PATH descriptor of the checked root
	name string // the directory's name in root
	fd   int    // O_RDONLY|O_DIRECTORY descriptor of the directory
	lock int    // the lock file, flocked LOCK_EX
}

const dirOpenFlags = unix.O_RDONLY | unix.O_DIRECTORY | unix.O_NOFOLLOW | unix.O_CLOEXEC

// Create checks and opens root (openRoot), removes what killed runs left behind there
// (sweep), then makes a new run directory named prefix followed by decimal digits, mode
// exactly 0700 whatever the umask, with its lock held. On error nothing of it is left.
func Create(root, prefix string) (*Dir, error) {
	rootfd, rootPath, err := openRoot(root)
	if err != nil {
		return nil, err
	}
	return createIn(rootfd, rootPath, prefix)
}

// CreateDefault is Create in the default root (openDefaultRoot): $TMPDIR when it is set,
// otherwise /dev/shm when it is a memory filesystem that passes the root's checks, otherwise
// /tmp.
func CreateDefault(prefix string) (*Dir, error) {
	rootfd, rootPath, err := openDefaultRoot()
	if err != nil {
		return nil, err
	}
	return createIn(rootfd, rootPath, prefix)
}

// createIn is Create in the checked root held by rootfd, which it owns from then on.
func createIn(rootfd int, rootPath, prefix string) (*Dir, error) {
	if err := sweep(rootfd, rootPath, prefix); err != nil {
		unix.Close(rootfd)
		return nil, err
	}
	name, err := mkdirRandom(rootfd, prefix)
	if err != nil {
		unix.Close(rootfd)
		return nil, refuse.Wrap(CodeCreate, err, "create a run directory under %s", rootPath).WithHint(createHint)
	}
	d := &Dir{Path: filepath.Join(rootPath, name), root: rootfd, name: name, fd: -1, lock: -1}
	if err := d.open(); err != nil {
		if rerr := d.Remove(); rerr != nil {
			err = errors.Join(err, rerr)
		}
		return nil, err
	}
	return d, nil
}

// mkdirRandom makes a directory prefix<random decimal> in rootfd. The name is unpredictable so
// that nobody can prepare it; mkdirat fails on any existing entry, symlinks included.
func mkdirRandom(rootfd int, prefix string) (string, error) {
	var err error
	for range 16 {
		var b [8]byte
		if _, err := rand.Read(b[:]); err != nil {
			return "", err
		}
		name := prefix + strconv.FormatUint(binary.LittleEndian.Uint64(b[:]), 10)
		if err = unix.Mkdirat(rootfd, name, 0o700); err == nil {
			return name, nil
		}
		if !errors.Is(err, unix.EEXIST) {
			return "", err
		}
	}
	return "", err
}

// open opens the new directory, makes its mode exactly 0700 and takes its lock.
func (d *Dir) open() error {
	fd, err := openat(d.root, d.name, dirOpenFlags)
	if err != nil {
		return refuse.Wrap(CodeCreate, err, "open run directory %s", d.Path)
	}
	d.fd = fd
	// A umask can only have removed bits; the mode must be exactly 0700, whatever it is.
	if err := unix.Fchmod(fd, 0o700); err != nil {
		return refuse.Wrap(CodeCreate, err, "chmod run directory %s", d.Path)
	}
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		return refuse.Wrap(CodeCreate, err, "stat run directory %s", d.Path)
	}
	if st.Mode&unix.S_IFMT != unix.S_IFDIR || st.Mode&0o7777 != 0o700 || int(st.Uid) != geteuid() {
		return refuse.New(CodeCreate, "run directory %s is not a 0700 directory owned by uid %d", d.Path, geteuid())
	}
	lock, err := takeLock(fd)
	if err != nil {
		return refuse.Wrap(CodeCreate, err, "lock run directory %s", d.Path).WithHint(createHint)
	}
	d.lock = lock
	return nil
}

// takeLock makes the lock file of the directory open on dirfd and returns it flocked. The file
// is made unnamed (O_TMPFILE), locked, then linked in: no sweep can ever see it unlocked. Where
// O_TMPFILE or /proc is missing it is made by name and then locked; a sweep that locks it
// first makes this fail (the run is refused, nothing leaks).
func takeLock(dirfd int) (int, error) {
	if useTmpfile {
		fd, err := openat(dirfd, ".", unix.O_TMPFILE|unix.O_RDWR|unix.O_CLOEXEC, 0o600)
		if err == nil {
			err = unix.Flock(fd, unix.LOCK_EX|unix.LOCK_NB)
			if err == nil {
				err = unix.Fchmod(fd, 0o600)
			}
			if err == nil {
				err = unix.Linkat(unix.AT_FDCWD, "/proc/self/fd/"+strconv.Itoa(fd), dirfd, LockName, unix.AT_SYMLINK_FOLLOW)
			}
			if err == nil {
				return fd, nil
			}
			unix.Close(fd)
			if errors.Is(err, unix.EEXIST) {
				return -1, err
			}
		}
	}
	fd, err := openat(dirfd, LockName, unix.O_CREAT|unix.O_EXCL|unix.O_RDWR|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0o600)
	if err != nil {
		return -1, err
	}
	var st unix.Stat_t
	err = unix.Flock(fd, unix.LOCK_EX|unix.LOCK_NB)
	if err == nil {
		err = unix.Fchmod(fd, 0o600)
	}
	if err == nil {
		err = unix.Fstat(fd, &st)
	}
	if err == nil && st.Nlink == 0 {
		err = errors.New("rundir: the lock file was removed by a concurrent sweep")
	}
	if err != nil {
		unix.Close(fd)
		return -1, err
	}
	return fd, nil
}

// Mkdir makes the subdirectory name of d, mode exactly 0700.
func (d *Dir) Mkdir(name string) error {
	err := unix.Mkdirat(d.fd, name, 0o700)
	if err == nil {
		var fd int
		if fd, err = openat(d.fd, name, dirOpenFlags); err == nil {
			err = unix.Fchmod(fd, 0o700)
			unix.Close(fd)
		}
	}
	if err != nil {
		return refuse.Wrap(CodeCreate, err, "create %s/%s", d.Path, name).WithHint(createHint)
	}
	return nil
}

// WriteFile writes b as the new file name of d: O_EXCL|O_NOFOLLOW so that it is a new file of
// ours, mode exactly 0600, its length checked. The bytes may be a credential: no error carries
// them.
func (d *Dir) WriteFile(name string, b []byte) error {
	fd, err := openat(d.fd, name, unix.O_WRONLY|unix.O_CREAT|unix.O_EXCL|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0o600)
	if err != nil {
		return refuse.Wrap(CodeCreate, err, "create %s/%s", d.Path, name).WithHint(createHint)
	}
	f := os.NewFile(uintptr(fd), name)
	n, err := f.Write(b)
	if err == nil && n != len(b) {
		err = fmt.Errorf("rundir: short write of %d of %d bytes", n, len(b))
	}
	if err == nil {
		err = f.Chmod(0o600)
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return refuse.Wrap(CodeCreate, err, "write %s/%s (%d bytes)", d.Path, name, len(b)).WithHint(createHint)
	}
	return nil
}

// Remove removes the directory and everything in it, relative to the held descriptors, and
// confirms that its name is gone from the root. It releases the lock and every descriptor
// whatever happens, so that a directory it could not remove is removed by a later run's sweep.
func (d *Dir) Remove() error {
	var err error
	if d.fd >= 0 {
		err = removeTree(d.root, d.name, d.fd)
	} else {
		// open failed: the directory is empty, or is not what mkdirat made.
		err = unix.Unlinkat(d.root, d.name, unix.AT_REMOVEDIR)
		if errors.Is(err, unix.ENOENT) {
			err = nil
		}
	}
	for _, fd := range []int{d.lock, d.fd, d.root} {
		if fd >= 0 {
			unix.Close(fd)
		}
	}
	d.lock, d.fd, d.root = -1, -1, -1
	if err != nil {
		return refuse.Wrap(CodeCleanup, err, "remove run directory %s", d.Path).
			WithHint("it holds a copy of the kubeconfig: remove it by hand, or let the next run remove it")
	}
	return nil
}

// removeTree removes the directory name of rootfd, open on dirfd: its contents, then its lock
// file last (so that a failure leaves the lock for a later sweep), then the directory itself if
// the name still names the same inode, and confirms that the name is gone.
func removeTree(rootfd int, name string, dirfd int) error {
	// kubectl could have changed its HOME's mode; the directory is ours.
	_ = unix.Fchmod(dirfd, 0o700)
	if err := removeContents(dirfd, LockName, 0); err != nil {
		return err
	}
	if err := unix.Unlinkat(dirfd, LockName, 0); err != nil && !errors.Is(err, unix.ENOENT) {
		return err
	}
	var held, named unix.Stat_t
	if err := unix.Fstat(dirfd, &held); err != nil {
		return err
	}
	if err := unix.Fstatat(rootfd, name, &named, unix.AT_SYMLINK_NOFOLLOW); err != nil {
		return err
	}
	if held.Dev != named.Dev || held.Ino != named.Ino {
		return fmt.Errorf("rundir: %s names another inode than the directory emptied", name)
	}
	if err := unix.Unlinkat(rootfd, name, unix.AT_REMOVEDIR); err != nil {
		return err
	}
	if err := unix.Fstatat(rootfd, name, &named, unix.AT_SYMLINK_NOFOLLOW); !errors.Is(err, unix.ENOENT) {
		return fmt.Errorf("rundir: %s still exists after removal", name)
	}
	return nil
}

// removeContents removes every entry of the directory open on dirfd but skip, without following
// a symlink: unlinkat removes a symlink itself, and a subdirectory is opened O_NOFOLLOW.
// kubectl could have left a subdirectory without write permission: it is made 0700 first.
func removeContents(dirfd int, skip string, depth int) error {
	if depth > maxDepth {
		return fmt.Errorf("rundir: directory tree deeper than %d", maxDepth)
	}
	names, err := readNames(dirfd)
	if err != nil {
		return err
	}
	for _, n := range names {
		if n == skip {
			continue
		}
		err := unlinkat(dirfd, n, 0)
		if errors.Is(err, unix.EISDIR) || errors.Is(err, unix.EPERM) {
			var sub int
			if sub, err = openat(dirfd, n, dirOpenFlags); err != nil {
				return err
			}
			_ = unix.Fchmod(sub, 0o700)
			err = removeContents(sub, "", depth+1)
			unix.Close(sub)
			if err == nil {
				err = unix.Unlinkat(dirfd, n, unix.AT_REMOVEDIR)
			}
		}
		if err != nil && !errors.Is(err, unix.ENOENT) {
			return err
		}
	}
	return nil
}

// readNames lists the directory open on dirfd through a fresh descriptor of it.
func readNames(dirfd int) ([]string, error) {
	fd, err := openat(dirfd, ".", unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, err
	}
	f := os.NewFile(uintptr(fd), ".")
	defer f.Close()
	return f.Readdirnames(-1)
}

// sweep removes from the root every run directory of our own whose run has ended without
// removing it (a SIGKILL, a crash, a failed cleanup). "Our own" is exactly: an entry named
// prefix followed by decimal digits; a directory, not a symlink; owned by the effective uid;
// holding a regular file LockName owned by the effective uid and still linked there; and on
// that file flock(LOCK_EX|LOCK_NB) succeeds, so no live process holds it. A directory without a
// lock file is left alone: a run is creating it, and it holds no credential yet (the lock is
// linked before anything else is written). A live run's directory is never touched: its lock
// is held for its whole life.
func sweep(rootfd int, rootPath, prefix string) error {
	names, err := readNames(rootfd)
	if err != nil {
		return refuse.Wrap(CodeTmpdirInvalid, err, "list temporary directory %s", rootPath)
	}
	pattern := regexp.MustCompile(`^` + regexp.QuoteMeta(prefix) + `[0-9]+$`)
	for _, name := range names {
		if !pattern.MatchString(name) {
			continue
		}
		if err := sweepOne(rootfd, name); err != nil {
			return refuse.Wrap(CodeCleanup, err, "remove run directory %s left behind by an earlier run", filepath.Join(rootPath, name)).
				WithHint("it holds a copy of the kubeconfig: remove it by hand")
		}
	}
	return nil
}

// sweepOne removes the run directory name if it is ours and dead (see sweep); it returns nil
// when it is not, and an error only when removing a dead one failed.
func sweepOne(rootfd int, name string) error {
	var st unix.Stat_t
	if err := unix.Fstatat(rootfd, name, &st, unix.AT_SYMLINK_NOFOLLOW); err != nil ||
		st.Mode&unix.S_IFMT != unix.S_IFDIR || int(st.Uid) != geteuid() {
		return nil
	}
	dirfd, err := openat(rootfd, name, dirOpenFlags)
	if err != nil {
		return nil
	}
	defer unix.Close(dirfd)
	lock, err := openat(dirfd, LockName, unix.O_RDONLY|unix.O_NOFOLLOW|unix.O_NONBLOCK|unix.O_CLOEXEC|unix.O_NOCTTY)
	if err != nil {
		return nil
	}
	defer unix.Close(lock)
	if err := unix.Fstat(lock, &st); err != nil || st.Mode&unix.S_IFMT != unix.S_IFREG || int(st.Uid) != geteuid() {
		return nil
	}
	if err := unix.Flock(lock, unix.LOCK_EX|unix.LOCK_NB); err != nil {
		return nil // EWOULDBLOCK: a live run holds it
	}
	// Another sweep may have removed the directory between our open and our lock.
	if err := unix.Fstat(lock, &st); err != nil || st.Nlink == 0 {
		return nil
	}
	return removeTree(rootfd, name, dirfd)
}

func openat(dirfd int, name string, flags int, mode ...uint32) (int, error) {
	var m uint32
	if len(mode) > 0 {
		m = mode[0]
	}
	for {
		fd, err := unix.Openat(dirfd, name, flags, m)
		if !errors.Is(err, unix.EINTR) {
			return fd, err
		}
	}
}
