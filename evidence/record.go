package evidence

import (
	"bytes"
	"encoding/json"
	"reflect"
	"slices"
	"strconv"
	"strings"

	"github.com/opencontainers/go-digest"
	"github.com/qinglong/ql3/refuse"
)

// Reason codes of the record layer.
const (
	CodeRecordUnknownField   refuse.Code = "RECORD_UNKNOWN_FIELD"
	CodeRecordMissingField   refuse.Code = "RECORD_MISSING_FIELD"
	CodeRecordShape          refuse.Code = "RECORD_SHAPE"
	CodeRecordIntegerRange   refuse.Code = "RECORD_INTEGER_RANGE"
	CodeRecordNotInteger     refuse.Code = "RECORD_NOT_INTEGER"
	CodeRecordNotCanonical   refuse.Code = "RECORD_NOT_CANONICAL"
	CodeRecordSchemaMismatch refuse.Code = "RECORD_SCHEMA_MISMATCH"
	CodeRecordEncode         refuse.Code = "RECORD_ENCODE"
	CodeDescriptorInvalid    refuse.Code = "DESCRIPTOR_INVALID"
)

// MaxSafeInteger bounds every integer in a record: ±2^53 is the range in which every integer has
// an exact IEEE 754 double, so an RFC 8785 implementation in any language reads the same value.
const MaxSafeInteger = 1 << 53

// MarshalRecord returns the canonical bytes of record v. Before returning it decodes those bytes
// back into a fresh value of v's type under the rules of DecodeStrict, so ql3 never writes a
// record it would refuse to read (a nil slice, for example, encodes as null and is refused).
func MarshalRecord(v any) ([]byte, error) {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return nil, refuse.Wrap(CodeRecordEncode, err, "record does not encode as json")
	}
	enc1 := bytes.TrimSuffix(buf.Bytes(), []byte("\n"))
	root, lits, err := parseStrict(enc1)
	if err != nil {
		return nil, err
	}
	if err := checkIntegers(root, "$"); err != nil {
		return nil, err
	}
	out, err := canonicalTree(root, lits, len(enc1))
	if err != nil {
		return nil, err
	}
	if t := reflect.TypeOf(v); t != nil {
		for t.Kind() == reflect.Pointer {
			t = t.Elem()
		}
		if t.Kind() == reflect.Struct {
			if err := DecodeStrict(out, reflect.New(t).Interface()); err != nil {
				return nil, err
			}
		}
	}
	return out, nil
}

// DecodeStrict decodes JSON b into the struct v that pointer v points at. b need not be canonical,
// but must pass every check of Canonicalize; then the shape is closed: every member must name a
// field, every field without omitempty must be present, null is never accepted, numbers must be
// integers within ±2^53, and every digest and descriptor is validated.
func DecodeStrict(b []byte, v any) error {
	root, lits, err := parseStrict(b)
	if err != nil {
		return err
	}
	if _, err := canonicalTree(root, lits, len(b)); err != nil {
		return err
	}
	return decodeTree(root, v)
}

// DecodeCanonical is DecodeStrict for bytes that must also be in canonical form (an index entry,
// a bundle): one parse serves both checks, where Canonicalize then DecodeStrict parse twice.
func DecodeCanonical(b []byte, v any) error {
	root, err := parseCanonical(b, "json")
	if err != nil {
		return err
	}
	return decodeTree(root, v)
}

// parseCanonical parses b strictly and refuses it unless it is already in canonical form; what
// names the bytes in the refusal ("json", "record").
func parseCanonical(b []byte, what string) (*node, error) {
	root, lits, err := parseStrict(b)
	if err != nil {
		return nil, err
	}
	if err := checkCanonical(root, lits, b, what); err != nil {
		return nil, err
	}
	return root, nil
}

// checkCanonical refuses b, parsed as root and lits, unless it is already in canonical form.
func checkCanonical(root *node, lits [][]byte, b []byte, what string) error {
	canon, err := canonicalTree(root, lits, len(b))
	if err != nil {
		return err
	}
	if !bytes.Equal(canon, b) {
		return refuse.New(CodeRecordNotCanonical, "%s of %d bytes is not in rfc 8785 canonical form", what, len(b))
	}
	return nil
}

func decodeTree(root *node, v any) error {
	rv := reflect.ValueOf(v)
	if rv.Kind() != reflect.Pointer || rv.IsNil() {
		return refuse.New(CodeRecordShape, "decode target is not a non-nil pointer")
	}
	if err := checkIntegers(root, "$"); err != nil {
		return err
	}
	return decodeValue(root, rv.Elem(), "$")
}

// DecodeRecord decodes the stored record b of mediaType into v. b must already be in canonical
// form, mediaType must be a record media type, and the record's schema must be the one that media
// type names.
func DecodeRecord(mediaType string, b []byte, v any) error {
	root, err := parseCanonical(b, "record")
	if err != nil {
		return err
	}
	want, ok := RecordSchema(mediaType)
	if !ok {
		return refuse.New(CodeRecordSchemaMismatch, "media type %q is not a record media type", mediaType)
	}
	member := "schema"
	if m, ok := schemaMembers[mediaType]; ok {
		member = m
	}
	if got, ok := schemaOf(root, member); !ok || got != want {
		return refuse.New(CodeRecordSchemaMismatch, "record %s is not %q as media type %q requires", member, want, mediaType)
	}
	return decodeTree(root, v)
}

func schemaOf(n *node, member string) (string, bool) {
	if n.kind != kObject {
		return "", false
	}
	for i, k := range n.keys {
		if k.str == member && n.elems[i].kind == kString {
			return n.elems[i].str, true
		}
	}
	return "", false
}

// Descriptors returns every object in record b whose member names are exactly mediaType, digest
// and size, in document order, each validated as a descriptor.
func Descriptors(b []byte) ([]Descriptor, error) {
	root, lits, err := parseStrict(b)
	if err != nil {
		return nil, err
	}
	if _, err := canonicalTree(root, lits, len(b)); err != nil {
		return nil, err
	}
	var ds []Descriptor
	var segs []string
	err = walkDescriptors(root, &segs, &ds)
	return ds, err
}

// walkDescriptors keeps the path as a stack of segments and renders it only when it must (for a
// refusal), so a hostile document of long keys and many members costs linear time.
func walkDescriptors(n *node, segs *[]string, ds *[]Descriptor) error {
	switch n.kind {
	case kArray:
		for i, e := range n.elems {
			*segs = append(*segs, "["+strconv.Itoa(i)+"]")
			err := walkDescriptors(e, segs, ds)
			*segs = (*segs)[:len(*segs)-1]
			if err != nil {
				return err
			}
		}
	case kObject:
		if isDescriptorShape(n) {
			var d Descriptor
			if err := decodeValue(n, reflect.ValueOf(&d).Elem(), ""); err != nil {
				// Decode again with the rendered path so the refusal says where.
				return decodeValue(n, reflect.ValueOf(&d).Elem(), "$"+strings.Join(*segs, ""))
			}
			*ds = append(*ds, d)
			return nil
		}
		for i, k := range n.keys {
			*segs = append(*segs, "."+pathKey(k.str))
			err := walkDescriptors(n.elems[i], segs, ds)
			*segs = (*segs)[:len(*segs)-1]
			if err != nil {
				return err
			}
		}
	}
	return nil
}

func isDescriptorShape(n *node) bool {
	if len(n.keys) != 3 {
		return false
	}
	var seen [3]bool
	for _, k := range n.keys {
		switch k.str {
		case "mediaType":
			seen[0] = true
		case "digest":
			seen[1] = true
		case "size":
			seen[2] = true
		}
	}
	return seen[0] && seen[1] && seen[2]
}

func validateDescriptor(d Descriptor, path string) error {
	if d.MediaType == "" {
		return refuse.New(CodeDescriptorInvalid, "descriptor at %s has an empty media type", path)
	}
	if _, err := ParseDigest(string(d.Digest)); err != nil {
		return refuse.Wrap(CodeDigestInvalid, err, "descriptor at %s", path)
	}
	if d.Size < 0 {
		return refuse.New(CodeDescriptorInvalid, "descriptor at %s has negative size %d", path, d.Size)
	}
	return nil
}

// TargetDigest is the identity of a target: the sha256 of its canonical record form. Preflight
// records it and apply and the auditor recompute it, so all three must call this.
func TargetDigest(t Target) (digest.Digest, error) {
	b, err := MarshalRecord(t)
	if err != nil {
		return "", err
	}
	return FromBytes(b), nil
}

// checkIntegers refuses any number that is not an integer literal within ±2^53. The literal, not
// the parsed double, is checked, because 2^53+1 parses to the same double as 2^53. The path is
// rendered only for the offending number.
func checkIntegers(n *node, root string) error {
	bad, segs := badInteger(n)
	if bad == nil {
		return nil
	}
	slices.Reverse(segs)
	_, err := recordInt(bad, root+strings.Join(segs, ""))
	return err
}

// badInteger returns the first number that recordInt refuses and its path segments, innermost
// first.
func badInteger(n *node) (*node, []string) {
	switch n.kind {
	case kNumber:
		if _, err := recordInt(n, ""); err != nil {
			return n, nil
		}
	case kArray:
		for i, e := range n.elems {
			if bad, segs := badInteger(e); bad != nil {
				return bad, append(segs, "["+strconv.Itoa(i)+"]")
			}
		}
	case kObject:
		for i, k := range n.keys {
			if bad, segs := badInteger(n.elems[i]); bad != nil {
				return bad, append(segs, "."+pathKey(k.str))
			}
		}
	}
	return nil, nil
}

// pathKey renders a member name as a path segment, truncated so hostile names cannot make paths
// (and refusal lines) large.
func pathKey(s string) string {
	if r := []rune(s); len(r) > 64 {
		return string(r[:64]) + "..."
	}
	return s
}

func recordInt(n *node, path string) (int64, error) {
	lit := n.str
	for i := 0; i < len(lit); i++ {
		if c := lit[i]; c == '.' || c == 'e' || c == 'E' {
			return 0, refuse.New(CodeRecordNotInteger, "number at %s is not an integer literal", path)
		}
	}
	i, err := strconv.ParseInt(lit, 10, 64)
	if err != nil || i > MaxSafeInteger || i < -MaxSafeInteger {
		return 0, refuse.New(CodeRecordIntegerRange, "integer at %s is outside ±2^53", path)
	}
	return i, nil
}
