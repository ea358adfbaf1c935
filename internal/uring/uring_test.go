//go:build linux

package uring

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"golang.org/x/sys/unix"
)

// ring returns a ring, or skips (fails under CI=true, where the machine is known to have
// io_uring) when the kernel refuses one: the plain path is then the only one, and the store's
// tests run it.
func ring(t *testing.T) *Ring {
	t.Helper()
	r, err := newRing()
	if err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatalf("io_uring is unavailable under CI: %v", err)
		}
		t.Skipf("io_uring is unavailable here (%v): the plain system calls are the only path", err)
	}
	return r
}

const flags = unix.O_RDONLY | unix.O_NOFOLLOW | unix.O_CLOEXEC | unix.O_NONBLOCK

// TestOpenMatchesOpenat opens every kind of name through the ring and with openat(2) and
// compares: the descriptor's file (device and inode) or the errno, name by name, across more
// names than one submission holds.
func TestOpenMatchesOpenat(t *testing.T) {
	r := ring(t)
	dir := t.TempDir()
	var names []string
	for i := range 300 {
		name := filepath.Base(strings.Repeat("f", 1+i%60)) + string(rune('a'+i%26))
		switch i % 6 {
		case 0, 1, 2:
			name = "file" + strings.Repeat("0", i%40) + string(rune('a'+i%26))
			if err := os.WriteFile(filepath.Join(dir, name), []byte(name), 0o400); err != nil && !os.IsPermission(err) {
				t.Fatal(err)
			}
		case 3:
			name = "missing" + name
		case 4:
			name = "link" + name
			if err := os.Symlink("/etc/hostname", filepath.Join(dir, name)); err != nil && !os.IsExist(err) {
				t.Fatal(err)
			}
		case 5:
			name = "dir" + name
			if err := os.Mkdir(filepath.Join(dir, name), 0o700); err != nil && !os.IsExist(err) {
				t.Fatal(err)
			}
		}
		names = append(names, name)
	}
	names = append(names, strings.Repeat("x", MaxName+1), "", "../"+filepath.Base(dir)+"/file0a", "a\x00b")
	dirfd, err := unix.Open(dir, unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Close(dirfd)
	dirfds := make([]int, len(names))
	for i := range dirfds {
		dirfds[i] = dirfd
	}
	fds := make([]int, len(names))
	if err := r.Open(dirfds, names, flags, fds); err != nil {
		t.Fatal(err)
	}
	for i, name := range names {
		want, werr := unix.Openat(dirfd, name, flags, 0)
		switch {
		case len(name) > MaxName:
			werr = unix.ENAMETOOLONG
		case name == "":
			werr = unix.ENOENT
		}
		if werr != nil {
			if fds[i] >= 0 || unix.Errno(-fds[i]) != werr {
				t.Errorf("%q: ring gave %d, openat %v", name, fds[i], werr)
			}
			continue
		}
		var a, b unix.Stat_t
		if fds[i] < 0 || unix.Fstat(fds[i], &a) != nil || unix.Fstat(want, &b) != nil || a.Ino != b.Ino || a.Dev != b.Dev {
			t.Errorf("%q: ring gave %d (errno %v), openat a descriptor of another file", name, fds[i], unix.Errno(-fds[i]))
		}
		fl, err := unix.FcntlInt(uintptr(fds[i]), unix.F_GETFL, 0)
		if err != nil || fl&unix.O_ACCMODE != unix.O_RDONLY {
			t.Errorf("%q: flags %#x, %v", name, fl, err)
		}
		if fd, err := unix.FcntlInt(uintptr(fds[i]), unix.F_GETFD, 0); err != nil || fd&unix.FD_CLOEXEC == 0 {
			t.Errorf("%q: not close-on-exec", name)
		}
		unix.Close(want)
	}
	r.CloseAll(fds)
	for i, fd := range fds {
		if fd < 0 {
			continue
		}
		if _, err := unix.FcntlInt(uintptr(fd), unix.F_GETFD, 0); !errors.Is(err, unix.EBADF) {
			t.Errorf("%q: descriptor %d is still open after CloseAll", names[i], fd)
		}
	}
	Put(r)
}

// TestRingCloseOnExec: a ring's descriptor is not inherited by kubectl or any other program ql3
// runs.
func TestRingCloseOnExec(t *testing.T) {
	r := ring(t)
	defer Put(r)
	fl, err := unix.FcntlInt(uintptr(r.fd), unix.F_GETFD, 0)
	if err != nil || fl&unix.FD_CLOEXEC == 0 {
		t.Fatalf("ring descriptor flags %#x, %v: not close-on-exec", fl, err)
	}
}

// TestGetDisabled: a disabled package hands out no ring, so its callers take the plain path.
func TestGetDisabled(t *testing.T) {
	Disable()
	defer Enable()
	if r := Get(); r != nil {
		t.Fatal("Get returned a ring while disabled")
	}
}

// TestRingsAreReused: Put keeps a ring for the next Get, and a broken one is dropped.
func TestRingsAreReused(t *testing.T) {
	r := ring(t)
	Put(r)
	if g := Get(); g != r {
		t.Fatalf("Get after Put returned another ring")
	}
	r.broken = true
	Put(r)
	if g := Get(); g == r {
		t.Fatal("a broken ring was handed out again")
	} else {
		Put(g)
	}
}

// TestRingRestricted: the kernel refuses any request but open, read and close on a ring of this
// package (EACCES), and any register operation: a no-op, a socket, a write, a probe.
func TestRingRestricted(t *testing.T) {
	r := ring(t)
	defer Put(r)
	for _, op := range []uint8{0 /* NOP */, 45 /* SOCKET */, 23 /* WRITE */, 16 /* CONNECT */, 9 /* SENDMSG */} {
		s := r.next()
		s.opcode, s.fd = op, -1
		var res int32
		if err := r.submit(1, func(c *cqe) { res = c.res }); err != nil {
			t.Fatal(err)
		}
		if unix.Errno(-res) != unix.EACCES {
			t.Errorf("opcode %d: result %d, want -EACCES", op, res)
		}
	}
	if err := r.probe(); !errors.Is(err, unix.EACCES) {
		t.Errorf("a probe of the enabled ring: %v, want EACCES", err)
	}
}

// TestReadMatchesPread: Read returns what pread(2) at offset 0 returns, byte for byte, for files
// shorter than, as long as and longer than the buffer, an empty one and a directory (EISDIR); a
// negative descriptor or an empty buffer is left alone. (Not a FIFO: the ring reads a stream
// whatever the offset, where pread fails with ESPIPE; Read is for regular files.)
func TestReadMatchesPread(t *testing.T) {
	r := ring(t)
	defer Put(r)
	dir := t.TempDir()
	var fds []int
	var bufs [][]byte
	for i, size := range []int{0, 1, 99, 100, 101, 5000} {
		p := filepath.Join(dir, strings.Repeat("f", i+1))
		if err := os.WriteFile(p, []byte(strings.Repeat(string(rune('a'+i)), size)), 0o400); err != nil {
			t.Fatal(err)
		}
		fd, err := unix.Open(p, unix.O_RDONLY|unix.O_CLOEXEC, 0)
		if err != nil {
			t.Fatal(err)
		}
		defer unix.Close(fd)
		fds, bufs = append(fds, fd), append(bufs, make([]byte, 100))
	}
	dfd, err := unix.Open(dir, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Close(dfd)
	fds, bufs = append(fds, dfd, -1, fds[2]), append(bufs, make([]byte, 10), make([]byte, 10), nil)
	ns := make([]int, len(fds))
	for i := range ns {
		ns[i] = 12345
	}
	if err := r.Read(fds, bufs, ns); err != nil {
		t.Fatal(err)
	}
	for i, fd := range fds {
		if fd < 0 || len(bufs[i]) == 0 {
			if ns[i] != 12345 {
				t.Errorf("read %d: result %d for a request that was not to be made", i, ns[i])
			}
			continue
		}
		want := make([]byte, len(bufs[i]))
		n, err := unix.Pread(fd, want, 0)
		if err != nil {
			n = -int(err.(unix.Errno))
		}
		if ns[i] != n || (n > 0 && string(bufs[i][:n]) != string(want[:n])) {
			t.Errorf("read %d: ring %d %.10q, pread %d %.10q", i, ns[i], bufs[i], n, want)
		}
	}
	if unix.Errno(-ns[6]) != unix.EISDIR {
		t.Errorf("a directory read %d: want -EISDIR", ns[6])
	}
}
