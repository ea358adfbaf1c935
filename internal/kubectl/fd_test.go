package kubectl

import (
	"io"
	"os"
	"testing"

	"golang.org/x/sys/unix"
)

// TestAboveFD: a child-side pipe end below the held descriptor is moved above it, still works,
// and the original number is released; one already above is kept as it is.
func TestAboveFD(t *testing.T) {
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	held := int(w.Fd()) + 50
	low := int(w.Fd())
	g, err := aboveFD(w, held)
	if err != nil {
		t.Fatal(err)
	}
	defer g.Close()
	if int(g.Fd()) <= held {
		t.Fatalf("moved to descriptor %d, not above %d", g.Fd(), held)
	}
	if flags, err := unix.FcntlInt(g.Fd(), unix.F_GETFD, 0); err != nil || flags&unix.FD_CLOEXEC == 0 {
		t.Fatalf("the moved descriptor is not close-on-exec (%v)", err)
	}
	if _, err := unix.FcntlInt(uintptr(low), unix.F_GETFD, 0); err == nil {
		t.Fatalf("descriptor %d is still open", low)
	}
	if _, err := g.Write([]byte("through")); err != nil {
		t.Fatal(err)
	}
	g.Close()
	if b, err := io.ReadAll(r); err != nil || string(b) != "through" {
		t.Fatalf("read %q, %v", b, err)
	}
	same, err := aboveFD(r, int(r.Fd())-1)
	if err != nil || same != r {
		t.Fatalf("a descriptor already above was replaced (%v)", err)
	}
}

func TestStdStream(t *testing.T) {
	for p, want := range map[string]bool{
		"/proc/self/fd/0": true, "/proc/self/fd/1": true, "/proc/self/fd/2": true,
		"/proc/self/fd/3": false, "/proc/self/fd/10": false, "/proc/self/fd/00": false,
	} {
		if stdStream(p) != want {
			t.Errorf("stdStream(%s) = %v", p, !want)
		}
	}
}
