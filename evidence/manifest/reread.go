package manifest

import (
	"bytes"

	"github.com/qinglong/ql3/refuse"
)

// Reread reads manifest bytes again that Parse accepted when they were stored, for a reader that
// only needs their objects (the plan of a preflight reads the previous release's manifest this
// way). It applies the byte-level rules and kubectl's document split as Parse does, but reads each
// document once, with kubectl's own conversion (sigs.k8s.io/yaml), and skips the second reading
// that Parse compares it with: that comparison exists to refuse bytes two readers could read
// differently before kubectl applies them, and these bytes already passed it. A document whose
// text is exactly the Text of an object in known (objects Parse or Reread returned) is not read
// at all: the same text reads to the same object, whose JSON and Fields are then shared, so
// callers must not modify them.
//
// For bytes Parse accepts, Reread returns the same objects. For bytes Parse would refuse, Reread
// returns what kubectl reads, or a refusal; it must never be used to admit a manifest.
func Reread(b []byte, known []Object) ([]Object, error) {
	chunks, err := documents(b)
	if err != nil {
		return nil, err
	}
	seen := make(map[string]*Object, len(known))
	for i := range known {
		seen[string(known[i].Text)] = &known[i]
	}
	var objs []Object
	for _, c := range chunks {
		if k, ok := seen[string(c.text)]; ok {
			o := *k
			o.Index, o.Text = len(objs), c.text
			objs = append(objs, o)
			continue
		}
		o, ok, err := rereadDocument(c, len(objs))
		if err != nil {
			return nil, err
		}
		if ok {
			objs = append(objs, o)
		}
	}
	if len(objs) == 0 {
		return nil, refuse.New(CodeEmpty, "manifest of %d bytes holds no object", len(b))
	}
	return objs, nil
}

// rereadDocument is parseDocument with kubectl's reading alone.
func rereadDocument(c chunk, index int) (Object, bool, error) {
	js, err := toJSON(c.text)
	if err != nil {
		return Object{}, false, syntaxErr(c, index, "goyaml.v2", err)
	}
	js = bytes.TrimSpace(js)
	if len(js) == 0 || string(js) == "null" {
		return Object{}, false, nil
	}
	if js[0] != '{' {
		return Object{}, false, refuse.New(CodeNotObject, "document %d (starting on line %d) is not a mapping", index, c.line)
	}
	o := Object{Index: index, JSON: js, Text: c.text}
	if o.Fields, err = decodeFields(js); err != nil {
		return Object{}, false, refuse.Wrap(CodeNotObject, err, "document %d (starting on line %d) does not decode as a json object", index, c.line)
	}
	if err := identify(&o, o.Fields, c); err != nil {
		return Object{}, false, err
	}
	return o, true, nil
}
