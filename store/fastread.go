package store

import (
	"bytes"
	"encoding/binary"
	"errors"
	"sort"
	"strings"

	"golang.org/x/sys/unix"

	"github.com/qinglong/ql3/internal/sysfile"
	"github.com/qinglong/ql3/refuse"
)

// The store's bulk readers (log verify reads three small files per publication: the leaf, the
// index entry, the record) are bound by system calls, not by hashing: on the shared VMs a call
// costs 1 to 3 µs. The helpers here keep each file to openat, fstat, one pread and close, without
// a heap allocation for the name, and list a directory with large getdents buffers.

// openFlags open a store file for reading: never through a symlink, never blocking on a FIFO.
const openFlags = unix.O_RDONLY | unix.O_NOFOLLOW | unix.O_CLOEXEC | unix.O_NONBLOCK

// maxFastName is the longest name openRO passes without an allocation (object names are 64).
const maxFastName = 127

// openRO opens name relative to dirfd with openFlags, retrying EINTR. A short name is passed to
// openat(2) from a stack buffer: unix.Openat allocates a NUL-terminated copy per call.
//
// It asks for O_NOATIME: the store's files are immutable, and on a relatime mount the first read
// of a file whose access time is not after its modification time (every file the first time it
// is read, and again after a day) writes the inode back, which made the first `log verify` of a
// store cost twice the next one. O_NOATIME is allowed only to the file's owner: for another
// owner's file (EPERM) the open is made again without it, and the owner check that follows
// refuses the file as before.
func openRO(dirfd int, name string) (int, error) {
	fd, err := openat(dirfd, name, openFlags|unix.O_NOATIME)
	if errors.Is(err, unix.EPERM) {
		fd, err = openat(dirfd, name, openFlags)
	}
	return fd, err
}

func openat(dirfd int, name string, flags int) (int, error) {
	if len(name) > maxFastName || len(name) == 0 || strings.IndexByte(name, 0) >= 0 {
		return sysfile.RetryEINTR(func() (int, error) { return unix.Openat(dirfd, name, flags, 0) })
	}
	var buf [maxFastName + 1]byte
	copy(buf[:], name)
	for {
		fd, e := openatRaw(dirfd, &buf[0], flags)
		switch e {
		case 0:
			return fd, nil
		case unix.EINTR:
			continue
		}
		return -1, e
	}
}

// preadFull reads from fd at offset 0 into buf until buf is full or the file ends; it returns
// the bytes read. A caller sizes buf one past the size fstat gave, so that a full buf means the
// file grew. A regular file's read returns less than asked only at its end: once the stated size
// is read (len(buf)-1), a short read is the end, and no second pread(2) is spent to see it (it
// was: two preads per leaf).
func preadFull(fd int, buf []byte) (int, error) { return preadFullFrom(fd, buf, 0) }

// preadFullFrom is preadFull with buf[:n] already read.
func preadFullFrom(fd int, buf []byte, n int) (int, error) {
	for n < len(buf) {
		k, err := preadRaw(fd, buf[n:], int64(n))
		if err != nil {
			return n, err
		}
		if k == 0 {
			break
		}
		n += k
		if n >= len(buf)-1 && n < len(buf) {
			break
		}
	}
	return n, nil
}

// statOK is checkObjectStat's rules without building a message: the common case of a bulk read.
func statOK(st *unix.Stat_t, max int64) bool {
	return st.Mode&unix.S_IFMT == unix.S_IFREG && st.Mode&0o7777 == ObjectMode && int(st.Uid) == processUID &&
		st.Nlink == 1 && st.Size <= max
}

// direntBuffer is the getdents(2) buffer: 64 KiB holds about 1,400 of the store's 64-hex names,
// so a directory of 100,000 entries is listed in about 70 calls.
const direntBuffer = 64 << 10

// eachName calls fn with every name in the held directory dirfd except "." and "..", in
// directory order, through a fresh descriptor of the same inode (a directory's read offset
// belongs to the open file, and the held one is shared by concurrent listings). The name is
// valid only during the call.
func eachName(dirfd int, rel string, fn func(name []byte)) error {
	fd, err := sysfile.ReopenDir(dirfd)
	if err != nil {
		return refuse.Wrap(CodeStoreIO, err, "open %s for listing", rel)
	}
	defer unix.Close(fd)
	buf := make([]byte, direntBuffer)
	for {
		n, err := sysfile.RetryEINTR(func() (int, error) { return unix.Getdents(fd, buf) })
		if err != nil {
			return refuse.Wrap(CodeStoreIO, err, "list %s", rel)
		}
		if n <= 0 {
			return nil
		}
		// struct linux_dirent64: ino u64, off s64, reclen u16, type u8, name NUL-terminated.
		const nameOff = 19
		for b := buf[:n]; len(b) > 0; {
			if len(b) < nameOff {
				return refuse.New(CodeStoreIO, "list %s: a short directory record", rel)
			}
			reclen := int(binary.NativeEndian.Uint16(b[16:18]))
			if reclen < nameOff || reclen > len(b) {
				return refuse.New(CodeStoreIO, "list %s: a directory record of %d bytes", rel, reclen)
			}
			name := b[nameOff:reclen]
			if i := bytes.IndexByte(name, 0); i >= 0 {
				name = name[:i]
			}
			b = b[reclen:]
			if string(name) == "." || string(name) == ".." {
				continue
			}
			fn(name)
		}
	}
}

// listDir returns the sorted names in the held directory dirfd.
func listDir(dirfd int, rel string) ([]string, error) {
	var names []string
	if err := eachName(dirfd, rel, func(name []byte) { names = append(names, string(name)) }); err != nil {
		return nil, err
	}
	sort.Strings(names)
	return names, nil
}

// parseNameBytes is parseName on a listed name, without making a string of it.
func parseNameBytes(name []byte) (int64, bool) {
	if len(name) != 20 {
		return 0, false
	}
	var n int64
	for _, c := range name {
		if c < '0' || c > '9' {
			return 0, false
		}
		d := int64(c - '0')
		if n > (1<<63-1-d)/10 {
			return 0, false
		}
		n = n*10 + d
	}
	return n, true
}

// putPad20 writes the 20-digit name of n (pad20) into b[:20].
func putPad20(b []byte, n int64) {
	for i := 19; i >= 0; i-- {
		b[i] = byte('0' + n%10)
		n /= 10
	}
}
