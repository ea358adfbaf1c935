package stablefile

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/qinglong/ql3/evidence"
	"github.com/qinglong/ql3/refuse"
)

func TestReverify(t *testing.T) {
	vectors := []struct {
		name   string
		root   bool                         // needs root
		change func(t *testing.T, p string) // changes the file after Read
		code   refuse.Code                  // the reason code Reverify must give; "" for none
	}{
		{"unchanged", false, func(*testing.T, string) {}, ""},
		{"read again", false, func(t *testing.T, p string) {
			_, err := os.ReadFile(p)
			must(t, err)
		}, ""},
		{"content appended", false, func(t *testing.T, p string) { must(t, appendTo(p, []byte("x"))) }, CodeChanged},
		{"same size, mtime restored", false, func(t *testing.T, p string) {
			keepTimes(t, p, func() { writeFile(t, p, []byte("CONTENT"), 0o600) })
		}, CodeChanged},
		{"touched, content unchanged", false, func(t *testing.T, p string) {
			must(t, os.Chtimes(p, time.Time{}, time.Date(2020, 1, 1, 0, 0, 0, 0, time.UTC)))
		}, CodeChanged},
		{"renamed over with the same content", false, func(t *testing.T, p string) {
			writeFile(t, p+".new", []byte("content"), 0o600)
			must(t, os.Rename(p+".new", p))
		}, CodeChanged},
		{"mode changed", false, func(t *testing.T, p string) { must(t, os.Chmod(p, 0o644)) }, CodeChanged},
		{"mode changed and restored", false, func(t *testing.T, p string) {
			must(t, os.Chmod(p, 0o644))
			must(t, os.Chmod(p, 0o600))
		}, CodeChanged},
		{"hard link added", false, func(t *testing.T, p string) { must(t, os.Link(p, p+".link")) }, CodeChanged},
		{"hard link added and removed", false, func(t *testing.T, p string) {
			must(t, os.Link(p, p+".link"))
			must(t, os.Remove(p+".link"))
		}, CodeChanged},
		{"deleted", false, func(t *testing.T, p string) { must(t, os.Remove(p)) }, CodeChanged},
		{"replaced by a symlink", false, func(t *testing.T, p string) {
			must(t, os.Rename(p, p+".real"))
			must(t, os.Symlink(p+".real", p))
		}, CodeChanged},
		{"directory mode changed", false, func(t *testing.T, p string) { must(t, os.Chmod(filepath.Dir(p), 0o755)) }, CodeChanged},
		{"directory replaced, file moved into it", false, func(t *testing.T, p string) {
			d := filepath.Dir(p)
			must(t, os.Rename(d, d+".old"))
			mkdir(t, d, 0o700)
			must(t, os.Rename(d+".old/input", p))
		}, CodeChanged},
		{"owner changed", true, func(t *testing.T, p string) { must(t, os.Chown(p, nobody, nobody)) }, CodeChanged},
		{"unrelated file added to the directory", false, func(t *testing.T, p string) {
			writeFile(t, filepath.Dir(p)+"/other", []byte("x"), 0o600)
		}, ""},
	}
	resolvers(t, func(t *testing.T) {
		for _, v := range vectors {
			t.Run(v.name, func(t *testing.T) {
				if v.root {
					needRoot(t)
				}
				p := privateFile(t, []byte("content"))
				f, err := readGuarded(t, p, testCeiling)
				must(t, err)
				v.change(t, p)
				wantCode(t, f.Reverify(), v.code)
			})
		}
	})
}

// keepTimes runs change and then puts p's atime and mtime back as they were.
func keepTimes(t *testing.T, p string, change func()) {
	t.Helper()
	var st unix.Stat_t
	must(t, unix.Stat(p, &st))
	change()
	must(t, unix.UtimesNano(p, []unix.Timespec{st.Atim, st.Mtim}))
	var after unix.Stat_t
	must(t, unix.Stat(p, &after))
	if after.Mtim != st.Mtim || after.Size != st.Size {
		t.Fatal("keepTimes did not restore mtime and size")
	}
}

// TestReverifyRehash shows that the re-hash alone catches a same-size rewrite: the recorded
// identity is moved to the rewritten file's (as on a filesystem whose ctime did not tick), and
// Reverify must still refuse on the content.
func TestReverifyRehash(t *testing.T) {
	p := privateFile(t, []byte("content"))
	f, err := Read(p, evidence.RoleLockReport, testCeiling)
	must(t, err)
	keepTimes(t, p, func() { writeFile(t, p, []byte("CONTENT"), 0o600) })
	s, err := readPrivate(p, f.Role, f.ceiling)
	must(t, err)
	f.id, f.dir = s.id, s.dir
	err = f.Reverify()
	wantCode(t, err, CodeChanged)
	if !strings.Contains(err.Error(), "content now has digest") {
		t.Fatalf("refused for another reason: %v", err)
	}
}
