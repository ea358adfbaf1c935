//go:build linux && !(amd64 || arm64)

package store

import (
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/qinglong/ql3/internal/sysfile"
)

// The scheduler-aware calls where fastread_raw.go's layouts are not known.

func fstatRaw(fd int, st *unix.Stat_t) error { return unix.Fstat(fd, st) }

func preadRaw(fd int, b []byte, off int64) (int, error) {
	return sysfile.RetryEINTR(func() (int, error) { return unix.Pread(fd, b, off) })
}

func closeRaw(fd int) { unix.Close(fd) }

func openatRaw(dirfd int, path *byte, flags int) (int, unix.Errno) {
	fd, _, e := unix.Syscall6(unix.SYS_OPENAT, uintptr(dirfd), uintptr(unsafe.Pointer(path)), uintptr(flags), 0, 0, 0)
	return int(fd), e
}
