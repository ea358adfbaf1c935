package stablefile

import (
	"errors"
	"hash"
	"runtime"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/qinglong/ql3/internal/sysfile"
)

// yieldEvery is how many bytes hashFD hashes between two yields to the scheduler (about 2.5 ms
// of SHA-256 here). A goroutine that runs for 10 ms without one is preempted by the runtime's
// monitor thread, which then polls every 20 µs for a while; in ten applies on the 2-core VMs
// that was about 360 preemptions, half of them of the passes over kubectl.
const yieldEvery = 4 << 20

// The two reads of hashFD; the tests replace them to count or refuse.
var (
	preadCached = preadNoWait
	preadWait   = func(fd int, b []byte, off int64) (int, error) {
		return sysfile.RetryEINTR(func() (int, error) { return unix.Pread(fd, b, off) })
	}
)

// hashFD writes the content of the regular file fd, from offset 0 to its end, into h through
// buf, and returns how many bytes it read.
//
// Each read is first asked of the page cache alone (preadv2 with RWF_NOWAIT) as a raw system
// call. The runtime then does not mark the thread as in a system call, so its monitor thread does
// not take the P away from a read of a few dozen microseconds, wake another thread to run it, and
// poll every 20 µs for a while after: on the 2-core VMs, during an apply, that was a hand-off for
// most of the 233 reads of a pass over kubectl. RWF_NOWAIT makes the call fail with EAGAIN rather
// than wait for a disk, so a raw call never blocks; what the page cache lacks is read with an
// ordinary pread(2), as is everything on a filesystem without RWF_NOWAIT.
func hashFD(fd int, h hash.Hash, buf []byte) (int64, error) {
	var n int64
	nowait := true
	for {
		// EAGAIN until a read has answered: the ordinary read below is asked unless the page
		// cache answered.
		k, err := 0, error(unix.EAGAIN)
		if nowait {
			k, err = preadCached(fd, buf, n)
			if errors.Is(err, unix.EOPNOTSUPP) || errors.Is(err, unix.ENOSYS) || errors.Is(err, unix.EINVAL) {
				// A filesystem or kernel without RWF_NOWAIT: ordinary reads from here on.
				nowait, err = false, unix.EAGAIN
			}
		}
		if errors.Is(err, unix.EAGAIN) {
			k, err = preadWait(fd, buf, n)
		}
		if err != nil {
			return n, err
		}
		if k == 0 {
			return n, nil
		}
		h.Write(buf[:k])
		n += int64(k)
		if n%yieldEvery < int64(k) {
			runtime.Gosched()
		}
	}
}

// preadNoWait is preadv2(fd, [b], off, RWF_NOWAIT) as a raw system call: it reads what the page
// cache holds and fails with EAGAIN rather than wait for I/O.
func preadNoWait(fd int, b []byte, off int64) (int, error) {
	iov := unix.Iovec{Base: unsafe.SliceData(b)}
	iov.SetLen(len(b))
	for {
		// On 64-bit kernels the whole offset travels in pos_l and pos_h is ignored (ql3 builds for
		// 64-bit Linux only: its stat fields are 64-bit too).
		k, _, e := unix.RawSyscall6(unix.SYS_PREADV2, uintptr(fd), uintptr(unsafe.Pointer(&iov)), 1,
			uintptr(off), 0, unix.RWF_NOWAIT)
		switch e {
		case 0:
			return int(k), nil
		case unix.EINTR:
			continue
		}
		return 0, e
	}
}
