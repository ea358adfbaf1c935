package stablefile

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/qinglong/ql3/refuse"
)

// FuzzCheckPath holds checkPath to its contract: it accepts exactly the absolute paths that are
// their own filepath.Clean, other than "/" and any holding a NUL byte, and refuses everything
// else with CodePathInvalid. An accepted path splits into a parent and a base with no separator.
func FuzzCheckPath(f *testing.F) {
	f.Fuzz(func(t *testing.T, p string) {
		err := checkPath(p)
		canonical := strings.HasPrefix(p, "/") && p != "/" && filepath.Clean(p) == p && !strings.Contains(p, "\x00")
		if canonical != (err == nil) {
			t.Fatalf("checkPath(%q) = %v, canonical %v", p, err, canonical)
		}
		if err != nil {
			if refuse.CodeOf(err) != CodePathInvalid {
				t.Fatalf("checkPath(%q) code %q", p, refuse.CodeOf(err))
			}
			return
		}
		dir, base := filepath.Dir(p), filepath.Base(p)
		if base == "." || base == ".." || strings.Contains(base, "/") || filepath.Join(dir, base) != p || !filepath.IsAbs(dir) {
			t.Fatalf("checkPath accepted %q, which splits into %q and %q", p, dir, base)
		}
		for _, c := range strings.Split(p[1:], "/") {
			if c == "" || c == "." || c == ".." {
				t.Fatalf("checkPath accepted %q with component %q", p, c)
			}
		}
	})
}

// TestFuzzSeedsExist keeps the seed corpus from going missing quietly.
func TestFuzzSeedsExist(t *testing.T) {
	seeds, err := os.ReadDir("testdata/fuzz/FuzzCheckPath")
	if err != nil || len(seeds) < 10 {
		t.Fatalf("seed corpus of FuzzCheckPath: %d files, %v", len(seeds), err)
	}
}
