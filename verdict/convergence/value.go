package convergence

import (
	"encoding/json"
	"math/big"
	"strconv"
	"strings"
)

// decimal is the exact value of a JSON number: digits × 10^exp, with digits free of leading and
// trailing zeros ("" for zero). Two JSON numbers are equal exactly when their decimals are, so 1,
// 1.0, 10e-1 and 1E0 are equal and 1 and 1.0000000000000000001 are not; float64 rounding never
// decides. The server renders integer fields as integers, so a manifest's 1.0 converges to 1.
type decimal struct {
	neg    bool
	digits string
	exp    string // canonical integer text; "0" for zero
}

// parseDecimal parses the JSON number grammar -?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][+-]?[0-9]+)?.
func parseDecimal(s string) (decimal, bool) {
	var d decimal
	i := 0
	if i < len(s) && s[i] == '-' {
		d.neg = true
		i++
	}
	start := i
	for i < len(s) && s[i] >= '0' && s[i] <= '9' {
		i++
	}
	intPart := s[start:i]
	if intPart == "" || (len(intPart) > 1 && intPart[0] == '0') {
		return decimal{}, false
	}
	var frac string
	if i < len(s) && s[i] == '.' {
		i++
		fs := i
		for i < len(s) && s[i] >= '0' && s[i] <= '9' {
			i++
		}
		if frac = s[fs:i]; frac == "" {
			return decimal{}, false
		}
	}
	expText := "0"
	if i < len(s) && (s[i] == 'e' || s[i] == 'E') {
		i++
		es := i
		if i < len(s) && (s[i] == '+' || s[i] == '-') {
			i++
		}
		ds := i
		for i < len(s) && s[i] >= '0' && s[i] <= '9' {
			i++
		}
		if i == ds {
			return decimal{}, false
		}
		expText = s[es:i]
	}
	if i != len(s) {
		return decimal{}, false
	}
	digits := strings.TrimLeft(intPart+frac, "0")
	if digits == "" {
		return decimal{exp: "0"}, true // -0 and 0e7 are zero
	}
	trimmed := strings.TrimRight(digits, "0")
	d.digits = trimmed
	// exp = expText - len(frac) + trailing zeros removed. An exponent literal may have any number
	// of digits (JSON allows 1e-00000000000000000000001), so big.Int takes over past int64.
	adjust := int64(len(digits)-len(trimmed)) - int64(len(frac))
	if e, err := strconv.ParseInt(strings.TrimPrefix(expText, "+"), 10, 64); err == nil && e > -(1<<62) && e < 1<<62 {
		d.exp = strconv.FormatInt(e+adjust, 10)
		return d, true
	}
	e, ok := new(big.Int).SetString(strings.TrimPrefix(expText, "+"), 10)
	if !ok {
		return decimal{}, false
	}
	d.exp = e.Add(e, big.NewInt(adjust)).String()
	return d, true
}

func numbersEqual(a, b json.Number) bool {
	if a == b {
		return true
	}
	da, ok1 := parseDecimal(string(a))
	db, ok2 := parseDecimal(string(b))
	return ok1 && ok2 && da == db
}

// scalarsEqual compares a manifest scalar with a live value: same JSON type and same value.
func scalarsEqual(m, l any) bool {
	switch x := m.(type) {
	case string:
		y, ok := l.(string)
		return ok && x == y
	case bool:
		y, ok := l.(bool)
		return ok && x == y
	case json.Number:
		y, ok := l.(json.Number)
		return ok && numbersEqual(x, y)
	}
	return false
}

// canon renders a decoded JSON value as a string that is equal for two values exactly when the
// values are equal under the rules of this package (member order ignored, numbers by decimal
// value). It keys list elements: k: keys against live elements, v: values against live values.
func canon(v any) string {
	var b strings.Builder
	appendCanon(&b, v)
	return b.String()
}

func appendCanon(b *strings.Builder, v any) {
	switch x := v.(type) {
	case nil:
		b.WriteByte('z')
	case bool:
		if x {
			b.WriteByte('t')
		} else {
			b.WriteByte('f')
		}
	case json.Number:
		d, ok := parseDecimal(string(x))
		if !ok { // never produced by the decoder; keep it distinct from every valid number
			b.WriteString("x" + strconv.Itoa(len(x)) + ":" + string(x))
			return
		}
		b.WriteByte('n')
		if d.neg && d.digits != "" {
			b.WriteByte('-')
		}
		b.WriteString(d.digits + "e" + d.exp + ";")
	case string:
		appendString(b, x)
	case map[string]any:
		b.WriteByte('{')
		for _, k := range sortedKeys(x) {
			appendString(b, k)
			appendCanon(b, x[k])
		}
		b.WriteByte('}')
	case []any:
		b.WriteByte('[')
		for _, e := range x {
			appendCanon(b, e)
		}
		b.WriteByte(']')
	default:
		b.WriteByte('?')
	}
}

// appendString length-prefixes s, which keeps the encoding injective without escaping.
func appendString(b *strings.Builder, s string) {
	b.WriteByte('s')
	b.WriteString(strconv.Itoa(len(s)))
	b.WriteByte(':')
	b.WriteString(s)
}

// typeName names a decoded JSON value's type for a message, never its value.
func typeName(v any) string {
	switch v.(type) {
	case nil:
		return "null"
	case bool:
		return "boolean"
	case json.Number:
		return "number"
	case string:
		return "string"
	case map[string]any:
		return "object"
	case []any:
		return "array"
	}
	return "unknown"
}
