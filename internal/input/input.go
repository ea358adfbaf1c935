// Package input is the one bounded reader of every file and stream a ql3 command reads as input
// (docs/input.md). A named file is opened without blocking and without following a final
// symlink, must be a regular file by the fstat of the opened descriptor, and is read up to its
// ceiling plus one byte: a larger file is refused, never truncated, and never buffered whole.
// Standard input goes through the same ceiling rule.
//
// Private stable inputs (internal/stablefile) add their own path, ownership and mode checks on
// top of the same read core (ReadFD) and the same reason codes.
package input

import (
	"fmt"
	"io"

	"golang.org/x/sys/unix"

	"github.com/qinglong/ql3/internal/sysfile"
	"github.com/qinglong/ql3/refuse"
)

// Reason codes of any input read; each exits 1 (refuse.ExitStatus).
const (
	// CodeNotRegular: the input is a directory, fifo, device or socket.
	CodeNotRegular refuse.Code = "INPUT_NOT_REGULAR"
	// CodeTooLarge: the input is larger than its ceiling, or grew past it while read.
	CodeTooLarge refuse.Code = "INPUT_TOO_LARGE"
	// CodeSymlink: the input path is a symbolic link (stable inputs: any component of it).
	CodeSymlink refuse.Code = "INPUT_SYMLINK"
	// CodeNotFound: the input does not exist or a component of its path is not a directory.
	CodeNotFound refuse.Code = "INPUT_NOT_FOUND"
	// CodeRead: the input file or stdin cannot be opened, stated or read for another reason.
	CodeRead refuse.Code = "INPUT_READ"
)

// openFlags: O_NONBLOCK so that opening a FIFO (or a device) returns at once and the fstat
// refuses it, O_NOFOLLOW so that the name is not a symlink, O_NOCTTY so that a terminal never
// becomes ours.
const openFlags = unix.O_RDONLY | unix.O_NOFOLLOW | unix.O_CLOEXEC | unix.O_NONBLOCK | unix.O_NOCTTY

// ReadFile reads the regular file at path, at most ceiling bytes of it; a larger file is
// refused with INPUT_TOO_LARGE. Messages name the path, never the content.
func ReadFile(path string, ceiling int64) ([]byte, error) {
	if ceiling < 0 {
		return nil, fmt.Errorf("input: negative ceiling %d for %s", ceiling, path)
	}
	// A file that is not regular when first looked at is never opened: opening a device can
	// have side effects (a tape rewinds). The fstat of the opened descriptor is what counts.
	var st unix.Stat_t
	if err := unix.Lstat(path, &st); err != nil {
		return nil, openErr(path, err)
	}
	if err := checkRegular(path, &st); err != nil {
		return nil, err
	}
	fd, err := sysfile.RetryEINTR(func() (int, error) { return unix.Open(path, openFlags, 0) })
	if err != nil {
		return nil, openErr(path, err)
	}
	defer unix.Close(fd)
	if err := unix.Fstat(fd, &st); err != nil {
		return nil, refuse.Wrap(CodeRead, err, "%s cannot be stated", path)
	}
	if err := checkRegular(path, &st); err != nil {
		return nil, err
	}
	// A sparse file of 20 GB costs nothing on disk; the stated size refuses it before any read.
	if st.Size > ceiling {
		return nil, refuse.New(CodeTooLarge, "%s is %d bytes, over the ceiling of %d", path, st.Size, ceiling)
	}
	b, err := ReadFD(fd, st.Size, ceiling)
	if err != nil {
		return nil, refuse.Wrap(CodeRead, err, "%s cannot be read", path)
	}
	if int64(len(b)) > ceiling {
		return nil, refuse.New(CodeTooLarge, "%s grew past the ceiling of %d bytes while it was read", path, ceiling)
	}
	return b, nil
}

// ReadStdin reads r (standard input) to its end, at most ceiling bytes; more is refused with
// INPUT_TOO_LARGE after ceiling+1 bytes have been read, so a stream without end costs no more.
func ReadStdin(r io.Reader, ceiling int64) ([]byte, error) {
	if ceiling < 0 {
		return nil, fmt.Errorf("input: negative ceiling %d for stdin", ceiling)
	}
	b, err := io.ReadAll(io.LimitReader(r, limitOf(ceiling)))
	if err != nil {
		return nil, refuse.Wrap(CodeRead, err, "stdin cannot be read")
	}
	if int64(len(b)) > ceiling {
		return nil, refuse.New(CodeTooLarge, "stdin is over the ceiling of %d bytes", ceiling)
	}
	return b, nil
}

// ReadFD reads the regular file open on fd from offset 0 until end of file or until it holds
// ceiling+1 bytes, whichever is first: one byte past the ceiling is enough to refuse, and no
// more is ever buffered. size is the stated size, a hint for the first allocation only (never
// more than ceiling+1 is allocated, whatever it says). The caller refuses a result longer than
// ceiling.
func ReadFD(fd int, size, ceiling int64) ([]byte, error) {
	limit := limitOf(ceiling)
	// size+1 leaves room to see the end of file in the first pass.
	b := make([]byte, 0, min(max(size, 0), ceiling)+1)
	for int64(len(b)) < limit {
		if len(b) == cap(b) {
			b = append(b, make([]byte, min(int64(cap(b)), limit-int64(len(b))))...)[:len(b)]
		}
		asked := min(int64(cap(b)), limit) - int64(len(b))
		n, err := sysfile.RetryEINTR(func() (int, error) { return unix.Pread(fd, b[len(b):len(b)+int(asked)], int64(len(b))) })
		if err != nil {
			return nil, err
		}
		if n == 0 {
			break
		}
		b = b[:len(b)+n]
		// A regular file's read returns less than asked only at its end: once the stated size is
		// read, a short read is the end, and no second read(2) is spent to see it (the store
		// reads thousands of small objects per listing this way).
		if int64(len(b)) >= size && int64(n) < asked {
			break
		}
	}
	return b, nil
}

// limitOf is ceiling+1, the bytes needed to tell "at the ceiling" from "past it".
func limitOf(ceiling int64) int64 {
	if ceiling+1 < 0 { // ceiling is math.MaxInt64
		return ceiling
	}
	return ceiling + 1
}

// checkRegular refuses a stat that is not of a regular file: INPUT_SYMLINK for a symlink,
// INPUT_NOT_REGULAR naming the file type otherwise.
func checkRegular(path string, st *unix.Stat_t) error {
	switch st.Mode & unix.S_IFMT {
	case unix.S_IFREG:
		return nil
	case unix.S_IFLNK:
		return refuse.New(CodeSymlink, "%s is a symlink", path).
			WithHint("name the file itself, not a symbolic link to it")
	}
	return refuse.New(CodeNotRegular, "%s is a %s, not a regular file", path, Kind(st.Mode))
}

// Kind names the file type in st_mode for a message.
func Kind(mode uint32) string {
	switch mode & unix.S_IFMT {
	case unix.S_IFREG:
		return "regular file"
	case unix.S_IFDIR:
		return "directory"
	case unix.S_IFIFO:
		return "fifo"
	case unix.S_IFCHR:
		return "character device"
	case unix.S_IFBLK:
		return "block device"
	case unix.S_IFSOCK:
		return "socket"
	case unix.S_IFLNK:
		return "symlink"
	}
	return "file of unknown type"
}

func openErr(path string, err error) error {
	switch sysfile.CauseOf(err) {
	case sysfile.CauseSymlink:
		return refuse.New(CodeSymlink, "%s is a symlink", path).
			WithHint("name the file itself, not a symbolic link to it")
	case sysfile.CauseNotFound:
		return refuse.Wrap(CodeNotFound, err, "%s does not exist (or a component is not a directory)", path)
	}
	return refuse.Wrap(CodeRead, err, "%s cannot be opened", path)
}
