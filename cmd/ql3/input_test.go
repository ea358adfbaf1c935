package main

import (
	"bytes"
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// addressSpace is the RLIMIT_AS every hostile-input run gets: far below what reading /dev/zero
// for a minute (14 GB) or allocating by a sparse file's size (20 GB) would need, so a reader that
// is not bounded fails by an allocation failure instead of passing slowly.
const addressSpace = 2 << 30

// hangGuard bounds one run; a run that reaches it has hung, and that is a failure.
const hangGuard = 2 * time.Minute

// buildStatic builds cmd/ql3 with CGO_ENABLED=0 into a private directory of t.
func buildStatic(t *testing.T) string {
	t.Helper()
	out := filepath.Join(t.TempDir(), "ql3")
	cmd := exec.Command("go", "build", "-o", out, ".")
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
	if b, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, b)
	}
	return out
}

// limited runs ql3 under the address-space limit, with prlimit(1) when present and a shell's
// ulimit -v otherwise, and fails the test if the run outlives hangGuard.
func limited(t *testing.T, ql3 string, stdin *os.File, args ...string) (stderr string, code int) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), hangGuard)
	defer cancel()
	var cmd *exec.Cmd
	if prlimit, err := exec.LookPath("prlimit"); err == nil {
		cmd = exec.CommandContext(ctx, prlimit, append([]string{"--as=" + strconv.Itoa(addressSpace), "--", ql3}, args...)...)
	} else {
		script := "ulimit -v " + strconv.Itoa(addressSpace>>10) + ` && exec "$0" "$@"`
		cmd = exec.CommandContext(ctx, "sh", append([]string{"-c", script, ql3}, args...)...)
	}
	cmd.Env = append(os.Environ(), "QL3_STORE=")
	if stdin != nil {
		cmd.Stdin = stdin
	}
	var o, e bytes.Buffer
	cmd.Stdout, cmd.Stderr = &o, &e
	err := cmd.Run()
	if ctx.Err() != nil {
		t.Fatalf("ql3 %v hung: killed after %s", args, hangGuard)
	}
	var x *exec.ExitError
	if errors.As(err, &x) {
		code = x.ExitCode()
	} else if err != nil {
		t.Fatal(err)
	}
	if code != 0 && o.Len() != 0 {
		t.Errorf("refused ql3 %v printed %q on stdout", args, o.String())
	}
	// A crashed run prints every goroutine; the first lines say what happened.
	stderr = e.String()
	if len(stderr) > 400 {
		stderr = stderr[:400] + "..."
	}
	return stderr, code
}

// TestCLIHostileInputBounded runs the built ql3 on inputs that used to exhaust memory or hang:
// /dev/zero (a character device without end), a sparse 20 GB file, a FIFO nobody writes, and
// /dev/zero on stdin. Each is refused with its exact line and exit status 1, within 2 GB of
// address space and without hanging.
func TestCLIHostileInputBounded(t *testing.T) {
	ql3 := buildStatic(t)
	dir, err := filepath.EvalSymlinks(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	store := filepath.Join(dir, "store")
	if e, c := limited(t, ql3, nil, "store", "init", store); c != 0 {
		t.Fatalf("store init: exit %d %s", c, e)
	}
	sparse := filepath.Join(dir, "sparse")
	if err := os.WriteFile(sparse, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Truncate(sparse, 20<<30); err != nil {
		t.Fatal(err)
	}
	fifo := filepath.Join(dir, "fifo")
	if err := unix.Mkfifo(fifo, 0o600); err != nil {
		t.Fatal(err)
	}
	const ceiling = "67108864" // store.MaxObjectSize
	vectors := []struct {
		name   string
		file   string // the named input
		stderr string // the exact refusal
	}{
		{"dev-zero", "/dev/zero", "ql3: refused: INPUT_NOT_REGULAR: /dev/zero is a character device, not a regular file\n"},
		{"sparse-20GB", sparse, "ql3: refused: INPUT_TOO_LARGE: " + sparse + " is 21474836480 bytes, over the ceiling of " + ceiling + "\n"},
		{"fifo", fifo, "ql3: refused: INPUT_NOT_REGULAR: " + fifo + " is a fifo, not a regular file\n"},
	}
	for _, v := range vectors {
		for _, args := range [][]string{{"--store", store, "store", "put", v.file}, {"canonicalize", v.file}} {
			t.Run(args[len(args)-2]+"/"+v.name, func(t *testing.T) {
				e, c := limited(t, ql3, nil, args...)
				if c != 1 || e != v.stderr {
					t.Fatalf("exit %d stderr %q; want exit 1 and %q", c, e, v.stderr)
				}
			})
		}
	}
	// A copied store is untrusted input too: its marker may be a fifo or a symlink to /dev/zero.
	for _, v := range []struct {
		name   string
		marker func(p string) error // replaces the marker at p
	}{
		{"fifo", func(p string) error { return unix.Mkfifo(p, 0o600) }},
		{"symlink-to-dev-zero", func(p string) error { return os.Symlink("/dev/zero", p) }},
		{"sparse-20GB", func(p string) error {
			if err := os.WriteFile(p, nil, 0o600); err != nil {
				return err
			}
			return os.Truncate(p, 20<<30)
		}},
	} {
		t.Run("store-verify/marker-"+v.name, func(t *testing.T) {
			copied := filepath.Join(dir, "copy-"+v.name)
			if e, c := limited(t, ql3, nil, "store", "init", copied); c != 0 {
				t.Fatalf("store init: exit %d %s", c, e)
			}
			p := filepath.Join(copied, "ql3-store.json")
			if err := os.Remove(p); err != nil {
				t.Fatal(err)
			}
			if err := v.marker(p); err != nil {
				t.Fatal(err)
			}
			e, c := limited(t, ql3, nil, "--store", copied, "store", "verify")
			if want := "ql3: refused: STORE_MARKER: store marker ql3-store.json missing or invalid\n"; c != 1 || e != want {
				t.Fatalf("exit %d stderr %q; want exit 1 and %q", c, e, want)
			}
		})
	}
	zero, err := os.Open("/dev/zero")
	if err != nil {
		t.Fatal(err)
	}
	defer zero.Close()
	for _, args := range [][]string{{"--store", store, "store", "put", "-"}, {"canonicalize", "-"}} {
		t.Run(args[len(args)-2]+"/stdin-dev-zero", func(t *testing.T) {
			e, c := limited(t, ql3, zero, args...)
			if want := "ql3: refused: INPUT_TOO_LARGE: stdin is over the ceiling of " + ceiling + " bytes\n"; c != 1 || e != want {
				t.Fatalf("exit %d stderr %q; want exit 1 and %q", c, e, want)
			}
		})
	}
}
