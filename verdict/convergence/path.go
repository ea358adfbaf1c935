package convergence

import (
	"slices"
	"strconv"
	"strings"

	"github.com/qinglong/ql3/refuse"
)

// pathElem is one step of a field path: a map key, or a list index (the manifest's and the live
// list's, which are the same because list lengths must be equal).
type pathElem struct {
	key   string
	index int    // -1 for a map key
	name  string // the element's "name" member when it is a plain identifier, for rendering
}

// fieldPath is a field path in an object, rendered like spec.template.spec.containers[name=api].image.
type fieldPath []pathElem

// key returns p extended by a map key, never sharing p's backing array.
func (p fieldPath) key(k string) fieldPath {
	return append(p[:len(p):len(p)], pathElem{key: k, index: -1})
}

// index returns p extended by list element i whose manifest value is elem.
func (p fieldPath) index(i int, elem any) fieldPath {
	return append(p[:len(p):len(p)], listElem(i, elem))
}

func listElem(i int, elem any) pathElem {
	e := pathElem{index: i}
	if m, ok := elem.(map[string]any); ok {
		if n, ok := m["name"].(string); ok && isIdent(n) {
			e.name = n
		}
	}
	return e
}

func (p fieldPath) String() string {
	if len(p) == 0 {
		return "(object)"
	}
	var b strings.Builder
	for _, e := range p {
		switch {
		case e.index >= 0 && e.name != "":
			b.WriteString("[name=" + e.name + "]")
		case e.index >= 0:
			b.WriteString("[" + strconv.Itoa(e.index) + "]")
		case isIdent(e.key) && !strings.Contains(e.key, "."):
			if b.Len() > 0 {
				b.WriteByte('.')
			}
			b.WriteString(e.key)
		default:
			b.WriteString("[" + quoteKey(e.key) + "]")
		}
	}
	return b.String()
}

// isIdent reports whether s is short and made of characters that render unambiguously in a path.
func isIdent(s string) bool {
	if len(s) == 0 || len(s) > 96 {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '-' || c == '_' || c == '.') {
			return false
		}
	}
	return true
}

// quoteKey quotes a map key (annotation keys, data keys) for a path, truncating long ones.
func quoteKey(k string) string {
	if len(k) > 96 {
		return refuse.Ident(k)
	}
	return strconv.Quote(k)
}

func sortedKeys(m map[string]any) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}
