package convergence_test

import (
	"bytes"
	"encoding/json"
	"flag"
	"fmt"
	"math/big"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"sigs.k8s.io/structured-merge-diff/v6/fieldpath"

	"github.com/qinglong/ql3/evidence"
	"github.com/qinglong/ql3/refuse"
	"github.com/qinglong/ql3/verdict/convergence"
	"github.com/qinglong/ql3/verdict/convergence/internal/convtest"
)

var updateSeeds = flag.Bool("update-seeds", false, "rewrite testdata/fuzz/FuzzVerify from the captured outputs")

// fuzzFixtures are the converged outputs FuzzVerify mutates, each with the manifest it was read
// for: the full captured List, the bare ConfigMap, and the api Deployment alone (an item of the
// List, compact), so that small inputs let the fuzzer reach the interesting bytes quickly.
func fuzzFixtures(t testing.TB) []capture {
	full := load(t, "live-list.json", "manifest.yaml")
	single := load(t, "live-single.json", "configmap.yaml")
	var doc struct{ Items []json.RawMessage }
	if err := json.Unmarshal(full.out, &doc); err != nil {
		t.Fatal(err)
	}
	var api bytes.Buffer
	if err := json.Compact(&api, doc.Items[0]); err != nil {
		t.Fatal(err)
	}
	first, _, _ := strings.Cut(string(readFile(t, "manifest.yaml")), "\n---\n")
	objs := convtest.MustObjects([]byte(strings.ReplaceAll(first, "namespace: qinglong", "namespace: "+namespaceOf(t, full.out))))
	return []capture{full, single, {objs: objs, auths: convtest.Authorities(objs), out: api.Bytes()}}
}

// fuzzSeeds are the seed corpus: each fixture's converged output, every captured refusal (against
// the full fixture), and shapes at the edge of the grammar.
func fuzzSeeds(t testing.TB) map[string]struct {
	fixture byte
	out     []byte
} {
	type seed = struct {
		fixture byte
		out     []byte
	}
	seeds := map[string]seed{
		"empty-list": {0, []byte(`{"apiVersion":"v1","items":[],"kind":"List","metadata":{"resourceVersion":""}}`)},
		"empty-obj":  {1, []byte(`{}`)},
	}
	for i, c := range fuzzFixtures(t) {
		seeds[fmt.Sprintf("converged-%d", i)] = seed{byte(i), c.out}
	}
	for _, f := range []string{"live-count.json", "live-terminating.json", "live-field-not-owned.json", "live-image-mismatch.json", "live-image-not-owned.json"} {
		seeds[strings.TrimSuffix(f, ".json")] = seed{0, readFile(t, f)}
	}
	return seeds
}

// TestFuzzSeedsCommitted keeps the committed corpus in step with the captures, and proves every
// fixture converges, so the fuzzer starts from convergence and mutates away from it.
func TestFuzzSeedsCommitted(t *testing.T) {
	dir := filepath.Join("testdata", "fuzz", "FuzzVerify")
	for name, s := range fuzzSeeds(t) {
		want := fmt.Sprintf("go test fuzz v1\nbyte(%q)\n[]byte(%q)\n", s.fixture, s.out)
		path := filepath.Join(dir, name)
		if *updateSeeds {
			if err := os.MkdirAll(dir, 0o755); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(path, []byte(want), 0o644); err != nil {
				t.Fatal(err)
			}
		}
		got, err := os.ReadFile(path)
		if err != nil || string(got) != want {
			t.Errorf("seed %s is missing or stale (go test -run TestFuzzSeedsCommitted -update-seeds): %v", path, err)
		}
	}
	for i, c := range fuzzFixtures(t) {
		if _, err := convergence.Verify(c.input()); err != nil {
			t.Errorf("fixture %d does not converge: %v", i, err)
		}
	}
}

// FuzzVerify mutates the stdout of a converged apply. Verify must never panic, must refuse with
// one of its own codes, and may pass only if the mutated output still says everything Verify
// proves about the original, judged by an oracle that shares no code with Verify: the same
// objects, the same value at every field the manifest sets (numbers by exact rational value), and
// our manager's Apply entry still holding every leaf of the original field set, as read by
// structured-merge-diff itself.
func FuzzVerify(f *testing.F) {
	for _, s := range fuzzSeeds(f) {
		f.Add(s.fixture, s.out)
	}
	fixtures := fuzzFixtures(f)
	wants := make([][]view, len(fixtures))
	for i, c := range fixtures {
		if wants[i] = oracleView(f, c.out, c); wants[i] == nil {
			f.Fatalf("fixture %d has no oracle view", i)
		}
	}
	f.Fuzz(func(t *testing.T, fixture byte, out []byte) {
		i := int(fixture) % len(fixtures)
		checkMutation(t, fixtures[i], wants[i], out)
	})
}

// TestSingleByteMutations sweeps every byte of the two small converged fixtures: replaced by
// another character, or deleted. Each mutation must be refused or, if it passes, be judged
// equivalent by the oracle, as in FuzzVerify.
func TestSingleByteMutations(t *testing.T) {
	if testing.Short() {
		t.Skip("sweep of about 9,000 mutations")
	}
	fixtures := fuzzFixtures(t)
	for _, i := range []int{1, 2} {
		c := fixtures[i]
		want := oracleView(t, c.out, c)
		passed := 0
		for pos := range c.out {
			alt := byte('x')
			if c.out[pos] == alt {
				alt = 'y'
			}
			replaced := bytes.Clone(c.out)
			replaced[pos] = alt
			deleted := append(bytes.Clone(c.out[:pos]), c.out[pos+1:]...)
			for _, out := range [][]byte{replaced, deleted} {
				if checkMutation(t, c, want, out) {
					passed++
				}
			}
		}
		// Passing mutations exist (timestamps, server defaults, entry times), so the sweep does
		// exercise the oracle and not only the refusals.
		if passed == 0 {
			t.Errorf("fixture %d: no mutation passed, so the oracle was never consulted", i)
		}
		t.Logf("fixture %d: %d of %d mutations pass Verify and the oracle", i, passed, 2*len(c.out))
	}
}

// checkMutation runs Verify on a mutated output of golden and fails t if it panics, refuses with
// a foreign code, or passes something the oracle does not find equivalent. It reports a pass.
func checkMutation(t testing.TB, golden capture, want []view, out []byte) bool {
	t.Helper()
	c := golden
	c.out = out
	res, err := convergence.Verify(c.input())
	if err != nil {
		if code := string(refuse.CodeOf(err)); !strings.HasPrefix(code, "CONVERGENCE_") {
			t.Fatalf("refusal without a convergence code: %v", err)
		}
		return false
	}
	got := oracleView(t, out, golden)
	if got == nil {
		t.Fatalf("Verify passed an output the oracle cannot read: %q", out)
	}
	for i, lo := range res.Objects {
		if lo.UID == "" || lo.ResourceVersion == "" || lo.Kind != golden.objs[i].Kind || lo.Name != golden.objs[i].Name ||
			lo.APIVersion != golden.objs[i].APIVersion || lo.Namespace != golden.objs[i].Namespace {
			t.Fatalf("object %d identity %+v", i, lo)
		}
	}
	for i := range want {
		for p, v := range want[i].values {
			if !oracleEqual(v, got[i].values[p]) {
				t.Fatalf("object %d: Verify passed a changed field %s: %q", i, p, out)
			}
		}
		if want[i].leaves == nil {
			continue
		}
		if got[i].ours == nil {
			t.Fatalf("object %d: Verify passed without our Apply entry: %q", i, out)
		}
		want[i].leaves.Iterate(func(p fieldpath.Path) {
			if !got[i].ours.Has(p) {
				t.Fatalf("object %d: Verify passed though our manager lost %s: %q", i, p, out)
			}
		})
	}
	return true
}

// view is what the oracle reads from one live object.
type view struct {
	values map[string]any // manifest leaf path -> live value (absent: missing key)
	leaves *fieldpath.Set // leaves of our Apply entry's set (golden only)
	ours   *fieldpath.Set // our Apply entry's set
}

func oracleView(t testing.TB, out []byte, c capture) []view {
	dec := json.NewDecoder(bytes.NewReader(out))
	dec.UseNumber()
	var top map[string]any
	if dec.Decode(&top) != nil {
		return nil
	}
	items := []any{top}
	if top["kind"] == "List" {
		items, _ = top["items"].([]any)
	}
	if len(items) != len(c.objs) {
		return nil
	}
	views := make([]view, len(items))
	for i, it := range items {
		v := view{values: map[string]any{}}
		leafPaths(c.objs[i].Fields, "", func(p string, path []any) {
			if lv, ok := lookup(it, path); ok {
				v.values[p] = lv
			}
		})
		mf, _ := lookup(it, []any{"metadata", "managedFields"})
		list, _ := mf.([]any)
		for _, e := range list {
			m, _ := e.(map[string]any)
			if m["manager"] != evidence.FieldManager || m["operation"] != "Apply" || m["subresource"] != nil {
				continue
			}
			raw, _ := json.Marshal(m["fieldsV1"])
			s := &fieldpath.Set{}
			if err := s.FromJSON(bytes.NewReader(raw)); err != nil {
				t.Logf("structured-merge-diff cannot read our set: %v", err)
				return nil
			}
			v.ours, v.leaves = s, s.Leaves()
		}
		views[i] = v
	}
	return views
}

// leafPaths walks the manifest's scalar leaves, skipping the identity fields.
func leafPaths(v any, prefix string, f func(string, []any)) {
	var walk func(v any, p string, path []any)
	walk = func(v any, p string, path []any) {
		switch x := v.(type) {
		case map[string]any:
			for k, e := range x {
				if (len(path) == 0 && (k == "apiVersion" || k == "kind")) || (len(path) == 1 && path[0] == "metadata" && (k == "name" || k == "namespace")) {
					continue
				}
				walk(e, p+"/"+k, append(append([]any{}, path...), k))
			}
		case []any:
			for i, e := range x {
				walk(e, fmt.Sprintf("%s/%d", p, i), append(append([]any{}, path...), i))
			}
		default:
			f(p, path)
		}
	}
	walk(v, prefix, nil)
}

func lookup(v any, path []any) (any, bool) {
	for _, p := range path {
		switch k := p.(type) {
		case string:
			m, ok := v.(map[string]any)
			if !ok {
				return nil, false
			}
			if v, ok = m[k]; !ok {
				return nil, false
			}
		case int:
			l, ok := v.([]any)
			if !ok || k >= len(l) {
				return nil, false
			}
			v = l[k]
		}
	}
	return v, true
}

var smallNumber = regexp.MustCompile(`^-?[0-9]+(\.[0-9]+)?([eE][+-]?[0-9]{1,4})?$`)

// oracleEqual compares two live scalars: numbers as exact rationals (big.Rat), the rest by ==.
func oracleEqual(a, b any) bool {
	na, ok1 := a.(json.Number)
	nb, ok2 := b.(json.Number)
	if !ok1 || !ok2 {
		return a == b
	}
	if !smallNumber.MatchString(string(na)) || !smallNumber.MatchString(string(nb)) {
		return na == nb
	}
	ra, _ := new(big.Rat).SetString(string(na))
	rb, _ := new(big.Rat).SetString(string(nb))
	return ra != nil && rb != nil && ra.Cmp(rb) == 0
}
