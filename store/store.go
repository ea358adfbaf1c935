// Package store is ql3's content-addressed evidence store (docs/rationale.md#7-the-evidence-store): OCI image-layout blobs
// under blobs/sha256/, no-replace index pointers under index/<kind>/, staging under tmp/ and
// per-command lock files under locks/.
package store

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"io"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/opencontainers/go-digest"
	"golang.org/x/sys/unix"

	"github.com/qinglong/ql3/deploylog"
	"github.com/qinglong/ql3/evidence"
	"github.com/qinglong/ql3/internal/input"
	"github.com/qinglong/ql3/internal/sysfile"
	"github.com/qinglong/ql3/refuse"
)

// Reason codes raised by this package.
const (
	CodeStoreRoot        refuse.Code = "STORE_ROOT"       // root not absolute/canonical or missing
	CodeStoreMode        refuse.Code = "STORE_MODE"       // root or subdirectory mode is not 0700
	CodeStoreOwner       refuse.Code = "STORE_OWNER"      // root or subdirectory not owned by current uid
	CodeStoreMarker      refuse.Code = "STORE_MARKER"     // ql3-store.json missing or not the expected bytes
	CodeStoreIO          refuse.Code = "STORE_IO"         // an i/o operation failed
	CodeStoreLocked      refuse.Code = "STORE_LOCKED"     // lock not acquired before the context ended
	CodeObjectNotFound   refuse.Code = "OBJECT_NOT_FOUND" // no object of that digest
	CodeObjectCorrupt    refuse.Code = "OBJECT_CORRUPT"   // object content does not hash to its name
	CodeObjectSize       refuse.Code = "OBJECT_SIZE_MISMATCH"
	CodeObjectNotRegular refuse.Code = "OBJECT_NOT_REGULAR" // object is a symlink, directory, fifo...
	CodeObjectMode       refuse.Code = "OBJECT_MODE"        // object mode is not 0400
	CodeObjectOwner      refuse.Code = "OBJECT_OWNER"       // object not owned by current uid
	CodeObjectLinkCount  refuse.Code = "OBJECT_LINK_COUNT"  // object has more than one hard link
	CodeObjectTooLarge   refuse.Code = "OBJECT_TOO_LARGE"   // object exceeds MaxObjectSize
	CodeIndexKind        refuse.Code = "INDEX_KIND"         // unknown index kind
	CodeIndexConflict    refuse.Code = "INDEX_CONFLICT"     // index entry exists with other content
	CodeIndexCorrupt     refuse.Code = "INDEX_CORRUPT"      // index entry is not a canonical descriptor
	CodeMediaType        refuse.Code = "STORE_MEDIA_TYPE"   // record put under a non-record media type
)

// MaxObjectSize bounds every object so a read can never exhaust memory.
const MaxObjectSize = 64 << 20

// ObjectMode is the mode of committed objects and index entries: immutable by construction.
const ObjectMode = 0o400

const (
	markerName = "ql3-store.json"
	marker     = `{"digestAlgorithm":"sha256","schema":"qinglong/ql3-store@v1"}`
)

// Store is an opened, validated store. It holds its root and every subdirectory by a descriptor
// from Open to Close, and does all its i/o relative to those descriptors (docs/store.md,
// "Descriptors"): the path is resolved once, by Open, and again only to check, before anything
// is published, that it still names the directory held.
type Store struct {
	root string
	// mu is held shared by every operation and exclusively by Close, so that no operation uses a
	// descriptor number after Close released it (the kernel reuses the number for the next open).
	mu     sync.RWMutex
	closed bool
	dirs   [nDirs]heldDir
	// writerFD holds the writers' lock (gc.go) from the handle's first object write to Close.
	writerMu   sync.Mutex
	writerFD   int
	writerHeld bool
}

// Root is the store's absolute path, as given to Open.
func (s *Store) Root() string { return s.root }

// Close releases the store's directory descriptors. Any later operation is refused (STORE_IO);
// a second Close is a no-op.
func (s *Store) Close() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return nil
	}
	s.closed = true
	s.releaseWriters()
	if err := closeDirs(&s.dirs); err != nil {
		return refuse.Wrap(CodeStoreIO, err, "close store %s", s.root)
	}
	return nil
}

// acquire holds the descriptors for one operation; the caller releases with s.mu.RUnlock.
func (s *Store) acquire() error {
	s.mu.RLock()
	if s.closed {
		s.mu.RUnlock()
		return refuse.New(CodeStoreIO, "store %s is closed", s.root)
	}
	return nil
}

// Init creates the store at root (its parent must exist) or opens an existing valid one.
func Init(root string) (*Store, error) {
	return open(root, true)
}

func checkPath(root string) error {
	if !filepath.IsAbs(root) || filepath.Clean(root) != root || root == "/" || strings.IndexByte(root, 0) >= 0 {
		return refuse.New(CodeStoreRoot, "store path %q is not absolute and clean", root)
	}
	return nil
}

// Open validates and opens the store at root.
func Open(root string) (*Store, error) {
	return open(root, false)
}

func open(root string, create bool) (*Store, error) {
	if err := checkPath(root); err != nil {
		return nil, err
	}
	dirs, err := openTree(root, create)
	if err != nil {
		return nil, err
	}
	s := &Store{root: root, dirs: dirs}
	if create {
		var st unix.Stat_t
		if err := unix.Fstatat(s.dirs[dRoot].fd, markerName, &st, unix.AT_SYMLINK_NOFOLLOW); errors.Is(err, unix.ENOENT) {
			if err := s.commit(dRoot, markerName, []byte(marker)); err != nil && !errors.Is(err, errExists) {
				s.Close()
				return nil, err
			}
		}
	}
	if err := s.checkMarker(); err != nil {
		s.Close()
		return nil, err
	}
	return s, nil
}

func (s *Store) checkMarker() error {
	fd, err := sysfile.RetryEINTR(func() (int, error) {
		return unix.Openat(s.dirs[dRoot].fd, markerName, unix.O_RDONLY|unix.O_NOFOLLOW|unix.O_CLOEXEC|unix.O_NONBLOCK, 0)
	})
	if err != nil { // missing, a symlink (O_NOFOLLOW), unreadable: one refusal for them all
		return refuse.New(CodeStoreMarker, "store marker %s missing or invalid", markerName)
	}
	defer unix.Close(fd)
	// A copied store is untrusted: its marker may be a fifo or a device. It is read only as a
	// regular file, through the one bounded read core.
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil || st.Mode&unix.S_IFMT != unix.S_IFREG {
		return refuse.New(CodeStoreMarker, "store marker %s missing or invalid", markerName)
	}
	b, err := input.ReadFD(fd, st.Size, int64(len(marker)))
	if err != nil || string(b) != marker {
		return refuse.New(CodeStoreMarker, "store marker %s missing or invalid", markerName)
	}
	return nil
}

// commitHook, when set by tests, runs after the staged file is written and before it is linked.
var commitHook func()

// commit writes b to name in held directory dir with the no-replace staged-rename protocol. It
// returns errExists with nothing changed when the name already exists.
func (s *Store) commit(dir int, name string, b []byte) error {
	return s.commitAt(s.dirs[dir].fd, layout[dir].rel, name, b)
}

// commitAt is commit into any directory held by the descriptor dirfd (rel names it in messages).
func (s *Store) commitAt(dirfd int, rel, name string, b []byte) error {
	st, err := s.stage(b, true)
	if err != nil {
		return err
	}
	defer st.discard(s)
	if commitHook != nil {
		commitHook()
	}
	if err := s.link(st, dirfd, name); err != nil {
		return err
	}
	if err := unix.Fsync(dirfd); err != nil {
		return refuse.Wrap(CodeStoreIO, err, "fsync %s", rel)
	}
	return nil
}

// staged is a file written in tmp/ and not yet renamed into place.
type staged struct {
	name    string
	fd      int // open for writing until synced (-1 once closed)
	renamed bool
}

// stage writes b to a new uniquely named file in tmp/, mode 0400, and syncs it when sync is
// set; otherwise its descriptor stays open for a later sync.
func (s *Store) stage(b []byte, sync bool) (*staged, error) {
	tmp := s.dirs[dTmp].fd
	st := &staged{fd: -1}
	var fd int
	for try := 0; ; try++ {
		st.name = "stage-" + strconv.FormatUint(rand.Uint64(), 36)
		var err error
		fd, err = sysfile.RetryEINTR(func() (int, error) {
			return unix.Openat(tmp, st.name, unix.O_WRONLY|unix.O_CREAT|unix.O_EXCL|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0o600)
		})
		if err == nil {
			break
		}
		if !errors.Is(err, unix.EEXIST) || try == 100 {
			return nil, refuse.Wrap(CodeStoreIO, err, "create staging file")
		}
	}
	st.fd = fd
	err := sysfile.WriteAll(fd, b)
	if err == nil {
		err = unix.Fchmod(fd, ObjectMode)
	}
	if err == nil && sync {
		err = st.sync()
	}
	if err != nil {
		st.discard(s)
		return nil, refuse.Wrap(CodeStoreIO, err, "write staging file")
	}
	return st, nil
}

// sync makes the staged content durable and closes its descriptor.
func (st *staged) sync() error {
	err := unix.Fsync(st.fd)
	if cerr := unix.Close(st.fd); err == nil {
		err = cerr
	}
	st.fd = -1
	return err
}

// discard closes a staged file's descriptor and removes it unless it was renamed into place.
func (st *staged) discard(s *Store) {
	if st.fd >= 0 {
		_ = unix.Close(st.fd)
		st.fd = -1
	}
	if !st.renamed {
		_ = unix.Unlinkat(s.dirs[dTmp].fd, st.name, 0)
		st.renamed = true // removed: nothing is left to discard
	}
}

// link renames the synced staged file to name in dirfd without replacing anything; errExists
// when the name exists. The directory is not synced.
func (s *Store) link(st *staged, dirfd int, name string) error {
	// rename with RENAME_NOREPLACE, not link(2): the committed name never has a second link, so
	// a concurrent reader never sees link count 2 on a good object.
	if err := unix.Renameat2(s.dirs[dTmp].fd, st.name, dirfd, name, unix.RENAME_NOREPLACE); err != nil {
		if errors.Is(err, unix.EEXIST) {
			return errExists
		}
		return refuse.Wrap(CodeStoreIO, err, "rename object into place")
	}
	st.renamed = true
	return nil
}

var errExists = errors.New("store: name exists")

// PutBlob stores b verbatim. Putting existing content is a no-op.
func (s *Store) PutBlob(mediaType string, b []byte) (evidence.Descriptor, error) {
	if err := s.acquire(); err != nil {
		return evidence.Descriptor{}, err
	}
	defer s.mu.RUnlock()
	return s.putBlob(mediaType, b)
}

func (s *Store) putBlob(mediaType string, b []byte) (evidence.Descriptor, error) {
	desc, exists, err := s.present(mediaType, b)
	if err != nil || exists {
		return desc, err
	}
	err = s.commit(dSHA256, desc.Digest.Encoded(), b)
	if errors.Is(err, errExists) {
		return desc, s.same(desc.Digest)
	}
	return desc, err
}

// present returns b's descriptor and whether the store holds it already, checked as Get checks
// it. A run stores many objects that earlier runs stored (its inputs, kubectl's unchanged
// output): those cost a lookup and a re-hash, not a staged copy and an fsync.
func (s *Store) present(mediaType string, b []byte) (evidence.Descriptor, bool, error) {
	if err := checkSize(b); err != nil {
		return evidence.Descriptor{}, false, err
	}
	// From here the run may reference this object: gc must not remove it until the run ends.
	if err := s.holdWriters(); err != nil {
		return evidence.Descriptor{}, false, err
	}
	sum := sha256.Sum256(b)
	d := digest.Digest("sha256:" + hex.EncodeToString(sum[:]))
	desc := evidence.Descriptor{MediaType: mediaType, Digest: d, Size: int64(len(b))}
	var st unix.Stat_t
	err := unix.Fstatat(s.dirs[dSHA256].fd, d.Encoded(), &st, unix.AT_SYMLINK_NOFOLLOW)
	if errors.Is(err, unix.ENOENT) {
		return desc, false, nil
	}
	// Anything else under the name, readable or not, is for the full read to judge: the name is
	// never overwritten.
	return desc, true, s.same(d)
}

// checkSize refuses an object over MaxObjectSize before anything of it is written.
func checkSize(b []byte) error {
	if len(b) > MaxObjectSize {
		return refuse.New(CodeObjectTooLarge, "object of %d bytes exceeds %d", len(b), MaxObjectSize)
	}
	return nil
}

// checkRecord holds b to the record rules of mediaType (canonical form, the schema that media
// type names) without keeping the decoded value.
func checkRecord(mediaType string, b []byte) error {
	_, err := evidence.ParseRecord(mediaType, b)
	return err
}

// same checks the object already committed under d's name: the same content is a no-op,
// anything else is refused and nothing is overwritten.
func (s *Store) same(d digest.Digest) error {
	_, err := s.get(d)
	return err
}

// rootMediaTypes are the records an index entry publishes: writing one is a publication, so it
// is preceded by the root identity check.
var rootMediaTypes = map[string]bool{
	evidence.MediaTypePreflight: true, evidence.MediaTypeIntent: true, evidence.MediaTypeReceipt: true,
	evidence.MediaTypeLiveAudit: true,
}

// PutRecord stores the canonical bytes of record v under mediaType, whose schema v must carry.
// A root record (a preflight report, an apply intent, a receipt) is refused with STORE_ROOT_MOVED,
// and not written, when the store path no longer names the directory Open held.
func (s *Store) PutRecord(mediaType string, v any) (evidence.Descriptor, []byte, error) {
	if err := s.acquire(); err != nil {
		return evidence.Descriptor{}, nil, err
	}
	defer s.mu.RUnlock()
	b, err := s.recordBytes(mediaType, v)
	if err != nil {
		return evidence.Descriptor{}, nil, err
	}
	d, err := s.putBlob(mediaType, b)
	return d, b, err
}

// recordBytes returns the canonical bytes of record v, checked to read back under the record
// rules with the schema mediaType names, after the root identity check for a root media type.
func (s *Store) recordBytes(mediaType string, v any) ([]byte, error) {
	if _, ok := evidence.RecordSchema(mediaType); !ok {
		return nil, refuse.New(CodeMediaType, "media type %q is not a record media type", mediaType)
	}
	b, err := evidence.MarshalRecord(v)
	if err != nil {
		return nil, err
	}
	if err := checkRecord(mediaType, b); err != nil {
		return nil, err
	}
	if rootMediaTypes[mediaType] {
		if err := s.checkRoot(); err != nil {
			return nil, err
		}
	}
	return b, nil
}

// Get returns the object named d after checking its file and re-hashing its content.
func (s *Store) Get(d digest.Digest) ([]byte, error) {
	if err := s.acquire(); err != nil {
		return nil, err
	}
	defer s.mu.RUnlock()
	return s.get(d)
}

func (s *Store) get(d digest.Digest) ([]byte, error) {
	if _, err := evidence.ParseDigest(string(d)); err != nil {
		return nil, err
	}
	return readObject(s.dirs[dSHA256].fd, d)
}

// openObjectFD opens the file name in dirfd without following a symlink and checks its stat as
// object d's. It returns the bare descriptor, which the caller closes: the reads of a listing
// (thousands of small files) skip os.File's set-up and the poller.
func openObjectFD(dirfd int, name string, d digest.Digest) (int, int64, error) {
	fd, err := openRO(dirfd, name)
	size, err := objectFD(plainFile(fd), err, d)
	if err != nil {
		if fd >= 0 {
			closeRaw(fd)
		}
		return -1, 0, err
	}
	return fd, size, nil
}

// objectFD judges the open of object d that gave f and openErr (openRO's), then checks the
// file's stat as the object's, and returns its size. It never closes f: its opener does
// (openObjectFD, or a chunk's batch: openedFiles).
func objectFD(f storeFile, openErr error, d digest.Digest) (int64, error) {
	if openErr != nil {
		if errors.Is(openErr, unix.ENOENT) {
			return 0, refuse.New(CodeObjectNotFound, "object %s not found", d)
		}
		if errors.Is(openErr, unix.ELOOP) {
			return 0, refuse.New(CodeObjectNotRegular, "object %s is a symlink", d)
		}
		return 0, refuse.Wrap(CodeStoreIO, openErr, "open object %s", d)
	}
	var st unix.Stat_t
	if err := f.fstat(&st); err != nil {
		return 0, refuse.Wrap(CodeStoreIO, err, "stat object %s", d)
	}
	if err := checkObjectStat(&st, d); err != nil {
		return 0, err
	}
	return st.Size, nil
}

// readSized reads the regular file fd, of size bytes by its fstat, and reports a file that is
// longer: one bounded read (at most size+1 bytes, one pread(2) for a file that ends where fstat
// said). A file that grows after that read is beyond what any read could see;
// its content is hashed regardless.
func readSized(fd int, size int64) (b []byte, grew bool, err error) {
	// input.ReadFD's bounded read, with preadFull's calls (without the scheduler's hand-off:
	// fastread_raw.go): size+1 bytes, one pread for a file that ends where fstat said.
	b = make([]byte, max(size, 0)+1)
	n, err := preadFull(fd, b)
	switch {
	case err != nil:
		return nil, false, err
	case int64(n) > size:
		return nil, true, nil
	case int64(n) < size:
		return nil, false, io.ErrUnexpectedEOF
	}
	return b[:n:n], false, nil
}

func readObject(blobs int, d digest.Digest) ([]byte, error) {
	fd, size, err := openObjectFD(blobs, d.Encoded(), d)
	if err != nil {
		return nil, err
	}
	defer closeRaw(fd)
	// Sized from fstat (bounded above), and the file must end there: a file that grows between
	// fstat and read is refused rather than read in part.
	b, grew, err := readSized(fd, size)
	if err != nil {
		return nil, refuse.Wrap(CodeObjectCorrupt, err, "read object %s", d)
	}
	if grew {
		return nil, refuse.New(CodeObjectCorrupt, "object %s grew while being read", d)
	}
	if !sumIs(sha256.Sum256(b), d.Encoded()) {
		return nil, refuse.New(CodeObjectCorrupt, "object %s does not hash to its name", d)
	}
	return b, nil
}

// hashBuffers are the chunk buffers of checkObject, reused so that a walk over a large store
// neither allocates nor faults in fresh memory per object.
var hashBuffers = sync.Pool{New: func() any { b := make([]byte, 1<<20); return &b }}

// checkObject is Get without keeping the bytes: the same file checks, the content read with
// pread(2) into a pooled chunk buffer and streamed through SHA-256 (a file that ends where fstat
// said takes one read: a short read past the stated size is its end). It returns the object's
// size.
func checkObject(blobs int, d digest.Digest) (int64, error) {
	fd, err := openRO(blobs, d.Encoded())
	if fd >= 0 {
		defer closeRaw(fd)
	}
	return checkObjectFD(plainFile(fd), err, d)
}

// checkObjectFD is checkObject of the object d opened as f (or not: openErr); it does not close f.
func checkObjectFD(f storeFile, openErr error, d digest.Digest) (int64, error) {
	size, err := objectFD(f, openErr, d)
	if err != nil {
		return 0, err
	}
	// Read ahead whole by its chunk (size+1 bytes asked, as hashFile reads), or streamed through
	// the hash.
	var n int64
	var sum [sha256.Size]byte
	if b, ok, err := f.ahead(size + 1); ok {
		if err != nil {
			return 0, refuse.Wrap(CodeObjectCorrupt, err, "read object %s", d)
		}
		n, sum = int64(len(b)), sha256.Sum256(b)
	} else if n, sum, err = hashFile(f.fd, size); err != nil {
		return 0, refuse.Wrap(CodeObjectCorrupt, err, "read object %s", d)
	}
	switch {
	case n > size:
		return 0, refuse.New(CodeObjectCorrupt, "object %s grew while being read", d)
	case n < size:
		return 0, refuse.New(CodeObjectCorrupt, "object %s shrank while being read", d)
	case !sumIs(sum, d.Encoded()):
		return 0, refuse.New(CodeObjectCorrupt, "object %s does not hash to its name", d)
	}
	return size, nil
}

// hashFile streams at most size+1 bytes of fd from offset 0 through SHA-256, in the pooled
// hash buffers, and returns how many it read and their sum (a file that ends where its fstat
// said takes one read per buffer: a short read past size is its end).
func hashFile(fd int, size int64) (int64, [sha256.Size]byte, error) {
	buf := hashBuffers.Get().(*[]byte)
	defer hashBuffers.Put(buf)
	h := sha256.New()
	var n int64
	var sum [sha256.Size]byte
	for n <= size {
		chunk := (*buf)[:min(int64(len(*buf)), size+1-n)]
		k, err := preadRaw(fd, chunk, n)
		if err != nil {
			return n, sum, err
		}
		if k == 0 {
			break
		}
		h.Write(chunk[:k])
		n += int64(k)
		if n >= size && k < len(chunk) {
			break
		}
	}
	return n, [sha256.Size]byte(h.Sum(sum[:0])), nil
}

// processUID is the process's uid, read once: checkObjectStat runs for every object a listing
// reads (tens of thousands), and getuid(2) was 7 % of a history's CPU; a process's uid does not
// change under ql3, which never calls setuid.
var processUID = os.Getuid()

func checkObjectStat(st *unix.Stat_t, d digest.Digest) error {
	switch {
	case st.Mode&unix.S_IFMT != unix.S_IFREG:
		return refuse.New(CodeObjectNotRegular, "object %s is not a regular file", d)
	case st.Mode&0o7777 != ObjectMode:
		return refuse.New(CodeObjectMode, "object %s has mode %04o, want 0400", d, st.Mode&0o7777)
	case int(st.Uid) != processUID:
		return refuse.New(CodeObjectOwner, "object %s is owned by uid %d", d, st.Uid)
	case st.Nlink != 1:
		return refuse.New(CodeObjectLinkCount, "object %s has %d links, want 1", d, st.Nlink)
	case st.Size > MaxObjectSize:
		return refuse.New(CodeObjectTooLarge, "object %s of %d bytes exceeds %d", d, st.Size, MaxObjectSize)
	}
	return nil
}

// GetDescriptor is Get plus the descriptor's size and, for record media types, canonical form
// and schema.
func (s *Store) GetDescriptor(d evidence.Descriptor) ([]byte, error) {
	b, _, err := s.GetRecord(d)
	return b, err
}

// GetRecord is GetDescriptor that also returns, for a record media type, the record as parsed by
// that check (nil for a blob), so that a reader decoding it does not parse it again.
func (s *Store) GetRecord(d evidence.Descriptor) ([]byte, *evidence.Record, error) {
	if err := s.acquire(); err != nil {
		return nil, nil, err
	}
	defer s.mu.RUnlock()
	b, err := s.get(d.Digest)
	if err != nil {
		return nil, nil, err
	}
	r, err := CheckDescriptor(d, b)
	if err != nil {
		return nil, nil, err
	}
	return b, r, nil
}

// CheckDescriptor makes the checks of a descriptor's read on b, the object's bytes already
// re-hashed to d.Digest: its size and, for a record media type, its canonical form and schema. It
// returns the record as parsed (nil for a blob). GetRecord makes them on the store's reads, and
// every other reader of evidence objects (an OCI layout) makes them with the same codes.
func CheckDescriptor(d evidence.Descriptor, b []byte) (*evidence.Record, error) {
	if int64(len(b)) != d.Size {
		return nil, refuse.New(CodeObjectSize, "object %s has %d bytes, descriptor says %d", d.Digest, len(b), d.Size)
	}
	if _, ok := evidence.RecordSchema(d.MediaType); !ok {
		return nil, nil
	}
	return evidence.ParseRecord(d.MediaType, b)
}

func checkKind(kind string) error {
	switch kind {
	case evidence.IndexReceipts, evidence.IndexIntents, evidence.IndexPreflights, evidence.IndexLiveAudits:
		return nil
	}
	return refuse.New(CodeIndexKind, "unknown index kind %q", kind)
}

// optionalKinds are the index kinds added after stores were first written: their directory is
// made by the first entry, so an older store opens, lists and audits unchanged. It is opened
// relative to the held index directory and checked like every store directory.
var optionalKinds = map[string]bool{evidence.IndexLiveAudits: true}

// kindDir returns the descriptor of kind's index directory and a function that releases it; ok
// is false for an optional kind whose directory does not exist (and create is false).
func (s *Store) kindDir(kind string, create bool) (fd int, release func(), ok bool, err error) {
	if !optionalKinds[kind] {
		return s.dirs[indexDir(kind)].fd, func() {}, true, nil
	}
	parent, rel := s.dirs[dIndex].fd, "index/"+kind
	if create {
		if err := unix.Mkdirat(parent, kind, 0o700); err != nil && !errors.Is(err, unix.EEXIST) {
			return -1, nil, false, refuse.Wrap(CodeStoreIO, err, "create %s", rel)
		}
	} else {
		var st unix.Stat_t
		if err := unix.Fstatat(parent, kind, &st, unix.AT_SYMLINK_NOFOLLOW); errors.Is(err, unix.ENOENT) {
			return -1, func() {}, false, nil
		}
	}
	d, err := openDir(parent, kind, rel)
	if err != nil {
		return -1, nil, false, err
	}
	return d.fd, func() { unix.Close(d.fd) }, true, nil
}

// maxIndexEntry bounds an index entry: one canonical descriptor is under 300 bytes.
const maxIndexEntry = 4 << 10

// PutIndex records key -> d under kind, never replacing a different entry. An index entry
// publishes its record, so it is written only after the root identity check (STORE_ROOT_MOVED
// otherwise), and the check is repeated once it is in place: an entry created while the path
// was being swapped is removed again and refused, so that a refused publication leaves nothing
// published in any directory.
func (s *Store) PutIndex(kind string, key digest.Digest, d evidence.Descriptor) error {
	if err := s.acquire(); err != nil {
		return err
	}
	defer s.mu.RUnlock()
	if err := checkKind(kind); err != nil {
		return err
	}
	if _, err := evidence.ParseDigest(string(key)); err != nil {
		return err
	}
	b, err := evidence.MarshalRecord(d)
	if err != nil {
		return err
	}
	if err := s.checkRoot(); err != nil {
		return err
	}
	dirfd, release, _, err := s.kindDir(kind, true)
	if err != nil {
		return err
	}
	defer release()
	lk, _ := deploylog.KindOfIndex(kind)
	// The entry is new, or the same (a no-op), or a conflict: judged under the publication
	// lock, so that exactly one leaf is appended for it (docs/log.md).
	present := func() (bool, error) {
		old, ok, err := readEntry(dirfd, kind, key)
		if err != nil || !ok {
			return false, err
		}
		if old != d {
			return false, refuse.New(CodeIndexConflict, "index %s entry %s exists with another descriptor", kind, key)
		}
		return true, nil
	}
	// The entry's content is staged and synced while the leaf is made durable (publish runs
	// prepare beside the append): only the renames and directory syncs stay serial.
	var st *staged
	defer func() {
		if st != nil {
			st.discard(s)
		}
	}()
	prepare := func() error {
		var err error
		st, err = s.stage(b, true)
		return err
	}
	return s.publish(deploylog.Leaf{Kind: lk, Key: key, Record: d.Digest}, present, prepare, func() error {
		if st == nil {
			if err := prepare(); err != nil {
				return err
			}
		}
		if commitHook != nil {
			commitHook()
		}
		err := s.link(st, dirfd, key.Encoded())
		if err == nil {
			if err := unix.Fsync(dirfd); err != nil {
				return refuse.Wrap(CodeStoreIO, err, "fsync index/%s", kind)
			}
			return s.withdrawIfMoved(dirfd, key.Encoded(), "index "+kind+" entry "+string(key))
		}
		if errors.Is(err, errExists) {
			old, ok, gerr := s.getIndex(kind, key)
			if gerr != nil {
				return gerr
			}
			if !ok || old != d {
				return refuse.New(CodeIndexConflict, "index %s entry %s exists with another descriptor", kind, key)
			}
			return nil
		}
		return err
	})
}

// withdrawIfMoved is the check after an index entry's rename into the held directory dirfd: when
// the store path no longer names the store opened, the entry name, which this call has just created
// (RENAME_NOREPLACE succeeded), is removed again and the removal synced, and the call is refused
// with STORE_ROOT_MOVED. That is the only name the store ever removes once committed, so that the
// path's new directory and the held one both end without it.
func (s *Store) withdrawIfMoved(dirfd int, name, what string) error {
	err := s.checkRoot()
	if err == nil {
		return nil
	}
	if uerr := unix.Unlinkat(dirfd, name, 0); uerr != nil {
		return refuse.Wrap(CodeRootMoved, uerr, "%v; and its %s, written in the directory held, could not be removed", err, what)
	}
	if serr := unix.Fsync(dirfd); serr != nil {
		return refuse.Wrap(CodeRootMoved, serr, "%v; and the removal of its %s could not be synced", err, what)
	}
	return err
}

// GetIndex returns the descriptor stored under kind/key.
func (s *Store) GetIndex(kind string, key digest.Digest) (evidence.Descriptor, bool, error) {
	if err := s.acquire(); err != nil {
		return evidence.Descriptor{}, false, err
	}
	defer s.mu.RUnlock()
	return s.getIndex(kind, key)
}

func (s *Store) getIndex(kind string, key digest.Digest) (evidence.Descriptor, bool, error) {
	if err := checkKind(kind); err != nil {
		return evidence.Descriptor{}, false, err
	}
	if _, err := evidence.ParseDigest(string(key)); err != nil {
		return evidence.Descriptor{}, false, err
	}
	dirfd, release, ok, err := s.kindDir(kind, false)
	if err != nil || !ok {
		return evidence.Descriptor{}, false, err
	}
	defer release()
	return readEntry(dirfd, kind, key)
}

// readEntry reads the entry key of kind's index directory, held by dirfd.
func readEntry(dirfd int, kind string, key digest.Digest) (evidence.Descriptor, bool, error) {
	fd, err := openRO(dirfd, key.Encoded())
	if fd >= 0 {
		defer closeRaw(fd)
	}
	return readEntryFD(plainFile(fd), err, kind, key)
}

// readEntryFD is readEntry of the entry opened as f (or not: openErr); it does not close f.
func readEntryFD(f storeFile, openErr error, kind string, key digest.Digest) (evidence.Descriptor, bool, error) {
	// An entry is held to an object's file rules (no symlink, regular, 0400, owner, one link),
	// so that it cannot be swapped for a file outside the store or another writer's file.
	size, err := objectFD(f, openErr, key)
	if refuse.CodeOf(err) == CodeObjectNotFound {
		return evidence.Descriptor{}, false, nil
	}
	if err != nil {
		return evidence.Descriptor{}, false, refuse.Wrap(CodeIndexCorrupt, err, "index %s entry %s", kind, key)
	}
	d, err := decodeEntry(f, size, "index "+kind+" entry "+string(key))
	return d, err == nil, err
}

// decodeEntry reads one index entry of size bytes, opened under the object file rules, and
// decodes its canonical descriptor. Its caller closes f.
func decodeEntry(f storeFile, size int64, what string) (evidence.Descriptor, error) {
	if size > maxIndexEntry {
		return evidence.Descriptor{}, refuse.New(CodeIndexCorrupt, "%s is larger than %d bytes", what, maxIndexEntry)
	}
	// One pread (preadFull), as readSized would, without the scheduler's hand-off.
	buf := make([]byte, size+1)
	m, err := f.readFull(buf)
	switch {
	case err != nil:
		return evidence.Descriptor{}, refuse.Wrap(CodeStoreIO, err, "read %s", what)
	case int64(m) > size:
		return evidence.Descriptor{}, refuse.New(CodeIndexCorrupt, "%s grew while being read", what)
	case int64(m) < size:
		return evidence.Descriptor{}, refuse.Wrap(CodeStoreIO, io.ErrUnexpectedEOF, "read %s", what)
	}
	d, err := evidence.DecodeCanonicalDescriptor(buf[:m])
	if err != nil {
		return evidence.Descriptor{}, refuse.Wrap(CodeIndexCorrupt, err, "%s is not one canonical descriptor", what)
	}
	return d, nil
}

// IndexEntry is one index pointer.
type IndexEntry struct {
	Kind       string              `json:"kind"`
	Key        digest.Digest       `json:"key"`
	Descriptor evidence.Descriptor `json:"descriptor"`
}

// ListIndex returns every entry of kind, sorted by key.
func (s *Store) ListIndex(kind string) ([]IndexEntry, error) {
	if err := s.acquire(); err != nil {
		return nil, err
	}
	defer s.mu.RUnlock()
	return s.listIndex(kind)
}

func (s *Store) listIndex(kind string) ([]IndexEntry, error) {
	if err := checkKind(kind); err != nil {
		return nil, err
	}
	dirfd, release, ok, err := s.kindDir(kind, false)
	if err != nil || !ok {
		return nil, err // no directory: a store written before the kind existed
	}
	defer release()
	names, err := listDir(dirfd, "index/"+kind)
	if err != nil {
		return nil, err
	}
	out := make([]IndexEntry, 0, len(names))
	for _, name := range names {
		key, err := evidence.ParseDigest("sha256:" + name)
		if err != nil {
			return nil, refuse.Wrap(CodeIndexCorrupt, err, "index %s has a stray entry", kind)
		}
		d, ok, err := readEntry(dirfd, kind, key)
		if err != nil {
			return nil, err
		}
		if ok { // an entry listed a moment ago is never removed, except by a refused publication
			out = append(out, IndexEntry{Kind: kind, Key: key, Descriptor: d})
		}
	}
	return out, nil
}

// Lock takes an exclusive flock on locks/<hex>.lock, polling until ctx is done.
func (s *Store) Lock(ctx context.Context, name digest.Digest) (func() error, error) {
	if _, err := evidence.ParseDigest(string(name)); err != nil {
		return nil, err
	}
	if err := s.acquire(); err != nil {
		return nil, err
	}
	fd, err := sysfile.RetryEINTR(func() (int, error) {
		return unix.Openat(s.dirs[dLocks].fd, name.Encoded()+".lock", unix.O_RDWR|unix.O_CREAT|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0o600)
	})
	s.mu.RUnlock() // the lock file's own descriptor carries the lock from here
	if err != nil {
		return nil, refuse.Wrap(CodeStoreIO, err, "open lock file")
	}
	f := os.NewFile(uintptr(fd), name.Encoded()+".lock")
	for {
		err := unix.Flock(int(f.Fd()), unix.LOCK_EX|unix.LOCK_NB)
		if err == nil {
			return func() error { return f.Close() }, nil
		}
		if !errors.Is(err, unix.EWOULDBLOCK) {
			f.Close()
			return nil, refuse.Wrap(CodeStoreIO, err, "flock %s", name)
		}
		select {
		case <-ctx.Done():
			f.Close()
			return nil, refuse.New(CodeStoreLocked, "lock %s is held by another run", name)
		case <-time.After(20 * time.Millisecond):
		}
	}
}
