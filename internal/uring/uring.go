//go:build linux

// Package uring opens and closes many files with few system calls, through an io_uring: the
// store's bulk readers (log verify, history) open tens of thousands of small files, and on the
// shared VMs a system call's trap costs 1.5 to 3 µs before the kernel does any work
// (docs/testbed.md, "Fewer traps per file"). A batch of openat(2)s, of reads, or of close(2)s is
// one io_uring_enter(2).
//
// Every call waits for all of its requests to complete before it returns, so that the kernel
// holds no pointer into Go memory after it (openat copies its name when the request is
// prepared; a read fills its buffer before it completes). Go's heap does not move; the names and
// buffers passed are on the heap. A ring that fails mid-call is never used again, and the
// buffers it was given are kept reachable for good (Read).
//
// A kernel without io_uring, or one that refuses it (io_uring_disabled, a seccomp filter, a
// kernel before 5.10, without the restrictions newRing sets or the operations it probes), is no
// error: Get returns nil and the caller makes the plain system calls.
package uring

import (
	"errors"
	"strings"
	"sync"
	"sync/atomic"
	"unsafe"

	"golang.org/x/sys/unix"
)

// Entries is the submission queue's size: the most requests one call submits.
const Entries = 128

// MaxName is the longest name Open passes through the ring (the store's names are at most 64
// bytes); a longer one is -ENAMETOOLONG in its result, for the caller's plain open to judge.
const MaxName = 127

const (
	opOpenat = 18 // IORING_OP_OPENAT
	opClose  = 19 // IORING_OP_CLOSE
	opRead   = 22 // IORING_OP_READ

	enterGetEvents = 1 // IORING_ENTER_GETEVENTS
	registerProbe  = 8 // IORING_REGISTER_PROBE
	opSupported    = 1 // IO_URING_OP_SUPPORTED

	setupRDisabled       = 1 << 6 // IORING_SETUP_R_DISABLED
	registerRestrictions = 11     // IORING_REGISTER_RESTRICTIONS
	registerEnableRings  = 12     // IORING_REGISTER_ENABLE_RINGS
	restrictionSQEOp     = 1      // IORING_RESTRICTION_SQE_OP

	offSQRing = 0
	offSQEs   = 0x10000000

	featSingleMmap = 1 // IORING_FEAT_SINGLE_MMAP
)

// params is struct io_uring_params.
type params struct {
	sqEntries, cqEntries, flags, sqThreadCPU, sqThreadIdle, features, wqFd uint32
	resv                                                                   [3]uint32
	sqOff                                                                  sqRingOffsets
	cqOff                                                                  cqRingOffsets
}

type sqRingOffsets struct {
	head, tail, ringMask, ringEntries, flags, dropped, array, resv1 uint32
	userAddr                                                        uint64
}

type cqRingOffsets struct {
	head, tail, ringMask, ringEntries, overflow, cqes, flags, resv1 uint32
	userAddr                                                        uint64
}

// sqe is struct io_uring_sqe (64 bytes).
type sqe struct {
	opcode, flags uint8
	ioprio        uint16
	fd            int32
	off           uint64
	addr          uint64
	len           uint32
	opFlags       uint32
	userData      uint64
	bufIndex      uint16
	personality   uint16
	fileIndex     uint32
	addr3, pad    uint64
}

// cqe is struct io_uring_cqe.
type cqe struct {
	userData uint64
	res      int32
	flags    uint32
}

// Ring is one io_uring, used by one goroutine at a time (Get and Put hand it over).
type Ring struct {
	fd             int
	sqTail, sqMask *uint32
	cqHead, cqTail *uint32
	cqMask         *uint32
	sqArray        []uint32
	sqes           []sqe
	cqes           []cqe
	// names holds the NUL-terminated names of one Open: the kernel reads them while the requests
	// are submitted, from this heap array (a goroutine's stack may move, the heap does not).
	names *[Entries][MaxName + 1]byte
	// broken: a submission failed in a way that leaves its requests' fate unknown; the ring is
	// never used again (nor unmapped: the kernel may still complete into it).
	broken bool
}

var (
	mu       sync.Mutex
	free     []*Ring
	disabled atomic.Bool // set by Disable, or once setup has failed: every Get is nil from then on
)

// Disable makes every later Get return nil: the tests run the plain path with it.
func Disable() { disabled.Store(true) }

// Enable undoes Disable (tests only); where setup failed, the next Get tries it once more.
func Enable() { disabled.Store(false) }

// Get returns a ring for the caller's use, or nil when io_uring cannot be used here. Give it back
// with Put. Rings are kept for the life of the process: at most as many as goroutines used them
// at once, each a descriptor and a few KiB of shared memory.
func Get() *Ring {
	if disabled.Load() {
		return nil
	}
	mu.Lock()
	if n := len(free); n > 0 {
		r := free[n-1]
		free = free[:n-1]
		mu.Unlock()
		return r
	}
	mu.Unlock()
	r, err := newRing()
	if err != nil {
		disabled.Store(true)
		return nil
	}
	return r
}

// Put gives r back for another Get. A nil or broken ring is dropped.
func Put(r *Ring) {
	if r == nil || r.broken {
		return
	}
	mu.Lock()
	free = append(free, r)
	mu.Unlock()
}

// errUnsupported: the kernel's io_uring lacks an operation this package submits.
var errUnsupported = errors.New("io_uring lacks openat, close or read")

// newRing sets up a ring that can do nothing but open, read and close: it is created disabled,
// restricted to those three operations (IORING_REGISTER_RESTRICTIONS: the kernel refuses any
// other request on it, and every register operation, with EACCES), then enabled. The ring's
// requests are not system calls, so strace cannot see them: what a ql3 process can ask of its
// rings is bounded by the kernel, not only by this package's code (the auditor's guarantee that
// it opens no socket, audit/noexec_test.go, stays true). A kernel without restrictions (before
// 5.10) gets no ring.
func newRing() (*Ring, error) {
	p := params{flags: setupRDisabled}
	fd, _, e := unix.Syscall(unix.SYS_IO_URING_SETUP, Entries, uintptr(unsafe.Pointer(&p)), 0)
	if e != 0 {
		return nil, e
	}
	r := &Ring{fd: int(fd), names: new([Entries][MaxName + 1]byte)}
	if err := r.setup(&p); err != nil {
		unix.Close(r.fd)
		return nil, err
	}
	return r, nil
}

// restriction is struct io_uring_restriction.
type restriction struct {
	opcode uint16
	op     uint8
	resv   uint8
	resv2  [3]uint32
}

func (r *Ring) setup(p *params) error {
	if p.features&featSingleMmap == 0 {
		return errUnsupported // kernels before 5.4, which also lack IORING_OP_OPENAT
	}
	if err := r.probe(); err != nil {
		return err
	}
	res := []restriction{{opcode: restrictionSQEOp, op: opOpenat}, {opcode: restrictionSQEOp, op: opRead}, {opcode: restrictionSQEOp, op: opClose}}
	if _, _, e := unix.Syscall6(unix.SYS_IO_URING_REGISTER, uintptr(r.fd), registerRestrictions, uintptr(unsafe.Pointer(&res[0])), uintptr(len(res)), 0, 0); e != 0 {
		return e
	}
	if _, _, e := unix.Syscall6(unix.SYS_IO_URING_REGISTER, uintptr(r.fd), registerEnableRings, 0, 0, 0, 0); e != 0 {
		return e
	}
	size := max(int(p.sqOff.array)+int(p.sqEntries)*4, int(p.cqOff.cqes)+int(p.cqEntries)*int(unsafe.Sizeof(cqe{})))
	m, err := unix.Mmap(r.fd, offSQRing, size, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED|unix.MAP_POPULATE)
	if err != nil {
		return err
	}
	s, err := unix.Mmap(r.fd, offSQEs, int(p.sqEntries)*int(unsafe.Sizeof(sqe{})), unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED|unix.MAP_POPULATE)
	if err != nil {
		unix.Munmap(m)
		return err
	}
	u32 := func(off uint32) *uint32 { return (*uint32)(unsafe.Pointer(&m[off])) }
	r.sqTail, r.sqMask = u32(p.sqOff.tail), u32(p.sqOff.ringMask)
	r.cqHead, r.cqTail, r.cqMask = u32(p.cqOff.head), u32(p.cqOff.tail), u32(p.cqOff.ringMask)
	r.sqArray = unsafe.Slice((*uint32)(unsafe.Pointer(&m[p.sqOff.array])), p.sqEntries)
	r.sqes = unsafe.Slice((*sqe)(unsafe.Pointer(&s[0])), p.sqEntries)
	r.cqes = unsafe.Slice((*cqe)(unsafe.Pointer(&m[p.cqOff.cqes])), p.cqEntries)
	return nil
}

// probe checks that the kernel supports every operation submitted here (IORING_REGISTER_PROBE):
// a request of an unknown opcode would complete with -EINVAL, which a caller would take for the
// file's own error.
func (r *Ring) probe() error {
	const nOps = 64
	var pr struct {
		lastOp, opsLen uint8
		resv           uint16
		resv2          [3]uint32
		ops            [nOps]struct {
			op, resv uint8
			flags    uint16
			resv2    uint32
		}
	}
	if _, _, e := unix.Syscall6(unix.SYS_IO_URING_REGISTER, uintptr(r.fd), registerProbe, uintptr(unsafe.Pointer(&pr)), nOps, 0, 0); e != 0 {
		return e
	}
	for _, op := range []uint8{opOpenat, opClose, opRead} {
		if op > pr.lastOp || pr.ops[op].flags&opSupported == 0 {
			return errUnsupported
		}
	}
	return nil
}

// Open opens each names[i] relative to dirfds[i] with flags (the flags openat(2) takes, mode 0:
// never O_CREAT) and sets fds[i] to the new descriptor or to -errno (-ENAMETOOLONG for a name
// longer than MaxName, -ENOENT for an empty one, -EINVAL for one with a NUL byte, without
// asking the kernel). It makes one io_uring_enter(2) per Entries names. It fails only when the
// ring does: the requests' outcome is then unknown (a descriptor it opened may be leaked), and
// the caller opens the names itself.
func (r *Ring) Open(dirfds []int, names []string, flags int, fds []int) error {
	for lo := 0; lo < len(names); {
		n := 0
		for ; lo < len(names) && n < Entries; lo++ {
			switch name := names[lo]; {
			case len(name) > MaxName:
				fds[lo] = -int(unix.ENAMETOOLONG)
				continue
			case name == "":
				fds[lo] = -int(unix.ENOENT)
				continue
			case strings.IndexByte(name, 0) >= 0:
				fds[lo] = -int(unix.EINVAL) // as openat(2) through unix.Openat: the name would end early
				continue
			}
			copy(r.names[n][:], names[lo])
			r.names[n][len(names[lo])] = 0
			s := r.next()
			s.opcode, s.fd, s.opFlags, s.userData = opOpenat, int32(dirfds[lo]), uint32(flags), uint64(lo)
			s.addr = uint64(uintptr(unsafe.Pointer(&r.names[n][0])))
			n++
		}
		if err := r.submit(n, func(c *cqe) { fds[c.userData] = int(c.res) }); err != nil {
			return err
		}
	}
	return nil
}

// CloseAll closes every descriptor in fds that is not negative. Its errors are not returned:
// Linux releases a descriptor even when close reports an error, and a reader has nothing to
// flush. When the ring fails, the rest are closed one by one.
func (r *Ring) CloseAll(fds []int) {
	for lo := 0; lo < len(fds); {
		n := 0
		for ; lo < len(fds) && n < Entries; lo++ {
			if fds[lo] >= 0 {
				s := r.next()
				s.opcode, s.fd = opClose, int32(fds[lo])
				n++
			}
		}
		if err := r.submit(n, func(*cqe) {}); err != nil {
			// Whether this batch's descriptors were closed is unknown: they are left open
			// rather than closed twice (a second close could close another goroutine's
			// file that reused the number). The rest are closed one by one.
			for _, fd := range fds[lo:] {
				if fd >= 0 {
					unix.Close(fd)
				}
			}
			return
		}
	}
}

// Read reads bufs[i] from fds[i] at offset 0 (as one pread(2) would) for every i with a
// non-negative descriptor, and sets ns[i] to the bytes read or to -errno. It waits for every
// read to complete before it returns, so that the kernel writes into no buffer after that.
// The descriptors must be of regular files: the ring reads a pipe or a socket as a stream,
// whatever the offset, and a read that waits for data would wait for good.
//
// It fails only when the ring does. The reads' fate is then unknown: the kernel may still write
// into bufs, which therefore belong to the ring from then on (kept reachable for the life of
// the process, never freed), and the caller must not reuse them.
func (r *Ring) Read(fds []int, bufs [][]byte, ns []int) error {
	for lo := 0; lo < len(fds); {
		n := 0
		for ; lo < len(fds) && n < Entries; lo++ {
			if fds[lo] < 0 || len(bufs[lo]) == 0 {
				continue
			}
			s := r.next()
			s.opcode, s.fd, s.addr, s.len, s.userData = opRead, int32(fds[lo]), uint64(uintptr(unsafe.Pointer(&bufs[lo][0]))), uint32(len(bufs[lo])), uint64(lo)
			n++
		}
		if err := r.submit(n, func(c *cqe) { ns[c.userData] = int(c.res) }); err != nil {
			abandoned.Lock()
			abandoned.bufs = append(abandoned.bufs, bufs)
			abandoned.Unlock()
			return err
		}
	}
	return nil
}

// abandoned keeps the buffers of failed reads reachable: the kernel may still fill them.
var abandoned struct {
	sync.Mutex
	bufs [][][]byte
}

// next returns the next free submission entry, zeroed, and queues it (Open, Read and CloseAll
// queue at most Entries before submitting them).
func (r *Ring) next() *sqe {
	t := *r.sqTail // only this goroutine writes the tail
	i := t & *r.sqMask
	r.sqArray[i] = i
	s := &r.sqes[i]
	*s = sqe{}
	atomic.StoreUint32(r.sqTail, t+1) // the entry is written before the kernel can see it
	return s
}

// submit submits the n queued entries, waits for their n completions and hands each to fn.
func (r *Ring) submit(n int, fn func(*cqe)) error {
	if n == 0 {
		return nil
	}
	toSubmit := n
	for {
		head, tail := atomic.LoadUint32(r.cqHead), atomic.LoadUint32(r.cqTail)
		if toSubmit == 0 && int(tail-head) >= n {
			break
		}
		k, _, e := unix.Syscall6(unix.SYS_IO_URING_ENTER, uintptr(r.fd), uintptr(toSubmit), uintptr(n), enterGetEvents, 0, 0)
		switch e {
		case 0:
			if int(k) == 0 && toSubmit > 0 {
				r.broken = true // the kernel took none of the queued entries: nothing to wait for
				return unix.EIO
			}
			toSubmit -= int(k)
		case unix.EINTR, unix.EAGAIN, unix.EBUSY:
			// A signal (the runtime's preemption) or a moment without resources: what was
			// submitted stays submitted; the loop submits the rest and waits again.
		default:
			r.broken = true
			return e
		}
	}
	head := atomic.LoadUint32(r.cqHead)
	for range n {
		fn(&r.cqes[head&*r.cqMask])
		head++
	}
	atomic.StoreUint32(r.cqHead, head) // the entries are read before the kernel may reuse them
	return nil
}
