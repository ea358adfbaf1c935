package convergence

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/qinglong/ql3/evidence"
	"github.com/qinglong/ql3/refuse"
)

// CodeManagedFieldsInvalid: metadata.managedFields is not a list of well-formed FieldsV1 entries,
// names our manager's Apply entry twice, or its field sets are ambiguous for a live list.
const CodeManagedFieldsInvalid refuse.Code = "CONVERGENCE_MANAGED_FIELDS_INVALID"

// Bounds on hostile managedFields. The API server writes one entry per manager, operation and
// subresource (a handful), and one key-field set per associative list (a few with optional key
// fields); the bounds keep the auditor's work linear in the stdout size.
const (
	maxManagers  = 1000
	maxKeyGroups = 64
)

// manager is one managedFields entry.
type manager struct {
	name, operation, subresource string
	set                          *fnode
	index                        int // position in managedFields: a repair patch addresses the entry by it
	raw                          any // the fieldsV1 value as read, for a repair that hands a whole set back
}

func (m *manager) String() string {
	s := refuse.Ident(m.name) + " (" + refuse.Ident(m.operation)
	if m.subresource != "" {
		s += ", subresource " + refuse.Ident(m.subresource)
	}
	return s + ")"
}

// fnode is one node of a structured-merge-diff FieldsV1 set. In the JSON form a member key is
// f:<field>, k:<json object of the element's key fields>, v:<json value of a set element>,
// i:<position>, or "." (the list element itself); a node without members, {}, is a field owned
// as a whole.
type fnode struct {
	key     string   // the member key in the parent node ("" at the root): a repair patch's pointer
	kids    []*fnode // the members other than ".", in key order
	members int
	self    bool
	fields  map[string]*fnode
	keyed   []*keyGroup
	groups  map[string]*keyGroup // canon(names) -> group, while parsing
	values  map[string]*fnode    // canon(value) -> node
	index   map[int]*fnode
}

// keyGroup holds the k: children that key on the same field names.
type keyGroup struct {
	names  []string          // sorted
	byKeys map[string]*fnode // canon(key object) -> node
}

func parseManagedFields(v any, fieldManager string) ([]*manager, *manager, error) {
	if v == nil {
		return nil, nil, nil // absent: an object whose applied field set is empty
	}
	list, ok := v.([]any)
	if !ok {
		return nil, nil, fmt.Errorf("is a json %s, not an array", typeName(v))
	}
	if len(list) > maxManagers {
		return nil, nil, fmt.Errorf("holds %d entries, more than %d", len(list), maxManagers)
	}
	var all []*manager
	var ours *manager
	for i, e := range list {
		m, err := parseEntry(e)
		if err != nil {
			return nil, nil, fmt.Errorf("entry %d: %w", i, err)
		}
		m.index = i
		all = append(all, m)
		if m.name == fieldManager && m.operation == "Apply" && m.subresource == "" {
			if ours != nil {
				return nil, nil, fmt.Errorf("entries of manager %s with operation Apply repeat", refuse.Ident(fieldManager))
			}
			ours = m
		}
	}
	return all, ours, nil
}

// parseEntry reads the members ownership depends on; others (apiVersion, time) are not trusted
// for anything and may be whatever the server writes.
func parseEntry(e any) (*manager, error) {
	obj, ok := e.(map[string]any)
	if !ok {
		return nil, fmt.Errorf("is a json %s, not an object", typeName(e))
	}
	m := &manager{}
	for _, f := range []struct {
		name     string
		dst      *string
		required bool
	}{{"manager", &m.name, true}, {"operation", &m.operation, true}, {"fieldsType", new(string), true}, {"subresource", &m.subresource, false}} {
		v, present := obj[f.name]
		s, isStr := v.(string)
		if (present && !isStr) || (!present && f.required) {
			return nil, fmt.Errorf("%s is missing or not a string", f.name)
		}
		*f.dst = s
	}
	if obj["fieldsType"] != "FieldsV1" {
		return nil, errors.New("fieldsType is not FieldsV1")
	}
	set, err := parseSet(obj["fieldsV1"], 0)
	if err != nil {
		return nil, fmt.Errorf("manager %s: fieldsV1: %w", refuse.Ident(m.name), err)
	}
	m.set, m.raw = set, obj["fieldsV1"]
	return m, nil
}

func parseSet(v any, depth int) (*fnode, error) {
	obj, ok := v.(map[string]any)
	if !ok {
		return nil, fmt.Errorf("a set node is a json %s, not an object", typeName(v))
	}
	if depth > evidence.MaxDepth {
		return nil, errors.New("set nests too deep")
	}
	n := &fnode{members: len(obj)}
	for _, k := range sortedKeys(obj) {
		if k == "." {
			if c, ok := obj[k].(map[string]any); !ok || len(c) != 0 {
				return nil, errors.New(`member "." is not an empty object`)
			}
			n.self = true
			continue
		}
		child, err := parseSet(obj[k], depth+1)
		if err != nil {
			return nil, err
		}
		child.key = k
		n.kids = append(n.kids, child)
		prefix, rest, _ := strings.Cut(k, ":")
		switch prefix {
		case "f":
			if n.fields == nil {
				n.fields = map[string]*fnode{}
			}
			n.fields[rest] = child
		case "k":
			err = n.addKeyed(rest, child)
		case "v":
			err = n.addValue(rest, child)
		case "i":
			err = n.addIndex(rest, child)
		default:
			err = fmt.Errorf("member %s has no f:, k:, v: or i: prefix", refuse.Ident(k))
		}
		if err != nil {
			return nil, err
		}
	}
	return n, nil
}

// parseEmbedded decodes the JSON text inside a k: or v: member under the same strict rules as the
// stdout itself.
func parseEmbedded(s string) (any, error) {
	if err := evidence.Validate([]byte(s)); err != nil {
		return nil, err
	}
	dec := json.NewDecoder(bytes.NewReader([]byte(s)))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return nil, errors.New("embedded json does not decode")
	}
	return v, nil
}

func (n *fnode) addKeyed(text string, child *fnode) error {
	v, err := parseEmbedded(text)
	if err != nil {
		return fmt.Errorf("k: member: %w", err)
	}
	key, ok := v.(map[string]any)
	if !ok || len(key) == 0 {
		return errors.New("k: member is not a non-empty json object")
	}
	names := sortedKeys(key)
	id := make([]any, len(names))
	for i, k := range names {
		id[i] = k
	}
	g := n.groups[canon(id)]
	if g == nil {
		if len(n.keyed) == maxKeyGroups {
			return fmt.Errorf("k: members use more than %d sets of key fields", maxKeyGroups)
		}
		if n.groups == nil {
			n.groups = map[string]*keyGroup{}
		}
		g = &keyGroup{names: names, byKeys: map[string]*fnode{}}
		n.groups[canon(id)] = g
		n.keyed = append(n.keyed, g)
	}
	c := canon(key)
	if g.byKeys[c] != nil {
		return errors.New("two k: members name the same key")
	}
	g.byKeys[c] = child
	return nil
}

func (n *fnode) addValue(text string, child *fnode) error {
	v, err := parseEmbedded(text)
	if err != nil {
		return fmt.Errorf("v: member: %w", err)
	}
	if n.values == nil {
		n.values = map[string]*fnode{}
	}
	c := canon(v)
	if n.values[c] != nil {
		return errors.New("two v: members name the same value")
	}
	n.values[c] = child
	return nil
}

func (n *fnode) addIndex(text string, child *fnode) error {
	i, err := strconv.Atoi(text)
	if err != nil || i < 0 || strconv.Itoa(i) != text {
		return errors.New("i: member is not a decimal position")
	}
	if n.index == nil {
		n.index = map[int]*fnode{}
	}
	if n.index[i] != nil {
		return errors.New("two i: members name the same position")
	}
	n.index[i] = child
	return nil
}
