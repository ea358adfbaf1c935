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
	fd, size, err := openObjectFD(blobs, d.Encoded(), d)
	if err != nil {
		return err
	}
	defer closeRaw(fd)
	bp := viewBuffers.Get().(*[]byte)
	defer viewBuffers.Put(bp)
	if int64(cap(*bp)) < size+1 {
		*bp = make([]byte, size+1) // size is bounded by MaxObjectSize (checkObjectStat)
	}
	// size+1 bytes are asked for, as readSized asks: a file that grew since fstat is refused.
	n, err := preadFull(fd, (*bp)[:size+1])
	switch {
	case err != nil:
		return refuse.Wrap(CodeObjectCorrupt, err, "read object %s", d)
	case int64(n) > size:
		return refuse.New(CodeObjectCorrupt, "object %s grew while being read", d)
	case int64(n) < size:
		return refuse.Wrap(CodeObjectCorrupt, io.ErrUnexpectedEOF, "read object %s", d)
	}
	b := (*bp)[:n:n]
	if !sumIs(sha256.Sum256(b), d.Encoded()) {
		return refuse.New(CodeObjectCorrupt, "object %s does not hash to its name", d)
	}
	return fn(b)
}
