// Package stablefile reads ql3's private inputs and holds the kubectl executable so that what was
// checked is what is used (docs/rationale.md#4-private-inputs).
//
// A private input (command file, manifest, lock report, kubeconfig) is read once, through one
// descriptor, with its identity recorded; Reverify opens the path again the same way and refuses
// any difference. The executable is opened once and held: it is hashed through the held
// descriptor and run through it (ExecPath), so no path is resolved again between hash and exec.
// docs/stable-files.md describes every check and its reason code.
package stablefile

import (
	"crypto/sha256"
	"fmt"
	"strconv"
	"time"

	"github.com/opencontainers/go-digest"
	"golang.org/x/sys/unix"

	"github.com/qinglong/ql3/evidence"
	"github.com/qinglong/ql3/internal/input"
	"github.com/qinglong/ql3/refuse"
)

// Reason codes for private inputs.
const (
	// CodeNotPrivate: the file is not mode 0600 or not owned by the current uid, or its directory
	// is not mode 0700 or not owned by the current uid. The message says which.
	CodeNotPrivate refuse.Code = "INPUT_NOT_PRIVATE"
	// CodeNotRegular: the file is a directory, fifo, device or socket (shared with every input).
	CodeNotRegular = input.CodeNotRegular
	// CodeLinkCount: the file has more than one hard link, so it can be changed under another name.
	CodeLinkCount refuse.Code = "INPUT_LINK_COUNT"
	// CodeTooLarge: the file is larger than its role's ceiling, or grew past it while read
	// (shared with every input).
	CodeTooLarge = input.CodeTooLarge
	// CodeChanged: the file changed while it was read, or between Read and Reverify.
	CodeChanged refuse.Code = "INPUT_CHANGED"
)

const (
	privateFileMode = 0o600
	privateDirMode  = 0o700
)

// hookAfterStat runs between the first fstat of a private file and its read (tests grow the file
// there).
var hookAfterStat = func() {}

// File is a private input as it was read.
type File struct {
	Path, Role string
	Bytes      []byte
	Digest     digest.Digest // sha256 of Bytes

	ceiling int64
	id      identity // the file, as stated before and after the read
	dir     identity // its directory; only dev, inode, mode and owner are compared
}

// snapshot is one complete, checked read of a private file.
type snapshot struct {
	bytes   []byte
	digest  digest.Digest
	id, dir identity
}

// Read reads the private input at path, refusing it unless it passes every check of rationale §4 (docs/rationale.md#4-private-inputs),
// and reads at most ceiling bytes: a larger file is refused, never truncated. role names the
// input in messages and in its evidence record.
func Read(path, role string, ceiling int64) (*File, error) {
	if ceiling < 0 {
		return nil, fmt.Errorf("stablefile: negative ceiling %d for %s", ceiling, role)
	}
	s, err := readPrivate(path, role, ceiling)
	if err != nil {
		return nil, err
	}
	return &File{Path: path, Role: role, Bytes: s.bytes, Digest: s.digest, ceiling: ceiling, id: s.id, dir: s.dir}, nil
}

// Reverify opens and reads the path again with every check of Read, and refuses with
// CodeChanged if the directory, the file's identity (device, inode, mode, owner, link count,
// size, mtime, ctime) or its content differ from what Read recorded. Re-opening by path is what
// catches a file renamed over the original.
func (f *File) Reverify() error {
	s, err := readPrivate(f.Path, f.Role, f.ceiling)
	if err != nil {
		return refuse.Wrap(CodeChanged, err, "%s %s changed since it was read", f.Role, f.Path)
	}
	if f.dir.dev != s.dir.dev || f.dir.ino != s.dir.ino || f.dir.mode != s.dir.mode || f.dir.uid != s.dir.uid {
		return refuse.New(CodeChanged, "%s %s changed since it was read: its directory %s", f.Role, f.Path, f.dir.diff(s.dir))
	}
	if d := f.id.diff(s.id); d != "" {
		return refuse.New(CodeChanged, "%s %s changed since it was read: %s", f.Role, f.Path, d)
	}
	if s.digest != f.Digest {
		return refuse.New(CodeChanged, "%s %s changed since it was read: content now has digest %s, was %s",
			f.Role, f.Path, s.digest, f.Digest)
	}
	return nil
}

// Input is the qinglong/ql3-input@v1 record of f. content is the descriptor of the stored raw
// bytes, or nil for an input that is bound by digest alone.
func (f *File) Input(content *evidence.Descriptor) evidence.Input {
	return inputOf(f.Role, f.Path, f.id, f.Digest, content)
}

func inputOf(role, path string, id identity, d digest.Digest, content *evidence.Descriptor) evidence.Input {
	return evidence.Input{
		Schema: evidence.SchemaInput, Role: role, Path: path,
		Dev: strconv.FormatUint(id.dev, 10), Inode: strconv.FormatUint(id.ino, 10),
		Mode: fmt.Sprintf("%04o", id.mode&0o7777), UID: int64(id.uid), Size: id.size,
		Mtime: stamp(id.mtime), Ctime: stamp(id.ctime), Digest: d, Content: content,
	}
}

func stamp(ts unix.Timespec) string {
	return time.Unix(ts.Sec, ts.Nsec).UTC().Format(time.RFC3339Nano)
}

func readPrivate(path, role string, ceiling int64) (*snapshot, error) {
	if err := checkPath(path); err != nil {
		return nil, labeled(role, err)
	}
	dirfd, dirSt, err := openParent(path)
	if err != nil {
		return nil, labeled(role, err)
	}
	defer unix.Close(dirfd)
	if err := checkPrivate(role, path, "directory", &dirSt, privateDirMode); err != nil {
		return nil, err
	}
	fd, st, err := openLeaf(dirfd, path, CodeNotRegular)
	if err != nil {
		return nil, labeled(role, err)
	}
	defer unix.Close(fd)
	if st.Nlink != 1 {
		return nil, refuse.New(CodeLinkCount, "%s %s has %d hard links, want 1", role, path, st.Nlink).
			WithHint("remove the other links, or copy the file to a fresh private file")
	}
	if err := checkPrivate(role, path, "file", &st, privateFileMode); err != nil {
		return nil, err
	}
	if st.Size > ceiling {
		return nil, refuse.New(CodeTooLarge, "%s %s is %d bytes, over the ceiling of %d", role, path, st.Size, ceiling)
	}
	hookAfterStat()
	b, err := input.ReadFD(fd, st.Size, ceiling)
	if err != nil {
		return nil, refuse.Wrap(CodeIO, err, "%s %s cannot be read", role, path)
	}
	if int64(len(b)) > ceiling {
		return nil, refuse.New(CodeTooLarge, "%s %s grew past the ceiling of %d bytes while it was read", role, path, ceiling)
	}
	var after unix.Stat_t
	if err := unix.Fstat(fd, &after); err != nil {
		return nil, refuse.Wrap(CodeIO, err, "%s %s cannot be stated", role, path)
	}
	id := identityOf(&st)
	if d := id.diff(identityOf(&after)); d != "" {
		return nil, refuse.New(CodeChanged, "%s %s changed while it was read: %s", role, path, d)
	}
	if int64(len(b)) != st.Size {
		return nil, refuse.New(CodeChanged, "%s %s changed while it was read: read %d bytes of %d", role, path, len(b), st.Size)
	}
	sum := sha256.Sum256(b)
	return &snapshot{bytes: b, digest: digest.NewDigestFromBytes(digest.SHA256, sum[:]), id: id, dir: identityOf(&dirSt)}, nil
}

// checkPrivate requires the exact mode (type bits aside) and the current uid as owner.
func checkPrivate(role, path, what string, st *unix.Stat_t, mode uint32) error {
	uid := getuid()
	if int64(st.Uid) != int64(uid) {
		return refuse.New(CodeNotPrivate, "%s %s: %s is owned by uid %d, not the current uid %d", role, path, what, st.Uid, uid).
			WithHint("the file and its directory must belong to the user running ql3")
	}
	if got := st.Mode & 0o7777; got != mode {
		return refuse.New(CodeNotPrivate, "%s %s: %s mode is %04o, want %04o", role, path, what, got, mode).
			WithHint("chmod 600 the file and chmod 700 its directory")
	}
	return nil
}
