package materialize

import (
	"bytes"
	"unicode/utf8"

	"github.com/qinglong/ql3/refuse"
)

// Reason codes of the YAML subset check.
const (
	CodeManifestAnchor   refuse.Code = "MATERIALIZE_MANIFEST_ANCHOR"
	CodeManifestTag      refuse.Code = "MATERIALIZE_MANIFEST_TAG"
	CodeManifestMergeKey refuse.Code = "MATERIALIZE_MANIFEST_MERGE_KEY"
	CodeManifestSyntax   refuse.Code = "MATERIALIZE_MANIFEST_SYNTAX"
)

// scanner checks one document (as split by kubectl's reader) against the YAML subset the
// materializer accepts. The module graph holds no YAML parser that reports anchors, aliases or
// tags (go.yaml.in/yaml/v2 expands them silently), so this is a line scanner that finds every
// place where YAML allows a node property or alias -- the start of a node -- and refuses one
// there. Where it cannot tell what YAML would read (explicit keys, directives, flow collections
// over several lines, a scalar whose parent is on another line) it refuses too: it may refuse
// valid YAML, but never lets an anchor, alias, tag or merge key through.
//
// Lines it skips are scalar content: the lines of a block scalar, and the continuation lines of a
// plain or quoted scalar that started after a key or "- " on an earlier line. YAML reads a line
// indented more than that key or entry as part of the scalar, or fails; it never reads it as
// structure, so skipping it can hide nothing.
type scanner struct {
	doc, line int
	quote     byte // the quote of a quoted scalar continuing from an earlier line, or 0
	contMode  bool // inside a block scalar or a multi-line plain scalar
	contCol   int  // ... whose content lines are those indented more than this column (or blank)
}

func scanSubset(b []byte, doc int) error {
	if !utf8.Valid(b) {
		return refuse.New(CodeManifestSyntax, "document %d is not valid utf-8", doc)
	}
	// YAML 1.1 (go.yaml.in/yaml/v2) also breaks lines at NEL, LS and PS; a byte order mark is
	// read as a document boundary. Either would make the scanner's lines differ from the parser's.
	for _, r := range []string{"\u0085", "\u2028", "\u2029", "\ufeff"} {
		if bytes.Contains(b, []byte(r)) {
			return refuse.New(CodeManifestSyntax, "document %d holds a unicode line break or byte order mark", doc)
		}
	}
	s := &scanner{doc: doc}
	for len(b) > 0 {
		s.line++
		text := b
		if i := bytes.IndexByte(b, '\n'); i >= 0 {
			text, b = b[:i], b[i+1:]
		} else {
			b = nil
		}
		if err := s.scanLine(text); err != nil {
			return err
		}
	}
	return nil
}

func (s *scanner) fail(code refuse.Code, what string) error {
	return refuse.New(code, "document %d line %d: %s", s.doc, s.line, what).
		WithHint("the unlocked manifest must be plain block yaml: no anchors, aliases, tags, merge keys or multi-line quoted or flow values")
}

func (s *scanner) scanLine(text []byte) error {
	for _, c := range text {
		if c < 0x20 && c != '\t' || c == 0x7f {
			return s.fail(CodeManifestSyntax, "control character (carriage returns included)")
		}
	}
	if s.quote != 0 {
		end, ok := closeQuote(text, 0, s.quote)
		if !ok {
			return nil
		}
		s.quote = 0
		if j := skipWS(text, end); j < len(text) && (text[j] != '#' || j == end) {
			return s.fail(CodeManifestSyntax, "text after a multi-line quoted scalar")
		}
		return nil
	}
	indent := 0
	for indent < len(text) && text[indent] == ' ' {
		indent++
	}
	rest := bytes.TrimLeft(text[indent:], " \t")
	if s.contMode {
		if len(rest) == 0 || indent > s.contCol {
			return nil
		}
		s.contMode = false
	}
	if len(rest) == 0 || rest[0] == '#' {
		return nil
	}
	if len(rest) != len(text)-indent {
		return s.fail(CodeManifestSyntax, "tab in indentation")
	}
	// kubectl's reader keeps a separator line that opens a document (the manifest's first line,
	// or a run of separators); YAML reads it as the document start.
	if s.line == 1 && bytes.HasPrefix(text, []byte("---")) {
		if j := skipWS(text, 3); j == len(text) || j > 3 && text[j] == '#' {
			return nil
		}
	}
	if indent == 0 && (rest[0] == '%' || bytes.HasPrefix(rest, []byte("---")) || bytes.HasPrefix(rest, []byte("..."))) {
		return s.fail(CodeManifestSyntax, "directive or document marker inside a document")
	}
	return s.nodes(text, indent)
}

// nodes scans the node starts of one line from column i: sequence entries, then at most one
// mapping key per nesting, then the value.
func (s *scanner) nodes(text []byte, i int) error {
	parent, lineStart := -1, true
	for {
		i = skipWS(text, i)
		if i >= len(text) || text[i] == '#' {
			return nil
		}
		c, sep := text[i], i+1 >= len(text) || isWS(text[i+1])
		switch {
		case c == '&' || c == '*':
			return s.fail(CodeManifestAnchor, "anchor or alias")
		case c == '!':
			return s.fail(CodeManifestTag, "explicit tag")
		case c == '-' && sep:
			parent, lineStart, i = i, false, i+1
			continue
		case (c == '?' || c == ':') && sep:
			return s.fail(CodeManifestSyntax, "explicit or empty mapping key")
		case c == '|' || c == '>':
			return s.blockHeader(text, i, parent, lineStart)
		case c == '[' || c == '{':
			return s.flow(text, i)
		case c == '%' || c == '@' || c == '`':
			return s.fail(CodeManifestSyntax, "reserved indicator at the start of a value")
		case c == '"' || c == '\'':
			end, ok := closeQuote(text, i+1, c)
			if !ok {
				if lineStart {
					return s.fail(CodeManifestSyntax, "multi-line quoted scalar at the start of a line")
				}
				s.quote = c
				return nil
			}
			j := skipWS(text, end)
			if j >= len(text) || text[j] == '#' && j > end {
				return nil
			}
			if text[j] != ':' || j+1 < len(text) && !isWS(text[j+1]) {
				return s.fail(CodeManifestSyntax, "text after a quoted scalar")
			}
			if string(text[i+1:end-1]) == "<<" {
				return s.fail(CodeManifestMergeKey, "merge key")
			}
			parent, lineStart, i = i, false, j+1
		default:
			k := plainEnd(text, i)
			if k >= len(text) || text[k] != ':' {
				// A plain scalar value; after a key or entry it may go on over more lines.
				s.contMode, s.contCol = !lineStart, parent
				return nil
			}
			if string(bytes.TrimRight(text[i:k], " \t")) == "<<" {
				return s.fail(CodeManifestMergeKey, "merge key")
			}
			parent, lineStart, i = i, false, k+1
		}
	}
}

// plainEnd returns the index of the mapping indicator (": " or ":" at the end) or comment (" #")
// that ends the plain scalar starting at i, or len(text).
func plainEnd(text []byte, i int) int {
	for k := i; k < len(text); k++ {
		switch text[k] {
		case ':':
			if k+1 == len(text) || isWS(text[k+1]) {
				return k
			}
		case '#':
			if isWS(text[k-1]) {
				return k
			}
		}
	}
	return len(text)
}

// blockHeader accepts a block scalar header (| or >, an optional indentation indicator 1-9 and
// chomping indicator - or + in either order, an optional comment) after a key or sequence entry on
// the same line; the content is every following line indented more than that key or entry, or
// blank. A header alone on its line is refused: its parent would be on another line.
func (s *scanner) blockHeader(text []byte, i, parent int, lineStart bool) error {
	if lineStart {
		return s.fail(CodeManifestSyntax, "block scalar header at the start of a line")
	}
	j := i + 1
	for n := 0; n < 2 && j < len(text); n++ {
		if c := text[j]; c == '-' || c == '+' || c >= '1' && c <= '9' {
			j++
		}
	}
	k := skipWS(text, j)
	if k < len(text) && (text[k] != '#' || k == j) {
		return s.fail(CodeManifestSyntax, "text after a block scalar header")
	}
	s.contMode, s.contCol = true, parent
	return nil
}

// closeQuote returns the index just past the closing quote q at or after i, and whether there is
// one on this line. A backslash at the end of a double-quoted line escapes the line break.
func closeQuote(text []byte, i int, q byte) (int, bool) {
	for k := i; k < len(text); k++ {
		switch {
		case q == '"' && text[k] == '\\':
			k++
		case text[k] == q && q == '\'' && k+1 < len(text) && text[k+1] == '\'':
			k++
		case text[k] == q:
			return k + 1, true
		}
	}
	return 0, false
}

// flow scans a flow collection, which must close on this line. Every position after [ { , or :
// is treated as a node start, a superset of YAML's.
func (s *scanner) flow(text []byte, i int) error {
	depth, start := 0, true
	for k := i; k < len(text); k++ {
		c := text[k]
		if start && !isWS(c) {
			switch {
			case c == '&' || c == '*':
				return s.fail(CodeManifestAnchor, "anchor or alias in a flow collection")
			case c == '!':
				return s.fail(CodeManifestTag, "explicit tag in a flow collection")
			case c == '?' || bytes.HasPrefix(text[k:], []byte("<<")):
				return s.fail(CodeManifestMergeKey, "explicit or merge key in a flow collection")
			}
			start = false
		}
		switch c {
		case '"', '\'':
			end, ok := closeQuote(text, k+1, c)
			if !ok {
				return s.fail(CodeManifestSyntax, "flow collection continues on the next line")
			}
			if string(text[k+1:end-1]) == "<<" {
				return s.fail(CodeManifestMergeKey, "merge key in a flow collection")
			}
			k = end - 1
		case '[', '{':
			depth++
			start = true
		case ']', '}':
			depth--
			if depth == 0 {
				j := skipWS(text, k+1)
				if j < len(text) && (text[j] != '#' || j == k+1) {
					return s.fail(CodeManifestSyntax, "text after a flow collection")
				}
				return nil
			}
		case ',', ':':
			start = true
		case '#':
			if isWS(text[k-1]) {
				return s.fail(CodeManifestSyntax, "flow collection continues on the next line")
			}
		}
	}
	return s.fail(CodeManifestSyntax, "flow collection continues on the next line")
}

func isWS(c byte) bool { return c == ' ' || c == '\t' }

func skipWS(text []byte, i int) int {
	for i < len(text) && isWS(text[i]) {
		i++
	}
	return i
}
