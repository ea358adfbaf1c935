package evidence

import (
	"strconv"
	"unicode/utf16"
	"unicode/utf8"

	"github.com/qinglong/ql3/refuse"
)

// Limits of the accepted language. They bound memory and recursion for hostile input; every
// legitimate ql3 record is orders of magnitude below them.
const (
	// MaxInputBytes is the largest JSON text Canonicalize, DecodeStrict and DecodeRecord accept.
	MaxInputBytes = 16 << 20
	// MaxDepth is the deepest nesting of arrays and objects accepted; a top-level array or object
	// is depth 1.
	MaxDepth = 64
)

// Reason codes of strict JSON validation.
const (
	CodeInvalidJSON   refuse.Code = "JCS_INVALID_JSON"
	CodeInvalidNumber refuse.Code = "JCS_INVALID_NUMBER"
	CodeInvalidUTF8   refuse.Code = "JCS_INVALID_UTF8"
	CodeLoneSurrogate refuse.Code = "JCS_LONE_SURROGATE"
	CodeDuplicateKey  refuse.Code = "JCS_DUPLICATE_KEY"
	CodeTooDeep       refuse.Code = "JCS_TOO_DEEP"
	CodeTooLarge      refuse.Code = "JCS_TOO_LARGE"
)

type kind uint8

const (
	kNull kind = iota
	kBool
	kNumber
	kString
	kArray
	kObject
)

// node is one parsed JSON value. Strings keep their decoded value (for key order, duplicate
// detection and decoding) and their index into the document's string table (for serialization).
type node struct {
	kind  kind
	b     bool
	str   string  // decoded string, or the number literal as written
	num   float64 // number value
	sidx  int     // index of the string literal in parser.lits
	elems []*node // array elements; object values
	keys  []*node // object keys (kString nodes), parallel to elems
}

type parser struct {
	in   []byte
	pos  int
	lits [][]byte // raw string literals (with quotes) in document order
	// src is one immutable copy of in: a string without escapes, and every number literal, is
	// a substring of it, not a copy of its own (one allocation per document, not per string).
	src string
	// slab hands out nodes in blocks, so a document of many values costs a few allocations of
	// nodes, not one each. A tree is kept whole or dropped whole, so no block outlives its use.
	slab []node
	// open holds the members (or elements) of every array and object still being parsed, the
	// innermost last: a container's children go here, then into one slice of ptrs, sized when
	// the container closes, instead of a slice of its own grown by append (a few allocations per
	// container, and most of a large document's).
	open []*node
	// ptrs hands out the closed containers' child slices in blocks, as slab hands out nodes.
	ptrs []*node
}

// cut returns k slots of ptrs, from the current block or a new one, with the capacity at the
// length: an append to one container's slice could never reach a neighbour's.
func (p *parser) cut(k int) []*node {
	if cap(p.ptrs)-len(p.ptrs) < k {
		p.ptrs = make([]*node, 0, max(k, min(max(len(p.in)/16, 16), 4096)))
	}
	at := len(p.ptrs)
	p.ptrs = p.ptrs[:at+k]
	return p.ptrs[at : at+k : at+k]
}

// closeChildren pops the elements that an array pushed on p.open since mark into a slice of
// their own. An empty array never gets here.
func (p *parser) closeChildren(mark int) []*node {
	elems := p.cut(len(p.open) - mark)
	copy(elems, p.open[mark:])
	p.open = p.open[:mark]
	return elems
}

// closeMembers is closeChildren for an object, whose members are pushed as key, value pairs: it
// pops them into a slice of keys and one of values.
func (p *parser) closeMembers(mark int) (keys, values []*node) {
	pairs := p.open[mark:]
	m := len(pairs) / 2
	both := p.cut(2 * m)
	keys, values = both[:m:m], both[m:]
	for i := range m {
		keys[i], values[i] = pairs[2*i], pairs[2*i+1]
	}
	p.open = p.open[:mark]
	return keys, values
}

// newNode returns a fresh node holding v, from the current block.
func (p *parser) newNode(v node) *node {
	if len(p.slab) == cap(p.slab) {
		// Blocks grow with the document: a small record costs one small block.
		p.slab = make([]node, 0, min(max(len(p.in)/32, 8), 1024))
	}
	p.slab = append(p.slab, v)
	return &p.slab[len(p.slab)-1]
}

// parseStrict parses b as exactly one JSON text under the rules of docs/jcs.md.
func parseStrict(b []byte) (*node, [][]byte, error) {
	if len(b) > MaxInputBytes {
		return nil, nil, refuse.New(CodeTooLarge, "json input of %d bytes exceeds the limit of %d", len(b), MaxInputBytes)
	}
	if !utf8.Valid(b) {
		return nil, nil, refuse.New(CodeInvalidUTF8, "json input at byte %d is not valid utf-8", invalidUTF8At(b))
	}
	// Most documents hold a string literal every few dozen bytes; presizing the table avoids
	// re-copying it while it grows. The stack of open members has room for a record's without
	// regrowing.
	p := &parser{in: b, lits: make([][]byte, 0, len(b)/32+1), src: string(b), open: make([]*node, 0, 64)}
	p.ws()
	n, err := p.value(0)
	if err != nil {
		return nil, nil, err
	}
	p.ws()
	if p.pos != len(p.in) {
		return nil, nil, p.fail(CodeInvalidJSON, "trailing data after the json value")
	}
	return n, p.lits, nil
}

func invalidUTF8At(b []byte) int {
	for i := 0; i < len(b); {
		r, sz := utf8.DecodeRune(b[i:])
		if r == utf8.RuneError && sz <= 1 {
			return i
		}
		i += sz
	}
	return len(b)
}

func (p *parser) fail(code refuse.Code, what string) error {
	return refuse.New(code, "%s at byte %d", what, p.pos)
}

func (p *parser) ws() {
	for p.pos < len(p.in) {
		switch p.in[p.pos] {
		case ' ', '\t', '\n', '\r':
			p.pos++
		default:
			return
		}
	}
}

func (p *parser) value(depth int) (*node, error) {
	if p.pos >= len(p.in) {
		return nil, p.fail(CodeInvalidJSON, "unexpected end of json input")
	}
	switch c := p.in[p.pos]; {
	case c == '{':
		return p.object(depth + 1)
	case c == '[':
		return p.array(depth + 1)
	case c == '"':
		return p.string()
	case c == '-' || (c >= '0' && c <= '9'):
		return p.number()
	case c == '+' || c == '.' || c == 'N' || c == 'I':
		return nil, p.fail(CodeInvalidNumber, "number form not allowed by json")
	default:
		for _, lit := range []struct {
			s string
			n node
		}{{"true", node{kind: kBool, b: true}}, {"false", node{kind: kBool}}, {"null", node{kind: kNull}}} {
			if len(p.in)-p.pos >= len(lit.s) && string(p.in[p.pos:p.pos+len(lit.s)]) == lit.s {
				p.pos += len(lit.s)
				return p.newNode(lit.n), nil
			}
		}
		return nil, p.fail(CodeInvalidJSON, "invalid json value")
	}
}

func (p *parser) array(depth int) (*node, error) {
	if depth > MaxDepth {
		return nil, p.fail(CodeTooDeep, "nesting deeper than the limit of "+strconv.Itoa(MaxDepth))
	}
	p.pos++ // [
	n := p.newNode(node{kind: kArray})
	p.ws()
	if p.pos < len(p.in) && p.in[p.pos] == ']' {
		p.pos++
		return n, nil
	}
	mark := len(p.open)
	for {
		p.ws()
		v, err := p.value(depth)
		if err != nil {
			return nil, err
		}
		p.open = append(p.open, v)
		p.ws()
		if p.pos >= len(p.in) {
			return nil, p.fail(CodeInvalidJSON, "unexpected end of json input in array")
		}
		switch p.in[p.pos] {
		case ',':
			p.pos++
		case ']':
			p.pos++
			n.elems = p.closeChildren(mark)
			return n, nil
		default:
			return nil, p.fail(CodeInvalidJSON, "expected , or ] in array")
		}
	}
}

func (p *parser) object(depth int) (*node, error) {
	if depth > MaxDepth {
		return nil, p.fail(CodeTooDeep, "nesting deeper than the limit of "+strconv.Itoa(MaxDepth))
	}
	p.pos++ // {
	n := p.newNode(node{kind: kObject})
	p.ws()
	if p.pos < len(p.in) && p.in[p.pos] == '}' {
		p.pos++
		return n, nil
	}
	// Keys and values go on p.open in pairs, key first.
	mark := len(p.open)
	for {
		p.ws()
		if p.pos >= len(p.in) || p.in[p.pos] != '"' {
			return nil, p.fail(CodeInvalidJSON, "expected string key in object")
		}
		k, err := p.string()
		if err != nil {
			return nil, err
		}
		p.ws()
		if p.pos >= len(p.in) || p.in[p.pos] != ':' {
			return nil, p.fail(CodeInvalidJSON, "expected : after object key")
		}
		p.pos++
		p.ws()
		v, err := p.value(depth)
		if err != nil {
			return nil, err
		}
		p.open = append(p.open, k, v)
		p.ws()
		if p.pos >= len(p.in) {
			return nil, p.fail(CodeInvalidJSON, "unexpected end of json input in object")
		}
		switch p.in[p.pos] {
		case ',':
			p.pos++
		case '}':
			p.pos++
			n.keys, n.elems = p.closeMembers(mark)
			return n, nil
		default:
			return nil, p.fail(CodeInvalidJSON, "expected , or } in object")
		}
	}
}

func (p *parser) number() (*node, error) {
	start := p.pos
	digits := func() int {
		s := p.pos
		for p.pos < len(p.in) && p.in[p.pos] >= '0' && p.in[p.pos] <= '9' {
			p.pos++
		}
		return p.pos - s
	}
	if p.in[p.pos] == '-' {
		p.pos++
	}
	if p.pos < len(p.in) && p.in[p.pos] == '0' {
		p.pos++
		if p.pos < len(p.in) && p.in[p.pos] >= '0' && p.in[p.pos] <= '9' {
			return nil, p.fail(CodeInvalidNumber, "number with a leading zero")
		}
	} else if digits() == 0 {
		return nil, p.fail(CodeInvalidNumber, "number without integer digits")
	}
	if p.pos < len(p.in) && p.in[p.pos] == '.' {
		p.pos++
		if digits() == 0 {
			return nil, p.fail(CodeInvalidNumber, "number without fraction digits")
		}
	}
	if p.pos < len(p.in) && (p.in[p.pos] == 'e' || p.in[p.pos] == 'E') {
		p.pos++
		if p.pos < len(p.in) && (p.in[p.pos] == '+' || p.in[p.pos] == '-') {
			p.pos++
		}
		if digits() == 0 {
			return nil, p.fail(CodeInvalidNumber, "number without exponent digits")
		}
	}
	// A number glued to more number-like characters (0x10, 1.2.3, 1e5e5, 1-2) is one bad token,
	// not a number followed by garbage.
	if p.pos < len(p.in) {
		c := p.in[p.pos]
		if c == '.' || c == '+' || c == '-' || c == '_' || (c >= '0' && c <= '9') || (c|0x20 >= 'a' && c|0x20 <= 'z') {
			return nil, p.fail(CodeInvalidNumber, "number form not allowed by json")
		}
	}
	lit := p.src[start:p.pos]
	f, err := strconv.ParseFloat(lit, 64)
	if err != nil {
		// Syntax is already proven, so this is a magnitude beyond float64 (±Inf).
		return nil, refuse.New(CodeInvalidNumber, "number at byte %d overflows ieee 754 double precision", start)
	}
	return p.newNode(node{kind: kNumber, str: lit, num: f}), nil
}

// simpleEscapes maps the byte after a backslash to the byte it stands for; 0 means not simple.
var simpleEscapes = [256]byte{'"': '"', '\\': '\\', '/': '/', 'b': '\b', 'f': '\f', 'n': '\n', 'r': '\r', 't': '\t'}

func hexVal(b []byte) (rune, bool) {
	var r rune
	for _, c := range b {
		switch {
		case c >= '0' && c <= '9':
			r = r<<4 | rune(c-'0')
		case c >= 'a' && c <= 'f':
			r = r<<4 | rune(c-'a'+10)
		case c >= 'A' && c <= 'F':
			r = r<<4 | rune(c-'A'+10)
		default:
			return 0, false
		}
	}
	return r, true
}

func (p *parser) string() (*node, error) {
	start := p.pos
	p.pos++        // "
	var buf []byte // nil until the first escape: most strings are copied once
	seg := p.pos
	for {
		if p.pos >= len(p.in) {
			return nil, p.fail(CodeInvalidJSON, "unterminated string")
		}
		c := p.in[p.pos]
		switch {
		case c == '"':
			var s string
			if buf == nil {
				s = p.src[seg:p.pos]
			} else {
				s = string(append(buf, p.in[seg:p.pos]...))
			}
			p.pos++
			p.lits = append(p.lits, p.in[start:p.pos])
			return p.newNode(node{kind: kString, str: s, sidx: len(p.lits) - 1}), nil
		case c < 0x20:
			return nil, p.fail(CodeInvalidJSON, "unescaped control character in string")
		case c != '\\':
			p.pos++
			continue
		}
		buf = append(buf, p.in[seg:p.pos]...)
		if p.pos+1 >= len(p.in) {
			return nil, p.fail(CodeInvalidJSON, "unterminated escape in string")
		}
		esc := p.in[p.pos+1]
		if r := simpleEscapes[esc]; r != 0 {
			buf = append(buf, r)
			p.pos += 2
			seg = p.pos
			continue
		}
		if esc != 'u' {
			return nil, p.fail(CodeInvalidJSON, "invalid escape in string")
		}
		r, err := p.u4(p.pos)
		if err != nil {
			return nil, err
		}
		switch {
		case utf16.IsSurrogate(r) && r >= 0xDC00:
			return nil, p.fail(CodeLoneSurrogate, "low surrogate escape without a high surrogate")
		case utf16.IsSurrogate(r):
			if p.pos+12 > len(p.in) || p.in[p.pos+6] != '\\' || p.in[p.pos+7] != 'u' {
				return nil, p.fail(CodeLoneSurrogate, "high surrogate escape without a low surrogate")
			}
			lo, err := p.u4(p.pos + 6)
			if err != nil {
				return nil, err
			}
			if lo < 0xDC00 || lo > 0xDFFF {
				return nil, p.fail(CodeLoneSurrogate, "high surrogate escape followed by a non-low-surrogate")
			}
			buf = utf8.AppendRune(buf, utf16.DecodeRune(r, lo))
			p.pos += 12
		default:
			buf = utf8.AppendRune(buf, r)
			p.pos += 6
		}
		seg = p.pos
	}
}

// u4 reads the \uXXXX escape at i.
func (p *parser) u4(i int) (rune, error) {
	if i+6 > len(p.in) {
		return 0, p.fail(CodeInvalidJSON, "truncated unicode escape in string")
	}
	r, ok := hexVal(p.in[i+2 : i+6])
	if !ok {
		return 0, p.fail(CodeInvalidJSON, "invalid unicode escape in string")
	}
	return r, nil
}
