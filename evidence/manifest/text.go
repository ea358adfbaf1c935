package manifest

import (
	"bytes"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/qinglong/ql3/refuse"
)

// Reason codes of the byte- and line-level checks, which run before any YAML is parsed.
const (
	// CodeInvalidUTF8: kubectl decodes the file through a UTF-8 decoder that replaces invalid
	// bytes with U+FFFD, so what it applies would differ from the bytes that were hashed.
	CodeInvalidUTF8 refuse.Code = "MANIFEST_INVALID_UTF8"
	// CodeBOM: kubectl strips a UTF-8 byte order mark (and switches to UTF-16 on a UTF-16 one);
	// inside the text YAML readers disagree on it.
	CodeBOM refuse.Code = "MANIFEST_BOM"
	// CodeControlCharacter: a control character, "\r", NEL, LS or PS, or a non-character. YAML
	// 1.1 treats NEL, LS and PS as line breaks and YAML 1.2 does not, and kubectl's document
	// splitter breaks lines at "\n" only, so any line break but "\n" lets readers split and
	// fold differently.
	CodeControlCharacter refuse.Code = "MANIFEST_CONTROL_CHARACTER"
	// CodeJSONStream: the first non-space character is '{' or '['. With '{' kubectl switches to
	// its JSON stream decoder, which splits documents differently and keeps the last of
	// duplicate keys; '[' is refused alongside so that every accepted manifest is YAML with a
	// mapping per document.
	CodeJSONStream refuse.Code = "MANIFEST_JSON_STREAM"
	// CodeSeparator: a line starting with "---" carries something other than a comment, which
	// kubectl's reader refuses ("--- !tag", "--- {}", "----").
	CodeSeparator refuse.Code = "MANIFEST_SEPARATOR"
	// CodeDirective: a line starting with '%' (a YAML directive such as %YAML or %TAG).
	CodeDirective refuse.Code = "MANIFEST_DIRECTIVE"
	// CodeDocumentEnd: a line starting with "...". goyaml.v2 stops at a document end marker
	// and silently ignores the rest of the document kubectl handed it.
	CodeDocumentEnd refuse.Code = "MANIFEST_DOCUMENT_END"
)

// checkText applies the byte- and line-level rules of docs/lock-v2.md.
func checkText(b []byte) error {
	line := 1
	for i := 0; i < len(b); {
		r, sz := utf8.DecodeRune(b[i:])
		switch {
		case r == utf8.RuneError && sz <= 1:
			return refuse.New(CodeInvalidUTF8, "manifest byte %d (line %d) is not valid utf-8", i, line)
		case r == '\uFEFF':
			return refuse.New(CodeBOM, "manifest byte %d (line %d) is a byte order mark", i, line).
				WithHint("save the manifest as utf-8 without a byte order mark")
		case r == '\n':
			line++
		case r == '\t':
		case r < 0x20 || r == 0x7F || (r >= 0x80 && r <= 0x9F) || r == '\u2028' || r == '\u2029' ||
			r == '\uFFFE' || r == '\uFFFF':
			return refuse.New(CodeControlCharacter, "manifest byte %d (line %d) is control character U+%04X", i, line, r).
				WithHint("use \"\\n\" line breaks only and escape control characters inside double-quoted strings")
		}
		i += sz
	}
	// The same test as kubectl's IsJSONBuffer: the first rune that is not unicode.IsSpace.
	if t := bytes.TrimLeftFunc(b, unicode.IsSpace); len(t) > 0 && (t[0] == '{' || t[0] == '[') {
		return refuse.New(CodeJSONStream, "manifest starts with %q: kubectl would read it as a json stream", t[0]).
			WithHint("write the manifest as yaml documents separated by \"---\" lines")
	}
	for n, l := range lines(b) {
		switch {
		case bytes.HasPrefix(l, []byte("---")):
			// kubectl's YAMLReader allows any Unicode space and a comment after "---"; a YAML
			// parser, which sees the line when it starts a chunk, only spaces and tabs, and a
			// comment only after one of them ("---#" is a plain scalar). Only what both agree on
			// is accepted.
			rest := string(l[3:])
			trimmed := strings.TrimLeft(rest, " \t")
			if trimmed != "" && (trimmed[0] != '#' || len(trimmed) == len(rest)) {
				return refuse.New(CodeSeparator, "line %d starts with \"---\" followed by content", n+1).
					WithHint("put a document separator \"---\" on a line of its own")
			}
		case bytes.HasPrefix(l, []byte("...")):
			return refuse.New(CodeDocumentEnd, "line %d starts with \"...\"", n+1)
		case len(l) > 0 && l[0] == '%':
			return refuse.New(CodeDirective, "line %d starts with '%%' (a yaml directive)", n+1)
		}
	}
	return nil
}
