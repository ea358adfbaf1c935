package store

import (
	"crypto/sha256"
	"io"
	"sync"

	"github.com/opencontainers/go-digest"

	"github.com/qinglong/ql3/evidence"
	"github.com/qinglong/ql3/refuse"
)

// viewBuffers are the buffers View lends. Get returns a slice its caller owns, so it allocates
// (and the runtime zeroes) a fresh one per call; a reader that only looks at an object, then
// drops it, reads into a reused buffer instead: no zeroing, no fresh pages to fault in.
var viewBuffers = sync.Pool{New: func() any { return new([]byte) }}

// View calls fn with the content of the object named d, after every check Get makes (the file
// checks on one fstat, one read, the hash compared with the name). The bytes are lent for the call
// only: fn must neither modify them nor keep them, or any part of them, after it returns (they are
// read over by the next View); a caller that keeps an object uses Get. View returns fn's error.
func (s *Store) View(d digest.Digest, fn func(b []byte) error) error {
	if err := s.acquire(); err != nil {
		return err
	}
	defer s.mu.RUnlock()
	if _, err := evidence.ParseDigest(string(d)); err != nil {
		return err
	}
	return viewObject(s.dirs[dSHA256].fd, d, fn)
}

// viewObject is View's read of the object d in the directory blobs, lending the bytes to fn.
func viewObject(blobs int, d digest.Digest, fn func(b []byte) error) error {
	fd, err := openRO(blobs, d.Encoded())
	if fd >= 0 {
		defer closeRaw(fd)
	}
	return viewObjectFD(plainFile(fd), err, d, fn)
}

// viewObjectFD is viewObject of the object d opened as f (or not: openErr); it does not close f.
// A file its chunk read ahead is lent from that read.
func viewObjectFD(f storeFile, openErr error, d digest.Digest, fn func(b []byte) error) error {
	size, err := objectFD(f, openErr, d)
	if err != nil {
		return err
	}
	if b, ok, err := f.ahead(size + 1); ok {
		if err != nil {
			return refuse.Wrap(CodeObjectCorrupt, err, "read object %s", d)
		}
		return lendObject(b, size, d, fn)
	}
	bp := viewBuffers.Get().(*[]byte)
	defer viewBuffers.Put(bp)
	if int64(cap(*bp)) < size+1 {
		*bp = make([]byte, size+1) // size is bounded by MaxObjectSize (checkObjectStat)
	}
	// size+1 bytes are asked for, as readSized asks: a file that grew since fstat is refused.
	n, err := preadFull(f.fd, (*bp)[:size+1])
	if err != nil {
		return refuse.Wrap(CodeObjectCorrupt, err, "read object %s", d)
	}
	return lendObject((*bp)[:n], size, d, fn)
}

// lendObject judges b, what a read of size+1 bytes of object d returned, and lends it to fn.
func lendObject(b []byte, size int64, d digest.Digest, fn func(b []byte) error) error {
	switch n := int64(len(b)); {
	case n > size:
		return refuse.New(CodeObjectCorrupt, "object %s grew while being read", d)
	case n < size:
		return refuse.Wrap(CodeObjectCorrupt, io.ErrUnexpectedEOF, "read object %s", d)
	}
	b = b[:len(b):len(b)]
	if !sumIs(sha256.Sum256(b), d.Encoded()) {
		return refuse.New(CodeObjectCorrupt, "object %s does not hash to its name", d)
	}
	return fn(b)
}

// ViewAll is View of every object in ds, on as many goroutines as there are cores: fn(i, b) is
// called with the content of ds[i] after every check View makes, lent for the call only, and
// concurrently with other calls. It returns each object's error (View's, or fn's), nil where
// none. The objects are opened, read and closed in chunks (openedFiles), so a listing that reads
// thousands of small objects makes a few system calls per chunk instead of four per object.
func (s *Store) ViewAll(ds []digest.Digest, fn func(i int, b []byte) error) []error {
	errs := make([]error, len(ds))
	if err := s.acquire(); err != nil {
		for i := range errs {
			errs[i] = err
		}
		return errs
	}
	defer s.mu.RUnlock()
	blobs := s.dirs[dSHA256].fd
	parallelChunks(int64(len(ds)), func(lo, hi int64) {
		var files openedFiles
		defer files.closeAll()
		slots := make([]int, hi-lo)
		for i := lo; i < hi; i++ {
			slots[i-lo] = -1
			if _, err := evidence.ParseDigest(string(ds[i])); err != nil {
				errs[i] = err
				continue
			}
			slots[i-lo] = files.add(blobs, ds[i].Encoded())
		}
		files.openAll()
		for i := lo; i < hi; i++ {
			slot := slots[i-lo]
			if slot < 0 {
				continue
			}
			f, err := files.file(slot)
			errs[i] = viewObjectFD(f, err, ds[i], func(b []byte) error { return fn(int(i), b) })
			files.release(slot)
		}
	})
	return errs
}
