package materialize

import (
	"errors"
	"os"
	"path/filepath"
	"syscall"
	"testing"

	"github.com/qinglong/ql3/refuse"
)

func released(t *testing.T) *Result {
	t.Helper()
	r, err := Materialize(readRelease(t, "catalog.json"), readRelease(t, "unlocked.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// listing returns name -> content of every entry in dir, so a test sees stray temp files too.
func listing(t *testing.T, dir string) map[string]string {
	t.Helper()
	es, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	m := map[string]string{}
	for _, e := range es {
		b, _ := os.ReadFile(filepath.Join(dir, e.Name()))
		m[e.Name()] = string(b)
	}
	return m
}

func TestWriteDirCreates(t *testing.T) {
	r := released(t)
	// A restrictive umask must not leave the directory or the files with other modes.
	old := syscall.Umask(0o277)
	defer syscall.Umask(old)
	dir := filepath.Join(t.TempDir(), "out")
	w, err := WriteDir(dir, r)
	if err != nil {
		t.Fatal(err)
	}
	if w.Manifest != filepath.Join(dir, ManifestName) || w.Report != filepath.Join(dir, ReportName) {
		t.Fatalf("paths %+v", w)
	}
	if got := listing(t, dir); len(got) != 2 || got[ManifestName] != string(r.Manifest) || got[ReportName] != string(r.Report) {
		t.Fatalf("directory holds %d entries", len(got))
	}
	for p, want := range map[string]os.FileMode{dir: os.ModeDir | 0o700, w.Manifest: 0o600, w.Report: 0o600} {
		st, err := os.Lstat(p)
		if err != nil || st.Mode() != want || st.Sys().(*syscall.Stat_t).Uid != uint32(os.Getuid()) {
			t.Errorf("%s: mode %v, want %v (%v)", p, st.Mode(), want, err)
		}
		if st.Sys().(*syscall.Stat_t).Nlink != 1 && !st.IsDir() {
			t.Errorf("%s has %d links", p, st.Sys().(*syscall.Stat_t).Nlink)
		}
	}
}

func TestWriteDirNoReplace(t *testing.T) {
	r := released(t)
	other := &Result{Manifest: []byte("other\n"), Report: []byte("{}\n")}
	vectors := []struct {
		name    string           // what is already in DIR
		prepare func(dir string) // creates it
	}{
		{"both files (a second run)", func(dir string) {
			if _, err := WriteDir(dir, r); err != nil {
				t.Fatal(err)
			}
		}},
		{"the manifest only", func(dir string) { mustWrite(t, filepath.Join(dir, ManifestName), "x") }},
		{"the report only", func(dir string) { mustWrite(t, filepath.Join(dir, ReportName), "x") }},
		{"a dangling symlink as the report", func(dir string) {
			if err := os.Symlink(filepath.Join(dir, "nowhere"), filepath.Join(dir, ReportName)); err != nil {
				t.Fatal(err)
			}
		}},
		{"a directory as the manifest", func(dir string) {
			if err := os.Mkdir(filepath.Join(dir, ManifestName), 0o700); err != nil {
				t.Fatal(err)
			}
		}},
	}
	for _, v := range vectors {
		t.Run(v.name, func(t *testing.T) {
			dir := filepath.Join(t.TempDir(), "out")
			if err := os.Mkdir(dir, 0o700); err != nil {
				t.Fatal(err)
			}
			v.prepare(dir)
			before := listing(t, dir)
			_, err := WriteDir(dir, other)
			if refuse.CodeOf(err) != CodeOutExists {
				t.Fatalf("got %v, want %s", err, CodeOutExists)
			}
			if after := listing(t, dir); !sameListing(before, after) {
				t.Fatalf("directory changed: %v -> %v", before, after)
			}
		})
	}
}

func TestWriteDirRefusals(t *testing.T) {
	r := released(t)
	vectors := []struct {
		name string                   // what is wrong with DIR
		dir  func(base string) string // prepares DIR under a fresh base directory
		code refuse.Code              // the expected reason code
	}{
		{"mode 0755", func(b string) string { return mkdir(t, b, 0o755) }, CodeOutMode},
		{"mode 0750", func(b string) string { return mkdir(t, b, 0o750) }, CodeOutMode},
		{"sticky bit", func(b string) string { d := mkdir(t, b, 0o700); chmod(t, d, 0o1700); return d }, CodeOutMode},
		{"owned by another uid", func(b string) string {
			if os.Getuid() != 0 {
				return "/" // owned by root, which the test user is not
			}
			d := mkdir(t, b, 0o700)
			if err := os.Chown(d, 65534, 65534); err != nil {
				t.Fatal(err)
			}
			return d
		}, CodeOutOwner},
		{"a symlink to a good directory", func(b string) string {
			d := mkdir(t, b, 0o700)
			l := filepath.Join(b, "link")
			if err := os.Symlink(d, l); err != nil {
				t.Fatal(err)
			}
			return l
		}, CodeOutDir},
		{"a regular file", func(b string) string { p := filepath.Join(b, "f"); mustWrite(t, p, "x"); return p }, CodeOutDir},
		{"missing parent", func(b string) string { return filepath.Join(b, "no", "out") }, CodeOutDir},
	}
	for _, v := range vectors {
		t.Run(v.name, func(t *testing.T) {
			dir := v.dir(t.TempDir())
			_, err := WriteDir(dir, r)
			if got := refuse.CodeOf(err); got != v.code {
				t.Fatalf("got %s (%v), want %s", got, err, v.code)
			}
			if _, err := os.Lstat(filepath.Join(dir, ManifestName)); !errors.Is(err, os.ErrNotExist) && v.code != CodeOutDir {
				t.Fatalf("%s written despite the refusal", ManifestName)
			}
		})
	}
}

// TestWriteDirRollback fails the commit of the second file and checks that neither file, nor any
// staged temp file, is left behind, and that a file raced in by someone else is not touched.
func TestWriteDirRollback(t *testing.T) {
	r := released(t)
	vectors := []struct {
		name string // how the second commit fails
		hook func(dir string) error
		left map[string]string // what DIR holds afterwards
		code refuse.Code
	}{
		{"i/o error", func(string) error { return errors.New("injected") }, map[string]string{}, CodeOutIO},
		{"report raced in", func(dir string) error { mustWrite(t, filepath.Join(dir, ReportName), "racer"); return nil },
			map[string]string{ReportName: "racer"}, CodeOutExists},
	}
	for _, v := range vectors {
		t.Run(v.name, func(t *testing.T) {
			dir := filepath.Join(t.TempDir(), "out")
			renameHook = func() error { return v.hook(dir) }
			defer func() { renameHook = nil }()
			_, err := WriteDir(dir, r)
			if got := refuse.CodeOf(err); got != v.code {
				t.Fatalf("got %s (%v), want %s", got, err, v.code)
			}
			if got := listing(t, dir); !sameListing(got, v.left) {
				t.Fatalf("directory holds %v, want %v", keys(got), keys(v.left))
			}
		})
	}
}

func mustWrite(t *testing.T, p, s string) {
	t.Helper()
	if err := os.WriteFile(p, []byte(s), 0o600); err != nil {
		t.Fatal(err)
	}
}

func mkdir(t *testing.T, base string, mode os.FileMode) string {
	t.Helper()
	d := filepath.Join(base, "out")
	if err := os.Mkdir(d, 0o700); err != nil {
		t.Fatal(err)
	}
	chmod(t, d, mode)
	return d
}

func chmod(t *testing.T, p string, mode os.FileMode) {
	t.Helper()
	if err := syscall.Chmod(p, uint32(mode)); err != nil {
		t.Fatal(err)
	}
}

func sameListing(a, b map[string]string) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if w, ok := b[k]; !ok || w != v {
			return false
		}
	}
	return true
}

func keys(m map[string]string) []string {
	var ks []string
	for k := range m {
		ks = append(ks, k)
	}
	return ks
}
