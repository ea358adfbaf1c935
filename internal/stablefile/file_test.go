package stablefile

import (
	"bytes"
	"fmt"
	"math"
	"net"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/opencontainers/go-digest"
	"golang.org/x/sys/unix"

	"github.com/qinglong/ql3/evidence"
	"github.com/qinglong/ql3/internal/sysfile"
	"github.com/qinglong/ql3/refuse"
)

const testCeiling = 1 << 10

// secret is file content that no message may repeat.
const secret = "token: s3cr3t-0f-the-test"

// readGuarded is Read with a guard: a Read that blocks (on a FIFO, say) fails the test instead
// of hanging the suite.
func readGuarded(t *testing.T, p string, ceiling int64) (*File, error) {
	t.Helper()
	type result struct {
		f   *File
		err error
	}
	done := make(chan result, 1)
	go func() {
		f, err := Read(p, evidence.RoleManifest, ceiling)
		done <- result{f, err}
	}()
	select {
	case r := <-done:
		return r.f, r.err
	case <-time.After(time.Minute):
		t.Fatalf("Read(%s) blocked", p)
		return nil, nil
	}
}

func TestReadAccepts(t *testing.T) {
	resolvers(t, func(t *testing.T) {
		for _, b := range [][]byte{nil, []byte("kind: List\n"), bytes.Repeat([]byte{'x'}, testCeiling)} {
			p := privateFile(t, b)
			f, err := readGuarded(t, p, testCeiling)
			must(t, err)
			if !bytes.Equal(f.Bytes, b) || f.Digest != evidence.FromBytes(b) || f.Path != p || f.Role != evidence.RoleManifest {
				t.Fatalf("read %d bytes digest %s, want %d bytes digest %s", len(f.Bytes), f.Digest, len(b), evidence.FromBytes(b))
			}
			must(t, f.Reverify())
		}
	})
}

func TestReadRefuses(t *testing.T) {
	vectors := []struct {
		name  string
		root  bool                                     // needs root (chown, mknod)
		setup func(t *testing.T, dir, p string) string // adjusts the valid private file p in dir; returns the path to read
		code  refuse.Code                              // the reason code Read must give
	}{
		{"empty path", false, func(*testing.T, string, string) string { return "" }, CodePathInvalid},
		{"root", false, func(*testing.T, string, string) string { return "/" }, CodePathInvalid},
		{"relative", false, func(_ *testing.T, _, p string) string { return p[1:] }, CodePathInvalid},
		{"dot-dot", false, func(_ *testing.T, d, _ string) string { return d + "/../private/input" }, CodePathInvalid},
		{"dot", false, func(_ *testing.T, d, _ string) string { return d + "/./input" }, CodePathInvalid},
		{"double slash", false, func(_ *testing.T, d, _ string) string { return d + "//input" }, CodePathInvalid},
		{"trailing slash", false, func(_ *testing.T, _, p string) string { return p + "/" }, CodePathInvalid},
		{"nul byte", false, func(_ *testing.T, _, p string) string { return p + "\x00" }, CodePathInvalid},
		{"missing", false, func(_ *testing.T, d, _ string) string { return d + "/absent" }, CodeNotFound},
		{"missing directory", false, func(_ *testing.T, d, _ string) string { return d + "/absent/input" }, CodeNotFound},
		{"file as a directory", false, func(_ *testing.T, _, p string) string { return p + "/input" }, CodeNotFound},
		{"symlink as the file", false, func(t *testing.T, d, p string) string {
			must(t, os.Symlink(p, d+"/link"))
			return d + "/link"
		}, CodeSymlink},
		{"relative symlink as the file", false, func(t *testing.T, d, _ string) string {
			must(t, os.Symlink("input", d+"/link"))
			return d + "/link"
		}, CodeSymlink},
		{"dangling symlink as the file", false, func(t *testing.T, d, _ string) string {
			must(t, os.Symlink(d+"/absent", d+"/link"))
			return d + "/link"
		}, CodeSymlink},
		{"symlink as the parent directory", false, func(t *testing.T, d, _ string) string {
			must(t, os.Symlink(d, filepath.Dir(d)+"/link"))
			return filepath.Dir(d) + "/link/input"
		}, CodeSymlink},
		{"symlink as an ancestor", false, func(t *testing.T, d, _ string) string {
			top := filepath.Dir(d)
			must(t, os.Symlink(top, top+"/link"))
			return top + "/link/private/input"
		}, CodeSymlink},
		{"hard link", false, func(t *testing.T, d, p string) string {
			must(t, os.Link(p, d+"/other"))
			return p
		}, CodeLinkCount},
		{"mode 0400", false, chmod(0o400), CodeNotPrivate},
		{"mode 0640", false, chmod(0o640), CodeNotPrivate},
		{"mode 0644", false, chmod(0o644), CodeNotPrivate},
		{"mode 0700", false, chmod(0o700), CodeNotPrivate},
		{"mode 0604", false, chmod(0o604), CodeNotPrivate},
		{"mode 4600", false, chmod(0o4600), CodeNotPrivate},
		{"mode 1600", false, chmod(0o1600), CodeNotPrivate},
		{"directory mode 0750", false, chmodDir(0o750), CodeNotPrivate},
		{"directory mode 0755", false, chmodDir(0o755), CodeNotPrivate},
		{"directory mode 0777", false, chmodDir(0o777), CodeNotPrivate},
		{"directory mode 0500", false, chmodDir(0o500), CodeNotPrivate},
		{"directory mode 1700", false, chmodDir(0o1700), CodeNotPrivate},
		{"file owned by another uid", true, func(t *testing.T, _, p string) string {
			must(t, os.Chown(p, nobody, nobody))
			return p
		}, CodeNotPrivate},
		{"directory owned by another uid", true, func(t *testing.T, d, p string) string {
			must(t, os.Chown(d, nobody, nobody))
			return p
		}, CodeNotPrivate},
		{"root's file read by a non-root operator", true, func(t *testing.T, d, p string) string {
			must(t, os.Chown(d, 1000, 1000))
			asUID(t, 1000)
			return p
		}, CodeNotPrivate},
		{"fifo", false, func(t *testing.T, d, _ string) string {
			must(t, unix.Mkfifo(d+"/fifo", 0o600))
			return d + "/fifo"
		}, CodeNotRegular},
		{"directory", false, func(t *testing.T, d, _ string) string {
			mkdir(t, d+"/sub", 0o600)
			return d + "/sub"
		}, CodeNotRegular},
		{"character device", true, func(t *testing.T, d, _ string) string {
			must(t, unix.Mknod(d+"/null", unix.S_IFCHR|0o600, int(unix.Mkdev(1, 3))))
			return d + "/null"
		}, CodeNotRegular},
		{"socket", false, func(t *testing.T, d, _ string) string {
			l, err := net.Listen("unix", d+"/sock")
			must(t, err)
			t.Cleanup(func() { l.Close() })
			must(t, os.Chmod(d+"/sock", 0o600))
			return d + "/sock"
		}, CodeNotRegular},
		{"over the ceiling", false, func(t *testing.T, _, p string) string {
			writeFile(t, p, make([]byte, testCeiling+1), 0o600)
			return p
		}, CodeTooLarge},
	}
	resolvers(t, func(t *testing.T) {
		for _, v := range vectors {
			t.Run(v.name, func(t *testing.T) {
				if v.root {
					needRoot(t)
				}
				p := privateFile(t, []byte(secret))
				path := v.setup(t, filepath.Dir(p), p)
				f, err := readGuarded(t, path, testCeiling)
				wantCode(t, err, v.code)
				if f != nil {
					t.Fatal("refused Read returned a file")
				}
				if strings.Contains(err.Error(), secret) {
					t.Fatalf("message leaks file content: %v", err)
				}
			})
		}
	})
}

func chmod(mode os.FileMode) func(*testing.T, string, string) string {
	return func(t *testing.T, _, p string) string {
		must(t, os.Chmod(p, mode|modeBits(mode)))
		return p
	}
}

func chmodDir(mode os.FileMode) func(*testing.T, string, string) string {
	return func(t *testing.T, d, p string) string {
		must(t, os.Chmod(d, mode|modeBits(mode)))
		return p
	}
}

// modeBits maps the octal setuid/setgid/sticky bits of mode to os.FileMode's flags.
func modeBits(mode os.FileMode) os.FileMode {
	var m os.FileMode
	if mode&0o4000 != 0 {
		m |= os.ModeSetuid
	}
	if mode&0o2000 != 0 {
		m |= os.ModeSetgid
	}
	if mode&0o1000 != 0 {
		m |= os.ModeSticky
	}
	return m
}

// TestReadRaces swaps the file between the checks and the read through the test hooks.
func TestReadRaces(t *testing.T) {
	vectors := []struct {
		name       string
		beforeOpen func(p string) error // runs after the leaf's type check, before its open
		afterStat  func(p string) error // runs after the first fstat, before the read
		code       refuse.Code          // the reason code Read must give
	}{
		{"fifo swapped in before the open", func(p string) error {
			return errorsJoin(os.Remove(p), unix.Mkfifo(p, 0o600))
		}, nil, CodeNotRegular},
		{"symlink swapped in before the open", func(p string) error {
			return errorsJoin(os.Rename(p, p+".real"), os.Symlink(p+".real", p))
		}, nil, CodeSymlink},
		{"grows past the ceiling before the read", nil, func(p string) error {
			return appendTo(p, make([]byte, testCeiling))
		}, CodeTooLarge},
		{"grows within the ceiling before the read", nil, func(p string) error {
			return appendTo(p, []byte("more"))
		}, CodeChanged},
		{"shrinks before the read", nil, func(p string) error {
			return os.Truncate(p, 1)
		}, CodeChanged},
	}
	resolvers(t, func(t *testing.T) {
		for _, v := range vectors {
			t.Run(v.name, func(t *testing.T) {
				p := privateFile(t, []byte("content"))
				t.Cleanup(func() { hookBeforeOpen, hookAfterStat = func() {}, func() {} })
				if v.beforeOpen != nil {
					hookBeforeOpen = func() { must(t, v.beforeOpen(p)) }
				}
				if v.afterStat != nil {
					hookAfterStat = func() { must(t, v.afterStat(p)) }
				}
				_, err := readGuarded(t, p, testCeiling)
				wantCode(t, err, v.code)
			})
		}
	})
}

func appendTo(p string, b []byte) error {
	f, err := os.OpenFile(p, os.O_WRONLY|os.O_APPEND, 0)
	if err != nil {
		return err
	}
	_, err = f.Write(b)
	return errorsJoin(err, f.Close())
}

func errorsJoin(errs ...error) error {
	for _, err := range errs {
		if err != nil {
			return err
		}
	}
	return nil
}

func TestFileInput(t *testing.T) {
	p := privateFile(t, []byte("kind: List\n"))
	f, err := Read(p, evidence.RoleManifest, testCeiling)
	must(t, err)
	var st unix.Stat_t
	must(t, unix.Stat(p, &st))
	content := &evidence.Descriptor{MediaType: evidence.MediaTypeManifest, Digest: f.Digest, Size: 11}
	got := f.Input(content)
	want := evidence.Input{
		Schema: evidence.SchemaInput, Role: evidence.RoleManifest, Path: p,
		Dev: fmt.Sprint(st.Dev), Inode: fmt.Sprint(st.Ino), Mode: "0600", UID: int64(os.Getuid()), Size: 11,
		Mtime:  time.Unix(st.Mtim.Sec, st.Mtim.Nsec).UTC().Format(time.RFC3339Nano),
		Ctime:  time.Unix(st.Ctim.Sec, st.Ctim.Nsec).UTC().Format(time.RFC3339Nano),
		Digest: evidence.FromBytes([]byte("kind: List\n")), Content: content,
	}
	if !reflect.DeepEqual(got, want) || got.Content != content {
		t.Fatalf("Input() =\n%+v, want\n%+v", got, want)
	}
	for _, ts := range []string{got.Mtime, got.Ctime} {
		parsed, err := time.Parse(time.RFC3339Nano, ts)
		if err != nil || !strings.HasSuffix(ts, "Z") || parsed.Location() != time.UTC {
			t.Fatalf("timestamp %q is not RFC 3339 UTC: %v", ts, err)
		}
	}
	if f.Input(nil).Content != nil {
		t.Fatal("Input(nil) has content")
	}
}

// TestReadCeilingEdges reads at the extremes of the ceiling: exactly at it, and with the largest
// ceiling there is (whose ceiling+1 overflows).
func TestReadCeilingEdges(t *testing.T) {
	for _, c := range []struct {
		size    int   // file size
		ceiling int64 // the ceiling Read gets
		code    refuse.Code
	}{{0, 0, ""}, {1, 0, CodeTooLarge}, {5, 5, ""}, {6, 5, CodeTooLarge}, {5, math.MaxInt64, ""}} {
		p := privateFile(t, bytes.Repeat([]byte{'a'}, c.size))
		f, err := Read(p, evidence.RoleCommandFile, c.ceiling)
		wantCode(t, err, c.code)
		if err == nil && len(f.Bytes) != c.size {
			t.Fatalf("size %d ceiling %d: read %d bytes", c.size, c.ceiling, len(f.Bytes))
		}
	}
	if _, err := Read(privateFile(t, nil), evidence.RoleCommandFile, -1); err == nil {
		t.Fatal("negative ceiling accepted")
	}
}

// TestOpenat2Missing makes openat2 fail as a kernel before 5.6 (ENOSYS) or a seccomp filter
// (EPERM) would: Read must fall back to the walk, keep refusing symlinks, and remember the
// fallback.
func TestOpenat2Missing(t *testing.T) {
	for _, errno := range []unix.Errno{unix.ENOSYS, unix.EPERM} {
		t.Run(errno.Error(), func(t *testing.T) {
			calls := 0
			t.Cleanup(sysfile.SetResolverForTest(sysfile.ResolverForTest{
				Openat2: func(int, string, *unix.OpenHow) (int, error) { calls++; return -1, errno }}))
			p := privateFile(t, []byte("x"))
			_, err := Read(p, evidence.RoleKubeconfig, testCeiling)
			must(t, err)
			d := filepath.Dir(p)
			must(t, os.Symlink(d, d+".link"))
			_, err = Read(d+".link/input", evidence.RoleKubeconfig, testCeiling)
			wantCode(t, err, CodeSymlink)
			if calls != 1 || !sysfile.Openat2Missing() {
				t.Fatalf("openat2 called %d times, missing %v: the fallback is not remembered", calls, sysfile.Openat2Missing())
			}
		})
	}
}

// TestReadIO: a failure that is neither a missing component nor a symlink is INPUT_IO, with
// both resolvers: a directory name longer than the kernel takes (ENAMETOOLONG), in the
// directory part and as the last component, for a private input and for the executable.
func TestReadIO(t *testing.T) {
	resolvers(t, func(t *testing.T) {
		long := strings.Repeat("n", 300)
		dir := privateDir(t)
		for _, p := range []string{dir + "/" + long + "/input", dir + "/" + long} {
			_, err := Read(p, evidence.RoleKubeconfig, testCeiling)
			wantCode(t, err, CodeIO)
			_, err = OpenExecutable(p, digest.FromString(""))
			wantCode(t, err, CodeIO)
		}
	})
}
