package manifest

import (
	"strconv"
	"unicode/utf8"

	yaml3 "sigs.k8s.io/yaml/goyaml.v3"

	"github.com/qinglong/ql3/refuse"
)

// Reason codes of the node-level checks (goyaml.v3 tree of one document).
const (
	CodeTooDeep         refuse.Code = "MANIFEST_TOO_DEEP"
	CodeAnchor          refuse.Code = "MANIFEST_ANCHOR"
	CodeAlias           refuse.Code = "MANIFEST_ALIAS"
	CodeMergeKey        refuse.Code = "MANIFEST_MERGE_KEY"
	CodeTag             refuse.Code = "MANIFEST_TAG"
	CodeDuplicateKey    refuse.Code = "MANIFEST_DUPLICATE_KEY"
	CodeKeyNotString    refuse.Code = "MANIFEST_KEY_NOT_STRING"
	CodeAmbiguousScalar refuse.Code = "MANIFEST_AMBIGUOUS_SCALAR"
)

// walker turns one document's node tree into the value every reader agrees on (map[string]any,
// []any, string, bool, nil, json.Number, float64), refusing what readers could disagree on.
type walker struct {
	text  []byte
	lines []int // byte offset of each line of text
	ascii bool  // text is ASCII: a column is a byte offset
	doc   int   // index of the document among the manifest's chunks, for messages
	line0 int   // manifest line of text's first line
	// cursor of the last position looked up; nodes come in document order, so looking up the
	// next one from here keeps a long line with many nodes linear
	curLine, curCol, curOff int
}

func newWalker(c chunk, doc int) *walker {
	w := &walker{text: c.text, doc: doc, line0: c.line, lines: []int{0}, ascii: true}
	for i, b := range c.text {
		if b == '\n' {
			w.lines = append(w.lines, i+1)
		}
		if b >= 0x80 {
			w.ascii = false
		}
	}
	return w
}

// path is a field path for messages, built only when one is needed.
type path struct {
	parent *path
	key    string
	index  int // -1 for a key
}

func (p *path) String() string {
	if p == nil {
		return "$"
	}
	if p.index >= 0 {
		return p.parent.String() + "[" + strconv.Itoa(p.index) + "]"
	}
	return p.parent.String() + "." + refuse.Ident(p.key)
}

func (w *walker) fail(code refuse.Code, n *yaml3.Node, p *path, what string) *refuse.Error {
	return refuse.New(code, "document %d, line %d, at %s: %s", w.doc, w.line0+n.Line-1, p, what)
}

// startsWithTag reports whether the source text at n's position is a tag. goyaml.v3 records a
// node's position at its first property, and only a tag starts with '!'; this also sees the
// non-specific tag "!", which goyaml.v3 drops from the node (it resolves "! 12" to an integer
// where goyaml.v2 reads the string "12").
func (w *walker) startsWithTag(n *yaml3.Node) bool {
	if n.Line < 1 || n.Line > len(w.lines) {
		return false
	}
	i := w.lines[n.Line-1]
	if w.ascii {
		i += n.Column - 1
		return i < len(w.text) && w.text[i] == '!'
	}
	col := 1
	if n.Line == w.curLine && n.Column >= w.curCol {
		i, col = w.curOff, w.curCol
	}
	for ; col < n.Column && i < len(w.text) && w.text[i] != '\n'; col++ { // goyaml.v3 counts columns in runes
		_, sz := utf8.DecodeRune(w.text[i:])
		i += sz
	}
	w.curLine, w.curCol, w.curOff = n.Line, col, i
	return i < len(w.text) && w.text[i] == '!'
}

// aliases refuses any alias in the tree before the walk meets the anchor it refers to, so that
// an alias is reported as one.
func (w *walker) aliases(n *yaml3.Node) error {
	if n.Kind == yaml3.AliasNode {
		return w.fail(CodeAlias, n, nil, "yaml alias")
	}
	for _, c := range n.Content {
		if err := w.aliases(c); err != nil {
			return err
		}
	}
	return nil
}

func (w *walker) value(n *yaml3.Node, p *path, depth int) (any, error) {
	switch {
	case n.Kind == yaml3.AliasNode:
		return nil, w.fail(CodeAlias, n, p, "yaml alias")
	case n.Anchor != "":
		return nil, w.fail(CodeAnchor, n, p, "yaml anchor")
	case n.Style&yaml3.TaggedStyle != 0 || w.startsWithTag(n):
		return nil, w.fail(CodeTag, n, p, "explicit yaml tag")
	}
	switch n.Kind {
	case yaml3.MappingNode:
		if depth >= MaxDepth {
			return nil, w.fail(CodeTooDeep, n, p, "nesting deeper than "+strconv.Itoa(MaxDepth))
		}
		m := make(map[string]any, len(n.Content)/2)
		for i := 0; i+1 < len(n.Content); i += 2 {
			k, err := w.key(n.Content[i], p)
			if err != nil {
				return nil, err
			}
			kp := &path{parent: p, key: k, index: -1}
			if _, dup := m[k]; dup {
				return nil, w.fail(CodeDuplicateKey, n.Content[i], kp, "key repeated in its mapping")
			}
			v, err := w.value(n.Content[i+1], kp, depth+1)
			if err != nil {
				return nil, err
			}
			m[k] = v
		}
		return m, nil
	case yaml3.SequenceNode:
		if depth >= MaxDepth {
			return nil, w.fail(CodeTooDeep, n, p, "nesting deeper than "+strconv.Itoa(MaxDepth))
		}
		s := make([]any, len(n.Content))
		for i, e := range n.Content {
			v, err := w.value(e, &path{parent: p, index: i}, depth+1)
			if err != nil {
				return nil, err
			}
			s[i] = v
		}
		return s, nil
	case yaml3.ScalarNode:
		if !plain(n) {
			return n.Value, nil
		}
		v, ok := resolvePlain(n.Value)
		if !ok {
			return nil, w.fail(CodeAmbiguousScalar, n, p, "plain scalar that yaml readers resolve differently or in a non-canonical form").
				WithHint("quote the value (or write true, false, null or a plain decimal number)")
		}
		return v, nil
	}
	return nil, w.fail(CodeKeyNotString, n, p, "unexpected yaml node kind")
}

// key returns the member name of mapping key n as both readers convert it.
func (w *walker) key(n *yaml3.Node, p *path) (string, error) {
	switch {
	case n.Kind == yaml3.AliasNode:
		return "", w.fail(CodeAlias, n, p, "yaml alias as a key")
	case n.Anchor != "":
		return "", w.fail(CodeAnchor, n, p, "yaml anchor on a key")
	case n.Style&yaml3.TaggedStyle != 0 || w.startsWithTag(n):
		return "", w.fail(CodeTag, n, p, "explicit yaml tag on a key")
	case n.Kind != yaml3.ScalarNode:
		return "", w.fail(CodeKeyNotString, n, p, "mapping or sequence as a key")
	case n.Value == "<<" || n.Tag == "!!merge":
		// Refused in any style: goyaml.v2 merges a plain "<<" and other readers differ on the rest.
		return "", w.fail(CodeMergeKey, n, p, "merge key \"<<\"")
	}
	if !plain(n) {
		return n.Value, nil
	}
	v, ok := resolvePlain(n.Value)
	if !ok {
		return "", w.fail(CodeAmbiguousScalar, n, p, "plain key that yaml readers resolve differently").
			WithHint("quote the key")
	}
	if s, isStr := v.(string); isStr {
		return s, nil
	}
	if _, isInt := v.(interface{ Int64() (int64, error) }); isInt {
		return n.Value, nil // a canonical integer key: goyaml.v2 formats it back to the same digits
	}
	return "", w.fail(CodeKeyNotString, n, p, "null, boolean or float as a key").WithHint("quote the key")
}

func plain(n *yaml3.Node) bool {
	return n.Style&(yaml3.DoubleQuotedStyle|yaml3.SingleQuotedStyle|yaml3.LiteralStyle|yaml3.FoldedStyle) == 0
}
