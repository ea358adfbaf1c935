// Package manifest parses a Kubernetes manifest exactly as kubectl reads it with -f, and refuses
// every manifest that a second reader could read otherwise.
//
// kubectl (k8s.io/cli-runtime resource.StreamVisitor) decodes a file with
// k8s.io/apimachinery/pkg/util/yaml.NewYAMLOrJSONDecoder: a stream whose first non-space byte is
// '{' goes to encoding/json's stream decoder, anything else is split into documents by
// util/yaml.NewYAMLReader and each document is converted with sigs.k8s.io/yaml (goyaml.v2, YAML
// 1.1) into JSON; documents that are empty or "null" after trimming are skipped. Parse takes the
// YAML path only, splits with the same NewYAMLReader, converts with the same sigs.k8s.io/yaml
// (its strict variant), and reads every document a second time with goyaml.v3 as a node tree to
// see what the JSON cannot show: anchors, aliases, merge keys, tags, duplicate keys after key
// conversion, and plain scalars that YAML readers resolve differently. The two readings must then
// agree value for value. docs/lock-v2.md lists every rule.
package manifest

import (
	"bufio"
	"bytes"
	"errors"
	"io"

	kyaml "k8s.io/apimachinery/pkg/util/yaml"

	"github.com/qinglong/ql3/refuse"
)

// Limits. They bound memory and recursion for hostile input; a release manifest is a few KiB and
// nests about ten levels deep.
const (
	// MaxBytes is the largest manifest Parse accepts (8 MiB).
	MaxBytes = 8 << 20
	// MaxDepth is the deepest nesting of mappings and sequences accepted in a document; the
	// document's top-level mapping is depth 1. It equals evidence.MaxDepth, so every parsed
	// object can also be canonicalized as JSON.
	MaxDepth = 64
)

// Reason codes of the stream-level checks. The per-document codes are in document.go and
// node.go, the byte-level ones in text.go.
const (
	CodeTooLarge refuse.Code = "MANIFEST_TOO_LARGE"
	CodeEmpty    refuse.Code = "MANIFEST_EMPTY"
)

// Object is one document of a manifest, in document order.
type Object struct {
	Index      int    // 0-based position among the manifest's (non-empty) documents
	APIVersion string // as written
	Kind       string
	Namespace  string // metadata.namespace as written; "" when absent
	Name       string
	JSON       []byte         // the document converted to JSON exactly as kubectl converts it (sigs.k8s.io/yaml)
	Fields     map[string]any // JSON decoded with json.Number for numbers
	// Text is the document as kubectl's reader hands it to the YAML converter: the bytes the
	// object was read from, which Reread uses to recognise a document it has read before.
	Text []byte
}

// documents applies the byte-level rules (size, text) and splits b into its documents as kubectl
// does: what Parse and Reread both start with.
func documents(b []byte) ([]chunk, error) {
	if len(b) > MaxBytes {
		return nil, refuse.New(CodeTooLarge, "manifest of %d bytes exceeds the limit of %d", len(b), MaxBytes)
	}
	if err := checkText(b); err != nil {
		return nil, err
	}
	return split(b)
}

// Parse splits and parses manifest bytes, refusing anything a second reader could read otherwise.
// It returns at least one object or a *refuse.Error.
func Parse(b []byte) ([]Object, error) {
	chunks, err := documents(b)
	if err != nil {
		return nil, err
	}
	if objs, ok := parseParallel(chunks); ok {
		return objs, nil
	}
	var objs []Object
	for _, c := range chunks {
		o, ok, err := parseDocument(c, len(objs))
		if err != nil {
			return nil, err
		}
		if ok {
			objs = append(objs, o)
		}
	}
	if len(objs) == 0 {
		return nil, refuse.New(CodeEmpty, "manifest of %d bytes holds no object", len(b)).
			WithHint("kubectl skips documents that are empty or null; at least one object is required")
	}
	return objs, nil
}

// chunk is one document as kubectl's reader returns it, with the manifest line it starts on.
type chunk struct {
	text []byte
	line int // 1-based manifest line of the chunk's first line, for messages
}

// split cuts b into documents with the reader kubectl uses (NewYAMLReader over a LineReader: a
// line starting with "---" ends the current document if it holds anything, and is otherwise kept
// as its first line; every line is kept with its line break normalized to "\n"). checkText has already refused every separator
// line that reader rejects. A second, line-numbering pass mirrors the reader and must agree with
// it byte for byte.
func split(b []byte) ([]chunk, error) {
	mine := mirrorSplit(b)
	r := newReader(b)
	for i := 0; ; i++ {
		doc, err := r.Read()
		if errors.Is(err, io.EOF) {
			if i != len(mine) {
				return nil, refuse.New(CodeReaderMismatch, "kubectl's yaml reader found %d documents, the mirror %d", i, len(mine))
			}
			return mine, nil
		}
		if err != nil {
			return nil, refuse.New(CodeSeparator, "kubectl's yaml reader refused the manifest after %d documents", i)
		}
		if i >= len(mine) || !bytes.Equal(doc, mine[i].text) {
			return nil, refuse.New(CodeReaderMismatch, "kubectl's yaml reader and the mirror disagree on document %d", i)
		}
	}
}

// newReader is kubectl's document reader; a variable so that tests can make the two splits
// disagree.
var newReader = func(b []byte) interface{ Read() ([]byte, error) } {
	return kyaml.NewYAMLReader(bufio.NewReader(bytes.NewReader(b)))
}

func mirrorSplit(b []byte) []chunk {
	var out []chunk
	var cur []byte
	start := 1
	for n, line := range lines(b) {
		// A separator ends a document that holds something and is dropped; one that would start
		// an empty document is kept in it (the YAML parser then sees a document start marker).
		if bytes.HasPrefix(line, []byte("---")) && len(cur) > 0 {
			out = append(out, chunk{text: cur, line: start})
			cur = nil
			continue
		}
		if len(cur) == 0 {
			start = n + 1
		}
		cur = append(append(cur, line...), '\n')
	}
	if len(cur) > 0 {
		out = append(out, chunk{text: cur, line: start})
	}
	return out
}

// lines splits b at "\n" as bufio.Reader.ReadLine does: a final line break does not start
// another line. checkText has refused every "\r", so no "\r\n" is left to strip.
func lines(b []byte) [][]byte {
	if len(b) == 0 {
		return nil
	}
	ls := bytes.Split(b, []byte("\n"))
	if len(ls[len(ls)-1]) == 0 {
		ls = ls[:len(ls)-1]
	}
	return ls
}
