// Package store is ql3's content-addressed evidence store (DESIGN §7): OCI image-layout blobs
// under blobs/sha256/, no-replace index pointers under index/<kind>/, staging under tmp/ and
// per-command lock files under locks/.
package store

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"

	"io"
	"os"
	"path/filepath"
	"sync"

	"time"

	"github.com/opencontainers/go-digest"
	"golang.org/x/sys/unix"

	"github.com/qinglong/ql3/evidence"
	"github.com/qinglong/ql3/internal/refuse"
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

var subdirs = []string{"blobs", "blobs/sha256", "index", "index/" + evidence.IndexReceipts,
	"index/" + evidence.IndexIntents, "index/" + evidence.IndexPreflights, "tmp", "locks"}

// Store is an opened, validated store.
type Store struct{ root string }

// Root is the store's absolute path.
func (s *Store) Root() string { return s.root }

// Init creates the store at root (its parent must exist) or opens an existing valid one.
func Init(root string) (*Store, error) {
	if err := checkPath(root); err != nil {
		return nil, err
	}
	if err := os.Mkdir(root, 0o700); err != nil && !errors.Is(err, os.ErrExist) {
		return nil, refuse.Wrap(CodeStoreIO, err, "create store root %s", root)
	}
	for _, d := range subdirs {
		if err := os.Mkdir(filepath.Join(root, d), 0o700); err != nil && !errors.Is(err, os.ErrExist) {
			return nil, refuse.Wrap(CodeStoreIO, err, "create %s", d)
		}
	}
	s := &Store{root: root}
	mp := filepath.Join(root, markerName)
	if _, err := os.Lstat(mp); errors.Is(err, os.ErrNotExist) {
		if err := s.commit(mp, []byte(marker)); err != nil {
			return nil, err
		}
	}
	return Open(root)
}

func checkPath(root string) error {
	if !filepath.IsAbs(root) || filepath.Clean(root) != root {
		return refuse.New(CodeStoreRoot, "store path %q is not absolute and clean", root)
	}
	return nil
}

// Open validates and opens the store at root.
func Open(root string) (*Store, error) {
	if err := checkPath(root); err != nil {
		return nil, err
	}
	if r, err := filepath.EvalSymlinks(root); err != nil || r != root {
		return nil, refuse.New(CodeStoreRoot, "store path %q is missing or has a symlink component", root)
	}
	for _, d := range append([]string{"."}, subdirs...) {
		if err := checkDir(filepath.Join(root, d), d); err != nil {
			return nil, err
		}
	}
	b, err := os.ReadFile(filepath.Join(root, markerName))
	if err != nil || string(b) != marker {
		return nil, refuse.New(CodeStoreMarker, "store marker %s missing or invalid", markerName)
	}
	return &Store{root: root}, nil
}

func checkDir(p, name string) error {
	var st unix.Stat_t
	if err := unix.Lstat(p, &st); err != nil {
		return refuse.Wrap(CodeStoreRoot, err, "store directory %s", name)
	}
	if st.Mode&unix.S_IFMT != unix.S_IFDIR {
		return refuse.New(CodeStoreRoot, "store entry %s is not a directory", name)
	}
	if st.Mode&0o7777 != 0o700 {
		return refuse.New(CodeStoreMode, "store directory %s has mode %04o, want 0700", name, st.Mode&0o7777)
	}
	if int(st.Uid) != os.Getuid() {
		return refuse.New(CodeStoreOwner, "store directory %s is owned by uid %d, not %d", name, st.Uid, os.Getuid())
	}
	return nil
}

// commitHook, when set by tests, runs after the staged file is written and before it is linked.
var commitHook func()

// commit writes b to final with the no-replace staged-link protocol. It returns errExists with
// nothing changed when final already exists.
func (s *Store) commit(final string, b []byte) error {
	tmp, err := os.CreateTemp(filepath.Join(s.root, "tmp"), "stage-")
	if err != nil {
		return refuse.Wrap(CodeStoreIO, err, "create staging file")
	}
	name := tmp.Name()
	defer os.Remove(name)
	n, err := tmp.Write(b)
	if err == nil && n != len(b) {
		err = io.ErrShortWrite
	}
	if err == nil {
		err = tmp.Chmod(ObjectMode)
	}
	if err == nil {
		err = tmp.Sync()
	}
	if cerr := tmp.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return refuse.Wrap(CodeStoreIO, err, "write staging file")
	}
	if commitHook != nil {
		commitHook()
	}
	// rename with RENAME_NOREPLACE, not link(2): the committed name never has a second link, so
	// a concurrent reader never sees link count 2 on a good object.
	if err := unix.Renameat2(unix.AT_FDCWD, name, unix.AT_FDCWD, final, unix.RENAME_NOREPLACE); err != nil {
		if errors.Is(err, unix.EEXIST) {
			return errExists
		}
		return refuse.Wrap(CodeStoreIO, err, "rename object into place")
	}
	if err := syncDir(filepath.Dir(final)); err != nil {
		return err
	}
	return nil
}

var errExists = errors.New("store: name exists")

func syncDir(dir string) error {
	f, err := os.Open(dir)
	if err != nil {
		return refuse.Wrap(CodeStoreIO, err, "open directory for fsync")
	}
	defer f.Close()
	if err := f.Sync(); err != nil {
		return refuse.Wrap(CodeStoreIO, err, "fsync directory")
	}
	return nil
}

func (s *Store) blobPath(d digest.Digest) string {
	return filepath.Join(s.root, "blobs", "sha256", d.Encoded())
}

// PutBlob stores b verbatim. Putting existing content is a no-op.
func (s *Store) PutBlob(mediaType string, b []byte) (evidence.Descriptor, error) {
	if len(b) > MaxObjectSize {
		return evidence.Descriptor{}, refuse.New(CodeObjectTooLarge, "object of %d bytes exceeds %d", len(b), MaxObjectSize)
	}
	sum := sha256.Sum256(b)
	d := digest.NewDigestFromEncoded(digest.SHA256, hex.EncodeToString(sum[:]))
	desc := evidence.Descriptor{MediaType: mediaType, Digest: d, Size: int64(len(b))}
	err := s.commit(s.blobPath(d), b)
	if errors.Is(err, errExists) {
		if _, gerr := s.Get(d); gerr != nil {
			return evidence.Descriptor{}, gerr
		}
		return desc, nil
	}
	return desc, err
}

// PutRecord stores the canonical bytes of record v under mediaType, whose schema v must carry.
func (s *Store) PutRecord(mediaType string, v any) (evidence.Descriptor, []byte, error) {
	if _, ok := evidence.RecordSchema(mediaType); !ok {
		return evidence.Descriptor{}, nil, refuse.New(CodeMediaType, "media type %q is not a record media type", mediaType)
	}
	b, err := evidence.MarshalRecord(v)
	if err != nil {
		return evidence.Descriptor{}, nil, err
	}
	var probe map[string]any
	if err := evidence.DecodeRecord(mediaType, b, &probe); err != nil {
		return evidence.Descriptor{}, nil, err
	}
	d, err := s.PutBlob(mediaType, b)
	return d, b, err
}

// Get returns the object named d after checking its file and re-hashing its content.
func (s *Store) Get(d digest.Digest) ([]byte, error) {
	if _, err := evidence.ParseDigest(string(d)); err != nil {
		return nil, err
	}
	return readObject(s.blobPath(d), d)
}

// openObject opens the object file at p without following a symlink and checks its stat.
func openObject(p string, d digest.Digest) (*os.File, int64, error) {
	fd, err := unix.Open(p, unix.O_RDONLY|unix.O_NOFOLLOW|unix.O_CLOEXEC|unix.O_NONBLOCK, 0)
	if err != nil {
		if errors.Is(err, unix.ENOENT) {
			return nil, 0, refuse.New(CodeObjectNotFound, "object %s not found", d)
		}
		if errors.Is(err, unix.ELOOP) {
			return nil, 0, refuse.New(CodeObjectNotRegular, "object %s is a symlink", d)
		}
		return nil, 0, refuse.Wrap(CodeStoreIO, err, "open object %s", d)
	}
	f := os.NewFile(uintptr(fd), p)
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		f.Close()
		return nil, 0, refuse.Wrap(CodeStoreIO, err, "stat object %s", d)
	}
	if err := checkObjectStat(&st, d); err != nil {
		f.Close()
		return nil, 0, err
	}
	return f, st.Size, nil
}

func readObject(p string, d digest.Digest) ([]byte, error) {
	f, size, err := openObject(p, d)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	// Presize from fstat (bounded above), then insist the file ends there: a file that grows
	// between fstat and read is refused rather than read in part.
	b := make([]byte, size)
	if _, err := io.ReadFull(f, b); err != nil {
		return nil, refuse.Wrap(CodeObjectCorrupt, err, "read object %s", d)
	}
	if n, _ := f.Read(make([]byte, 1)); n != 0 {
		return nil, refuse.New(CodeObjectCorrupt, "object %s grew while being read", d)
	}
	if evidence.FromBytes(b) != d {
		return nil, refuse.New(CodeObjectCorrupt, "object %s does not hash to its name", d)
	}
	return b, nil
}

// hashBuffers are the chunk buffers of checkObject, reused so that a walk over a large store
// neither allocates nor faults in fresh memory per object.
var hashBuffers = sync.Pool{New: func() any { b := make([]byte, 1<<20); return &b }}

// checkObject is Get without keeping the bytes: the same file checks, the content streamed
// through SHA-256 in chunks. It returns the object's size.
func checkObject(p string, d digest.Digest) (int64, error) {
	f, size, err := openObject(p, d)
	if err != nil {
		return 0, err
	}
	defer f.Close()
	buf := hashBuffers.Get().(*[]byte)
	defer hashBuffers.Put(buf)
	h := sha256.New()
	n, err := io.CopyBuffer(h, io.LimitReader(f, size+1), *buf)
	switch {
	case err != nil:
		return 0, refuse.Wrap(CodeObjectCorrupt, err, "read object %s", d)
	case n > size:
		return 0, refuse.New(CodeObjectCorrupt, "object %s grew while being read", d)
	case n < size:
		return 0, refuse.New(CodeObjectCorrupt, "object %s shrank while being read", d)
	case hex.EncodeToString(h.Sum(nil)) != d.Encoded():
		return 0, refuse.New(CodeObjectCorrupt, "object %s does not hash to its name", d)
	}
	return size, nil
}

func checkObjectStat(st *unix.Stat_t, d digest.Digest) error {
	switch {
	case st.Mode&unix.S_IFMT != unix.S_IFREG:
		return refuse.New(CodeObjectNotRegular, "object %s is not a regular file", d)
	case st.Mode&0o7777 != ObjectMode:
		return refuse.New(CodeObjectMode, "object %s has mode %04o, want 0400", d, st.Mode&0o7777)
	case int(st.Uid) != os.Getuid():
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
	b, err := s.Get(d.Digest)
	if err != nil {
		return nil, err
	}
	if int64(len(b)) != d.Size {
		return nil, refuse.New(CodeObjectSize, "object %s has %d bytes, descriptor says %d", d.Digest, len(b), d.Size)
	}
	if _, ok := evidence.RecordSchema(d.MediaType); ok {
		var probe map[string]any
		if err := evidence.DecodeRecord(d.MediaType, b, &probe); err != nil {
			return nil, err
		}
	}
	return b, nil
}

func checkKind(kind string) error {
	switch kind {
	case evidence.IndexReceipts, evidence.IndexIntents, evidence.IndexPreflights, evidence.IndexLiveAudits:
		return nil
	}
	return refuse.New(CodeIndexKind, "unknown index kind %q", kind)
}

// optionalKinds are the index kinds added after stores were first written: their directory is
// made by the first entry, so an older store opens, lists and audits unchanged.
var optionalKinds = map[string]bool{evidence.IndexLiveAudits: true}

// optionalKindDir checks an optional kind's directory as Open checks the others, creating it
// first when create is set.
func (s *Store) optionalKindDir(kind string, create bool) error {
	if !optionalKinds[kind] {
		return nil
	}
	p := filepath.Join(s.root, "index", kind)
	if create {
		if err := os.Mkdir(p, 0o700); err != nil && !errors.Is(err, os.ErrExist) {
			return refuse.Wrap(CodeStoreIO, err, "create index/%s", kind)
		}
	}
	return checkDir(p, "index/"+kind)
}

// maxIndexEntry bounds an index entry: one canonical descriptor is under 300 bytes.
const maxIndexEntry = 4 << 10

// PutIndex records key -> d under kind, never replacing a different entry.
func (s *Store) PutIndex(kind string, key digest.Digest, d evidence.Descriptor) error {
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
	if err := s.optionalKindDir(kind, true); err != nil {
		return err
	}
	p := filepath.Join(s.root, "index", kind, key.Encoded())
	err = s.commit(p, b)
	if errors.Is(err, errExists) {
		old, ok, gerr := s.GetIndex(kind, key)
		if gerr != nil {
			return gerr
		}
		if !ok || old != d {
			return refuse.New(CodeIndexConflict, "index %s entry %s exists with another descriptor", kind, key)
		}
		return nil
	}
	return err
}

// GetIndex returns the descriptor stored under kind/key.
func (s *Store) GetIndex(kind string, key digest.Digest) (evidence.Descriptor, bool, error) {
	if err := checkKind(kind); err != nil {
		return evidence.Descriptor{}, false, err
	}
	if _, err := evidence.ParseDigest(string(key)); err != nil {
		return evidence.Descriptor{}, false, err
	}
	p := filepath.Join(s.root, "index", kind, key.Encoded())
	// An entry is held to an object's file rules (no symlink, regular, 0400, owner, one link),
	// so that it cannot be swapped for a file outside the store or another writer's file.
	f, _, err := openObject(p, key)
	if refuse.CodeOf(err) == CodeObjectNotFound {
		return evidence.Descriptor{}, false, nil
	}
	if err != nil {
		return evidence.Descriptor{}, false, refuse.Wrap(CodeIndexCorrupt, err, "index %s entry %s", kind, key)
	}
	b, err := io.ReadAll(io.LimitReader(f, maxIndexEntry+1))
	f.Close()
	if err != nil {
		return evidence.Descriptor{}, false, refuse.Wrap(CodeStoreIO, err, "read index %s entry %s", kind, key)
	}
	if len(b) > maxIndexEntry {
		return evidence.Descriptor{}, false, refuse.New(CodeIndexCorrupt, "index %s entry %s is larger than %d bytes", kind, key, maxIndexEntry)
	}
	var d evidence.Descriptor
	if err := evidence.DecodeStrict(b, &d); err != nil {
		return evidence.Descriptor{}, false, refuse.Wrap(CodeIndexCorrupt, err, "index %s entry %s", kind, key)
	}
	if c, err := evidence.Canonicalize(b); err != nil || !bytes.Equal(c, b) {
		return evidence.Descriptor{}, false, refuse.New(CodeIndexCorrupt, "index %s entry %s is not canonical", kind, key)
	}
	return d, true, nil
}

// IndexEntry is one index pointer.
type IndexEntry struct {
	Kind       string              `json:"kind"`
	Key        digest.Digest       `json:"key"`
	Descriptor evidence.Descriptor `json:"descriptor"`
}

// ListIndex returns every entry of kind, sorted by key.
func (s *Store) ListIndex(kind string) ([]IndexEntry, error) {
	if err := checkKind(kind); err != nil {
		return nil, err
	}
	ents, err := os.ReadDir(filepath.Join(s.root, "index", kind))
	if errors.Is(err, os.ErrNotExist) && optionalKinds[kind] {
		return nil, nil // a store written before the kind existed
	}
	if err != nil {
		return nil, refuse.Wrap(CodeStoreIO, err, "list index %s", kind)
	}
	if err := s.optionalKindDir(kind, false); err != nil {
		return nil, err
	}
	var out []IndexEntry
	for _, e := range ents {
		key, err := evidence.ParseDigest("sha256:" + e.Name())
		if err != nil {
			return nil, refuse.Wrap(CodeIndexCorrupt, err, "index %s has a stray entry", kind)
		}
		d, _, err := s.GetIndex(kind, key)
		if err != nil {
			return nil, err
		}
		out = append(out, IndexEntry{Kind: kind, Key: key, Descriptor: d})
	}
	return out, nil
}

// Lock takes an exclusive flock on locks/<hex>.lock, polling until ctx is done.
func (s *Store) Lock(ctx context.Context, name digest.Digest) (func() error, error) {
	if _, err := evidence.ParseDigest(string(name)); err != nil {
		return nil, err
	}
	p := filepath.Join(s.root, "locks", name.Encoded()+".lock")
	f, err := os.OpenFile(p, os.O_RDWR|os.O_CREATE|unix.O_NOFOLLOW, 0o600)
	if err != nil {
		return nil, refuse.Wrap(CodeStoreIO, err, "open lock file")
	}
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
