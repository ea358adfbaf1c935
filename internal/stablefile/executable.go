package stablefile

import (
	"crypto/sha256"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync"

	"github.com/opencontainers/go-digest"
	"golang.org/x/sys/unix"

	"github.com/qinglong/ql3/evidence"
	"github.com/qinglong/ql3/refuse"
)

// Reason codes for the executable.
const (
	// CodeExecNotRegular: the executable is a directory, fifo, device or socket.
	CodeExecNotRegular refuse.Code = "EXECUTABLE_NOT_REGULAR"
	// CodeExecLinkCount: the executable has more than one hard link.
	CodeExecLinkCount refuse.Code = "EXECUTABLE_LINK_COUNT"
	// CodeExecOwner: the executable is owned by neither the current uid nor root.
	CodeExecOwner refuse.Code = "EXECUTABLE_OWNER"
	// CodeExecWritable: the executable is writable by its group or by others.
	CodeExecWritable refuse.Code = "EXECUTABLE_WRITABLE"
	// CodeExecSetID: the executable has the setuid or setgid bit (stricter than docs/rationale.md#4-private-inputs).
	CodeExecSetID refuse.Code = "EXECUTABLE_SETID"
	// CodeExecNotExecutable: the owner's execute bit is not set.
	CodeExecNotExecutable refuse.Code = "EXECUTABLE_NOT_EXECUTABLE"
	// CodeExecDigest: the executable's content does not hash to the pinned digest.
	CodeExecDigest refuse.Code = "EXECUTABLE_DIGEST_MISMATCH"
	// CodeExecChanged: the held descriptor's inode changed, its content no longer hashes to the
	// pinned digest, the path names another inode, or /proc/self/fd does not name the descriptor.
	CodeExecChanged refuse.Code = "EXECUTABLE_CHANGED"
)

// hashBuffer is the read size for hashing: large enough that system calls are noise next to
// SHA-256 (measured: 128 KiB to 1 MiB read and hash kubectl alike).
const hashBuffer = 256 << 10

// hashBuffers keeps read buffers between passes: a fresh one costs its zeroing and page faults
// on every pass (about 2 ms of a 1 MiB buffer's, measured in an apply's profile).
var hashBuffers = sync.Pool{New: func() any { return new([hashBuffer]byte) }}

// Executable is an executable file held open through one O_RDONLY|O_CLOEXEC descriptor. Its
// methods may be called from several goroutines; ExecPath is valid until Close.
type Executable struct {
	path     string
	f        *os.File
	execPath string
	id       identity
	digest   digest.Digest
}

// OpenExecutable opens the executable at path, checks it (regular, one link, owned by the
// current uid or root, not group- or other-writable, no setuid/setgid, owner-executable), hashes
// it in full through the held descriptor and refuses it unless the digest equals pinned.
func OpenExecutable(path string, pinned digest.Digest) (*Executable, error) {
	if _, err := evidence.ParseDigest(string(pinned)); err != nil {
		return nil, err
	}
	return openExecutable(path, pinned)
}

// InspectExecutable is OpenExecutable for a kubectl whose digest is not pinned yet: every check
// but the comparison, for the commands that help an operator pin it (ql3 command new, ql3 cluster
// identity). Digest is then the digest of the held content, for the operator to review.
func InspectExecutable(path string) (*Executable, error) { return openExecutable(path, "") }

func openExecutable(path string, pinned digest.Digest) (*Executable, error) {
	if err := checkPath(path); err != nil {
		return nil, labeled(evidence.RoleKubectl, err)
	}
	dirfd, _, err := openParent(path)
	if err != nil {
		return nil, labeled(evidence.RoleKubectl, err)
	}
	defer unix.Close(dirfd)
	fd, st, err := openLeaf(dirfd, path, CodeExecNotRegular)
	if err != nil {
		return nil, labeled(evidence.RoleKubectl, err)
	}
	if err := checkExecutable(path, &st); err != nil {
		unix.Close(fd)
		return nil, err
	}
	// The descriptor is known to be a regular file now; O_NONBLOCK only guarded the open.
	if err := unix.SetNonblock(fd, false); err != nil {
		unix.Close(fd)
		return nil, refuse.Wrap(CodeIO, err, "set %s blocking", path)
	}
	e := &Executable{path: path, f: os.NewFile(uintptr(fd), path), execPath: fmt.Sprintf("/proc/self/fd/%d", fd), id: identityOf(&st)}
	d, err := e.hash()
	if err != nil {
		e.Close()
		return nil, err
	}
	if pinned != "" && d != pinned {
		e.Close()
		return nil, refuse.New(CodeExecDigest, "kubectl %s has digest %s, the command pins %s", path, d, pinned).
			WithHint("pin the digest of the kubectl you mean to run, or point the command at that kubectl")
	}
	e.digest = d
	// A child resolves ExecPath in its own copy of our descriptor table; prove now that the name
	// reaches the held inode (it would not without procfs at /proc).
	var viaProc unix.Stat_t
	if err := unix.Stat(e.execPath, &viaProc); err != nil || identityOf(&viaProc) != e.id {
		e.Close()
		return nil, refuse.New(CodeExecChanged, "%s does not name the held descriptor of %s", e.execPath, path).
			WithHint("ql3 needs procfs mounted at /proc")
	}
	return e, nil
}

func checkExecutable(path string, st *unix.Stat_t) error {
	perm := st.Mode & 0o7777
	switch uid := getuid(); {
	case st.Nlink != 1:
		return refuse.New(CodeExecLinkCount, "kubectl %s has %d hard links, want 1", path, st.Nlink).
			WithHint("install kubectl as a file of its own, not a hard link")
	case int64(st.Uid) != int64(uid) && st.Uid != 0:
		return refuse.New(CodeExecOwner, "kubectl %s is owned by uid %d, neither the current uid %d nor root", path, st.Uid, uid)
	case perm&0o022 != 0:
		return refuse.New(CodeExecWritable, "kubectl %s has mode %04o: writable by group or others", path, perm).
			WithHint("chmod go-w the file")
	case perm&0o6000 != 0:
		return refuse.New(CodeExecSetID, "kubectl %s has mode %04o: setuid or setgid", path, perm)
	case perm&0o100 == 0:
		return refuse.New(CodeExecNotExecutable, "kubectl %s has mode %04o: not executable by its owner", path, perm)
	}
	return nil
}

// hash hashes the held descriptor in full from offset 0 and refuses if the inode changed while
// it was hashed or if it did not read exactly the stated size.
func (e *Executable) hash() (digest.Digest, error) {
	h := sha256.New()
	buf := hashBuffers.Get().(*[hashBuffer]byte)
	var n int64
	rc, err := e.f.SyscallConn()
	if err == nil {
		cerr := rc.Control(func(fd uintptr) { n, err = hashFD(int(fd), h, buf[:]) })
		err = errors.Join(err, cerr)
	}
	hashBuffers.Put(buf)
	if err != nil {
		return "", refuse.Wrap(CodeIO, err, "kubectl %s cannot be read", e.path)
	}
	st, err := e.fstat()
	if err != nil {
		return "", err
	}
	if d := e.id.diff(identityOf(&st)); d != "" {
		return "", refuse.New(CodeExecChanged, "kubectl %s changed while it was hashed: %s", e.path, d)
	}
	if n != e.id.size {
		return "", refuse.New(CodeExecChanged, "kubectl %s changed while it was hashed: read %d bytes of %d", e.path, n, e.id.size)
	}
	return digest.NewDigest(digest.SHA256, h), nil
}

func (e *Executable) fstat() (unix.Stat_t, error) {
	var st unix.Stat_t
	rc, err := e.f.SyscallConn()
	if err == nil {
		cerr := rc.Control(func(fd uintptr) { err = unix.Fstat(int(fd), &st) })
		err = errors.Join(err, cerr)
	}
	if err != nil {
		return st, refuse.Wrap(CodeExecChanged, err, "stat the held descriptor of kubectl %s", e.path)
	}
	return st, nil
}

// ExecPath is "/proc/self/fd/N" for the held descriptor N. A child exec'd through it runs exactly
// the held inode: the kernel resolves the name in the child at execve, where the descriptor is
// still open (O_CLOEXEC closes it only once the new image is loaded).
func (e *Executable) ExecPath() string { return e.execPath }

// Digest is the SHA-256 of the held content, equal to the pinned digest.
func (e *Executable) Digest() digest.Digest { return e.digest }

// ReverifyIdentity is the cheap check between steps: the held descriptor's stat (device, inode,
// mode, owner, link count, size, mtime, ctime) is unchanged and the path, resolved again without
// following symlinks, still names the held inode.
func (e *Executable) ReverifyIdentity() error {
	st, err := e.fstat()
	if err != nil {
		return err
	}
	if d := e.id.diff(identityOf(&st)); d != "" {
		return refuse.New(CodeExecChanged, "kubectl %s changed since it was opened: %s", e.path, d)
	}
	dirfd, _, err := openParent(e.path)
	if err != nil {
		return refuse.Wrap(CodeExecChanged, err, "kubectl %s no longer resolves", e.path)
	}
	defer unix.Close(dirfd)
	var named unix.Stat_t
	if err := unix.Fstatat(dirfd, filepath.Base(e.path), &named, unix.AT_SYMLINK_NOFOLLOW); err != nil {
		return refuse.Wrap(CodeExecChanged, resolveErr(e.path, err), "kubectl %s no longer resolves", e.path)
	}
	if uint64(named.Dev) != e.id.dev || named.Ino != e.id.ino {
		return refuse.New(CodeExecChanged, "kubectl %s now names inode %d:%d, not the held %d:%d",
			e.path, named.Dev, named.Ino, e.id.dev, e.id.ino)
	}
	return nil
}

// ReverifyFull is ReverifyIdentity plus a full re-hash of the held descriptor (about 80 ms for
// kubectl): it also catches content rewritten in place with every stat field restored.
func (e *Executable) ReverifyFull() error {
	if err := e.ReverifyIdentity(); err != nil {
		return err
	}
	d, err := e.hash()
	if err != nil {
		return err
	}
	if d != e.digest {
		return refuse.New(CodeExecChanged, "kubectl %s content now has digest %s, the pinned digest is %s", e.path, d, e.digest)
	}
	return nil
}

// Input is the qinglong/ql3-input@v1 record of role kubectl, from the held descriptor's stat as
// opened and hashed (the path is not resolved again).
func (e *Executable) Input() evidence.Input {
	return inputOf(evidence.RoleKubectl, e.path, e.id, e.digest, nil)
}

// Close releases the held descriptor; ExecPath is meaningless afterwards.
func (e *Executable) Close() error { return e.f.Close() }
