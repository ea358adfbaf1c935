package manifest

import (
	"encoding/json"
	"io"
	"reflect"
	"strings"
	"testing"

	"github.com/qinglong/ql3/refuse"
)

// head is the identity every vector object starts with.
const head = "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: c\n  namespace: ns\n"

func TestParseAccepts(t *testing.T) {
	vectors := []struct {
		name string   // what the vector shows
		in   string   // manifest text
		want []Object // expected identity and JSON (Fields are checked against JSON)
	}{
		{"one object", head + "data:\n  a: b\n",
			[]Object{{APIVersion: "v1", Kind: "ConfigMap", Namespace: "ns", Name: "c", JSON: []byte(`{"apiVersion":"v1","data":{"a":"b"},"kind":"ConfigMap","metadata":{"name":"c","namespace":"ns"}}`)}}},
		{"empty, comment and null documents are skipped", "---\n# nothing\n---\n\n---\nnull\n---\n" + head + "---\n---\n",
			[]Object{{APIVersion: "v1", Kind: "ConfigMap", Namespace: "ns", Name: "c", JSON: []byte(`{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"c","namespace":"ns"}}`)}}},
		{"separator with a comment, no namespace, no final newline", "--- # first\napiVersion: v1\nkind: Namespace\nmetadata: {name: qinglong}\n--- # second\napiVersion: v1\nkind: Namespace\nmetadata: {name: other}",
			[]Object{{APIVersion: "v1", Kind: "Namespace", Name: "qinglong", JSON: []byte(`{"apiVersion":"v1","kind":"Namespace","metadata":{"name":"qinglong"}}`)},
				{Index: 1, APIVersion: "v1", Kind: "Namespace", Name: "other", JSON: []byte(`{"apiVersion":"v1","kind":"Namespace","metadata":{"name":"other"}}`)}}},
		{"canonical scalars keep their type, everything else is a string", head + "data: {i: 80, neg: -3, f: 0.5, e: 1.5e+3, t: true, f2: false, z: null, e2: , v: 1.2.3, q: 100m, p: 8080:80, s: v1, d: \"2024-01-01\", w: 'yes'}\n",
			[]Object{{APIVersion: "v1", Kind: "ConfigMap", Namespace: "ns", Name: "c", JSON: []byte(`{"apiVersion":"v1","data":{"d":"2024-01-01","e":1500,"e2":null,"f":0.5,"f2":false,"i":80,"neg":-3,"p":"8080:80","q":"100m","s":"v1","t":true,"v":"1.2.3","w":"yes","z":null},"kind":"ConfigMap","metadata":{"name":"c","namespace":"ns"}}`)}}},
		{"block scalars, quoted keys, integer keys, html characters", head + "data:\n  \"k y\": |\n    line <1>\n    line & 2\n  '80': x\n  81: z\n  f: >-\n    folded\n    text\n",
			[]Object{{APIVersion: "v1", Kind: "ConfigMap", Namespace: "ns", Name: "c", JSON: []byte(`{"apiVersion":"v1","data":{"80":"x","81":"z","f":"folded text","k y":"line \u003c1\u003e\nline \u0026 2\n"},"kind":"ConfigMap","metadata":{"name":"c","namespace":"ns"}}`)}}},
		{"tab inside a value and a flow document after a separator", head + "data:\n  a: \"x\ty\"\n---\n{apiVersion: v1, kind: ConfigMap, metadata: {name: d}}\n",
			[]Object{{APIVersion: "v1", Kind: "ConfigMap", Namespace: "ns", Name: "c", JSON: []byte(`{"apiVersion":"v1","data":{"a":"x\ty"},"kind":"ConfigMap","metadata":{"name":"c","namespace":"ns"}}`)},
				{Index: 1, APIVersion: "v1", Kind: "ConfigMap", Name: "d", JSON: []byte(`{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"d"}}`)}}},
		{"64 levels of nesting", head + "data: " + strings.Repeat("[", 63) + strings.Repeat("]", 63) + "\n", nil},
	}
	for _, v := range vectors {
		t.Run(v.name, func(t *testing.T) {
			objs, err := Parse([]byte(v.in))
			if err != nil {
				t.Fatal(err)
			}
			agreesWithKubectl(t, []byte(v.in), objs)
			for i := range objs {
				var f map[string]any
				d := json.NewDecoder(strings.NewReader(string(objs[i].JSON)))
				d.UseNumber()
				if err := d.Decode(&f); err != nil || !reflect.DeepEqual(f, objs[i].Fields) {
					t.Fatalf("object %d: Fields %v do not decode from JSON (%v)", i, objs[i].Fields, err)
				}
				if len(objs[i].Text) == 0 {
					t.Fatalf("object %d: no Text", i)
				}
				objs[i].Fields, objs[i].Text = nil, nil
			}
			if v.want != nil && !reflect.DeepEqual(objs, v.want) {
				t.Fatalf("got %+v\nwant %+v", objs, v.want)
			}
		})
	}
}

func TestParseFieldsUseNumber(t *testing.T) {
	objs, err := Parse([]byte(head + "data: {num: 12345678901234567}\n"))
	if err != nil {
		t.Fatal(err)
	}
	if n, ok := objs[0].Fields["data"].(map[string]any)["num"].(json.Number); !ok || n != "12345678901234567" {
		t.Fatalf("got %#v", objs[0].Fields["data"])
	}
}

// TestReaderMismatch makes the two readings disagree through the test hooks: the checks that
// normally make a disagreement impossible are then the only thing between the readers.
func TestReaderMismatch(t *testing.T) {
	conv, reader := toJSON, newReader
	t.Cleanup(func() { toJSON, newReader = conv, reader })
	toJSON = func(y []byte) ([]byte, error) {
		j, err := conv(y)
		return append(j[:len(j)-1:len(j)-1], []byte(`,"x":1}`)...), err
	}
	if _, err := Parse([]byte(head)); refuse.CodeOf(err) != CodeReaderMismatch {
		t.Fatalf("conversion: got %v", err)
	}
	toJSON = conv
	newReader = func(b []byte) interface{ Read() ([]byte, error) } { return &oneShot{b: b} }
	if _, err := Parse([]byte(head + "---\n" + head)); refuse.CodeOf(err) != CodeReaderMismatch {
		t.Fatalf("split: got %v", err)
	}
}

// oneShot returns its whole input as one document, as a reader that ignores separators would.
type oneShot struct {
	b    []byte
	done bool
}

func (o *oneShot) Read() ([]byte, error) {
	if o.done {
		return nil, io.EOF
	}
	o.done = true
	return o.b, nil
}
