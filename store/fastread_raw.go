//go:build linux && (amd64 || arm64)

package store

import (
	"unsafe"

	"golang.org/x/sys/unix"
)

// The bulk readers' calls on a store file that is open (fstat, pread, close; openat in
// fastread.go) are made with RawSyscall: without the scheduler's entersyscall/exitsyscall, so a
// call of a few microseconds does not let the runtime hand the worker's P to another thread.
// Measured on the shared VMs, where every system call is a costly trap, the hand-offs cost a
// context switch and a thread wake-up each (docs/log.md, "How it reads"), and log verify of
// 100,000 publications spent 15-25 % more CPU with them. The price: a call that blocks (a read from a cold disk) holds its P until it
// returns, so the other goroutines wait for a core meanwhile; nothing waits on a worker's call.
// The 64-bit layouts: Stat_t is the kernel's struct stat on amd64 and arm64.

func fstatRaw(fd int, st *unix.Stat_t) error {
	_, _, e := unix.RawSyscall(unix.SYS_FSTAT, uintptr(fd), uintptr(unsafe.Pointer(st)), 0)
	if e != 0 {
		return e
	}
	return nil
}

func preadRaw(fd int, b []byte, off int64) (int, error) {
	var p unsafe.Pointer
	if len(b) > 0 {
		p = unsafe.Pointer(&b[0])
	}
	for {
		n, _, e := unix.RawSyscall6(unix.SYS_PREAD64, uintptr(fd), uintptr(p), uintptr(len(b)), uintptr(off), 0, 0)
		switch e {
		case 0:
			return int(n), nil
		case unix.EINTR:
			continue
		}
		return 0, e
	}
}

// closeRaw closes fd; Linux releases the descriptor even when close reports an error, and a
// reader has nothing to flush, so the error is not returned.
func closeRaw(fd int) {
	unix.RawSyscall(unix.SYS_CLOSE, uintptr(fd), 0, 0)
}

func openatRaw(dirfd int, path *byte, flags int) (int, unix.Errno) {
	fd, _, e := unix.RawSyscall6(unix.SYS_OPENAT, uintptr(dirfd), uintptr(unsafe.Pointer(path)), uintptr(flags), 0, 0, 0)
	return int(fd), e
}
