package convergence

import (
	"encoding/json"
	"fmt"

	"github.com/qinglong/ql3/evidence"
	"github.com/qinglong/ql3/evidence/lock"
	"github.com/qinglong/ql3/evidence/manifest"
	"github.com/qinglong/ql3/refuse"
)

// Reason codes of the input checks.
const (
	// CodeInputInvalid: the manifest objects, authorities or field manager handed to Verify are
	// unusable. It signals a caller bug (lock.Verify and manifest.Parse never produce such input),
	// never a property of the cluster.
	CodeInputInvalid refuse.Code = "CONVERGENCE_INPUT_INVALID"
	// CodeManifestNull: the manifest sets a field to null. What the server makes of a null
	// depends on the field's schema (dropped, defaulted, or the empty string), so its convergence
	// cannot be proven from the live read.
	CodeManifestNull refuse.Code = "CONVERGENCE_MANIFEST_NULL"
)

// podSpecListFields are the pod spec lists whose elements carry an image.
var podSpecListFields = map[string]bool{"containers": true, "initContainers": true, "ephemeralContainers": true}

// CheckManifest refuses a manifest whose convergence Verify could never prove. The ceremony can
// call it before any mutation; Verify calls it again.
func CheckManifest(objects []manifest.Object) error {
	if len(objects) == 0 {
		return refuse.New(CodeInputInvalid, "the manifest holds no objects")
	}
	for i := range objects {
		o := &objects[i]
		if o.Index != i {
			return refuse.New(CodeInputInvalid, "manifest object %d carries index %d", i, o.Index)
		}
		if o.Fields == nil {
			return refuse.New(CodeInputInvalid, "manifest object %d (%s) has no decoded fields", i, resourceName(o.Kind, o.Namespace, o.Name))
		}
		meta, _ := o.Fields["metadata"].(map[string]any)
		ns, hasNS := meta["namespace"]
		if o.Fields["apiVersion"] != o.APIVersion || o.Fields["kind"] != o.Kind || meta["name"] != o.Name ||
			o.APIVersion == "" || o.Kind == "" || o.Name == "" || (hasNS && ns != o.Namespace) || (!hasNS && o.Namespace != "") {
			return refuse.New(CodeInputInvalid, "manifest object %d (%s): identity fields disagree with the decoded document",
				i, resourceName(o.Kind, o.Namespace, o.Name))
		}
		if err := checkValue(o.Fields, nil, 0); err != nil {
			return fmt.Errorf("manifest object %d (%s): %w", i, resourceName(o.Kind, o.Namespace, o.Name), err)
		}
	}
	return nil
}

// checkValue accepts exactly the Go values a JSON decoder with UseNumber produces, without null.
func checkValue(v any, path fieldPath, depth int) error {
	if depth > evidence.MaxDepth {
		return refuse.New(CodeInputInvalid, "field %s nests deeper than %d", path, evidence.MaxDepth)
	}
	switch x := v.(type) {
	case nil:
		return refuse.New(CodeManifestNull, "field %s is null", path).
			WithHint("remove the field or give it a value: the server drops, defaults or converts a null depending on the schema")
	case map[string]any:
		for _, k := range sortedKeys(x) {
			if err := checkValue(x[k], path.key(k), depth+1); err != nil {
				return err
			}
		}
	case []any:
		for i, e := range x {
			if err := checkValue(e, path.index(i, e), depth+1); err != nil {
				return err
			}
		}
	case json.Number:
		if _, ok := parseDecimal(string(x)); !ok {
			return refuse.New(CodeInputInvalid, "field %s holds a number that is not a json number", path)
		}
	case string, bool:
	default:
		return refuse.New(CodeInputInvalid, "field %s holds a %T, not a decoded json value", path, v)
	}
	return nil
}

// checkInput validates everything Verify takes besides the stdout.
func checkInput(in Input) error {
	if in.FieldManager == "" {
		return refuse.New(CodeInputInvalid, "no field manager given")
	}
	if err := CheckManifest(in.Objects); err != nil {
		return err
	}
	seen := map[int]bool{}
	for i := range in.Authorities {
		a := &in.Authorities[i]
		if a.ObjectIndex < 0 || a.ObjectIndex >= len(in.Objects) || seen[a.ObjectIndex] {
			return refuse.New(CodeInputInvalid, "image authority %d names object index %d of %d (or twice)", i, a.ObjectIndex, len(in.Objects))
		}
		seen[a.ObjectIndex] = true
		o := &in.Objects[a.ObjectIndex]
		if a.APIVersion != o.APIVersion || a.Kind != o.Kind || a.Namespace != o.Namespace || a.Name != o.Name {
			return refuse.New(CodeInputInvalid, "image authority %d (%s) does not name manifest object %d (%s)",
				i, resourceName(a.Kind, a.Namespace, a.Name), a.ObjectIndex, resourceName(o.Kind, o.Namespace, o.Name))
		}
		if err := checkAuthorityShape(i, a); err != nil {
			return err
		}
	}
	return nil
}

func checkAuthorityShape(i int, a *lock.Authority) error {
	bad := func(what string) error {
		return refuse.New(CodeInputInvalid, "image authority %d (%s): %s", i, resourceName(a.Kind, a.Namespace, a.Name), what)
	}
	if len(a.PodSpecPath) == 0 {
		return bad("empty pod spec path")
	}
	for _, p := range a.PodSpecPath {
		if p == "" {
			return bad("empty pod spec path element")
		}
	}
	if len(a.Containers) == 0 {
		return bad("no containers")
	}
	names := map[string]bool{}
	for _, c := range a.Containers {
		if !podSpecListFields[c.Field] || c.Name == "" || c.Image == "" || names[c.Field+"\x00"+c.Name] {
			return bad("a container entry is empty, repeated or names an unknown pod spec list")
		}
		names[c.Field+"\x00"+c.Name] = true
	}
	if len(a.Annotations) == 0 {
		return bad("no release annotations")
	}
	for k := range a.Annotations {
		if k == "" {
			return bad("empty annotation key")
		}
	}
	return nil
}

// resourceName renders kind/namespace/name (kind/name when cluster-scoped or namespace-less).
func resourceName(kind, namespace, name string) string {
	if namespace == "" {
		return refuse.Ident(kind) + "/" + refuse.Ident(name)
	}
	return refuse.Ident(kind) + "/" + refuse.Ident(namespace) + "/" + refuse.Ident(name)
}
