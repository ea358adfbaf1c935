package store

import (
	"sync"

	"golang.org/x/sys/unix"

	"github.com/qinglong/ql3/internal/uring"
)

// openedFiles opens, reads and closes the files of one chunk of a bulk read (a log verify's
// leaves, or its index entries and records) together: through an io_uring, one system call for
// the chunk's opens, one for its reads and one for its closes, where the plain path makes one of
// each per file. On this project's VMs a system call's trap costs 1.5 to 3 µs before any work,
// and a file was four of them (docs/testbed.md, "Fewer traps per file").
//
// The checks are unchanged. Each file is opened with openRO's flags relative to a held directory
// and fstat'ed through its own descriptor (a plain fstat(2): the ring's statx is always handed to
// a kernel worker thread, which costs more than the trap it saves); a regular file of at most
// maxPrefetch bytes is then read whole, size+1 bytes asked at offset 0, as preadFull asks. The
// functions that judge a file (objectFD, readLeafFD, decodeEntry, viewObjectFD, checkObjectFD)
// take that stat and those bytes from its storeFile instead of asking the kernel again, and
// never close it.
//
// Without a ring (no io_uring here, or it failed) each file is opened when it is used and closed
// at release, and read by its judge, exactly as before.
type openedFiles struct {
	ring   *uring.Ring
	dirfds []int
	names  []string
	fds    []int // the ring's results: a descriptor or -errno; nil on the plain path
	plain  []int // the plain path's open descriptors, by slot (-1: none)
	// The prefetch, by slot: the fstat, whether it succeeded, and the read (ns: bytes or -errno;
	// bufs: nil where nothing was read).
	stats  []unix.Stat_t
	statOK []bool
	bufs   [][]byte
	ns     []int
	arena  *[]byte
}

// maxPrefetch is the largest file a chunk reads ahead: index entries, leaves and the records of
// a history are a few KiB; a larger record is read by its judge.
const maxPrefetch = 64 << 10

// prefetchArenas are the chunks' read buffers, reused: a history reads tens of MB of records.
var prefetchArenas = sync.Pool{New: func() any { return new([]byte) }}

// storeFile is one open store file and what its chunk already read of it.
type storeFile struct {
	fd  int
	st  *unix.Stat_t // the chunk's fstat of fd; nil: none, fstat it
	pre []byte       // the chunk's read: len(pre) bytes asked at offset 0; nil: none
	n   int          // what that read returned: bytes, or -errno
}

// plainFile is fd with nothing read ahead.
func plainFile(fd int) storeFile { return storeFile{fd: fd} }

// fstat is fstat(2) of the file, or the chunk's.
func (f storeFile) fstat(st *unix.Stat_t) error {
	if f.st != nil {
		*st = *f.st
		return nil
	}
	return fstatRaw(f.fd, st)
}

// ahead returns the chunk's read of the file when it asked for exactly want bytes at offset 0,
// completed by plain preads where the ring's read returned less than the file's size (preadFull
// would have read on); ok is false when the chunk read nothing of it. The bytes are the chunk's,
// valid until its closeAll.
func (f storeFile) ahead(want int64) (b []byte, ok bool, err error) {
	if f.pre == nil || int64(len(f.pre)) != want {
		return nil, false, nil
	}
	if f.n < 0 {
		return nil, true, unix.Errno(-f.n)
	}
	n := f.n
	if n < len(f.pre)-1 {
		if n, err = preadFullFrom(f.fd, f.pre, n); err != nil {
			return nil, true, err
		}
	}
	return f.pre[:n], true, nil
}

// readFull is preadFull(f.fd, buf), served from the chunk's read when it asked for len(buf).
func (f storeFile) readFull(buf []byte) (int, error) {
	b, ok, err := f.ahead(int64(len(buf)))
	if !ok {
		return preadFull(f.fd, buf)
	}
	if err != nil {
		return 0, err
	}
	return copy(buf, b), nil
}

// add names the file name in dirfd for the chunk, and returns its slot.
func (o *openedFiles) add(dirfd int, name string) int {
	o.dirfds = append(o.dirfds, dirfd)
	o.names = append(o.names, name)
	return len(o.names) - 1
}

// openAll opens every added file through a ring, when there is one, and reads ahead each
// regular file of at most maxPrefetch bytes.
func (o *openedFiles) openAll() {
	o.ring = uring.Get()
	if o.ring == nil {
		return
	}
	o.fds = make([]int, len(o.names))
	if err := o.ring.Open(o.dirfds, o.names, openFlags|unix.O_NOATIME, o.fds); err != nil {
		o.ring, o.fds = nil, nil // what the failed submission opened is left open, never closed twice
		return
	}
	o.stats = make([]unix.Stat_t, len(o.names))
	o.statOK = make([]bool, len(o.names))
	o.bufs = make([][]byte, len(o.names))
	o.ns = make([]int, len(o.names))
	// Each file read ahead is given size+1 bytes of one arena; ns holds that length until the
	// read replaces it with the read's result. Regular files only (uring.Read's contract): a FIFO
	// or a device is never read ahead, and its judge refuses it before any read, as on the plain
	// path.
	total := 0
	for i, fd := range o.fds {
		if fd < 0 || fstatRaw(fd, &o.stats[i]) != nil {
			continue
		}
		o.statOK[i] = true
		if st := &o.stats[i]; st.Mode&unix.S_IFMT == unix.S_IFREG && st.Size >= 0 && st.Size <= maxPrefetch {
			o.ns[i] = int(st.Size) + 1
			total += o.ns[i]
		}
	}
	o.arena = prefetchArenas.Get().(*[]byte)
	if cap(*o.arena) < total {
		*o.arena = make([]byte, total)
	}
	a := (*o.arena)[:total]
	for i, k := range o.ns {
		if k > 0 {
			o.bufs[i], a = a[:k:k], a[k:]
		}
	}
	if err := o.ring.Read(o.fds, o.bufs, o.ns); err != nil {
		// The buffers now belong to the broken ring (never reused); the descriptors are closed
		// one by one, and the chunk goes on plainly.
		o.arena = nil
		o.closeUnring()
	}
}

// closeUnring is the ring's failure after the opens: the descriptors are closed one by one and
// the chunk goes on plainly, each file opened again when used.
func (o *openedFiles) closeUnring() {
	for _, fd := range o.fds {
		if fd >= 0 {
			closeRaw(fd)
		}
	}
	o.ring, o.fds, o.plain, o.stats, o.statOK, o.bufs, o.ns = nil, nil, nil, nil, nil, nil, nil
}

// file returns slot's file, or the open's error, as openRO would give them.
func (o *openedFiles) file(slot int) (storeFile, error) {
	if o.fds == nil {
		if o.plain == nil {
			o.plain = make([]int, len(o.names))
			for i := range o.plain {
				o.plain[i] = -1
			}
		}
		o.release(slot)
		fd, err := openRO(o.dirfds[slot], o.names[slot])
		o.plain[slot] = fd
		return plainFile(fd), err
	}
	fd := o.fds[slot]
	if fd >= 0 {
		f := storeFile{fd: fd}
		if o.statOK[slot] {
			f.st = &o.stats[slot]
		}
		if o.bufs[slot] != nil {
			f.pre, f.n = o.bufs[slot], o.ns[slot]
		}
		return f, nil
	}
	switch err := unix.Errno(-fd); err {
	case unix.EPERM, unix.EMFILE, unix.ENFILE, unix.EAGAIN, unix.EINTR, unix.ENAMETOOLONG, unix.EINVAL:
		// O_NOATIME on another owner's file (openRO retries without it), a moment short of
		// descriptors while the chunk's are open, or a name the ring does not pass (longer
		// than uring.MaxName, or with a NUL): the file is opened alone, as the plain path
		// would, and closed with the chunk.
		fd, err := openRO(o.dirfds[slot], o.names[slot])
		o.fds[slot] = fd
		return plainFile(fd), err
	default:
		return plainFile(-1), err
	}
}

// release is done with slot's file: the plain path closes it now, a ring's at closeAll.
func (o *openedFiles) release(slot int) {
	if o.plain != nil && o.plain[slot] >= 0 {
		closeRaw(o.plain[slot])
		o.plain[slot] = -1
	}
}

// closeAll closes what is still open and readies o for the next chunk.
func (o *openedFiles) closeAll() {
	if o.ring != nil {
		o.ring.CloseAll(o.fds)
		uring.Put(o.ring)
	}
	for _, fd := range o.plain {
		if fd >= 0 {
			closeRaw(fd)
		}
	}
	if o.arena != nil {
		prefetchArenas.Put(o.arena)
	}
	*o = openedFiles{dirfds: o.dirfds[:0], names: o.names[:0]}
}
