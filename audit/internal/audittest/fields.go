package audittest

import (
	"bytes"
	"encoding/json"
	"fmt"
	"sort"
	"strings"
	"testing"

	"github.com/qinglong/ql3/audit"
	"github.com/qinglong/ql3/evidence"
	"github.com/qinglong/ql3/refuse"
)

// FieldOutcome is what the audit said of one record with one leaf changed.
type FieldOutcome struct {
	Object int    // index in the closure
	Path   string // the leaf, e.g. $.execs[2].size
	Passed bool
	Code   refuse.Code
}

// FieldSweep changes, one at a time, every leaf (string, number, bool) of every record of
// subject's closure to another value of the same type, stores the record canonically with every
// reference and the index re-pointed, and audits. A change to a time must pass, or be refused by
// the record-time check alone (AUDIT_RECORD_TIME); a change to anything the audit does not document as uncheckable must be refused, by a check of
// its own (not only by the index check). It returns every outcome.
func FieldSweep(t *testing.T, fx *Fixture, subject evidence.Descriptor) []FieldOutcome {
	st := Open(t, fx.Snap.Materialize(t))
	objs := Closure(t, st, subject)
	var out []FieldOutcome
	for i, d := range objs {
		if _, isRecord := evidence.RecordSchema(d.MediaType); !isRecord {
			continue
		}
		orig := fx.Snap["blobs/sha256/"+d.Digest.Encoded()]
		for k := 0; ; k++ {
			v := decodeGeneric(t, orig)
			skip := k
			path, ok := mutateLeaf(v, "$", &skip)
			if !ok {
				break
			}
			mutated, err := evidence.MarshalRecord(v)
			if err != nil {
				t.Fatalf("object %d %s: %v", i, path, err)
			}
			root := fx.Snap.Materialize(t)
			f := NewForger(t, root)
			f.Replace(d.Digest, mutated)
			nr := f.Rewrite(subject)
			f.TryPublish(nr)
			rep := Audit(t, root, nr.Digest)
			o := FieldOutcome{Object: i, Path: path, Passed: rep.OK, Code: rep.Code}
			out = append(out, o)
			switch {
			case Equivalent(d.MediaType, orig, mutated, TimesOnly):
				// A time is bound by no digest, only by the record-time check (its form and its
				// bounds against the exec records): any other refusal over-reaches.
				if !rep.OK && rep.Code != audit.CodeRecordTime {
					t.Errorf("object %d (%s) %s: a time changed, audit refused %s\n%s", i, d.MediaType, path, rep.Code, Failed(rep))
				}
			case !Equivalent(d.MediaType, orig, mutated, Unverifiable):
				if rep.OK || rep.Code == audit.CodeUnpublished {
					t.Errorf("object %d (%s) %s changed: audit ok %v code %s", i, d.MediaType, path, rep.OK, rep.Code)
				}
			}
		}
	}
	return out
}

func decodeGeneric(t *testing.T, b []byte) any {
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		t.Fatal(err)
	}
	return v
}

// mutateLeaf changes the k-th leaf of v in place (counting down k as it walks, keys in order)
// and returns its path; false when v has fewer leaves.
func mutateLeaf(v any, path string, k *int) (string, bool) {
	switch x := v.(type) {
	case map[string]any:
		keys := make([]string, 0, len(x))
		for key := range x {
			keys = append(keys, key)
		}
		sort.Strings(keys)
		for _, key := range keys {
			if p, ok := leaf(x[key], path+"."+key, k, func(n any) { x[key] = n }); ok {
				return p, true
			}
		}
	case []any:
		for i := range x {
			if p, ok := leaf(x[i], fmt.Sprintf("%s[%d]", path, i), k, func(n any) { x[i] = n }); ok {
				return p, true
			}
		}
	}
	return "", false
}

func leaf(v any, path string, k *int, set func(any)) (string, bool) {
	var next any
	switch x := v.(type) {
	case map[string]any, []any:
		return mutateLeaf(x, path, k)
	case string:
		switch {
		case strings.HasPrefix(x, "sha256:"):
			next = string(otherDigest)
		default:
			next = x + "x"
		}
	case json.Number:
		next = json.Number(fmt.Sprint(mustInt(x) + 1))
	case bool:
		next = !x
	default:
		return "", false
	}
	if *k > 0 {
		*k--
		return "", false
	}
	set(next)
	return path, true
}

func mustInt(n json.Number) int64 {
	i, err := n.Int64()
	if err != nil {
		panic(err)
	}
	return i
}
