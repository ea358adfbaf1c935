package manifest

import (
	"bytes"
	"errors"
	"io"
	"testing"

	"k8s.io/apimachinery/pkg/runtime"
	kyaml "k8s.io/apimachinery/pkg/util/yaml"
)

// kubectlDocuments reads b exactly as kubectl's resource.StreamVisitor does (minus the byte
// order mark handling, since Parse refuses every BOM): NewYAMLOrJSONDecoder with a 4096-byte
// JSON sniff, each document into a RawExtension, trimmed, empty and "null" documents skipped.
func kubectlDocuments(b []byte) ([][]byte, error) {
	d := kyaml.NewYAMLOrJSONDecoder(bytes.NewReader(b), 4096)
	var out [][]byte
	for {
		ext := runtime.RawExtension{}
		if err := d.Decode(&ext); err != nil {
			if errors.Is(err, io.EOF) {
				return out, nil
			}
			return nil, err
		}
		ext.Raw = bytes.TrimSpace(ext.Raw)
		if len(ext.Raw) == 0 || bytes.Equal(ext.Raw, []byte("null")) {
			continue
		}
		out = append(out, ext.Raw)
	}
}

// agreesWithKubectl checks that the objects Parse accepted from b are, document for document and
// byte for byte, what kubectl's own decoder makes of b.
func agreesWithKubectl(t testing.TB, b []byte, objs []Object) {
	t.Helper()
	docs, err := kubectlDocuments(b)
	if err != nil {
		t.Fatalf("Parse accepted what kubectl's decoder refuses: %v", err)
	}
	if len(docs) != len(objs) {
		t.Fatalf("Parse found %d objects, kubectl %d", len(objs), len(docs))
	}
	for i, o := range objs {
		if !bytes.Equal(o.JSON, docs[i]) {
			t.Fatalf("object %d: Parse %s, kubectl %s", i, o.JSON, docs[i])
		}
		if o.Index != i {
			t.Fatalf("object %d carries index %d", i, o.Index)
		}
	}
}
