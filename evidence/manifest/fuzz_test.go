package manifest

import (
	"bytes"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strconv"
	"testing"

	"github.com/qinglong/ql3/refuse"
)

var update = flag.Bool("update", false, "rewrite the FuzzParseManifest seeds from the testdata/lock fixtures")

const seedDir = "testdata/fuzz/FuzzParseManifest"

// fixtureManifests returns every distinct locked.yaml of the lock fixtures, keyed by seed file
// name.
func fixtureManifests(t testing.TB) map[string][]byte {
	t.Helper()
	paths, err := filepath.Glob("../../testdata/lock/*/locked.yaml")
	if err != nil {
		t.Fatal(err)
	}
	more, err := filepath.Glob("../../testdata/lock/invalid/*/locked.yaml")
	if err != nil {
		t.Fatal(err)
	}
	out := map[string][]byte{}
	seen := map[string]bool{}
	all := append(paths, more...)
	slices.Sort(all)
	for _, p := range all {
		b, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		if seen[string(b)] { // report-only cases share the valid manifest
			continue
		}
		seen[string(b)] = true
		out["fixture-"+filepath.Base(filepath.Dir(p))] = b
	}
	if len(out) < 2 {
		t.Fatalf("found %d fixture manifests", len(out))
	}
	return out
}

func seedFile(b []byte) []byte {
	return fmt.Appendf(nil, "go test fuzz v1\n[]byte(%s)\n", strconv.Quote(string(b)))
}

// TestFuzzSeedsExist keeps the committed corpus seeded from the fixtures: every fixture
// manifest is a seed, byte for byte.
func TestFuzzSeedsExist(t *testing.T) {
	if *update { // drop stale fixture seeds, keep any other corpus entry
		old, _ := filepath.Glob(filepath.Join(seedDir, "fixture-*"))
		for _, p := range old {
			if err := os.Remove(p); err != nil {
				t.Fatal(err)
			}
		}
	}
	for name, b := range fixtureManifests(t) {
		p := filepath.Join(seedDir, name)
		if *update {
			if err := os.MkdirAll(seedDir, 0o755); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(p, seedFile(b), 0o644); err != nil {
				t.Fatal(err)
			}
		}
		got, err := os.ReadFile(p)
		if err != nil {
			t.Fatalf("seed for %s: %v (run go test -run TestFuzzSeedsExist -update)", name, err)
		}
		if !bytes.Equal(got, seedFile(b)) {
			t.Fatalf("seed %s differs from its fixture (run go test -run TestFuzzSeedsExist -update)", p)
		}
	}
}

// FuzzParseManifest: Parse never panics, refuses only with a reason code, and whatever it
// accepts is exactly what kubectl's own decoder reads, with Fields decoded from JSON.
func FuzzParseManifest(f *testing.F) {
	for _, v := range []string{head, head + "---\n" + head, "--- # c\n" + head + "data: {a: \"x\"}\n"} {
		f.Add([]byte(v))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		objs, err := Parse(b)
		if err != nil {
			if refuse.CodeOf(err) == "" {
				t.Fatalf("refusal without a reason code: %v", err)
			}
			return
		}
		agreesWithKubectl(t, b, objs)
		for i, o := range objs {
			var fields map[string]any
			d := json.NewDecoder(bytes.NewReader(o.JSON))
			d.UseNumber()
			if err := d.Decode(&fields); err != nil || !reflect.DeepEqual(fields, o.Fields) {
				t.Fatalf("object %d: Fields do not decode from JSON", i)
			}
			if o.APIVersion == "" || o.Kind == "" || o.Name == "" {
				t.Fatalf("object %d: empty identity", i)
			}
		}
	})
}

// FuzzRereadManifest: Reread never panics and refuses only with a reason code; what Parse
// accepts, Reread reads to exactly the same objects, with and without Parse's objects as known
// documents; whatever Reread accepts is what kubectl's own decoder reads.
func FuzzRereadManifest(f *testing.F) {
	for _, v := range []string{head, head + "---\n" + head, "--- # c\n" + head + "data: {a: \"x\"}\n", head + "data: {a: 0o17}\n"} {
		f.Add([]byte(v))
	}
	for _, b := range fixtureManifests(f) {
		f.Add(b)
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		again, err := Reread(b, nil)
		if err != nil && refuse.CodeOf(err) == "" {
			t.Fatalf("refusal without a reason code: %v", err)
		}
		if err == nil {
			agreesWithKubectl(t, b, again)
		}
		objs, perr := Parse(b)
		if perr != nil {
			return
		}
		if err != nil {
			t.Fatalf("Parse accepts, Reread refuses: %v", err)
		}
		if !reflect.DeepEqual(again, objs) {
			t.Fatalf("Reread reads other objects than Parse")
		}
		known, err := Reread(b, objs)
		if err != nil || !reflect.DeepEqual(known, objs) {
			t.Fatalf("Reread with known documents reads other objects than Parse (%v)", err)
		}
	})
}
