package convergence_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"reflect"
	"strconv"
	"strings"
	"testing"

	"github.com/qinglong/ql3/evidence"
	"github.com/qinglong/ql3/verdict/convergence"
)

// applyPatch is an RFC 6902 applier for the operations a handback uses (test, remove, replace),
// written for the test alone so that the patch is checked by code that does not build it.
func applyPatch(doc any, patch []byte) (any, error) {
	var ops []struct {
		Op    string          `json:"op"`
		Path  string          `json:"path"`
		Value json.RawMessage `json:"value"`
	}
	if err := json.Unmarshal(patch, &ops); err != nil {
		return nil, err
	}
	for _, op := range ops {
		toks := strings.Split(op.Path, "/")[1:]
		for i, t := range toks {
			toks[i] = strings.ReplaceAll(strings.ReplaceAll(t, "~1", "/"), "~0", "~")
		}
		parent := doc
		for _, t := range toks[:len(toks)-1] {
			switch p := parent.(type) {
			case map[string]any:
				parent = p[t]
			case []any:
				i, err := strconv.Atoi(t)
				if err != nil || i >= len(p) {
					return nil, fmt.Errorf("%s: no element %s", op.Path, t)
				}
				parent = p[i]
			default:
				return nil, fmt.Errorf("%s: not a container", op.Path)
			}
		}
		last := toks[len(toks)-1]
		var val any
		if op.Value != nil {
			dec := json.NewDecoder(bytes.NewReader(op.Value))
			dec.UseNumber()
			if err := dec.Decode(&val); err != nil {
				return nil, err
			}
		}
		switch p := parent.(type) {
		case map[string]any:
			cur, ok := p[last]
			if !ok {
				return nil, fmt.Errorf("%s: absent", op.Path)
			}
			switch op.Op {
			case "test":
				if !reflect.DeepEqual(cur, val) {
					return nil, fmt.Errorf("test %s: %v is not %v", op.Path, cur, val)
				}
			case "remove":
				delete(p, last)
			case "replace":
				p[last] = val
			}
		case []any:
			i, err := strconv.Atoi(last)
			if err != nil || i >= len(p) {
				return nil, fmt.Errorf("%s: no element", op.Path)
			}
			switch op.Op {
			case "test":
				if !reflect.DeepEqual(p[i], val) {
					return nil, fmt.Errorf("test %s failed", op.Path)
				}
			case "remove":
				// the parent slice is shortened in place through its holder
				np := append(append([]any(nil), p[:i]...), p[i+1:]...)
				if err := setAt(doc, toks[:len(toks)-1], np); err != nil {
					return nil, err
				}
			case "replace":
				p[i] = val
			}
		default:
			return nil, fmt.Errorf("%s: not a container", op.Path)
		}
	}
	return doc, nil
}

func setAt(doc any, toks []string, v any) error {
	parent := doc
	for _, t := range toks[:len(toks)-1] {
		switch p := parent.(type) {
		case map[string]any:
			parent = p[t]
		case []any:
			i, _ := strconv.Atoi(t)
			parent = p[i]
		}
	}
	last := toks[len(toks)-1]
	switch p := parent.(type) {
	case map[string]any:
		p[last] = v
	case []any:
		i, _ := strconv.Atoi(last)
		p[i] = v
	default:
		return fmt.Errorf("cannot set %v", toks)
	}
	return nil
}

// handedBack applies every handback patch to its item of a List output and returns the output
// the next read would show (before any apply).
func handedBack(t *testing.T, c capture, hs []convergence.Handback) []byte {
	t.Helper()
	doc := decode(t, c.out)
	items, _ := doc["items"].([]any)
	for _, h := range hs {
		if h.Patch == nil {
			continue
		}
		for i, it := range items {
			meta := it.(map[string]any)["metadata"].(map[string]any)
			if meta["uid"] == h.Object.UID {
				got, err := applyPatch(it, h.Patch)
				if err != nil {
					t.Fatalf("patch of %s does not apply: %v\n%s", h.Object.Name, err, h.Patch)
				}
				items[i] = got
			}
		}
	}
	return encode(t, doc)
}

// TestHandbacksCaptured: on the captured drifts (another applier's Apply, kubectl set image's
// Update), the patch applies to the object as read, and afterwards no other manager holds a
// drifted field; a patch of a stale read (another resourceVersion) is refused by its first test.
func TestHandbacksCaptured(t *testing.T) {
	for _, tc := range []struct {
		file, path, holder string
	}{
		{"live-field-not-owned.json", "data.QL_PORT", "other (Apply)"},
		{"live-image-mismatch.json", "spec.template.spec.containers[name=web].image", "kubectl-set (Update)"},
	} {
		t.Run(tc.file, func(t *testing.T) {
			c := load(t, tc.file, "manifest.yaml")
			hs, err := convergence.Handbacks(c.input())
			if err != nil {
				t.Fatal(err)
			}
			var found bool
			for _, h := range hs {
				for _, f := range h.Fields {
					if f.Path == tc.path && len(f.Holders) == 1 && f.Holders[0].String() == tc.holder {
						found = true
					}
				}
			}
			if !found || len(hs) != 1 || hs[0].Patch == nil {
				t.Fatalf("handbacks %+v: want %s held by %s, one patch", hs, tc.path, tc.holder)
			}
			if !bytes.HasPrefix(hs[0].Patch, []byte(`[{"op":"test","path":"/metadata/resourceVersion","value":"`+hs[0].Object.ResourceVersion+`"}`)) {
				t.Fatalf("patch does not test the resourceVersion first: %s", hs[0].Patch)
			}
			after := c
			after.out = handedBack(t, c, hs)
			hs2, err := convergence.Handbacks(after.input())
			if err != nil {
				t.Fatal(err)
			}
			for _, h := range hs2 {
				if h.Patch != nil {
					t.Fatalf("after the handback %s still has holders: %+v", h.Object.Name, h.Fields)
				}
			}
			// Stale: the object changed after the read.
			doc := decode(t, c.out)
			for _, it := range doc["items"].([]any) {
				meta := it.(map[string]any)["metadata"].(map[string]any)
				if meta["uid"] == hs[0].Object.UID {
					meta["resourceVersion"] = "999999"
					if _, err := applyPatch(it, hs[0].Patch); err == nil || !strings.Contains(err.Error(), "resourceVersion") {
						t.Fatalf("a stale patch applied: %v", err)
					}
				}
			}
		})
	}
}

// TestHandbacksNoEntryLeft: when the drifted fields' holders are the object's only entries (our
// entry lost every field), removing them would leave managedFields empty and the server would
// credit the fields to before-first-apply (seen on the real cluster); the patch hands the sets to
// one Apply entry of ours instead.
func TestHandbacksNoEntryLeft(t *testing.T) {
	c := load(t, "live-image-mismatch.json", "manifest.yaml")
	doc := decode(t, c.out)
	var idx = -1
	for i, it := range doc["items"].([]any) {
		if at(it, "metadata", "name") == "qinglong-web" && at(it, "kind") == "Deployment" {
			idx = i
		}
	}
	mf := at(doc, item(idx, "metadata", "managedFields")...).([]any)
	var kept []any
	for _, e := range mf {
		if e.(map[string]any)["manager"] != evidence.FieldManager {
			kept = append(kept, e)
		}
	}
	set(doc, kept, item(idx, "metadata", "managedFields")...)
	c.out = encode(t, doc)
	hs, err := convergence.Handbacks(c.input())
	if err != nil {
		t.Fatal(err)
	}
	for _, h := range hs {
		if h.Object.Name != "qinglong-web" || h.Object.Kind != "Deployment" {
			continue
		}
		if !bytes.Contains(h.Patch, []byte(`{"op":"replace","path":"/metadata/managedFields","value":[{"apiVersion":"apps/v1","fieldsType":"FieldsV1","fieldsV1":`)) ||
			!bytes.Contains(h.Patch, []byte(`"manager":"`+evidence.FieldManager+`","operation":"Apply"}]}`)) {
			t.Fatalf("patch: %s", h.Patch)
		}
		return
	}
	t.Fatal("no handback of the web Deployment")
}

// FuzzHandbacks: Handbacks never panics on any output; every patch it returns applies to the
// object as read (its tests pass), and after it no other manager holds a drifted field of it.
func FuzzHandbacks(f *testing.F) {
	for _, s := range fuzzSeeds(f) {
		f.Add(s.fixture, s.out)
	}
	fixtures := fuzzFixtures(f)
	f.Fuzz(func(t *testing.T, fixture byte, out []byte) {
		c := fixtures[int(fixture)%len(fixtures)]
		c.out = out
		hs, err := convergence.Handbacks(c.input())
		if err != nil || len(hs) == 0 {
			return
		}
		dec := json.NewDecoder(bytes.NewReader(out))
		dec.UseNumber()
		var doc map[string]any
		if dec.Decode(&doc) != nil {
			t.Fatalf("Handbacks accepted an output that does not decode")
		}
		items, isList := doc["items"].([]any)
		if !isList {
			items = []any{doc}
		}
		for _, h := range hs {
			if h.Patch == nil {
				continue
			}
			for _, it := range items {
				m, _ := it.(map[string]any)
				meta, _ := m["metadata"].(map[string]any)
				if meta == nil || meta["uid"] != h.Object.UID || meta["name"] != h.Object.Name {
					continue
				}
				if _, err := applyPatch(it, h.Patch); err != nil {
					t.Fatalf("patch of %s does not apply to the object read: %v\n%s", h.Object.Name, err, h.Patch)
				}
			}
		}
	})
}
