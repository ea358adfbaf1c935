package convergence

import (
	"bytes"
	"encoding/json"
	"sort"
	"strconv"
	"strings"

	"github.com/qinglong/ql3/evidence"
	"github.com/qinglong/ql3/refuse"
)

// Holder is a managedFields entry of another manager that holds a field which has not converged.
type Holder struct {
	Manager     string `json:"manager"`
	Operation   string `json:"operation"` // Update (kubectl patch, edit, set, ...) or Apply (another server-side applier)
	Subresource string `json:"subresource,omitempty"`
	Index       int    `json:"index"` // the entry's position in metadata.managedFields as read
}

func (h Holder) String() string {
	s := refuse.Ident(h.Manager) + " (" + refuse.Ident(h.Operation)
	if h.Subresource != "" {
		s += ", subresource " + refuse.Ident(h.Subresource)
	}
	return s + ")"
}

// DriftedField is one field the manifest sets that has not converged on a live object.
type DriftedField struct {
	Path     string   `json:"path"`
	Live     string   `json:"live,omitempty"` // "" when the field is absent
	Present  bool     `json:"present"`
	Expected string   `json:"expected"`
	NotOwned bool     `json:"notOwned,omitempty"` // the value is the manifest's, the ownership is not ours
	Holders  []Holder `json:"holders"`            // other managers that hold it now; none for a removed field
}

// Handback is the repair of one live object that has not converged: every drifted field, and the
// JSON patch (RFC 6902) that hands the fields other managers hold back without forcing anything.
type Handback struct {
	Object evidence.LiveObject `json:"object"`
	Fields []DriftedField      `json:"fields"`
	// Patch is nil when no other manager holds a drifted field (a removed field: the next apply
	// sets it again without conflict). Otherwise it first tests the object's resourceVersion and
	// the name and operation of every entry it edits, so that it is refused by the server if the
	// object changed after the read, then removes from those entries exactly the members that
	// hold the drifted fields (an entry left empty is removed whole). When no entry would be left
	// at all, the server would credit every field to "before-first-apply" and the apply would
	// conflict with it: the patch then replaces the entries with one Apply entry of ours holding
	// the sets they held.
	Patch []byte `json:"-"`
}

type patchOp struct {
	Op    string `json:"op"`
	Path  string `json:"path"`
	Value any    `json:"value,omitempty"`
}

// Handbacks reads the convergence read of a live audit (the stdout Judge reads) and returns, for
// every live object that has not converged, its drifted fields and the patch that hands them back.
// Missing objects are left out: a new apply creates them. Like Judge, it refuses only a read it
// cannot judge.
func Handbacks(in Input) ([]Handback, error) {
	if err := checkInput(in); err != nil {
		return nil, err
	}
	var items []map[string]any
	if len(bytes.TrimSpace(in.Stdout)) > 0 {
		var err error
		if items, err = decodeOutput(in.Stdout); err != nil {
			return nil, err
		}
	}
	var out []Handback
	next := 0
	for i := range in.Objects {
		o := &in.Objects[i]
		if next >= len(items) || !sameIdentity(o, items[next]) {
			continue
		}
		lo, err := identify(o, items[next], in.FieldManager)
		next++
		if err != nil {
			continue // unreadable: nothing to hand back from a set that cannot be read
		}
		w := &fieldWalker{o: o, lo: lo, collect: true}
		if lo.id.APIVersion != o.APIVersion {
			w.drifts = append(w.drifts, fieldFailure{path: fieldPath{{key: "apiVersion", index: -1}}, want: o.APIVersion, live: lo.id.APIVersion, present: true})
		} else if err := w.walk(o.Fields, lo.raw, true, rootOwner(lo.ours)); err != nil {
			return nil, err
		}
		if len(w.drifts) == 0 {
			continue
		}
		h := Handback{Object: lo.id}
		removed := map[*manager]map[*fnode]bool{}
		for _, d := range w.drifts {
			f := DriftedField{Path: d.path.String(), Expected: shownRepair(d.want, true), Live: shownRepair(d.live, d.present),
				Present: d.present, NotOwned: d.notOwned, Holders: []Holder{}}
			for _, m := range lo.managers {
				if m == lo.ours {
					continue
				}
				ow := rootOwner(m).at(lo.raw, d.path)
				if ow.node == nil || ow.node == m.set || !(ow.whole || ow.n != nil) {
					continue
				}
				f.Holders = append(f.Holders, Holder{Manager: m.name, Operation: m.operation, Subresource: m.subresource, Index: m.index})
				if removed[m] == nil {
					removed[m] = map[*fnode]bool{}
				}
				removed[m][ow.node] = true
			}
			h.Fields = append(h.Fields, f)
		}
		if len(removed) > 0 {
			h.Patch = handbackPatch(lo, removed)
		}
		out = append(out, h)
	}
	return out, nil
}

// handbackPatch builds the JSON patch of one object. Tests come first, against the object as
// read; then the edits, entries in descending position so that removing one never moves another.
func handbackPatch(lo *liveObject, removed map[*manager]map[*fnode]bool) []byte {
	ops := []patchOp{{Op: "test", Path: "/metadata/resourceVersion", Value: lo.id.ResourceVersion}}
	ms := make([]*manager, 0, len(removed))
	for m := range removed {
		ms = append(ms, m)
	}
	sort.Slice(ms, func(i, j int) bool { return ms[i].index > ms[j].index })
	for i := len(ms) - 1; i >= 0; i-- {
		p := "/metadata/managedFields/" + strconv.Itoa(ms[i].index)
		ops = append(ops, patchOp{Op: "test", Path: p + "/manager", Value: ms[i].name},
			patchOp{Op: "test", Path: p + "/operation", Value: ms[i].operation})
	}
	var edits []patchOp
	left := len(lo.managers)
	var whole []any
	for _, m := range ms {
		gone := map[*fnode]bool{}
		markGone(m.set, removed[m], gone)
		p := "/metadata/managedFields/" + strconv.Itoa(m.index)
		if gone[m.set] {
			edits = append(edits, patchOp{Op: "remove", Path: p})
			whole = append(whole, m.raw)
			left--
			continue
		}
		edits = append(edits, removals(m.set, p+"/fieldsV1", gone)...)
	}
	if left == 0 {
		// Every entry would go: hand the sets to one Apply entry of ours instead (see Handback).
		var merged any = map[string]any{}
		for _, r := range whole {
			merged = mergeSets(merged, r)
		}
		edits = []patchOp{{Op: "replace", Path: "/metadata/managedFields", Value: []any{map[string]any{
			"manager": lo.fieldManager, "operation": "Apply", "apiVersion": lo.id.APIVersion,
			"fieldsType": "FieldsV1", "fieldsV1": merged}}}}
	}
	b, err := json.Marshal(append(ops, edits...))
	if err != nil {
		return nil // unreachable: every value came from decoded JSON
	}
	return append(b, '\n')
}

// markGone marks every node that the removal leaves without a member: removed nodes, and nodes
// all of whose members are gone (a node left as {} would own its field as a unit).
func markGone(n *fnode, rm map[*fnode]bool, gone map[*fnode]bool) bool {
	if rm[n] {
		gone[n] = true
		return true
	}
	if len(n.kids) == 0 {
		return false
	}
	all := !n.self
	for _, c := range n.kids {
		if !markGone(c, rm, gone) {
			all = false
		}
	}
	gone[n] = all
	return all
}

// removals lists the remove operations of the topmost gone nodes under n.
func removals(n *fnode, p string, gone map[*fnode]bool) []patchOp {
	var ops []patchOp
	for _, c := range n.kids {
		cp := p + "/" + pointerToken(c.key)
		if gone[c] {
			ops = append(ops, patchOp{Op: "remove", Path: cp})
			continue
		}
		ops = append(ops, removals(c, cp, gone)...)
	}
	return ops
}

// pointerToken escapes a member key as an RFC 6901 reference token.
func pointerToken(k string) string {
	return strings.ReplaceAll(strings.ReplaceAll(k, "~", "~0"), "/", "~1")
}

// mergeSets unites two fieldsV1 values (objects of objects).
func mergeSets(a, b any) any {
	am, ok1 := a.(map[string]any)
	bm, ok2 := b.(map[string]any)
	if !ok1 || !ok2 {
		return a
	}
	out := make(map[string]any, len(am)+len(bm))
	for k, v := range am {
		out[k] = v
	}
	for k, v := range bm {
		if cur, ok := out[k]; ok {
			out[k] = mergeSets(cur, v)
		} else {
			out[k] = v
		}
	}
	return out
}

// maxRepairValue bounds a value a repair names: long enough for an image reference with its
// digest, which the operator compares by eye.
const maxRepairValue = 512

func shownRepair(v any, present bool) string {
	return shownMax(v, present, maxRepairValue)
}
