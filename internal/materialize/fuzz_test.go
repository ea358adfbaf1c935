package materialize

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"testing"
	"unicode/utf8"

	"github.com/qinglong/ql3/evidence"
	"github.com/qinglong/ql3/refuse"
)

// seeds returns the committed corpus of a fuzz target, rewriting it first under -update. Go's
// fuzzer reads testdata/fuzz/<name> itself; the check here makes sure it is never silently empty.
func seeds(f *testing.F, name string, inputs [][]byte) {
	dir := filepath.Join("testdata", "fuzz", name)
	if *update {
		if err := os.MkdirAll(dir, 0o755); err != nil {
			f.Fatal(err)
		}
		for i, in := range inputs {
			b := fmt.Appendf(nil, "go test fuzz v1\n[]byte(%s)\n", strconv.Quote(string(in)))
			if err := os.WriteFile(filepath.Join(dir, fmt.Sprintf("seed-%02d", i)), b, 0o644); err != nil {
				f.Fatal(err)
			}
		}
	}
	if m, _ := filepath.Glob(filepath.Join(dir, "seed-*")); len(m) < len(inputs) {
		f.Fatalf("committed seed corpus %s has %d files, want %d (run go test -run Fuzz -update)", dir, len(m), len(inputs))
	}
}

func FuzzParseCatalog(f *testing.F) {
	good := readRelease(f, "catalog.json")
	inputs := [][]byte{good, []byte(`{}`), []byte(`{"schema":"a","schema":"b"}`), []byte("{\"images\":[null]}"),
		bytes.Replace(good, []byte("3.4.1"), []byte("3.4.1-rc.1"), 1), bytes.Replace(good, []byte(`"runner"`), []byte(`"web"`), 1)}
	seeds(f, "FuzzParseCatalog", inputs)
	refRE := regexp.MustCompile(`^ghcr\.io/qinglong/[a-z0-9._-]+@sha256:[0-9a-f]{64}$`)
	f.Fuzz(func(t *testing.T, b []byte) {
		c, err := ParseCatalog(b)
		if err != nil {
			if refuse.CodeOf(err) == "" {
				t.Fatalf("error without reason code: %v", err)
			}
			return
		}
		canon, err := evidence.Canonicalize(b)
		if err != nil || c.Digest != evidence.FromBytes(canon) {
			t.Fatalf("accepted a catalog whose digest is not that of its canonical form: %v", err)
		}
		if c.Ref != "refs/tags/v"+c.Version || len(c.Commit) != 40 || c.Workflow != Workflow || len(c.Images) != len(Roles) {
			t.Fatalf("accepted inconsistent catalog %+v", c)
		}
		seen := map[string]bool{}
		for i, im := range c.Images {
			if im.Role != Roles[i] || !refRE.MatchString(im.Reference) || seen[im.Reference] {
				t.Fatalf("accepted image %d %+v", i, im)
			}
			seen[im.Reference] = true
		}
	})
}

// FuzzMaterializeManifest drives the whole manifest path (kubectl's splitter, the YAML subset
// scanner, the converter, the workload rules, the writer and its read-back) with the release's
// catalog. Whatever it accepts must be self-consistent and must refuse to be locked a second time.
func FuzzMaterializeManifest(f *testing.F) {
	unlocked := readRelease(f, "unlocked.yaml")
	inputs := [][]byte{unlocked, readRelease(f, ManifestName), []byte("a: &x b\nc: *x\n"), []byte("a: |\n  &x\nb: c\n"),
		[]byte("- k: 'x\n    y'\n  l: [a, {b: c}]\n"), bytes.Replace(unlocked, []byte("QL_LOG_LEVEL: info"), []byte("QL_LOG_LEVEL: >-\n    x\n    &y"), 1)}
	seeds(f, "FuzzMaterializeManifest", inputs)
	catalog := readRelease(f, "catalog.json")
	f.Fuzz(func(t *testing.T, b []byte) {
		r, err := Materialize(catalog, b)
		if err != nil {
			if refuse.CodeOf(err) == "" {
				t.Fatalf("error without reason code: %v", err)
			}
			return
		}
		if r.Lock.Manifest.Digest != evidence.FromBytes(r.Manifest) || r.Lock.Manifest.ImageAuthorities != len(Roles) {
			t.Fatalf("inconsistent summary %+v", r.Lock.Manifest)
		}
		if _, err := Materialize(catalog, r.Manifest); refuse.CodeOf(err) != CodeAnnotationPreset {
			t.Fatalf("locked manifest could be locked again: %v", err)
		}
	})
}

// FuzzStringRoundTrip checks that any printable string value survives the YAML writer and the
// subset scanner: the materializer must not refuse its own output.
func FuzzStringRoundTrip(f *testing.F) {
	inputs := [][]byte{[]byte("plain"), []byte("a: b # c"), []byte("line1\nline2"), bytes.Repeat([]byte("w &x "), 40), []byte("  lead")}
	seeds(f, "FuzzStringRoundTrip", inputs)
	f.Fuzz(func(t *testing.T, b []byte) {
		v := string(b)
		if !printable(b) || strayRE.Match(b) {
			return
		}
		if _, err := materializeValue(t, v); err != nil {
			t.Fatalf("%q: %v", v, err)
		}
	})
}

// printable reports whether b is valid UTF-8 without the control characters, line breaks other
// than \n, and byte order marks that the manifest reader refuses.
func printable(b []byte) bool {
	return utf8.Valid(b) && !bytes.ContainsFunc(b, func(r rune) bool {
		return r < 0x20 && r != '\n' && r != '\t' || r >= 0x7f && r <= 0x9f || r == 0x2028 || r == 0x2029 || r == 0xfeff
	})
}
