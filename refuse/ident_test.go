package refuse

import (
	"strings"
	"testing"
)

func TestIdent(t *testing.T) {
	vectors := []struct {
		in, want string // untrusted name, its rendering in a message
	}{
		{"qinglong-api", "qinglong-api"},
		{"apps/v1", "apps/v1"},
		{"a b", `"a b"`},
		{"", `""`},
		{"x\nql3: refused: FORGED", `"x\nql3: refused: FORGED"`},
		{strings.Repeat("a", 64), strings.Repeat("a", 64)},
		{strings.Repeat("a", 65), `"` + strings.Repeat("a", 64) + `"...`},
		{strings.Repeat("a", 63) + "é", `"` + strings.Repeat("a", 63) + `"...`}, // cut before a split rune
	}
	for _, v := range vectors {
		if got := Ident(v.in); got != v.want {
			t.Errorf("Ident(%q) = %s, want %s", v.in, got, v.want)
		}
	}
}
