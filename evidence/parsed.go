package evidence

import (
	"encoding/json"
	"slices"
	"strconv"
	"strings"

	"github.com/qinglong/ql3/refuse"
)

// Record is a stored record parsed once: its bytes were checked to be canonical, to carry the
// schema of its media type, to hold integers only within ±2^53 and no null anywhere (the checks
// DecodeRecord makes of every record, and the store makes on every read). A reader that needs the
// same record several times (the auditor: its closure walk, then every check that loads it)
// decodes it from one Record instead of parsing and canonicalizing its bytes again each time.
// A Record is never modified after ParseRecord; Decode and Descriptors only read it, so one
// Record may be shared by any number of readers.
type Record struct {
	root      *node
	mediaType string
}

// MediaType is the record media type the Record was parsed and checked as.
func (r *Record) MediaType() string { return r.mediaType }

// String returns the value of the record's top-level member name when it is a string.
func (r *Record) String(name string) (string, bool) { return schemaOf(r.root, name) }

// ParseRecord parses the stored record b of mediaType and makes every check DecodeRecord makes
// before it decodes into a concrete type, with the refusal DecodeRecord into a map[string]any
// would give (the same code and message) for bytes that fail.
func ParseRecord(mediaType string, b []byte) (*Record, error) {
	root, err := parseCanonical(b, "record")
	if err != nil {
		return nil, err
	}
	return recordOf(root, mediaType)
}

// Parsed is a JSON document parsed once under Validate's rules. A reader that learns a record's
// media type from the record itself (the auditor's subject, by its schema member) reads the member
// and then checks the same parse as that record, instead of parsing the bytes again for each.
type Parsed struct {
	root *node
	lits [][]byte
	b    []byte
}

// Parse is Validate that keeps what it parsed: the same checks and refusals.
func Parse(b []byte) (*Parsed, error) {
	root, lits, err := parseStrict(b)
	if err != nil {
		return nil, err
	}
	if err := checkDuplicates(root); err != nil {
		return nil, err
	}
	return &Parsed{root: root, lits: lits, b: b}, nil
}

// IsObject reports whether the document is a JSON object.
func (p *Parsed) IsObject() bool { return p.root.kind == kObject }

// String returns the value of the object's member name when it is a string (false when the
// document is not an object, has no such member, or its value is not a string). Names match
// exactly, as the record rules read them (never case-insensitively, as encoding/json would).
func (p *Parsed) String(name string) (string, bool) { return schemaOf(p.root, name) }

// Record is ParseRecord(mediaType, b) of the parsed bytes b: the same checks and refusals, from
// this parse.
func (p *Parsed) Record(mediaType string) (*Record, error) {
	if err := checkCanonical(p.root, p.lits, p.b, "record"); err != nil {
		return nil, err
	}
	return recordOf(p.root, mediaType)
}

// recordOf is the rest of ParseRecord once root was parsed from canonical bytes.
func recordOf(root *node, mediaType string) (*Record, error) {
	want, ok := RecordSchema(mediaType)
	if !ok {
		return nil, refuse.New(CodeRecordSchemaMismatch, "media type %q is not a record media type", mediaType)
	}
	member := "schema"
	if m, ok := schemaMembers[mediaType]; ok {
		member = m
	}
	if got, ok := schemaOf(root, member); !ok || got != want {
		return nil, refuse.New(CodeRecordSchemaMismatch, "record %s is not %q as media type %q requires", member, want, mediaType)
	}
	if err := checkIntegers(root, "$"); err != nil {
		return nil, err
	}
	// Decoding into map[string]any refuses a null anywhere and a top level that is not an
	// object; the walk makes those refusals without building the map.
	switch root.kind {
	case kNull:
		return nil, refuse.New(CodeRecordShape, "null at $")
	case kObject:
	default:
		return nil, shapeErr(root, "$", "an object")
	}
	if bad, segs := firstNull(root); bad {
		slices.Reverse(segs)
		return nil, refuse.New(CodeRecordShape, "null at $%s", strings.Join(segs, ""))
	}
	return &Record{root: root, mediaType: mediaType}, nil
}

// firstNull reports whether n holds a null, and its path segments innermost first, in the order
// the generic decoder visits them (document order).
func firstNull(n *node) (bool, []string) {
	switch n.kind {
	case kNull:
		return true, nil
	case kArray:
		for i, e := range n.elems {
			if bad, segs := firstNull(e); bad {
				return true, append(segs, "["+strconv.Itoa(i)+"]")
			}
		}
	case kObject:
		for i, k := range n.keys {
			if bad, segs := firstNull(n.elems[i]); bad {
				return true, append(segs, "."+pathKey(k.str))
			}
		}
	}
	return false, nil
}

// Decode decodes the record into v, as DecodeRecord decodes its bytes.
func (r *Record) Decode(v any) error {
	return decodeTree(r.root, v)
}

// Descriptors is Descriptors of the record's bytes.
func (r *Record) Descriptors() ([]Descriptor, error) {
	var ds []Descriptor
	var segs []string
	err := walkDescriptors(r.root, &segs, &ds)
	return ds, err
}

// DecodeJSON parses b under the strict rules of Validate (docs/jcs.md) and returns the value
// encoding/json would decode from the same bytes with UseNumber: map[string]any, []any, string,
// json.Number (the literal as written), bool and nil. One parse serves both the strict check and
// the decoding, where Validate then encoding/json parse twice; after Validate passed, the two
// readers agree on every document (no duplicate member, valid UTF-8, no lone surrogate).
func DecodeJSON(b []byte) (any, error) {
	p, err := Parse(b)
	if err != nil {
		return nil, err
	}
	return genericJSON(p.root), nil
}

func genericJSON(n *node) any {
	switch n.kind {
	case kBool:
		return n.b
	case kString:
		return n.str
	case kNumber:
		return json.Number(n.str)
	case kArray:
		out := make([]any, len(n.elems))
		for i, e := range n.elems {
			out[i] = genericJSON(e)
		}
		return out
	case kObject:
		out := make(map[string]any, len(n.keys))
		for i, k := range n.keys {
			out[k.str] = genericJSON(n.elems[i])
		}
		return out
	}
	return nil
}
