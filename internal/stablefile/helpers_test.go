package stablefile

import (
	"os"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/qinglong/ql3/internal/sysfile"
	"github.com/qinglong/ql3/refuse"
)

// nobody is the uid the ownership tests chown to: neither root nor the test's uid.
const nobody = 65534

// resolvers runs f once with openat2 and once with the component-by-component walk, so that both
// resolution paths pass the same matrix.
func resolvers(t *testing.T, f func(t *testing.T)) {
	for _, r := range []struct {
		name    string
		openat2 bool
	}{{"openat2", true}, {"walk", false}} {
		t.Run(r.name, func(t *testing.T) {
			t.Cleanup(sysfile.SetResolverForTest(sysfile.ResolverForTest{Walk: !r.openat2}))
			f(t)
			if r.openat2 && sysfile.Openat2Missing() {
				t.Log("openat2 is unavailable here: the walk ran in its place")
			}
		})
	}
}

// privateDir makes a fresh 0700 directory at a symlink-free path.
func privateDir(t testing.TB) string {
	t.Helper()
	root, err := filepath.EvalSymlinks(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(root, "private")
	mkdir(t, dir, 0o700)
	return dir
}

func mkdir(t testing.TB, dir string, mode os.FileMode) {
	t.Helper()
	if err := os.Mkdir(dir, mode); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(dir, mode); err != nil { // past the umask
		t.Fatal(err)
	}
}

// writeFile writes b to p with exactly mode.
func writeFile(t testing.TB, p string, b []byte, mode os.FileMode) {
	t.Helper()
	if err := os.WriteFile(p, b, mode); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(p, mode); err != nil {
		t.Fatal(err)
	}
}

// privateFile writes a valid private input in a fresh private directory and returns its path.
func privateFile(t testing.TB, b []byte) string {
	t.Helper()
	p := filepath.Join(privateDir(t), "input")
	writeFile(t, p, b, 0o600)
	return p
}

func must(t testing.TB, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

// wantCode fails unless err carries exactly code.
func wantCode(t testing.TB, err error, code refuse.Code) {
	t.Helper()
	if got := refuse.CodeOf(err); got != code {
		t.Fatalf("got code %q (err %v), want %s", got, err, code)
	}
}

func needRoot(t testing.TB) {
	t.Helper()
	if os.Getuid() != 0 {
		t.Skip("needs root to chown, mknod and act as another uid")
	}
}

// asUID makes the package treat uid as the current uid for the rest of the test.
func asUID(t testing.TB, uid int) {
	old := getuid
	getuid = func() int { return uid }
	t.Cleanup(func() { getuid = old })
}

func formatUint(v uint64) string { return strconv.FormatUint(v, 10) }

// time0 is a timestamp no test file has by accident.
var time0 = time.Date(2020, 1, 2, 3, 4, 5, 6, time.UTC)
