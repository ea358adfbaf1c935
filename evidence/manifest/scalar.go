package manifest

import (
	"encoding/json"
	"math"
	"regexp"
	"strconv"
	"strings"
	"time"
)

// A plain (unquoted, untagged) scalar is accepted only when every YAML reader a reviewer might
// use resolves it to the same value: kubectl's goyaml.v2 (YAML 1.1 with its own quirks), a
// YAML 1.1 reader that follows the type repository (PyYAML's regular expressions), and a YAML
// 1.2 core schema reader. The accepted non-string forms are the canonical JSON ones below; any
// other plain scalar that one of those readers resolves to a non-string is refused as
// ambiguous, and everything else is a string for all of them.
var (
	safeInt   = regexp.MustCompile(`^(?:0|-?[1-9][0-9]*)$`)
	safeFloat = regexp.MustCompile(`^-?(?:0|[1-9][0-9]*)\.[0-9]+(?:[eE][-+][0-9]+)?$`)

	// YAML 1.1 (PyYAML resolver.py) implicit types.
	yaml11Int   = regexp.MustCompile(`^(?:[-+]?0b[0-1_]+|[-+]?0[0-7_]+|[-+]?(?:0|[1-9][0-9_]*)|[-+]?0x[0-9a-fA-F_]+|[-+]?[1-9][0-9_]*(?::[0-5]?[0-9])+)$`)
	yaml11Float = regexp.MustCompile(`^(?:[-+]?(?:[0-9][0-9_]*)\.[0-9_]*(?:[eE][-+][0-9]+)?|\.[0-9][0-9_]*(?:[eE][-+][0-9]+)?|[-+]?[0-9][0-9_]*(?::[0-5]?[0-9])+\.[0-9_]*|[-+]?\.(?:inf|Inf|INF)|\.(?:nan|NaN|NAN))$`)
	yaml11Time  = regexp.MustCompile(`^(?:[0-9][0-9][0-9][0-9]-[0-9][0-9]-[0-9][0-9]|[0-9][0-9][0-9][0-9]-[0-9][0-9]?-[0-9][0-9]?(?:[Tt]|[ \t]+)[0-9][0-9]?:[0-9][0-9]:[0-9][0-9](?:\.[0-9]*)?(?:[ \t]*(?:Z|[-+][0-9][0-9]?(?::[0-9][0-9])?))?)$`)

	// YAML 1.2 core schema.
	yaml12Int   = regexp.MustCompile(`^(?:[-+]?[0-9]+|0o[0-7]+|0x[0-9a-fA-F]+)$`)
	yaml12Float = regexp.MustCompile(`^(?:[-+]?(?:\.[0-9]+|[0-9]+(?:\.[0-9]*)?)(?:[eE][-+]?[0-9]+)?|[-+]?\.(?:inf|Inf|INF)|\.(?:nan|NaN|NAN))$`)

	// goyaml.v2's own float test (resolve.go).
	v2Float = regexp.MustCompile(`^[-+]?(\.[0-9]+|[0-9]+(\.[0-9]*)?)([eE][-+]?[0-9]+)?$`)
)

// typedWords are the plain scalars some reader resolves to a bool, null, float or merge key by
// table lookup: goyaml.v2's resolve table (which adds y/n to YAML 1.1's booleans), YAML 1.1 and
// YAML 1.2 core.
var typedWords = map[string]bool{}

func init() {
	for _, w := range strings.Fields(`y Y yes Yes YES n N no No NO true True TRUE false False FALSE
		on On ON off Off OFF ~ null Null NULL .nan .NaN .NAN .inf .Inf .INF +.inf +.Inf +.INF
		-.inf -.Inf -.INF << =`) {
		typedWords[w] = true
	}
}

// resolvePlain returns the value of plain scalar s as every reader agrees on it: nil, a bool, a
// json.Number holding a canonical integer, a float64, or s itself as a string. ok is false when
// the readers disagree or the form is not canonical.
func resolvePlain(s string) (v any, ok bool) {
	switch s {
	case "", "null":
		return nil, true
	case "true":
		return true, true
	case "false":
		return false, true
	}
	if safeInt.MatchString(s) {
		if _, err := strconv.ParseInt(s, 10, 64); err == nil {
			return json.Number(s), true
		}
		return nil, false // beyond int64: goyaml.v2 turns it into a uint64 or a float
	}
	if safeFloat.MatchString(s) {
		f, err := strconv.ParseFloat(s, 64)
		if err != nil || math.IsInf(f, 0) {
			return nil, false // goyaml.v2 keeps an out-of-range float as a string
		}
		return f, true
	}
	if typedBySomeReader(s) {
		return nil, false
	}
	return s, true
}

// typedBySomeReader reports whether any of the readers resolves s to something but a string.
func typedBySomeReader(s string) bool {
	if typedWords[s] {
		return true
	}
	// Every typed form that is not a word starts with a digit, a sign or a dot.
	if c := s[0]; !(c >= '0' && c <= '9' || c == '+' || c == '-' || c == '.') {
		return false
	}
	return v2Typed(s) || yaml11Int.MatchString(s) || yaml11Float.MatchString(s) || yaml11Time.MatchString(s) ||
		yaml12Int.MatchString(s) || yaml12Float.MatchString(s)
}

// v2Typed mirrors goyaml.v2's resolve for a plain scalar starting with a digit, sign or dot.
func v2Typed(s string) bool {
	if s[0] == '.' {
		_, err := strconv.ParseFloat(s, 64)
		return err == nil
	}
	if v2Timestamp(s) {
		return true
	}
	plain := strings.ReplaceAll(s, "_", "")
	if _, err := strconv.ParseInt(plain, 0, 64); err == nil {
		return true
	}
	if _, err := strconv.ParseUint(plain, 0, 64); err == nil {
		return true
	}
	if v2Float.MatchString(plain) {
		if _, err := strconv.ParseFloat(plain, 64); err == nil {
			return true
		}
	}
	if rest, ok := strings.CutPrefix(plain, "0b"); ok {
		_, err := strconv.ParseUint(rest, 2, 64)
		return err == nil
	}
	if rest, ok := strings.CutPrefix(plain, "-0b"); ok {
		_, err := strconv.ParseInt("-"+rest, 2, 64)
		return err == nil
	}
	return false
}

// v2Timestamp mirrors goyaml.v2's parseTimestamp. goyaml.v2 hands a timestamp to an untyped
// target as its string, but YAML 1.1 readers produce a date.
func v2Timestamp(s string) bool {
	i := 0
	for i < len(s) && s[i] >= '0' && s[i] <= '9' {
		i++
	}
	if i != 4 || i == len(s) || s[i] != '-' {
		return false
	}
	for _, f := range []string{"2006-1-2T15:4:5.999999999Z07:00", "2006-1-2t15:4:5.999999999Z07:00", "2006-1-2 15:4:5.999999999", "2006-1-2"} {
		if _, err := time.Parse(f, s); err == nil {
			return true
		}
	}
	return false
}
