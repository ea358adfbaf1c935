package input

import (
	"bytes"
	"errors"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/qinglong/ql3/refuse"
)

// sparseSize is the size of the sparse file: far more than the address space a test may use, so
// a reader that allocated by the stated size would fail the test by crashing.
const sparseSize = 20 << 30

func write(t *testing.T, p string, b []byte) {
	t.Helper()
	if err := os.WriteFile(p, b, 0o600); err != nil {
		t.Fatal(err)
	}
}

// wantRefusal asserts err's code and that its message names path.
func wantRefusal(t *testing.T, err error, code refuse.Code, path string) {
	t.Helper()
	r, ok := refuse.As(err)
	if !ok || r.Code != code {
		t.Fatalf("got %v, want %s", err, code)
	}
	if !strings.Contains(r.Message(), path) {
		t.Fatalf("message %q does not name %s", r.Message(), path)
	}
}

func TestReadFile(t *testing.T) {
	dir := t.TempDir()
	const ceiling = 10
	exact := filepath.Join(dir, "exact")
	write(t, exact, []byte("0123456789"))
	small := filepath.Join(dir, "small")
	write(t, small, []byte("abc"))
	empty := filepath.Join(dir, "empty")
	write(t, empty, nil)
	over := filepath.Join(dir, "over")
	write(t, over, []byte("0123456789a"))
	fifo := filepath.Join(dir, "fifo")
	if err := unix.Mkfifo(fifo, 0o600); err != nil {
		t.Fatal(err)
	}
	link := filepath.Join(dir, "link")
	if err := os.Symlink(exact, link); err != nil {
		t.Fatal(err)
	}
	sparse := filepath.Join(dir, "sparse")
	write(t, sparse, nil)
	if err := os.Truncate(sparse, sparseSize); err != nil {
		t.Fatal(err)
	}
	sock := filepath.Join(dir, "sock")
	sfd, err := unix.Socket(unix.AF_UNIX, unix.SOCK_STREAM, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Close(sfd)
	if err := unix.Bind(sfd, &unix.SockaddrUnix{Name: sock}); err != nil {
		t.Fatal(err)
	}

	for _, v := range []struct {
		name string
		path string
		want string      // content on success
		code refuse.Code // "" for success
	}{
		{"regular", small, "abc", ""},
		{"empty", empty, "", ""},
		{"exactly the ceiling", exact, "0123456789", ""},
		{"ceiling plus one", over, "", CodeTooLarge},
		{"sparse 20 GB", sparse, "", CodeTooLarge},
		{"char device /dev/zero", "/dev/zero", "", CodeNotRegular},
		{"char device /dev/null", "/dev/null", "", CodeNotRegular},
		{"fifo without a writer", fifo, "", CodeNotRegular},
		{"directory", dir, "", CodeNotRegular},
		{"socket", sock, "", CodeNotRegular},
		{"symlink to a regular file", link, "", CodeSymlink},
		{"missing", filepath.Join(dir, "missing"), "", CodeNotFound},
		{"component not a directory", filepath.Join(exact, "x"), "", CodeNotFound},
		// /proc/self/mem is a regular file whose read at offset 0 fails (EIO): a read error.
		{"read error", "/proc/self/mem", "", CodeRead},
	} {
		t.Run(v.name, func(t *testing.T) {
			b, err := ReadFile(v.path, ceiling)
			if v.code == "" {
				if err != nil || string(b) != v.want {
					t.Fatalf("got %q, %v; want %q", b, err, v.want)
				}
				return
			}
			if b != nil {
				t.Fatalf("a refusal returned %d bytes", len(b))
			}
			wantRefusal(t, err, v.code, v.path)
		})
	}
}

// TestReadFileUnreadable: a file the caller may not read is INPUT_READ (usage). Tests run as
// root, which reads a mode-000 file anyway, so the open runs on a thread whose filesystem uid is
// 65534: setfsuid drops CAP_DAC_OVERRIDE for that thread only.
func TestReadFileUnreadable(t *testing.T) {
	p := filepath.Join(t.TempDir(), "secret")
	write(t, p, []byte("x"))
	if err := os.Chmod(p, 0); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(filepath.Dir(p), 0o755); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() {
		// The thread is never unlocked: it ends with the goroutine, its fsuid with it.
		runtime.LockOSThread()
		if os.Geteuid() == 0 {
			unix.Setfsuid(65534)
			if got, _ := unix.SetfsuidRetUid(-1); got != 65534 {
				done <- errors.New("setfsuid did not take effect")
				return
			}
		}
		_, err := ReadFile(p, 10)
		done <- err
	}()
	err := <-done
	wantRefusal(t, err, CodeRead, p)
	if !errors.Is(err, unix.EACCES) {
		t.Fatalf("cause %v, want EACCES", err)
	}
}

// TestReadFD: whatever the size hint says (a file that grew after its fstat, a lying hint), at
// most ceiling+1 bytes are read.
func TestReadFD(t *testing.T) {
	p := filepath.Join(t.TempDir(), "f")
	write(t, p, bytes.Repeat([]byte("x"), 100))
	fd, err := unix.Open(p, unix.O_RDONLY|unix.O_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Close(fd)
	for _, v := range []struct {
		size, ceiling int64 // the size hint and the ceiling
		want          int   // bytes read
	}{{0, 10, 11}, {100, 10, 11}, {1 << 40, 10, 11}, {0, 100, 100}, {100, 99, 100}, {3, 1000, 100}, {-1, 0, 1}} {
		b, err := ReadFD(fd, v.size, v.ceiling)
		if err != nil || len(b) != v.want {
			t.Errorf("size %d ceiling %d: %d bytes, %v; want %d", v.size, v.ceiling, len(b), err, v.want)
		}
	}
}

// endless is a stdin without end, like /dev/zero.
type endless struct{ n int64 }

func (e *endless) Read(p []byte) (int, error) { e.n += int64(len(p)); return len(p), nil }

type failing struct{}

func (failing) Read([]byte) (int, error) { return 0, errors.New("injected read failure") }

func TestReadStdin(t *testing.T) {
	for _, v := range []struct {
		name string
		r    io.Reader
		want string
		code refuse.Code
	}{
		{"small", strings.NewReader("abc"), "abc", ""},
		{"empty", strings.NewReader(""), "", ""},
		{"exactly the ceiling", strings.NewReader("0123456789"), "0123456789", ""},
		{"ceiling plus one", strings.NewReader("0123456789a"), "", CodeTooLarge},
		{"endless", &endless{}, "", CodeTooLarge},
		{"read error", failing{}, "", CodeRead},
	} {
		t.Run(v.name, func(t *testing.T) {
			b, err := ReadStdin(v.r, 10)
			if v.code == "" {
				if err != nil || string(b) != v.want {
					t.Fatalf("got %q, %v", b, err)
				}
				return
			}
			wantRefusal(t, err, v.code, "stdin")
			if e, ok := v.r.(*endless); ok && e.n > 11 {
				t.Fatalf("read %d bytes of an endless stdin, want at most 11", e.n)
			}
		})
	}
}

// TestNegativeCeiling: a negative ceiling is a programming error, not a refusal of the input.
func TestNegativeCeiling(t *testing.T) {
	for _, err := range []error{
		func() error { _, err := ReadFile("/dev/null", -1); return err }(),
		func() error { _, err := ReadStdin(strings.NewReader(""), -1); return err }(),
	} {
		if err == nil || refuse.CodeOf(err) != "" || !strings.Contains(err.Error(), "negative ceiling -1") {
			t.Errorf("got %v, want the negative ceiling error", err)
		}
	}
}
