package materialize

import (
	"bytes"
	"errors"
	"io"

	yaml3 "sigs.k8s.io/yaml/goyaml.v3"

	"github.com/qinglong/ql3/refuse"
)

// checkNodes is the second, independent anchor/alias/tag/merge-key check of a document: it reads
// the node tree with goyaml.v3 (a YAML 1.2 parser, not kubectl's goyaml.v2) and refuses what the
// line scanner refuses, plus a document the two parsers would split differently. Either check
// alone suffices; together a gap in one is covered by the other.
func checkNodes(chunk []byte, doc int) error {
	dec := yaml3.NewDecoder(bytes.NewReader(chunk))
	var n yaml3.Node
	if err := dec.Decode(&n); errors.Is(err, io.EOF) {
		return nil
	} else if err != nil {
		// Parser errors can quote the document, so the error is not wrapped.
		return refuse.New(CodeManifestSyntax, "document %d is not valid yaml 1.2", doc)
	}
	var second yaml3.Node
	if err := dec.Decode(&second); !errors.Is(err, io.EOF) {
		return refuse.New(CodeManifestSyntax, "document %d holds more than one yaml document", doc)
	}
	return walkNodes(&n, doc)
}

func walkNodes(n *yaml3.Node, doc int) error {
	switch {
	case n.Kind == yaml3.AliasNode || n.Anchor != "":
		return refuse.New(CodeManifestAnchor, "document %d line %d: anchor or alias", doc, n.Line)
	case n.Style&yaml3.TaggedStyle != 0:
		return refuse.New(CodeManifestTag, "document %d line %d: explicit tag", doc, n.Line)
	}
	if n.Kind == yaml3.MappingNode {
		for i := 0; i+1 < len(n.Content); i += 2 {
			if k := n.Content[i]; k.Kind == yaml3.ScalarNode && k.Value == "<<" {
				return refuse.New(CodeManifestMergeKey, "document %d line %d: merge key", doc, k.Line)
			}
		}
	}
	for _, c := range n.Content {
		if err := walkNodes(c, doc); err != nil {
			return err
		}
	}
	return nil
}
