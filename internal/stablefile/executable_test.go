package stablefile

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"strings"
	"sync"
	"testing"

	"github.com/opencontainers/go-digest"
	"golang.org/x/sys/unix"

	"github.com/qinglong/ql3/evidence"
	"github.com/qinglong/ql3/refuse"
)

var markers struct {
	once     sync.Once
	original []byte // prints "original"
	replaced []byte // prints "replacement"
	err      error
}

// markerBinaries builds testdata/marker twice, linked with different markers, so that a test can
// tell from a child's output which bytes an exec ran.
func markerBinaries(t *testing.T) (original, replaced []byte) {
	t.Helper()
	markers.once.Do(func() {
		dir, err := os.MkdirTemp("", "stablefile-marker-")
		if err != nil {
			markers.err = err
			return
		}
		defer os.RemoveAll(dir)
		build := func(marker string) []byte {
			out := filepath.Join(dir, marker)
			cmd := exec.Command("go", "build", "-trimpath", "-ldflags=-X main.marker="+marker, "-o", out, "./testdata/marker")
			cmd.Env = append(os.Environ(), "CGO_ENABLED=0", "GOFLAGS=")
			if b, err := cmd.CombinedOutput(); err != nil {
				markers.err = errorsJoin(markers.err, fmt.Errorf("go build: %v\n%s", err, b))
				return nil
			}
			b, err := os.ReadFile(out)
			markers.err = errorsJoin(markers.err, err)
			return b
		}
		markers.original, markers.replaced = build("original"), build("replacement")
	})
	if markers.err != nil {
		t.Fatalf("build marker programs: %v", markers.err)
	}
	return markers.original, markers.replaced
}

// installExe writes b as an executable at dir/kubectl with mode and returns the path.
func installExe(t testing.TB, dir string, b []byte, mode os.FileMode) string {
	t.Helper()
	p := filepath.Join(dir, "kubectl")
	writeFile(t, p, b, mode)
	return p
}

func TestOpenExecutableRefuses(t *testing.T) {
	exe := []byte("\x7fELF not really, the checks never run it")
	pinned := evidence.FromBytes(exe)
	vectors := []struct {
		name   string
		root   bool                                     // needs root (chown)
		setup  func(t *testing.T, dir, p string) string // adjusts the valid executable p in dir; returns the path to open
		pinned digest.Digest                            // overrides the pinned digest when set
		code   refuse.Code                              // the reason code OpenExecutable must give; "" to accept
	}{
		{"valid", false, keep, "", ""},
		{"digest mismatch", false, keep, evidence.FromBytes([]byte("another kubectl")), CodeExecDigest},
		{"pinned digest invalid", false, keep, "sha256:abc", evidence.CodeDigestInvalid},
		{"pinned digest of another algorithm", false, keep, digest.Digest("sha512:" + strings.Repeat("ab", 64)), evidence.CodeDigestInvalid},
		{"relative path", false, func(_ *testing.T, _, p string) string { return p[1:] }, "", CodePathInvalid},
		{"unclean path", false, func(_ *testing.T, d, _ string) string { return d + "/./kubectl" }, "", CodePathInvalid},
		{"missing", false, func(_ *testing.T, d, _ string) string { return d + "/absent" }, "", CodeNotFound},
		{"mode 0775: group-writable", false, chmod(0o775), "", CodeExecWritable},
		{"mode 0757: other-writable", false, chmod(0o757), "", CodeExecWritable},
		{"mode 0722", false, chmod(0o722), "", CodeExecWritable},
		{"mode 0644: not executable", false, chmod(0o644), "", CodeExecNotExecutable},
		{"mode 0655: not executable by its owner", false, chmod(0o655), "", CodeExecNotExecutable},
		{"mode 4755: setuid", false, chmod(0o4755), "", CodeExecSetID},
		{"mode 2755: setgid", false, chmod(0o2755), "", CodeExecSetID},
		{"mode 0500", false, chmod(0o500), "", ""},
		{"symlink as the path", false, func(t *testing.T, d, p string) string {
			must(t, os.Symlink(p, d+"/kubectl-link"))
			return d + "/kubectl-link"
		}, "", CodeSymlink},
		{"symlink as the parent directory", false, func(t *testing.T, d, _ string) string {
			must(t, os.Symlink(d, filepath.Dir(d)+"/bin-link"))
			return filepath.Dir(d) + "/bin-link/kubectl"
		}, "", CodeSymlink},
		{"hard link", false, func(t *testing.T, d, p string) string {
			must(t, os.Link(p, d+"/kubectl-1.34"))
			return p
		}, "", CodeExecLinkCount},
		{"directory", false, func(t *testing.T, d, _ string) string {
			mkdir(t, d+"/sub", 0o755)
			return d + "/sub"
		}, "", CodeExecNotRegular},
		{"fifo", false, func(t *testing.T, d, _ string) string {
			must(t, unix.Mkfifo(d+"/fifo", 0o755))
			return d + "/fifo"
		}, "", CodeExecNotRegular},
		{"in a shared 0755 directory", false, func(t *testing.T, d, p string) string {
			must(t, os.Chmod(d, 0o755))
			return p
		}, "", ""},
		{"owned by another non-root uid", true, func(t *testing.T, _, p string) string {
			must(t, os.Chown(p, nobody, nobody))
			return p
		}, "", CodeExecOwner},
		{"owned by root, run by a non-root operator", true, func(t *testing.T, _, p string) string {
			asUID(t, 1000)
			return p
		}, "", ""},
		{"owned by the operator", true, func(t *testing.T, _, p string) string {
			must(t, os.Chown(p, 1000, 1000))
			asUID(t, 1000)
			return p
		}, "", ""},
		{"owned by another uid, run by a non-root operator", true, func(t *testing.T, _, p string) string {
			must(t, os.Chown(p, nobody, nobody))
			asUID(t, 1000)
			return p
		}, "", CodeExecOwner},
	}
	resolvers(t, func(t *testing.T) {
		for _, v := range vectors {
			t.Run(v.name, func(t *testing.T) {
				if v.root {
					needRoot(t)
				}
				p := installExe(t, privateDir(t), exe, 0o755)
				path := v.setup(t, filepath.Dir(p), p)
				pin := pinned
				if v.pinned != "" {
					pin = v.pinned
				}
				// InspectExecutable runs every check but the pin: the same code, except that a
				// vector about the pinned digest is accepted with the content's digest.
				inspectCode := v.code
				if v.pinned != "" {
					inspectCode = ""
				}
				ie, ierr := InspectExecutable(path)
				wantCode(t, ierr, inspectCode)
				if ierr == nil {
					if ie.Digest() != pinned {
						t.Fatalf("InspectExecutable Digest() = %s, want %s", ie.Digest(), pinned)
					}
					ie.Close()
				}
				e, err := OpenExecutable(path, pin)
				wantCode(t, err, v.code)
				if err != nil {
					if e != nil {
						t.Fatal("refused OpenExecutable returned an executable")
					}
					return
				}
				defer e.Close()
				if e.Digest() != pinned {
					t.Fatalf("Digest() = %s, want %s", e.Digest(), pinned)
				}
				must(t, e.ReverifyIdentity())
				must(t, e.ReverifyFull())
			})
		}
	})
}

func keep(_ *testing.T, _, p string) string { return p }

// TestExecThroughDescriptor replaces the path with another program after the open and shows
// that ExecPath still runs the bytes that were hashed, while ReverifyIdentity sees the swap.
func TestExecThroughDescriptor(t *testing.T) {
	original, replaced := markerBinaries(t)
	dir := privateDir(t)
	p := installExe(t, dir, original, 0o755)
	e, err := OpenExecutable(p, evidence.FromBytes(original))
	must(t, err)
	defer e.Close()
	if !strings.HasPrefix(e.ExecPath(), "/proc/self/fd/") {
		t.Fatalf("ExecPath() = %q", e.ExecPath())
	}
	must(t, e.ReverifyIdentity())

	writeFile(t, dir+"/kubectl.new", replaced, 0o755)
	must(t, os.Rename(dir+"/kubectl.new", p))
	if out := run(t, p); out != "replacement" {
		t.Fatalf("the path runs %q: the swap did not happen", out)
	}
	if out := run(t, e.ExecPath()); out != "original" {
		t.Fatalf("ExecPath runs %q, want the held original", out)
	}
	wantCode(t, e.ReverifyIdentity(), CodeExecChanged)
	wantCode(t, e.ReverifyFull(), CodeExecChanged)

	// The record describes the held inode, not whatever the path names now.
	var held, named unix.Stat_t
	must(t, unix.Stat(e.ExecPath(), &held))
	must(t, unix.Stat(p, &named))
	in := e.Input()
	if in.Inode == formatUint(named.Ino) || in.Inode != formatUint(held.Ino) {
		t.Fatalf("Input() inode %s, held %d, path now %d", in.Inode, held.Ino, named.Ino)
	}
}

func run(t *testing.T, path string) string {
	t.Helper()
	out, err := exec.Command(path).Output()
	if err != nil {
		t.Fatalf("run %s: %v", path, err)
	}
	return strings.TrimSpace(string(out))
}

// TestReverifyFullInPlace rewrites the held inode through another descriptor and restores its
// mtime. ReverifyIdentity sees the ctime; with the recorded identity moved to the new stat (a
// filesystem whose ctime did not tick), only ReverifyFull's re-hash can still see it, and does.
func TestReverifyFullInPlace(t *testing.T) {
	exe := []byte("#!kubectl bytes, version one")
	p := installExe(t, privateDir(t), exe, 0o755)
	e, err := OpenExecutable(p, evidence.FromBytes(exe))
	must(t, err)
	defer e.Close()
	keepTimes(t, p, func() {
		w, err := os.OpenFile(p, os.O_WRONLY, 0)
		must(t, err)
		_, err = w.WriteAt([]byte("TWO"), int64(len(exe)-3))
		must(t, errorsJoin(err, w.Close()))
	})
	wantCode(t, e.ReverifyIdentity(), CodeExecChanged)
	wantCode(t, e.ReverifyFull(), CodeExecChanged)

	st, err := e.fstat()
	must(t, err)
	e.id = identityOf(&st)
	must(t, e.ReverifyIdentity())
	err = e.ReverifyFull()
	wantCode(t, err, CodeExecChanged)
	if !strings.Contains(err.Error(), "content now has digest") {
		t.Fatalf("refused for another reason: %v", err)
	}
}

func TestExecutableReverifyIdentity(t *testing.T) {
	exe := []byte("kubectl")
	vectors := []struct {
		name   string
		change func(t *testing.T, p string) // changes the file or its path after the open
		code   refuse.Code                  // the reason code ReverifyIdentity must give; "" for none
	}{
		{"unchanged", func(*testing.T, string) {}, ""},
		{"mode changed", func(t *testing.T, p string) { must(t, os.Chmod(p, 0o700)) }, CodeExecChanged},
		{"hard link added", func(t *testing.T, p string) { must(t, os.Link(p, p+".2")) }, CodeExecChanged},
		{"touched", func(t *testing.T, p string) {
			must(t, os.Chtimes(p, time0, time0))
		}, CodeExecChanged},
		{"deleted", func(t *testing.T, p string) { must(t, os.Remove(p)) }, CodeExecChanged},
		{"moved away, same inode", func(t *testing.T, p string) { must(t, os.Rename(p, p+".old")) }, CodeExecChanged},
		{"replaced by a symlink to itself", func(t *testing.T, p string) {
			must(t, os.Rename(p, p+".real"))
			must(t, os.Symlink(p+".real", p))
		}, CodeExecChanged},
		{"parent replaced by a symlink", func(t *testing.T, p string) {
			d := filepath.Dir(p)
			must(t, os.Rename(d, d+".real"))
			must(t, os.Symlink(d+".real", d))
		}, CodeExecChanged},
	}
	resolvers(t, func(t *testing.T) {
		for _, v := range vectors {
			t.Run(v.name, func(t *testing.T) {
				p := installExe(t, privateDir(t), exe, 0o755)
				e, err := OpenExecutable(p, evidence.FromBytes(exe))
				must(t, err)
				defer e.Close()
				v.change(t, p)
				wantCode(t, e.ReverifyIdentity(), v.code)
			})
		}
	})
}

func TestExecutableInput(t *testing.T) {
	exe := []byte("kubectl v1.34")
	p := installExe(t, privateDir(t), exe, 0o750)
	e, err := OpenExecutable(p, evidence.FromBytes(exe))
	must(t, err)
	var st unix.Stat_t
	must(t, unix.Stat(p, &st))
	want := evidence.Input{
		Schema: evidence.SchemaInput, Role: evidence.RoleKubectl, Path: p,
		Dev: formatUint(st.Dev), Inode: formatUint(st.Ino), Mode: "0750", UID: int64(os.Getuid()),
		Size: int64(len(exe)), Mtime: stamp(st.Mtim), Ctime: stamp(st.Ctim), Digest: evidence.FromBytes(exe),
	}
	if got := e.Input(); !reflect.DeepEqual(got, want) {
		t.Fatalf("Input() =\n%+v, want\n%+v", got, want)
	}
	must(t, e.Close())
	wantCode(t, e.ReverifyIdentity(), CodeExecChanged)
}
