package store

import (
	"errors"
	"path/filepath"

	"golang.org/x/sys/unix"

	"github.com/qinglong/ql3/evidence"
	"github.com/qinglong/ql3/internal/sysfile"
	"github.com/qinglong/ql3/refuse"
)

// CodeRootMoved is raised before a root record (a preflight report, an apply intent, a receipt)
// or an index entry is published when the store path no longer names the directory Open held,
// or a held subdirectory is no longer linked at its name: the path was swapped for a symlink,
// renamed or replaced while the command ran.
const CodeRootMoved refuse.Code = "STORE_ROOT_MOVED"

// The directories a Store holds, by index into Store.dirs. Parents come before their children.
const (
	dRoot = iota
	dBlobs
	dSHA256
	dIndex
	dReceipts
	dIntents
	dPreflights
	dTmp
	dLocks
	nDirs
)

// layout names each held directory (its path in the store, for messages) and where it hangs.
var layout = [nDirs]struct {
	rel    string // path relative to the root
	parent int    // index of the parent directory; -1 for the root
}{
	dRoot:       {".", -1},
	dBlobs:      {"blobs", dRoot},
	dSHA256:     {"blobs/sha256", dBlobs},
	dIndex:      {"index", dRoot},
	dReceipts:   {"index/" + evidence.IndexReceipts, dIndex},
	dIntents:    {"index/" + evidence.IndexIntents, dIndex},
	dPreflights: {"index/" + evidence.IndexPreflights, dIndex},
	dTmp:        {"tmp", dRoot},
	dLocks:      {"locks", dRoot},
}

func indexDir(kind string) int {
	switch kind {
	case evidence.IndexReceipts:
		return dReceipts
	case evidence.IndexIntents:
		return dIntents
	}
	return dPreflights
}

// heldDir is one directory held open for the Store's lifetime.
type heldDir struct {
	fd       int // O_RDONLY|O_DIRECTORY: a dirfd for *at calls, fsync and listing
	dev, ino uint64
}

// openDir resolves name relative to dirfd without following a symlink, checks the directory
// (type, mode 0700, owner) on the resolved descriptor and reopens that very inode for reading.
func openDir(dirfd int, name, rel string) (heldDir, error) {
	pfd, err := sysfile.ResolveDir(dirfd, name)
	if err != nil {
		if dirfd == unix.AT_FDCWD {
			if errors.Is(err, unix.ENOENT) {
				return heldDir{fd: -1}, refuse.New(CodeStoreRoot, "store %s does not exist", name).
					WithHint("create it with: %s", refuse.ShellLine("ql3", "store", "init", name))
			}
			return heldDir{fd: -1}, refuse.New(CodeStoreRoot, "store path %q is missing or has a symlink component", name).
				WithHint("name the store by its canonical path (realpath), with no symbolic link in it")
		}
		if errors.Is(err, unix.ELOOP) {
			return heldDir{fd: -1}, refuse.New(CodeStoreRoot, "store directory %s is or passes through a symlink", rel)
		}
		return heldDir{fd: -1}, refuse.Wrap(CodeStoreRoot, err, "store directory %s", rel)
	}
	defer unix.Close(pfd)
	var st unix.Stat_t
	if err := unix.Fstat(pfd, &st); err != nil {
		return heldDir{fd: -1}, refuse.Wrap(CodeStoreIO, err, "stat store directory %s", rel)
	}
	if err := checkDir(&st, rel); err != nil {
		return heldDir{fd: -1}, err
	}
	fd, err := sysfile.ReopenDir(pfd)
	if err != nil {
		return heldDir{fd: -1}, refuse.Wrap(CodeStoreIO, err, "open store directory %s", rel)
	}
	return heldDir{fd: fd, dev: uint64(st.Dev), ino: st.Ino}, nil
}

func checkDir(st *unix.Stat_t, name string) error {
	if st.Mode&unix.S_IFMT != unix.S_IFDIR {
		return refuse.New(CodeStoreRoot, "store entry %s is not a directory", name)
	}
	if st.Mode&0o7777 != 0o700 {
		return refuse.New(CodeStoreMode, "store directory %s has mode %04o, want 0700", name, st.Mode&0o7777).
			WithHint("chmod 700 %s, if the store is yours and nobody else could have changed it", name)
	}
	if int(st.Uid) != processUID {
		return refuse.New(CodeStoreOwner, "store directory %s is owned by uid %d, not %d", name, st.Uid, processUID)
	}
	return nil
}

// openTree opens the root and every subdirectory of the layout, each relative to its parent's
// held descriptor. With create it first makes each missing one (mkdirat, mode 0700), the root
// relative to its parent directory, itself resolved without following a symlink.
func openTree(root string, create bool) (dirs [nDirs]heldDir, err error) {
	for i := range dirs {
		dirs[i].fd = -1
	}
	defer func() {
		if err != nil {
			closeDirs(&dirs)
		}
	}()
	for i, l := range layout {
		if i == dRoot {
			if dirs[i], err = openRoot(root, create); err != nil {
				return dirs, err
			}
			continue
		}
		pfd, base := dirs[l.parent].fd, filepath.Base(l.rel)
		if create {
			if err := unix.Mkdirat(pfd, base, 0o700); err != nil && !errors.Is(err, unix.EEXIST) {
				return dirs, refuse.Wrap(CodeStoreIO, err, "create %s", l.rel)
			}
		}
		if dirs[i], err = openDir(pfd, base, filepath.Join(root, l.rel)); err != nil {
			return dirs, err
		}
	}
	return dirs, nil
}

func openRoot(root string, create bool) (heldDir, error) {
	if !create {
		return openDir(unix.AT_FDCWD, root, root)
	}
	parent := filepath.Dir(root)
	pfd, err := sysfile.ResolveDir(unix.AT_FDCWD, parent)
	if err != nil {
		return heldDir{fd: -1}, refuse.Wrap(CodeStoreRoot, err, "the parent directory of store %s is missing or has a symlink component", root)
	}
	defer unix.Close(pfd)
	if err := unix.Mkdirat(pfd, filepath.Base(root), 0o700); err != nil && !errors.Is(err, unix.EEXIST) {
		return heldDir{fd: -1}, refuse.Wrap(CodeStoreIO, err, "create store root %s", root)
	}
	return openDir(pfd, filepath.Base(root), root)
}

func closeDirs(dirs *[nDirs]heldDir) error {
	var first error
	for i := range dirs {
		if dirs[i].fd >= 0 {
			if err := unix.Close(dirs[i].fd); err != nil && first == nil {
				first = err
			}
			dirs[i].fd = -1
		}
	}
	return first
}

// checkRoot is the identity check before anything is published: the store path, resolved again
// without following a symlink, must still be the root directory Open held (same device and
// inode), and every held subdirectory must still be linked at its name in its held parent. A
// store path swapped for a symlink (to another store, or to this very directory after a rename),
// renamed away or replaced fails it.
func (s *Store) checkRoot() error {
	fd, err := sysfile.ResolveDir(unix.AT_FDCWD, s.root)
	if err != nil {
		return refuse.Wrap(CodeRootMoved, err, "store path %s no longer resolves without a symlink to the directory opened", s.root).
			WithHint("the store directory was moved or swapped for a link while the command ran; nothing was published")
	}
	var st unix.Stat_t
	err = unix.Fstat(fd, &st)
	unix.Close(fd)
	if err != nil {
		return refuse.Wrap(CodeStoreIO, err, "stat store root %s", s.root)
	}
	if r := s.dirs[dRoot]; uint64(st.Dev) != r.dev || st.Ino != r.ino {
		return refuse.New(CodeRootMoved, "store path %s now names directory %d:%d, not the %d:%d opened", s.root, st.Dev, st.Ino, r.dev, r.ino).
			WithHint("the store directory was moved or replaced while the command ran; nothing was published")
	}
	for i := dRoot + 1; i < nDirs; i++ {
		l, d := layout[i], s.dirs[i]
		if err := unix.Fstatat(s.dirs[l.parent].fd, filepath.Base(l.rel), &st, unix.AT_SYMLINK_NOFOLLOW); err != nil ||
			uint64(st.Dev) != d.dev || st.Ino != d.ino {
			return refuse.New(CodeRootMoved, "store directory %s is no longer the one opened", l.rel).
				WithHint("a store directory was moved or replaced while the command ran; nothing was published")
		}
	}
	return nil
}
