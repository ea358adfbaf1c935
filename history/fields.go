package history

import (
	"encoding/binary"
	"encoding/json"
	"errors"
	"math/bits"
	"strconv"
	"unicode/utf8"

	"github.com/opencontainers/go-digest"

	"github.com/qinglong/ql3/evidence"
)

// A listing reads a few top-level members of thousands of records. encoding/json would scan
// every byte twice (its validity pass, then the decode) and go through reflection for the whole
// record, whose bulk (a receipt's objects, a live audit's verdicts) a line does not show. The
// scanner here walks the record once: it checks the JSON grammar of every value, skipped or not,
// and hands the members a line reads to small decoders. A member named twice is refused, since
// readers could disagree on which one counts.

const maxDepth = 10000 // the strict parser's nesting bound (evidence/strict.go) is far below this

var errSyntax = errors.New("not valid json")

type scanner struct {
	b []byte
	i int
}

func (s *scanner) ws() {
	for s.i < len(s.b) {
		switch s.b[s.i] {
		case ' ', '\t', '\n', '\r':
			s.i++
		default:
			return
		}
	}
}

func (s *scanner) eat(c byte) bool {
	s.ws()
	if s.i < len(s.b) && s.b[s.i] == c {
		s.i++
		return true
	}
	return false
}

// object walks the object at s.i and calls member with each member's name and the raw bytes of
// its value.
func (s *scanner) object(depth int, member func(name []byte, raw []byte) error) error {
	if depth > maxDepth {
		return errSyntax
	}
	if !s.eat('{') {
		return errSyntax
	}
	if s.eat('}') {
		return nil
	}
	for {
		s.ws()
		k0 := s.i
		if err := s.str(); err != nil {
			return err
		}
		var name []byte
		if member != nil {
			var err error
			if name, err = memberName(s.b[k0:s.i]); err != nil {
				return err
			}
		}
		if !s.eat(':') {
			return errSyntax
		}
		s.ws()
		v0 := s.i
		if err := s.value(depth + 1); err != nil {
			return err
		}
		if member != nil {
			if err := member(name, s.b[v0:s.i]); err != nil {
				return err
			}
		}
		if s.eat(',') {
			continue
		}
		if s.eat('}') {
			return nil
		}
		return errSyntax
	}
}

// array walks the array at s.i and calls elem with the raw bytes of each element.
func (s *scanner) array(depth int, elem func(raw []byte) error) error {
	if depth > maxDepth {
		return errSyntax
	}
	if !s.eat('[') {
		return errSyntax
	}
	if s.eat(']') {
		return nil
	}
	for {
		s.ws()
		v0 := s.i
		if err := s.value(depth + 1); err != nil {
			return err
		}
		if elem != nil {
			if err := elem(s.b[v0:s.i]); err != nil {
				return err
			}
		}
		if s.eat(',') {
			continue
		}
		if s.eat(']') {
			return nil
		}
		return errSyntax
	}
}

func (s *scanner) value(depth int) error {
	if s.i >= len(s.b) {
		return errSyntax
	}
	switch c := s.b[s.i]; {
	case c == '{':
		return s.object(depth, nil)
	case c == '[':
		return s.array(depth, nil)
	case c == '"':
		return s.str()
	case c == '-' || c >= '0' && c <= '9':
		return s.number()
	}
	for _, lit := range []string{"true", "false", "null"} {
		if len(s.b)-s.i >= len(lit) && string(s.b[s.i:s.i+len(lit)]) == lit {
			s.i += len(lit)
			return nil
		}
	}
	return errSyntax
}

// str steps over the string literal at s.i, checking its escapes; bytes are not checked as UTF-8
// (encoding/json does not either: it substitutes U+FFFD where it decodes). Records are mostly
// strings (digests, names, times), so the plain bytes are skipped eight at a time.
func (s *scanner) str() error {
	b := s.b
	if s.i >= len(b) || b[s.i] != '"' {
		return errSyntax
	}
	i := s.i + 1
	for {
		// To the next byte that is not plain: whole words, then the first flagged byte of the
		// word that has one.
		for i+8 <= len(b) {
			if m := special(binary.LittleEndian.Uint64(b[i:])); m != 0 {
				i += bits.TrailingZeros64(m) / 8
				break
			}
			i += 8
		}
		if i >= len(b) {
			return errSyntax
		}
		switch c := b[i]; {
		case c == '"':
			s.i = i + 1
			return nil
		case c < 0x20:
			return errSyntax
		case c == '\\':
			i++
			if i >= len(b) {
				return errSyntax
			}
			switch b[i] {
			case '"', '\\', '/', 'b', 'f', 'n', 'r', 't':
				i++
			case 'u':
				if i+4 >= len(b) {
					return errSyntax
				}
				for _, h := range b[i+1 : i+5] {
					if !(h >= '0' && h <= '9' || h >= 'a' && h <= 'f' || h >= 'A' && h <= 'F') {
						return errSyntax
					}
				}
				i += 5
			default:
				return errSyntax
			}
		default:
			i++
		}
	}
}

const (
	ones  = 0x0101010101010101
	highs = 0x8080808080808080
)

// special flags the bytes of x (eight bytes, little-endian) that a string literal must look at: a
// quote, a backslash or a control byte below 0x20. 0 when there is none. (v-ones)&^v&highs sets
// the high bit of a byte of v that is zero, and (x-0x20·ones)&^x&highs of a byte of x below 0x20
// (Hacker's Delight's haszero and hasless). A borrow can flag a byte above a flagged one, never
// below it, so the lowest flag is always a byte to look at.
func special(x uint64) uint64 {
	q := x ^ ones*'"'
	bs := x ^ ones*'\\'
	return ((q-ones)&^q | (bs-ones)&^bs | (x-ones*0x20)&^x) & highs
}

// number steps over a number literal in the JSON grammar.
func (s *scanner) number() error {
	b, i := s.b, s.i
	if i < len(b) && b[i] == '-' {
		i++
	}
	switch {
	case i < len(b) && b[i] == '0':
		i++
	case i < len(b) && b[i] >= '1' && b[i] <= '9':
		for i < len(b) && b[i] >= '0' && b[i] <= '9' {
			i++
		}
	default:
		return errSyntax
	}
	digits := func() bool {
		j := i
		for i < len(b) && b[i] >= '0' && b[i] <= '9' {
			i++
		}
		return i > j
	}
	if i < len(b) && b[i] == '.' {
		i++
		if !digits() {
			return errSyntax
		}
	}
	if i < len(b) && (b[i] == 'e' || b[i] == 'E') {
		i++
		if i < len(b) && (b[i] == '+' || b[i] == '-') {
			i++
		}
		if !digits() {
			return errSyntax
		}
	}
	s.i = i
	return nil
}

// unquote decodes the string literal raw (already checked by str). A literal of printable ASCII
// without escapes, which every name and value ql3 writes is, is its own content.
func unquote(raw []byte) (string, error) {
	plain := true
	for _, c := range raw[1 : len(raw)-1] {
		if c == '\\' || c >= utf8.RuneSelf {
			plain = false
			break
		}
	}
	if plain {
		return string(raw[1 : len(raw)-1]), nil
	}
	var s string
	if err := json.Unmarshal(raw, &s); err != nil {
		return "", errSyntax
	}
	return s, nil
}

// memberName is the name of a member, from its literal raw (already checked by str): a name of
// printable ASCII without escapes, which every name ql3 writes is, is the literal's own bytes
// (a listing compares thousands of names and keeps none, so none is copied).
func memberName(raw []byte) ([]byte, error) {
	for _, c := range raw[1 : len(raw)-1] {
		if c == '\\' || c >= utf8.RuneSelf {
			s, err := unquote(raw)
			return []byte(s), err
		}
	}
	return raw[1 : len(raw)-1], nil
}

// scanMembers walks the JSON object b, which must be the whole of b, and calls member for each of
// its members.
func scanMembers(b []byte, member func(name []byte, raw []byte) error) error {
	s := &scanner{b: b}
	if err := s.object(0, member); err != nil {
		return err
	}
	if s.ws(); s.i != len(b) {
		return errSyntax
	}
	return nil
}

// scanElements calls elem with each element of the JSON array raw.
func scanElements(raw []byte, elem func(raw []byte) error) error {
	s := &scanner{b: raw}
	return s.array(0, elem)
}

func decodeString(raw []byte, v *string) error {
	if len(raw) == 0 || raw[0] != '"' {
		return errors.New("not a string")
	}
	var err error
	*v, err = unquote(raw)
	return err
}

func decodeBool(raw []byte, v *bool) error {
	switch string(raw) {
	case "true":
		*v = true
	case "false":
		*v = false
	default:
		return errors.New("not a boolean")
	}
	return nil
}

// once runs decode for the member name, bit of *seen, and refuses a second member of that name.
// Only the members a listing reads are tracked: the others are not shown.
func once(seen *uint, bit uint, name []byte, decode func() error) error {
	if *seen&(1<<bit) != 0 {
		return errors.New("member " + strconv.Quote(string(name)) + " is named twice")
	}
	*seen |= 1 << bit
	return decode()
}

// decodeDescriptor reads the three members of a descriptor; the store checks the digest when the
// object is read, and the listing checks the media type.
func decodeDescriptor(raw []byte, d *evidence.Descriptor) error {
	var seen uint
	return scanMembers(raw, func(name []byte, raw []byte) error {
		switch string(name) {
		case "mediaType":
			return once(&seen, 0, name, func() error { return decodeString(raw, &d.MediaType) })
		case "digest":
			return once(&seen, 1, name, func() error {
				var s string
				err := decodeString(raw, &s)
				d.Digest = digest.Digest(s)
				return err
			})
		case "size":
			return once(&seen, 2, name, func() error {
				n, err := strconv.ParseInt(string(raw), 10, 64)
				d.Size = n
				return err
			})
		}
		return nil
	})
}
