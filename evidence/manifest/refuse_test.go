package manifest

import (
	"strings"
	"testing"

	"github.com/qinglong/ql3/refuse"
)

func TestParseRefuses(t *testing.T) {
	obj := func(extra string) string { return head + extra }
	deep := func(n int) string { return obj("data: " + strings.Repeat("[", n) + strings.Repeat("]", n) + "\n") }
	vectors := []struct {
		name string      // what the vector shows
		in   string      // manifest text
		code refuse.Code // exact reason code
	}{
		// size and emptiness
		{"over the ceiling", obj("data: {a: \"" + strings.Repeat("x", MaxBytes) + "\"}\n"), CodeTooLarge},
		{"empty input", "", CodeEmpty},
		{"only separators and comments", "---\n# c\n---\n", CodeEmpty},
		{"only a null document", "null\n", CodeEmpty},
		// bytes and lines
		{"invalid utf-8", obj("data: {a: \"\xff\"}\n"), CodeInvalidUTF8},
		{"truncated utf-8 at the end", obj("#\xe2\x82"), CodeInvalidUTF8},
		{"byte order mark first", "\ufeff" + head, CodeBOM},
		{"byte order mark inside a string", obj("data: {a: \"x\ufeff\"}\n"), CodeBOM},
		{"crlf line breaks", strings.ReplaceAll(head, "\n", "\r\n"), CodeControlCharacter},
		{"lone carriage return splitting a document", obj("data: {a: b}\r---\rkind: Secret\n"), CodeControlCharacter},
		{"nul", obj("data: {a: \"\x00\"}\n"), CodeControlCharacter},
		{"escape control", obj("data: {a: \"\x1b[0m\"}\n"), CodeControlCharacter},
		{"delete", obj("data: {a: \"\x7f\"}\n"), CodeControlCharacter},
		{"next line U+0085", obj("data: {a: \"x\u0085y\"}\n"), CodeControlCharacter},
		{"line separator U+2028", obj("data: {a: x\u2028y}\n"), CodeControlCharacter},
		{"paragraph separator U+2029", obj("data: {a: x\u2029y}\n"), CodeControlCharacter},
		{"non-character U+FFFE", obj("data: {a: \"\ufffe\"}\n"), CodeControlCharacter},
		{"json stream", `{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"c"}}`, CodeJSONStream},
		{"json stream after spaces", "\n \t{\"apiVersion\":\"v1\"}", CodeJSONStream},
		{"json stream after a unicode space", "\u00a0{\"apiVersion\":\"v1\"}", CodeJSONStream},
		{"json array", "[]\n", CodeJSONStream},
		{"separator with a tag", "--- !!map\n" + head, CodeSeparator},
		{"separator with content", "--- {a: 1}\n" + head, CodeSeparator},
		{"four dashes", head + "----\n" + head, CodeSeparator},
		{"separator glued to a comment", "---#c\n" + head, CodeSeparator},
		{"separator followed by a no-break space", head + "---\u00a0\n" + head, CodeSeparator},
		{"yaml directive", "%YAML 1.1\n---\n" + head, CodeDirective},
		{"tag directive", "%TAG !e! tag:example.com,2000:\n---\n" + head, CodeDirective},
		{"document end hiding the rest", obj("...\ndata: {a: b}\n"), CodeDocumentEnd},
		{"document end at the end", obj("...\n"), CodeDocumentEnd},
		// syntax
		{"unclosed flow sequence", obj("data: [\n"), CodeSyntax},
		{"unclosed quote", obj("data: {a: \"x}\n"), CodeSyntax},
		{"tab indentation", obj("data:\n\ta: b\n"), CodeSyntax},
		{"alias to an unknown anchor", obj("data: {a: *nope}\n"), CodeSyntax},
		{"bad indentation", obj("data:\n  a: b\n c: d\n"), CodeSyntax},
		// nodes
		{"65 levels of nesting", deep(64), CodeTooDeep},
		{"deeply nested mappings", obj("data:" + strings.Repeat(" {a:", 70) + " 1" + strings.Repeat("}", 70) + "\n"), CodeTooDeep},
		{"anchor on a scalar", obj("data: {a: &x 1}\n"), CodeAnchor},
		{"anchor on a mapping", obj("data: &x {a: 1}\n"), CodeAnchor},
		{"anchor on a key", obj("data: {&x a: 1}\n"), CodeAnchor},
		{"alias", obj("data: {a: &x 1, b: *x}\n"), CodeAlias},
		{"alias in a merge", obj("base: &b {a: 1}\ndata:\n  <<: *b\n"), CodeAlias},
		{"alias as a key", obj("data: {a: &x k, *x : 1}\n"), CodeAlias},
		{"merge key", obj("data:\n  <<: {a: 1}\n"), CodeMergeKey},
		{"quoted merge key", obj("data:\n  \"<<\": x\n"), CodeMergeKey},
		{"explicit string tag", obj("data: {a: !!str 1}\n"), CodeTag},
		{"non-specific tag", obj("data: {a: ! 12}\n"), CodeTag},
		{"custom tag", obj("data: {a: !vault x}\n"), CodeTag},
		{"verbatim tag", obj("data: {a: !<tag:yaml.org,2002:str> x}\n"), CodeTag},
		{"binary tag", obj("data: {a: !!binary aGk=}\n"), CodeTag},
		{"tag on a mapping", obj("data: !!map {a: 1}\n"), CodeTag},
		{"tag on a block mapping", obj("data: !custom\n  a: 1\n"), CodeTag},
		{"tag on a key", obj("data: {!!str a: 1}\n"), CodeTag},
		{"tag after a multi-byte key", obj("data: {ключ: ! 1}\n"), CodeTag},
		{"tag after several multi-byte nodes on one line", obj("data: {ключ: значение, ещё: [а, б], c: ! 1}\n"), CodeTag},
		{"duplicate key", obj("data: {a: 1, a: 2}\n"), CodeDuplicateKey},
		{"duplicate top-level key", head + "kind: Secret\n", CodeDuplicateKey},
		{"integer and string key", obj("data:\n  1: a\n  \"1\": b\n"), CodeDuplicateKey},
		{"duplicate key in a list item", obj("x:\n  - {a: 1, b: 2, a: 3}\n"), CodeDuplicateKey},
		{"top-level keys differing in case", obj("Kind: Secret\n"), CodeDuplicateKey},
		{"metadata keys differing in case", "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: c\n  Name: d\n", CodeDuplicateKey},
		{"sequence as a key", obj("data:\n  ? [a]\n  : 1\n"), CodeKeyNotString},
		{"mapping as a key", obj("data:\n  ? {a: 1}\n  : 1\n"), CodeKeyNotString},
		{"null key", obj("data: {null: 1}\n"), CodeKeyNotString},
		{"empty key", obj("data:\n  ?\n  : 1\n"), CodeKeyNotString},
		{"boolean key", obj("data: {true: 1}\n"), CodeKeyNotString},
		{"float key", obj("data: {1.5: 1}\n"), CodeKeyNotString},
		{"yaml 1.1 boolean key", obj("data: {on: 1}\n"), CodeAmbiguousScalar},
		// documents
		{"sequence document", "- a\n- b\n", CodeNotObject},
		{"scalar document", "hello\n", CodeNotObject},
		{"quoted scalar document", "\"null\"\n", CodeNotObject},
		{"block scalar document", "|\n  text\n", CodeNotObject},
		{"no apiVersion", "kind: ConfigMap\nmetadata: {name: c}\n", CodeAPIVersion},
		{"empty apiVersion", "apiVersion: \"\"\nkind: ConfigMap\nmetadata: {name: c}\n", CodeAPIVersion},
		{"numeric apiVersion", "apiVersion: 1\nkind: ConfigMap\nmetadata: {name: c}\n", CodeAPIVersion},
		{"no kind", "apiVersion: v1\nmetadata: {name: c}\n", CodeKind},
		{"kind a mapping", "apiVersion: v1\nkind: {a: b}\nmetadata: {name: c}\n", CodeKind},
		{"no metadata", "apiVersion: v1\nkind: ConfigMap\n", CodeMetadata},
		{"metadata a list", "apiVersion: v1\nkind: ConfigMap\nmetadata: [name, c]\n", CodeMetadata},
		{"namespace a number", "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: c, namespace: 7}\n", CodeMetadata},
		{"empty namespace", "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: c, namespace: \"\"}\n", CodeMetadata},
		{"null namespace", "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: c, namespace: null}\n", CodeMetadata},
		{"no name", "apiVersion: v1\nkind: ConfigMap\nmetadata: {namespace: ns}\n", CodeName},
		{"generateName only", "apiVersion: v1\nkind: ConfigMap\nmetadata: {generateName: c-}\n", CodeName},
		{"numeric name", "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: 7}\n", CodeName},
		{"kind List", "apiVersion: v1\nkind: List\nmetadata: {name: l}\n", CodeList},
		{"kind PodList", "apiVersion: v1\nkind: PodList\nmetadata: {name: l}\n", CodeList},
		{"kind ending in list in lower case", "apiVersion: example.com/v1\nkind: Checklist\nmetadata: {name: l}\n", CodeList},
		{"items member", obj("items: []\n"), CodeList},
		{"items member in another case", obj("Items: []\n"), CodeList},
		{"secret", "apiVersion: v1\nkind: Secret\nmetadata: {name: s}\nstringData: {a: b}\n", CodeSecret},
		{"secret in lower case", "apiVersion: v1\nkind: secret\nmetadata: {name: s}\n", CodeSecret},
		{"secret in a later document", head + "---\napiVersion: v1\nkind: Secret\nmetadata: {name: s}\n", CodeSecret},
	}
	for _, s := range ambiguousScalars {
		vectors = append(vectors, struct {
			name string
			in   string
			code refuse.Code
		}{"ambiguous " + s, obj("data: {a: " + s + "}\n"), CodeAmbiguousScalar})
	}
	for _, v := range vectors {
		t.Run(v.name, func(t *testing.T) {
			t.Parallel()
			objs, err := Parse([]byte(v.in))
			if got := refuse.CodeOf(err); got != v.code {
				t.Fatalf("got %q (%v), want %q", got, err, v.code)
			}
			if objs != nil {
				t.Fatal("objects returned with a refusal")
			}
		})
	}
}

// ambiguousScalars are plain scalars that goyaml.v2, a YAML 1.1 reader and a YAML 1.2 reader do
// not all resolve to the same value, or that are typed but not in canonical JSON form.
var ambiguousScalars = []string{
	"yes", "no", "on", "off", "y", "n", "Y", "N", "Yes", "NO", "On", "OFF",
	"True", "TRUE", "False", "FALSE", "Null", "NULL", "~",
	"0777", "00", "-0", "+5", "0o17", "0x1F", "0b101", "-0b1", "1_000", "1:20", "-1:30:00", "190:20:30.15",
	"1e3", "1.5e3", "1.", ".5", "-.5", ".inf", "-.Inf", "+.INF", ".nan", ".NaN", "1.0e+999",
	"2024-01-01", "2001-12-14t21:59:43.10-05:00", "2001-12-14 21:59:43.10 -5", "2002-1-2",
	"99999999999999999999", "9223372036854775808",
}
