package materialize

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"strings"

	k8syaml "k8s.io/apimachinery/pkg/util/yaml"
	"sigs.k8s.io/yaml"

	"github.com/qinglong/ql3/refuse"
)

// MaxManifestBytes bounds the unlocked and the locked manifest, the verifier's default ceiling.
const MaxManifestBytes = 8 << 20

// Reason codes of the manifest reader.
const (
	CodeManifestSize         refuse.Code = "MATERIALIZE_MANIFEST_SIZE"
	CodeManifestDuplicateKey refuse.Code = "MATERIALIZE_MANIFEST_DUPLICATE_KEY"
	CodeManifestDocument     refuse.Code = "MATERIALIZE_MANIFEST_DOCUMENT"
	CodeManifestList         refuse.Code = "MATERIALIZE_MANIFEST_LIST"
	CodeManifestSecret       refuse.Code = "MATERIALIZE_MANIFEST_SECRET"
)

// object is one non-empty document of a manifest.
type object struct {
	index                             int // position among the non-empty documents
	apiVersion, kind, namespace, name string
	fields                            map[string]any // numbers as json.Number
}

// parseManifest reads a manifest as kubectl does -- documents split by k8s.io/apimachinery's
// YAML reader, each converted by sigs.k8s.io/yaml -- after the YAML subset check of scanSubset,
// and refuses every document that is not a plain Kubernetes object the materializer can lock.
func parseManifest(b []byte) ([]*object, error) {
	if len(b) == 0 || len(b) > MaxManifestBytes {
		return nil, refuse.New(CodeManifestSize, "manifest of %d bytes is empty or exceeds %d", len(b), MaxManifestBytes)
	}
	// kubectl reads a stream that starts with { as a JSON stream, split differently.
	if t := bytes.TrimLeft(b, " \t\r\n"); len(t) > 0 && (t[0] == '{' || t[0] == '[') {
		return nil, refuse.New(CodeManifestSyntax, "manifest is json, not block yaml")
	}
	r := k8syaml.NewYAMLReader(bufio.NewReader(bytes.NewReader(b)))
	var objs []*object
	for n := 0; ; n++ {
		chunk, err := r.Read()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return nil, refuse.New(CodeManifestSyntax, "document separator after document %d is not ---", n)
		}
		if err := scanSubset(chunk, n); err != nil {
			return nil, err
		}
		if err := checkNodes(chunk, n); err != nil {
			return nil, err
		}
		fields, err := decodeDocument(chunk, n)
		if err != nil {
			return nil, err
		}
		if fields == nil {
			continue // empty or comments only: kubectl skips it
		}
		o, err := checkObject(fields, n)
		if err != nil {
			return nil, err
		}
		o.index = len(objs)
		objs = append(objs, o)
	}
	return objs, nil
}

// decodeDocument converts one document to JSON both leniently (as kubectl does) and strictly,
// which differ only on repeated keys, and decodes it with json.Number numbers.
func decodeDocument(chunk []byte, n int) (map[string]any, error) {
	lenient, err := yaml.YAMLToJSON(chunk)
	if err != nil {
		// Parser errors can quote the document, so the error is not wrapped.
		return nil, refuse.New(CodeManifestSyntax, "document %d is not valid yaml", n)
	}
	if _, err := yaml.YAMLToJSONStrict(chunk); err != nil {
		return nil, refuse.New(CodeManifestDuplicateKey, "document %d repeats a mapping key", n)
	}
	if string(lenient) == "null" {
		return nil, nil
	}
	dec := json.NewDecoder(bytes.NewReader(lenient))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return nil, refuse.New(CodeManifestSyntax, "document %d does not convert to json", n)
	}
	m, ok := v.(map[string]any)
	if !ok {
		return nil, refuse.New(CodeManifestDocument, "document %d is not an object", n)
	}
	return m, nil
}

func checkObject(f map[string]any, n int) (*object, error) {
	o := &object{fields: f}
	var ok bool
	if o.apiVersion, ok = f["apiVersion"].(string); !ok || o.apiVersion == "" {
		return nil, refuse.New(CodeManifestDocument, "document %d has no string apiVersion", n)
	}
	if o.kind, ok = f["kind"].(string); !ok || o.kind == "" {
		return nil, refuse.New(CodeManifestDocument, "document %d has no string kind", n)
	}
	meta, ok := f["metadata"].(map[string]any)
	if !ok {
		return nil, refuse.New(CodeManifestDocument, "document %d has no metadata object", n)
	}
	if o.name, ok = meta["name"].(string); !ok || o.name == "" {
		return nil, refuse.New(CodeManifestDocument, "document %d has no string metadata.name", n)
	}
	if ns, present := meta["namespace"]; present {
		if o.namespace, ok = ns.(string); !ok || o.namespace == "" {
			return nil, refuse.New(CodeManifestDocument, "document %d metadata.namespace is not a non-empty string", n)
		}
	}
	if _, items := f["items"]; items || o.kind == "List" || strings.HasSuffix(o.kind, "List") {
		return nil, refuse.New(CodeManifestList, "document %d is a list (kind %q): kubectl would apply its items instead", n, o.kind)
	}
	if strings.EqualFold(o.kind, "Secret") {
		return nil, refuse.New(CodeManifestSecret, "document %d is a Secret", n).
			WithHint("the manifest and its live read are archived as evidence; deliver secrets another way")
	}
	return o, nil
}

// render writes objects as the locked manifest: each document marshalled by sigs.k8s.io/yaml
// (keys sorted, so the bytes depend on the values only), documents joined by "---\n".
func render(objs []*object) ([]byte, error) {
	var out bytes.Buffer
	for i, o := range objs {
		y, err := yaml.Marshal(o.fields)
		if err != nil {
			return nil, refuse.Wrap(CodeOutputCheck, err, "document %d does not marshal", i)
		}
		if i > 0 {
			out.WriteString("---\n")
		}
		out.Write(y)
	}
	return out.Bytes(), nil
}
