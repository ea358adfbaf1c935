package evidence

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/qinglong/ql3/refuse"
)

// checkParseRecord holds ParseRecord to the reference it replaces: DecodeRecord into a
// map[string]any accepts exactly what it accepts, refuses the rest with the same code and message,
// and a Record decodes and lists descriptors exactly as DecodeRecord and Descriptors do on the bytes.
func checkParseRecord(t *testing.T, mediaType string, newValue func() any, b []byte) {
	t.Helper()
	var probe map[string]any
	want := DecodeRecord(mediaType, b, &probe)
	r, err := ParseRecord(mediaType, b)
	if (err == nil) != (want == nil) {
		t.Fatalf("ParseRecord %v, DecodeRecord into a map %v", err, want)
	}
	checkParsed(t, mediaType, b, r, err)
	if err != nil {
		if refuse.CodeOf(err) != refuse.CodeOf(want) || err.Error() != want.Error() {
			t.Fatalf("ParseRecord refuses %q, DecodeRecord into a map %q", err, want)
		}
		return
	}
	if r.MediaType() != mediaType {
		t.Fatalf("media type %q, want %q", r.MediaType(), mediaType)
	}
	v1, v2 := newValue(), newValue()
	e1, e2 := DecodeRecord(mediaType, b, v1), r.Decode(v2)
	if (e1 == nil) != (e2 == nil) || (e1 != nil && e1.Error() != e2.Error()) {
		t.Fatalf("Record.Decode %v, DecodeRecord %v", e2, e1)
	}
	if e1 == nil && !reflect.DeepEqual(v1, v2) {
		t.Fatalf("Record.Decode gives %+v, DecodeRecord %+v", v2, v1)
	}
	d1, e1 := Descriptors(b)
	d2, e2 := r.Descriptors()
	if (e1 == nil) != (e2 == nil) || (e1 != nil && e1.Error() != e2.Error()) || !reflect.DeepEqual(d1, d2) {
		t.Fatalf("Record.Descriptors %v %v, Descriptors %v %v", d2, e2, d1, e1)
	}
}

// checkParsed holds Parse and Parsed to what they stand for: Parse refuses exactly what Validate
// refuses, with its code and message; Parsed.Record is ParseRecord (r, err) of the same bytes;
// IsObject and String read what the generic decoding reads.
func checkParsed(t *testing.T, mediaType string, b []byte, r *Record, err error) {
	t.Helper()
	p, perr := Parse(b)
	if verr := Validate(b); (perr == nil) != (verr == nil) || (perr != nil && (refuse.CodeOf(perr) != refuse.CodeOf(verr) || perr.Error() != verr.Error())) {
		t.Fatalf("Parse %v, Validate %v", perr, verr)
	}
	if perr != nil {
		if err == nil {
			t.Fatalf("Parse refuses %v where ParseRecord accepts", perr)
		}
		return
	}
	pr, prErr := p.Record(mediaType)
	if (prErr == nil) != (err == nil) || (err != nil && (refuse.CodeOf(prErr) != refuse.CodeOf(err) || prErr.Error() != err.Error())) {
		t.Fatalf("Parsed.Record %v, ParseRecord %v", prErr, err)
	}
	if err == nil {
		var m1, m2 map[string]any
		if e1, e2 := r.Decode(&m1), pr.Decode(&m2); (e1 == nil) != (e2 == nil) || !reflect.DeepEqual(m1, m2) || pr.MediaType() != r.MediaType() {
			t.Fatalf("Parsed.Record decodes %v %v, ParseRecord's %v %v", m2, e2, m1, e1)
		}
	}
	generic, gerr := DecodeJSON(b)
	if gerr != nil {
		t.Fatalf("DecodeJSON refuses what Parse accepts: %v", gerr)
	}
	obj, isObj := generic.(map[string]any)
	if p.IsObject() != isObj {
		t.Fatalf("IsObject %v, the generic decoding %T", p.IsObject(), generic)
	}
	want, wantOK := obj["schema"].(string)
	if got, ok := p.String("schema"); got != want || ok != wantOK {
		t.Fatalf("String(schema) %q %v, the generic decoding %q %v", got, ok, want, wantOK)
	}
	if err == nil {
		if got, ok := r.String("schema"); got != want || ok != wantOK {
			t.Fatalf("Record.String(schema) %q %v, the generic decoding %q %v", got, ok, want, wantOK)
		}
	}
}

func TestParseRecordMatchesDecodeRecord(t *testing.T) {
	for _, c := range recordCases() {
		b, err := MarshalRecord(c.value)
		if err != nil {
			t.Fatal(err)
		}
		for _, rt := range fuzzRecordTypes {
			checkParseRecord(t, rt.mediaType, rt.new, b) // its own type accepts it, the others refuse
		}
	}
	schema := func(mt string) string { s, _ := RecordSchema(mt); return s }
	for name, b := range map[string]string{
		"null member":          `{"a":null,"schema":"` + schema(MediaTypeCommand) + `"}`,
		"nested null":          `{"a":[1,{"b":[null]}],"schema":"` + schema(MediaTypeCommand) + `"}`,
		"not an integer":       `{"a":1.5,"schema":"` + schema(MediaTypeCommand) + `"}`,
		"integer out of range": `{"a":9007199254740993,"schema":"` + schema(MediaTypeCommand) + `"}`,
		"not canonical":        `{"schema":"` + schema(MediaTypeCommand) + `", "a":1}`,
		"wrong schema":         `{"schema":"x"}`,
		"array":                `[1]`,
		"null":                 `null`,
		"descriptor invalid":   `{"d":{"digest":"sha256:00","mediaType":"x","size":1},"schema":"` + schema(MediaTypeCommand) + `"}`,
		"schema not a string":  `{"schema":1}`,
		"schema in other case": `{"Schema":"` + schema(MediaTypeCommand) + `"}`,
		"duplicate schema":     `{"schema":"` + schema(MediaTypeCommand) + `","schema":"x"}`,
		"not json":             `{"schema":`,
		"trailing data":        `{"schema":"` + schema(MediaTypeCommand) + `"} {}`,
	} {
		t.Run(name, func(t *testing.T) {
			for _, rt := range fuzzRecordTypes {
				checkParseRecord(t, rt.mediaType, rt.new, []byte(b))
			}
			// A descriptor's form is checked where it is decoded (Decode, Descriptors), as before.
			if _, err := ParseRecord(MediaTypeCommand, []byte(b)); err == nil && name != "descriptor invalid" {
				t.Fatalf("accepted %s", b)
			}
		})
	}
	if _, err := ParseRecord("application/octet-stream", []byte(`{}`)); refuse.CodeOf(err) != CodeRecordSchemaMismatch {
		t.Fatalf("a blob media type: %v, want %s", err, CodeRecordSchemaMismatch)
	}
}

func FuzzParseRecord(f *testing.F) {
	for _, c := range recordCases() {
		b, err := MarshalRecord(c.value)
		if err != nil {
			f.Fatal(err)
		}
		for i, rt := range fuzzRecordTypes {
			if rt.mediaType == c.mediaType {
				f.Add(uint8(i), b)
			}
		}
	}
	f.Fuzz(func(t *testing.T, kind uint8, b []byte) {
		rt := fuzzRecordTypes[int(kind)%len(fuzzRecordTypes)]
		checkParseRecord(t, rt.mediaType, rt.new, b)
	})
}

// checkDecodeJSON holds DecodeJSON to its reference: Validate, then encoding/json with UseNumber.
func checkDecodeJSON(t *testing.T, b []byte) {
	t.Helper()
	got, err := DecodeJSON(b)
	want := Validate(b)
	if (err == nil) != (want == nil) || (err != nil && err.Error() != want.Error()) {
		t.Fatalf("DecodeJSON refuses %v, Validate %v", err, want)
	}
	if err != nil {
		return
	}
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.UseNumber()
	var ref any
	if err := dec.Decode(&ref); err != nil {
		t.Fatalf("encoding/json refuses what Validate accepts: %v", err)
	}
	if !reflect.DeepEqual(got, ref) {
		t.Fatalf("DecodeJSON gives %#v, encoding/json %#v", got, ref)
	}
}

func TestDecodeJSONMatchesEncodingJSON(t *testing.T) {
	for _, s := range []string{
		`{"a":1,"b":[true,false,null,"x\u00e9\ud83d\ude00",-0,1e3,1.50],"c":{}}`,
		`[]`, `"s"`, `12345678901234567890`, `null`, ` {"k" : [ {} , [] ] } `,
		`{"a":1,"a":2}`, `{"a":1,}`, `"\ud800"`, "\"\xff\"", `{"a":1} x`, ``,
		// Containers closing at every depth, siblings after a nested one, and one refused
		// inside a nest (the parser's stack of open members must come back to each mark).
		`{"a":[{"b":[1,{"c":[]},[2,3,{"d":{"e":[4]}}]]},5],"f":{"g":[6,[7,[8]]],"h":{}},"i":"j"}`,
		`[[[[{}]],[]],{"a":[{"b":{}}],"c":[[],[1]]},[{"x":{"y":{"z":[null]}}}],0]`,
		`{"a":[{"b":[1,{"c":[]},[2,3,{"d":{"e":[4]}}]]},5],"f":{"g":[6,[7,[8]]],"g":{}}}`,
	} {
		checkDecodeJSON(t, []byte(s))
	}
	// More children than one block of the parser's child slices holds, in containers of every
	// size between the objects' members.
	var big strings.Builder
	big.WriteString(`{"items":[`)
	for i := range 6000 {
		if i > 0 {
			big.WriteByte(',')
		}
		fmt.Fprintf(&big, `{"n":%d,"tags":[%s],"m":{"k%d":[%d]}}`, i, strings.Repeat(`"t",`, i%7)+`"u"`, i, i)
	}
	big.WriteString(`],"tail":[1,2,3]}`)
	checkDecodeJSON(t, []byte(big.String()))
}

// TestParsedChildrenCappedAtLength: the parser cuts every container's children from shared
// blocks; each slice's capacity must end at its length, or an append to one (none is made today)
// would overwrite the next container's children.
func TestParsedChildrenCappedAtLength(t *testing.T) {
	root, _, err := parseStrict([]byte(`{"a":[1,[2,3],{"b":4,"c":[5]}],"d":{"e":{"f":[6,7,8]}},"g":[]}`))
	if err != nil {
		t.Fatal(err)
	}
	containers := 0
	var walk func(n *node)
	walk = func(n *node) {
		if cap(n.elems) != len(n.elems) || cap(n.keys) != len(n.keys) {
			t.Errorf("node of kind %d: %d elements in a capacity of %d, %d keys in %d", n.kind, len(n.elems), cap(n.elems), len(n.keys), cap(n.keys))
		}
		if n.kind == kObject && len(n.keys) != len(n.elems) {
			t.Errorf("object with %d keys and %d values", len(n.keys), len(n.elems))
		}
		if n.kind == kArray || n.kind == kObject {
			containers++
		}
		for _, e := range n.elems {
			walk(e)
		}
	}
	walk(root)
	if containers != 9 {
		t.Fatalf("walked %d containers, want 9", containers)
	}
}

func FuzzDecodeJSON(f *testing.F) {
	seeds, err := os.ReadDir(filepath.Join("testdata", "fuzz", "FuzzDecodeJSON"))
	if err != nil {
		f.Fatal(err)
	}
	if len(seeds) == 0 {
		f.Fatal("no seed corpus")
	}
	f.Add([]byte(`{"apiVersion":"v1","kind":"List","items":[{"a":1.5e3,"b":null}],"metadata":{}}`))
	f.Fuzz(func(t *testing.T, b []byte) {
		checkDecodeJSON(t, b)
	})
}
