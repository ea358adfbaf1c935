package manifest

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"maps"
	"regexp"
	"slices"
	"strconv"
	"strings"

	"sigs.k8s.io/yaml"
	yaml3 "sigs.k8s.io/yaml/goyaml.v3"

	"github.com/qinglong/ql3/refuse"
)

// Reason codes of the per-document checks.
const (
	CodeSyntax refuse.Code = "MANIFEST_YAML_SYNTAX"
	// CodeReaderMismatch: the two readings of a document (goyaml.v2 through sigs.k8s.io/yaml, as
	// kubectl converts it, and goyaml.v3's node tree under the rules above), or kubectl's
	// document reader and its line-numbering mirror, disagree. The other rules are meant to make
	// this impossible; it stays as the last line of defence.
	CodeReaderMismatch refuse.Code = "MANIFEST_READER_MISMATCH"
	CodeNotObject      refuse.Code = "MANIFEST_NOT_OBJECT"
	CodeAPIVersion     refuse.Code = "MANIFEST_API_VERSION_MISSING"
	CodeKind           refuse.Code = "MANIFEST_KIND_MISSING"
	CodeMetadata       refuse.Code = "MANIFEST_METADATA_INVALID"
	CodeName           refuse.Code = "MANIFEST_NAME_MISSING"
	// CodeList: kubectl expands a list (kind ending in "List", or any top-level "items" member,
	// which is how its unstructured decoder recognises a list) into its items.
	CodeList refuse.Code = "MANIFEST_LIST"
	// CodeSecret: the manifest is archived as evidence, so it must not carry a Secret.
	CodeSecret refuse.Code = "MANIFEST_SECRET"
)

var yamlLine = regexp.MustCompile(`line ([0-9]+)`)

// toJSON is kubectl's conversion of one document; a variable so that tests can make the two
// readings disagree.
var toJSON = yaml.YAMLToJSONStrict

// syntaxErr refuses a document the YAML parsers reject. Their messages can quote the document,
// so only the line number is kept.
func syntaxErr(c chunk, doc int, reader string, err error) error {
	where := ""
	if m := yamlLine.FindStringSubmatch(err.Error()); m != nil {
		if n, err := strconv.Atoi(m[1]); err == nil {
			where = " near line " + strconv.Itoa(c.line+n-1)
		}
	}
	return refuse.New(CodeSyntax, "document %d (starting on line %d) is not valid yaml for %s%s", doc, c.line, reader, where)
}

// parseDocument reads one chunk. ok is false for a document kubectl skips (empty or null).
func parseDocument(c chunk, index int) (Object, bool, error) {
	doc := index // chunk position is only used in messages; objects are numbered by index
	dec := yaml3.NewDecoder(bytes.NewReader(c.text))
	var root yaml3.Node
	var tree any
	switch err := dec.Decode(&root); {
	case errors.Is(err, io.EOF): // comments and blank lines only
	case err != nil:
		return Object{}, false, syntaxErr(c, doc, "goyaml.v3", err)
	default:
		var extra yaml3.Node
		if err := dec.Decode(&extra); !errors.Is(err, io.EOF) {
			return Object{}, false, refuse.New(CodeDocumentEnd, "document %d (starting on line %d) holds more than one yaml document", doc, c.line)
		}
		if len(root.Content) != 1 {
			return Object{}, false, refuse.New(CodeSyntax, "document %d (starting on line %d) has no single root node", doc, c.line)
		}
		w := newWalker(c, doc)
		if err := w.aliases(root.Content[0]); err != nil {
			return Object{}, false, err
		}
		if tree, err = w.value(root.Content[0], nil, 0); err != nil {
			return Object{}, false, err
		}
	}
	// Exactly kubectl's conversion (strict only adds the duplicate-key refusal, which the walk
	// has already made with a better message).
	js, err := toJSON(c.text)
	if err != nil {
		return Object{}, false, syntaxErr(c, doc, "goyaml.v2", err)
	}
	js = bytes.TrimSpace(js)
	mine, err := json.Marshal(tree)
	if err != nil || !bytes.Equal(mine, js) {
		return Object{}, false, refuse.New(CodeReaderMismatch, "document %d (starting on line %d) reads differently in goyaml.v2 and goyaml.v3", doc, c.line)
	}
	if len(js) == 0 || string(js) == "null" {
		return Object{}, false, nil // kubectl skips it too
	}
	m, isMap := tree.(map[string]any)
	if !isMap {
		return Object{}, false, refuse.New(CodeNotObject, "document %d (starting on line %d) is not a mapping", doc, c.line)
	}
	o := Object{Index: index, JSON: js, Text: c.text}
	if o.Fields, err = decodeFields(js); err != nil {
		return Object{}, false, refuse.Wrap(CodeReaderMismatch, err, "document %d (starting on line %d) does not decode as a json object", doc, c.line)
	}
	if err := identify(&o, m, c); err != nil {
		return Object{}, false, err
	}
	return o, true, nil
}

func decodeFields(js []byte) (map[string]any, error) {
	d := json.NewDecoder(bytes.NewReader(js))
	d.UseNumber()
	var f map[string]any
	if err := d.Decode(&f); err != nil {
		return nil, err
	}
	if f == nil {
		return nil, errors.New("manifest: document is not an object")
	}
	return f, nil
}

// identify fills the identity fields of o and applies the object-level rules.
func identify(o *Object, m map[string]any, c chunk) error {
	at := func(code refuse.Code, what string) *refuse.Error {
		return refuse.New(code, "document %d (starting on line %d): %s", o.Index, c.line, what)
	}
	// Readers that match member names case-insensitively (encoding/json into a struct, which
	// kubectl's list detector uses) would see two members where these differ only in case.
	if err := caseDuplicates(m, "$"); err != nil {
		return at(CodeDuplicateKey, err.Error())
	}
	var ok bool
	if o.APIVersion, ok = m["apiVersion"].(string); !ok || o.APIVersion == "" {
		return at(CodeAPIVersion, "apiVersion is missing or not a non-empty string")
	}
	if o.Kind, ok = m["kind"].(string); !ok || o.Kind == "" {
		return at(CodeKind, "kind is missing or not a non-empty string")
	}
	if len(o.Kind) >= 4 && strings.EqualFold(o.Kind[len(o.Kind)-4:], "list") {
		return at(CodeList, "kind "+refuse.Ident(o.Kind)+" is a list: kubectl would expand its items")
	}
	for k := range m {
		if strings.EqualFold(k, "items") {
			return at(CodeList, "top-level items member: kubectl would expand the document as a list")
		}
	}
	if strings.EqualFold(o.Kind, "Secret") {
		return at(CodeSecret, "kind Secret: the manifest is archived as evidence and must not carry secrets").
			WithHint("create the Secret out of band; reference it by name from the manifest")
	}
	meta, ok := m["metadata"].(map[string]any)
	if !ok {
		return at(CodeMetadata, "metadata is missing or not a mapping")
	}
	if err := caseDuplicates(meta, "$.metadata"); err != nil {
		return at(CodeDuplicateKey, err.Error())
	}
	if o.Name, ok = meta["name"].(string); !ok || o.Name == "" {
		return at(CodeName, "metadata.name is missing or not a non-empty string")
	}
	if ns, present := meta["namespace"]; present {
		if o.Namespace, ok = ns.(string); !ok || o.Namespace == "" {
			return at(CodeMetadata, "metadata.namespace is present but not a non-empty string")
		}
	}
	return nil
}

func caseDuplicates(m map[string]any, where string) error {
	seen := make(map[string]string, len(m))
	for _, k := range slices.Sorted(maps.Keys(m)) {
		l := strings.ToLower(k)
		if other, dup := seen[l]; dup {
			return errors.New("members " + refuse.Ident(other) + " and " + refuse.Ident(k) + " of " + where + " differ only in case")
		}
		seen[l] = k
	}
	return nil
}
