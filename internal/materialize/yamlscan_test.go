package materialize

import (
	"testing"

	"github.com/qinglong/ql3/refuse"
)

// TestScanSubset pins the scanner on YAML where the line structure decides whether an indicator
// is a node property or scalar content.
func TestScanSubset(t *testing.T) {
	vectors := []struct {
		doc  string      // one document
		code refuse.Code // "" when accepted
	}{
		{"a: b\n", ""},
		{"---\na: b\n", ""},                          // document start (kubectl keeps a leading separator)
		{"--- # c\na: b\n", ""},                      // with a comment
		{"---#c\na: b\n", CodeManifestSyntax},        // no marker for YAML, a separator for kubectl
		{"a: b\n---\n", CodeManifestSyntax},          // only the first line
		{"a: b&c*d!e\n", ""},                         // indicators inside a plain scalar
		{"a: 'x: &y'\n", ""},                         // inside a quoted scalar
		{"a: \"x \\\" &y\"\n", ""},                   // escaped quote
		{"a: 'it''s &y'\n", ""},                      // escaped single quote
		{"a: b # &c\n", ""},                          // in a comment
		{"# &c\na: b\n", ""},                         // in a comment line
		{"a: plain\n  &continued *text\n", ""},       // continuation of a plain scalar
		{"- plain\n  - &still text\n", ""},           // continuation of a sequence entry's scalar
		{"a: |\n  &x *y !z\n  <<: q\nb: c\n", ""},    // block scalar content
		{"a: |-\n  x\n\n  y\nb: c\n", ""},            // blank line inside a block scalar
		{"a: |2+\n   x\nb: c\n", ""},                 // indentation and chomping indicators
		{"- k: >\n    &x\n  l: m\n", ""},             // block scalar of a compact mapping
		{"a: 'long\n  &x'\nb: c\n", ""},              // multi-line single-quoted scalar
		{"a: \"long \\\n  *x\"\nb: c\n", ""},         // escaped line break in a double-quoted scalar
		{"a: [b, 'c, *d', {e: f}]\n", ""},            // flow collection
		{"a: {b: c} # &d\n", ""},                     // comment after a flow collection
		{"a: http://x:8080/#&y\n", ""},               // colon and hash inside a plain scalar
		{"a: |\n  x\nb: &c d\n", CodeManifestAnchor}, // after the block scalar ends
		{"- k: |\n    x\n  l: &a m\n", CodeManifestAnchor},
		{"a: 'x\n  y'\nb: *c\n", CodeManifestAnchor},
		{"a: plain\nb: &x y\n", CodeManifestAnchor},
		{"- &a x\n", CodeManifestAnchor},
		{"- - *a\n", CodeManifestAnchor},
		{"a:\n  &x\n", CodeManifestAnchor},
		{"a:\t*x\n", CodeManifestAnchor},
		{"\"k\": &x v\n", CodeManifestAnchor},
		{"a: [b, &c d]\n", CodeManifestAnchor},
		{"a: {b: *c}\n", CodeManifestAnchor},
		{"a: {\"b\":*c}\n", CodeManifestAnchor},
		{"a: ! b\n", CodeManifestTag},
		{"!t a: b\n", CodeManifestTag},
		{"a: [!!int 1]\n", CodeManifestTag},
		{"<<: {a: b}\n", CodeManifestMergeKey},
		{"<< : {a: b}\n", CodeManifestMergeKey},
		{"a: {<<: {b: c}}\n", CodeManifestMergeKey},
		{"a: ['<<']\n", CodeManifestMergeKey},
		{"%TAG ! tag:x\n", CodeManifestSyntax},
		{"...\n", CodeManifestSyntax},
		{"? a\n: b\n", CodeManifestSyntax},
		{"a: [b,\n  c]\n", CodeManifestSyntax},
		{"a: [b # c\n  ]\n", CodeManifestSyntax},
		{"a: [b]c\n", CodeManifestSyntax},
		{"a: \"b\" c\n", CodeManifestSyntax},
		{"a: 'x\n  y' z\n", CodeManifestSyntax},
		{"'x\n  y': z\n", CodeManifestSyntax},
		{"a:\n  |\n  x\n", CodeManifestSyntax},
		{"a: |x\n", CodeManifestSyntax},
		{"a: @b\n", CodeManifestSyntax},
		{"a: b\x00\n", CodeManifestSyntax},
		{"\ta: b\n", CodeManifestSyntax},
		{"a: b\u0085c: &d\n", CodeManifestSyntax},
		{"\ufeffa: b\n", CodeManifestSyntax},
	}
	for _, v := range vectors {
		err := scanSubset([]byte(v.doc), 0)
		if got := refuse.CodeOf(err); got != v.code {
			t.Errorf("%q: got %q (%v), want %q", v.doc, got, err, v.code)
		}
		// What the scanner accepts is valid YAML without anchors, tags or merge keys for the
		// node check too (the two agree where both can tell).
		if err := checkNodes([]byte(v.doc), 0); v.code == "" && err != nil {
			t.Errorf("%q: accepted by the scanner, refused by the node check: %v", v.doc, err)
		}
	}
}

// TestCheckNodes pins the goyaml.v3 node check: it refuses anchors, aliases, tags and merge keys
// on its own, and a chunk it would read as two documents.
func TestCheckNodes(t *testing.T) {
	vectors := []struct {
		doc  string      // one document
		code refuse.Code // "" when accepted
	}{
		{"a: b\n", ""},
		{"", ""},
		{"# only a comment\n", ""},
		{"---\na: b\n", ""},
		{"a: |\n  &x *y !z\n", ""},
		{"a: 'x &y'\n", ""},
		{"a: &x b\n", CodeManifestAnchor},
		{"a: &x b\nc: *x\n", CodeManifestAnchor},
		{"- &a\n  b: c\n", CodeManifestAnchor},
		{"a: !!str b\n", CodeManifestTag},
		{"a: !local b\n", CodeManifestTag},
		{"!!map {a: b}\n", CodeManifestTag},
		{"<<: {a: b}\n", CodeManifestMergeKey},
		{"\"<<\": b\n", CodeManifestMergeKey},
		{"a: {<<: {b: c}}\n", CodeManifestMergeKey},
		{"a: b\n---\nc: d\n", CodeManifestSyntax},
		{"a: b\n...\nc: d\n", CodeManifestSyntax},
		{"a: [b\n", CodeManifestSyntax},
		{"a: *undefined\n", CodeManifestSyntax},
	}
	for _, v := range vectors {
		if got := refuse.CodeOf(checkNodes([]byte(v.doc), 0)); got != v.code {
			t.Errorf("%q: got %q, want %q", v.doc, got, v.code)
		}
	}
}
