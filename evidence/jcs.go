package evidence

import (
	"bytes"
	"fmt"
	"slices"
	"unicode/utf16"

	"github.com/cyberphone/json-canonicalization/go/src/webpki.org/jsoncanonicalizer"
	"github.com/qinglong/ql3/refuse"
)

// CodeCanonicalize is raised when the wrapped RFC 8785 library fails on input the strict parser
// accepted; it indicates a bug in one of the two, never bad input.
const CodeCanonicalize refuse.Code = "JCS_INTERNAL"

// Canonicalize returns the RFC 8785 (JCS) form of b, refusing anything outside the strict language
// of docs/jcs.md.
//
// The cyberphone library is the serializer of every string and number, but it does not see the
// document's structure: it accepts non-JSON, recurses without bound and sorts object members in
// quadratic time. So the strict parser here builds the tree and orders members by UTF-16 code
// units (RFC 8785 §3.2.3) in O(n log n); all string literals go to the library in one flat array,
// which it handles in linear time, and numbers go through its ES6 number formatter.
func Canonicalize(b []byte) ([]byte, error) {
	root, lits, err := parseStrict(b)
	if err != nil {
		return nil, err
	}
	return canonicalTree(root, lits, len(b))
}

// Validate applies every check of Canonicalize (strict JSON, UTF-8, surrogates, numbers, limits,
// duplicate member names) without serializing: for live output that is judged, never stored in
// canonical form, it costs the parse alone.
func Validate(b []byte) error {
	_, err := Parse(b)
	return err
}

// checkDuplicates refuses an object with two members of one decoded name, anywhere in n.
func checkDuplicates(n *node) error {
	switch n.kind {
	case kArray:
		for _, e := range n.elems {
			if err := checkDuplicates(e); err != nil {
				return err
			}
		}
	case kObject:
		if len(n.keys) > 1 && hasDuplicateKey(n.keys) {
			// The refusal names the duplicate that the canonical sort meets first, whichever
			// reader finds it; sorting every object's names as UTF-16 only to find none repeated
			// was most of a large document's decoding.
			if _, err := sortedMembers(n); err != nil {
				return err
			}
			return refuse.New(CodeDuplicateKey, "duplicate object key in an object of %d members", len(n.keys))
		}
		for _, e := range n.elems {
			if err := checkDuplicates(e); err != nil {
				return err
			}
		}
	}
	return nil
}

// canonicalTree serializes root; sizeHint (the input length) presizes the output, which is never
// much longer than the input, so large documents are not copied over and over while growing.
func canonicalTree(root *node, lits [][]byte, sizeHint int) ([]byte, error) {
	strs, err := canonicalStrings(lits)
	if err != nil {
		return nil, err
	}
	out := make([]byte, 0, sizeHint+sizeHint/8+16)
	return appendCanonical(out, root, strs)
}

// canonicalStrings returns the canonical form of every string literal of the document. A literal
// with no backslash is its own canonical form: the parser has refused raw control characters and
// invalid UTF-8, a raw quote would have ended it, and the library escapes nothing else (it
// re-escapes only the backslash, the quote and bytes below 0x20), so it would give those bytes
// back unchanged. Every literal with a backslash goes through the library, all of them in a
// single call, and its output is split back into one canonical string per literal.
func canonicalStrings(lits [][]byte) ([][]byte, error) {
	if len(lits) == 0 {
		return nil, nil
	}
	strs := make([][]byte, len(lits))
	size, escaped := 2, 0
	for i, l := range lits {
		if bytes.IndexByte(l, '\\') < 0 {
			strs[i] = l
			continue
		}
		size += len(l) + 1
		escaped++
	}
	if escaped == 0 {
		return strs, nil
	}
	arr := make([]byte, 0, size)
	arr = append(arr, '[')
	for i, l := range lits {
		if strs[i] != nil {
			continue
		}
		if len(arr) > 1 {
			arr = append(arr, ',')
		}
		arr = append(arr, l...)
	}
	arr = append(arr, ']')
	out, err := jicsTransform(arr)
	if err != nil {
		return nil, err
	}
	// The library's strings, in the order of the escaped literals: each fills the next slot that
	// has none yet.
	mismatch := func() error {
		return refuse.New(CodeCanonicalize, "canonical string table does not match the %d escaped literals of %d", escaped, len(lits))
	}
	i := 1
	for k := range strs {
		if strs[k] != nil {
			continue
		}
		if i >= len(out) || out[i] != '"' {
			return nil, mismatch()
		}
		j := i + 1
		for j < len(out) && out[j] != '"' {
			if out[j] == '\\' {
				j++
			}
			j++
		}
		if j >= len(out) {
			return nil, mismatch()
		}
		strs[k] = out[i : j+1]
		i = j + 2 // skip the closing quote and the , or ]
	}
	if i != len(out) {
		return nil, mismatch()
	}
	return strs, nil
}

func jicsTransform(b []byte) ([]byte, error) {
	out, err := jsoncanonicalizer.Transform(b)
	if err != nil {
		return nil, refuse.Wrap(CodeCanonicalize, err, "rfc 8785 library refused strictly valid json")
	}
	return out, nil
}

type member struct {
	key  []uint16
	k, v *node
}

func appendCanonical(out []byte, n *node, strs [][]byte) ([]byte, error) {
	switch n.kind {
	case kNull:
		return append(out, "null"...), nil
	case kBool:
		if n.b {
			return append(out, "true"...), nil
		}
		return append(out, "false"...), nil
	case kNumber:
		s, err := jsoncanonicalizer.NumberToJSON(n.num)
		if err != nil {
			return nil, refuse.Wrap(CodeCanonicalize, err, "rfc 8785 number formatter refused a finite number")
		}
		return append(out, s...), nil
	case kString:
		return append(out, strs[n.sidx]...), nil
	case kArray:
		out = append(out, '[')
		for i, e := range n.elems {
			if i > 0 {
				out = append(out, ',')
			}
			var err error
			if out, err = appendCanonical(out, e, strs); err != nil {
				return nil, err
			}
		}
		return append(out, ']'), nil
	case kObject:
		ms, err := sortedMembers(n)
		if err != nil {
			return nil, err
		}
		out = append(out, '{')
		for i, m := range ms {
			if i > 0 {
				out = append(out, ',')
			}
			out = append(out, strs[m.k.sidx]...)
			out = append(out, ':')
			if out, err = appendCanonical(out, m.v, strs); err != nil {
				return nil, err
			}
		}
		return append(out, '}'), nil
	}
	return nil, refuse.New(CodeCanonicalize, "unknown node kind %d", n.kind)
}

// hasDuplicateKey reports whether two of keys hold the same decoded name. The parser has refused
// invalid UTF-8 and lone surrogates, so names equal as strings exactly when they are equal as
// the UTF-16 code units sortedMembers compares.
func hasDuplicateKey(keys []*node) bool {
	if len(keys) <= 16 {
		// A few comparisons, most of them ended by the lengths, and no allocation.
		for i := 1; i < len(keys); i++ {
			for _, k := range keys[:i] {
				if k.str == keys[i].str {
					return true
				}
			}
		}
		return false
	}
	seen := make(map[string]struct{}, len(keys))
	for _, k := range keys {
		if _, dup := seen[k.str]; dup {
			return true
		}
		seen[k.str] = struct{}{}
	}
	return false
}

// sortedMembers orders the members of object n by the UTF-16 code units of their decoded names
// and refuses duplicate names, which after unescaping sort next to each other.
func sortedMembers(n *node) ([]member, error) {
	ms := make([]member, len(n.keys))
	for i, k := range n.keys {
		ms[i] = member{key: utf16.Encode([]rune(k.str)), k: k, v: n.elems[i]}
	}
	slices.SortFunc(ms, func(a, b member) int { return slices.Compare(a.key, b.key) })
	for i := 1; i < len(ms); i++ {
		if slices.Equal(ms[i-1].key, ms[i].key) {
			return nil, refuse.New(CodeDuplicateKey, "duplicate object key %s", quoteKey(ms[i].k.str))
		}
	}
	return ms, nil
}

// quoteKey renders a key for a refusal message, truncated so a hostile key cannot flood the line.
func quoteKey(s string) string {
	r := []rune(s)
	if len(r) > 64 {
		return fmt.Sprintf("%q...", string(r[:64]))
	}
	return fmt.Sprintf("%q", s)
}

// equalJSON reports whether two parsed values are equal as JSON data (members unordered).
func equalJSON(a, b *node) bool {
	if a.kind != b.kind {
		return false
	}
	switch a.kind {
	case kNull:
		return true
	case kBool:
		return a.b == b.b
	case kNumber:
		return a.num == b.num
	case kString:
		return a.str == b.str
	case kArray:
		if len(a.elems) != len(b.elems) {
			return false
		}
		for i := range a.elems {
			if !equalJSON(a.elems[i], b.elems[i]) {
				return false
			}
		}
		return true
	}
	if len(a.keys) != len(b.keys) {
		return false
	}
	bm := make(map[string]*node, len(b.keys))
	for i, k := range b.keys {
		bm[k.str] = b.elems[i]
	}
	for i, k := range a.keys {
		bv, ok := bm[k.str]
		if !ok || !equalJSON(a.elems[i], bv) {
			return false
		}
	}
	return true
}
