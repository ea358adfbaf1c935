package convergence

import (
	"errors"
	"strconv"
	"strings"
)

// owner is a position in one manager's field set while walking an object. whole means an
// ancestor is owned as a unit (an atomic map, struct or list, recorded as a member without
// children), so everything below it is owned.
type owner struct {
	n      *fnode
	whole  bool
	atomic int // with whole: the length of the path to the member owned as a unit
	// node is the set node at the position, or with whole the member owned as a unit: what a
	// repair removes from another manager's set. Ownership itself never reads it.
	node *fnode
}

func rootOwner(m *manager) owner {
	if m == nil {
		return owner{}
	}
	return owner{n: m.set, node: m.set}
}

// field descends into map key k, which is at depth (path length) depth. A member without
// children is a leaf, or an atomic field whose whole value the manager set: structured-merge-diff
// records a granular map, struct or list only by its children (an empty one applied as {} is a
// member, but then it has no children to own), so {} at a field the manifest fills in means the
// server treats that field as atomic. liveObject.consistent double-checks that reading.
func (o owner) field(k string, depth int) owner {
	if o.whole {
		return o
	}
	if o.n == nil {
		return owner{}
	}
	c := o.n.fields[k]
	switch {
	case c == nil:
		return owner{}
	case c.members == 0:
		return owner{whole: true, atomic: depth, node: c}
	}
	return owner{n: c, node: c}
}

// owns reports whether the position itself is owned: as part of an atomic ancestor, as a leaf
// member ({}), or as a list element member (".").
func (o owner) owns() bool { return o.whole || (o.n != nil && o.n.self) }

var errAmbiguous = errors.New("field set members for a live list element are ambiguous")

// elements resolves the field set children of a list for each live element, without the schema:
//   - k: children key an associative list; element i belongs to the k: child whose key object
//     equals the corresponding fields of the live element i (the server may have defaulted a key
//     field the manifest omits, such as protocol: TCP), provided no other live element has the
//     same key fields;
//   - v: children are set elements, matched by value;
//   - i: children are positions.
//
// An element that no child matches is not owned. An element two children match is refused.
//
// The elements are at depth depth.
func (o owner) elements(live []any, depth int) ([]owner, error) {
	out := make([]owner, len(live))
	if o.whole {
		for i := range out {
			out[i] = o
		}
		return out, nil
	}
	if o.n == nil {
		return out, nil
	}
	n := o.n
	matches := make([]int, len(live))
	set := func(i int, c *fnode, whole bool) {
		matches[i]++
		if whole {
			out[i] = owner{whole: true, atomic: depth, node: c}
		} else {
			out[i] = owner{n: c, node: c}
		}
	}
	for _, g := range n.keyed {
		keys, unique := elementKeys(live, func(e any) (string, bool) { return project(e, g.names) })
		for i, k := range keys {
			if unique[i] {
				if c := g.byKeys[k]; c != nil {
					set(i, c, false)
				}
			}
		}
	}
	if n.values != nil {
		keys, unique := elementKeys(live, func(e any) (string, bool) { return canon(e), true })
		for i, k := range keys {
			if unique[i] {
				if c := n.values[k]; c != nil {
					set(i, c, c.members == 0)
				}
			}
		}
	}
	for i := range live {
		if c := n.index[i]; c != nil {
			set(i, c, false)
		}
	}
	for _, m := range matches {
		if m > 1 {
			return nil, errAmbiguous
		}
	}
	return out, nil
}

// elementKeys computes key(e) for every element and whether that key identifies it uniquely.
func elementKeys(live []any, key func(any) (string, bool)) ([]string, []bool) {
	keys := make([]string, len(live))
	unique := make([]bool, len(live))
	counts := make(map[string]int, len(live))
	for i, e := range live {
		if k, ok := key(e); ok {
			keys[i], unique[i] = k, true
			counts[k]++
		}
	}
	for i, k := range keys {
		unique[i] = unique[i] && counts[k] == 1
	}
	return keys, unique
}

// project renders the named fields of a live list element as the canon of a k: key object.
func project(e any, names []string) (string, bool) {
	m, ok := e.(map[string]any)
	if !ok {
		return "", false
	}
	sub := make(map[string]any, len(names))
	for _, k := range names {
		v, ok := m[k]
		if !ok {
			return "", false
		}
		sub[k] = v
	}
	return canon(sub), true
}

// at navigates from o along path through the live object, resolving list elements as elements
// does. A path it cannot follow is not owned.
func (o owner) at(live any, path fieldPath) owner {
	for i, e := range path {
		if e.index < 0 {
			o = o.field(e.key, i+1)
			m, _ := live.(map[string]any)
			live = m[e.key]
			continue
		}
		list, ok := live.([]any)
		if !ok || e.index >= len(list) {
			return owner{}
		}
		els, err := o.elements(list, i+1)
		if err != nil {
			return owner{}
		}
		o, live = els[e.index], list[e.index]
	}
	return o
}

// owned reports whether our manager's Apply entry owns path.
func (lo *liveObject) owned(path fieldPath) bool {
	o := rootOwner(lo.ours).at(lo.raw, path)
	return o.owns() && lo.consistent(o, path, lo.ours)
}

// consistent cross-checks self's ownership that rests on reading a member without children as an
// atomic field: if another manager owns a field inside it, the field is granular after all and
// the member owns nothing below it.
func (lo *liveObject) consistent(o owner, path fieldPath, self *manager) bool {
	if !o.whole || o.atomic >= len(path) || len(lo.managers) < 2 {
		return true
	}
	// Many leaves share one atomic field (the labels of a selector): decide it once per manager.
	key := consistencyKey{self: self, path: pathKey(path[:o.atomic])}
	if ok, seen := lo.consistency[key]; seen {
		return ok
	}
	ok := true
	for _, m := range lo.managers {
		if m != self && rootOwner(m).at(lo.raw, path[:o.atomic]).n != nil {
			ok = false
			break
		}
	}
	if lo.consistency == nil {
		lo.consistency = map[consistencyKey]bool{}
	}
	lo.consistency[key] = ok
	return ok
}

type consistencyKey struct {
	self *manager
	path string
}

// pathKey renders a path injectively (keys length-prefixed, indexes as numbers).
func pathKey(p fieldPath) string {
	var b strings.Builder
	for _, e := range p {
		if e.index >= 0 {
			b.WriteString("i" + strconv.Itoa(e.index) + ";")
		} else {
			appendString(&b, e.key)
		}
	}
	return b.String()
}

// ownersOf names the managers other than ours that own path, for a refusal.
func ownersOf(lo *liveObject, path fieldPath) string {
	var names []string
	for _, m := range lo.managers {
		if o := rootOwner(m).at(lo.raw, path); m != lo.ours && o.owns() && lo.consistent(o, path, m) {
			names = append(names, m.String())
		}
	}
	if len(names) == 0 {
		return "no manager"
	}
	if len(names) > 4 {
		names = append(names[:4], "...")
	}
	return strings.Join(names, ", ")
}
