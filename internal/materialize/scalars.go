package materialize

import (
	"maps"
	"regexp"
	"slices"
	"strconv"
	"strings"

	"sigs.k8s.io/yaml"

	"github.com/qinglong/ql3/refuse"
)

// CodeAmbiguousString is raised for a key or string value that the YAML writer would leave
// unquoted although some YAML reader types it: go.yaml.in/yaml/v2 quotes what it would read back
// as a non-string itself, but not, for example, = or <<, which YAML 1.1 types as value and merge.
// A reviewer's reader (or the verifier) must see the same string kubectl sees.
const CodeAmbiguousString refuse.Code = "MATERIALIZE_AMBIGUOUS_STRING"

// The implicit types of YAML 1.1 (the type repository, as PyYAML's resolver spells them) and of
// the YAML 1.2 core schema. A plain scalar matching any of them is not a string for some reader.
var typedScalar = []*regexp.Regexp{
	regexp.MustCompile(`^(?:y|Y|yes|Yes|YES|n|N|no|No|NO|true|True|TRUE|false|False|FALSE|on|On|ON|off|Off|OFF)$`),
	regexp.MustCompile(`^(?:~|null|Null|NULL|)$`),
	regexp.MustCompile(`^(?:<<|=)$`),
	regexp.MustCompile(`^(?:[-+]?0b[0-1_]+|[-+]?0[0-7_]+|[-+]?(?:0|[1-9][0-9_]*)|[-+]?0x[0-9a-fA-F_]+|[-+]?[1-9][0-9_]*(?::[0-5]?[0-9])+)$`),
	regexp.MustCompile(`^(?:[-+]?(?:[0-9][0-9_]*)\.[0-9_]*(?:[eE][-+][0-9]+)?|\.[0-9_]+(?:[eE][-+][0-9]+)?|[-+]?[0-9][0-9_]*(?::[0-5]?[0-9])+\.[0-9_]*|[-+]?\.(?:inf|Inf|INF)|\.(?:nan|NaN|NAN))$`),
	regexp.MustCompile(`^(?:[0-9]{4}-[0-9]{2}-[0-9]{2}|[0-9]{4}-[0-9]{1,2}-[0-9]{1,2}(?:[Tt]|[ \t]+)[0-9]{1,2}:[0-9]{2}:[0-9]{2}(?:\.[0-9]*)?(?:[ \t]*(?:Z|[-+][0-9]{1,2}(?::[0-9]{2})?))?)$`),
	regexp.MustCompile(`^(?:[-+]?[0-9]+|0o[0-7]+|0x[0-9a-fA-F]+|[-+]?(?:\.[0-9]+|[0-9]+(?:\.[0-9]*)?)(?:[eE][-+]?[0-9]+)?|[-+]?\.(?:inf|Inf|INF)|\.(?:nan|NaN|NAN))$`),
}

func typedSomewhere(s string) bool {
	return slices.ContainsFunc(typedScalar, func(re *regexp.Regexp) bool { return re.MatchString(s) })
}

// writtenPlain reports whether the YAML writer emits s without quotes or block style.
func writtenPlain(s string) bool {
	y, err := yaml.Marshal(s)
	return err == nil && len(y) > 0 && !strings.ContainsRune(`'"|>`, rune(y[0]))
}

// checkStrings refuses every key and string in o that is typed by some reader but written plain.
func checkStrings(o *object) error {
	var walk func(v any, path string) error
	walk = func(v any, path string) error {
		switch x := v.(type) {
		case string:
			if typedSomewhere(x) && writtenPlain(x) {
				return refuse.New(CodeAmbiguousString, "%s %s: the string at %s would be written unquoted, and yaml readers disagree on its type", o.kind, o.name, path)
			}
		case []any:
			for i, e := range x {
				if err := walk(e, path+"["+strconv.Itoa(i)+"]"); err != nil {
					return err
				}
			}
		case map[string]any:
			for _, k := range slices.Sorted(maps.Keys(x)) {
				if typedSomewhere(k) && writtenPlain(k) {
					return refuse.New(CodeAmbiguousString, "%s %s: a key in %s would be written unquoted, and yaml readers disagree on its type", o.kind, o.name, path)
				}
				if err := walk(x[k], path+"."+k); err != nil {
					return err
				}
			}
		}
		return nil
	}
	return walk(o.fields, "$")
}
