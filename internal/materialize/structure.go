package materialize

import (
	"encoding/json"
	"maps"
	"regexp"
	"slices"
	"strconv"
	"strings"

	"github.com/qinglong/ql3/refuse"
)

// Reason codes of the structural checks that keep a locked manifest free of anything a reader of
// the lock could not attribute: pod specs the lock does not cover, release annotations out of
// place, numbers in forms readers spell differently, nesting no reader should have to follow.
const (
	CodePodSpecElsewhere refuse.Code = "MATERIALIZE_POD_SPEC_ELSEWHERE"
	CodeNumberForm       refuse.Code = "MATERIALIZE_NUMBER_FORM"
	CodeTooDeep          refuse.Code = "MATERIALIZE_TOO_DEEP"
)

// MaxDepth bounds the nesting of mappings and sequences in a document.
const MaxDepth = 48

var (
	templateKeys = []string{"template", "jobTemplate"}
	numberRE     = regexp.MustCompile(`^-?(?:0|[1-9][0-9]*)(?:\.[0-9]+)?$`)
)

// checkStructure walks every member of o once. podSpec is o's pod spec path when o is a
// workload, nil otherwise. It refuses:
//   - a container list (a containers, initContainers or ephemeralContainers member that is not a
//     string) or a pod template (a template or jobTemplate object with a spec) anywhere but on a
//     workload's pod spec path: the lock could not pin its images;
//   - a member named like a release annotation anywhere but o's metadata.annotations;
//   - two top-level or metadata member names that differ only in letter case (the API server
//     decodes member names case-insensitively in places, kubectl's reader does not);
//   - a number that is not a decimal integer within int64 or a plain decimal fraction;
//   - nesting deeper than MaxDepth.
func checkStructure(o *object, podSpec []string) error {
	for _, m := range []any{o.fields, o.fields["metadata"]} {
		seen := map[string]bool{}
		for _, k := range slices.Sorted(maps.Keys(m.(map[string]any))) {
			lk := strings.ToLower(k)
			if seen[lk] {
				return refuse.New(CodeManifestDuplicateKey, "%s %s has two members spelled %q in different letter case", o.kind, o.name, lk)
			}
			seen[lk] = true
		}
	}
	var stack []string
	var walk func(v any) error
	walk = func(v any) error {
		if len(stack) > MaxDepth {
			return refuse.New(CodeTooDeep, "%s %s nests deeper than %d levels", o.kind, o.name, MaxDepth)
		}
		switch x := v.(type) {
		case json.Number:
			if !numberRE.MatchString(x.String()) {
				return refuse.New(CodeNumberForm, "%s %s: number at %s is not a plain decimal", o.kind, o.name, fieldPath(stack))
			}
			if !strings.Contains(x.String(), ".") {
				if _, err := strconv.ParseInt(x.String(), 10, 64); err != nil {
					return refuse.New(CodeNumberForm, "%s %s: integer at %s is beyond int64", o.kind, o.name, fieldPath(stack))
				}
			}
		case []any:
			for i, e := range x {
				stack = append(stack, "["+strconv.Itoa(i)+"]")
				if err := walk(e); err != nil {
					return err
				}
				stack = stack[:len(stack)-1]
			}
		case map[string]any:
			for _, k := range slices.Sorted(maps.Keys(x)) {
				e := x[k]
				stack = append(stack, k)
				if err := checkMember(o, podSpec, stack, e); err != nil {
					return err
				}
				if err := walk(e); err != nil {
					return err
				}
				stack = stack[:len(stack)-1]
			}
		}
		return nil
	}
	return walk(o.fields)
}

// checkMember applies the pod spec and annotation placement rules to the member at path at.
func checkMember(o *object, podSpec, at []string, v any) error {
	k := at[len(at)-1]
	if slices.Contains(Annotations, k) && !slices.Equal(at[:len(at)-1], []string{"metadata", "annotations"}) {
		return refuse.New(CodeAnnotationPreset, "%s %s has the release annotation key %s at %s", o.kind, o.name, k, fieldPath(at[:len(at)-1])).
			WithHint("release annotations belong in the workload's own metadata.annotations; the materializer sets them")
	}
	_, isStr := v.(string)
	vm, isMap := v.(map[string]any)
	_, hasSpec := vm["spec"]
	isList := slices.Contains(containerFields, k) && !isStr
	isTemplate := slices.Contains(templateKeys, k) && isMap && hasSpec
	if !isList && !isTemplate {
		return nil
	}
	if podSpec == nil {
		return refuse.New(CodePodSpecElsewhere, "%s %s holds pod spec content at %s but is not a workload the lock covers", o.kind, o.name, fieldPath(at))
	}
	onPath := isList && len(at) == len(podSpec)+1 && slices.Equal(at[:len(podSpec)], podSpec) ||
		isTemplate && len(at) < len(podSpec) && slices.Equal(at, podSpec[:len(at)])
	if !onPath {
		return refuse.New(CodePodSpecElsewhere, "%s %s holds pod spec content at %s, away from its pod spec %s", o.kind, o.name, fieldPath(at), fieldPath(podSpec))
	}
	return nil
}

// fieldPath spells a member path for a message.
func fieldPath(path []string) string {
	var b strings.Builder
	b.WriteString("$")
	for _, k := range path {
		if !strings.HasPrefix(k, "[") {
			b.WriteString(".")
		}
		b.WriteString(k)
	}
	return b.String()
}
