package materialize

import (
	"maps"
	"reflect"
	"regexp"
	"slices"
	"strings"

	"github.com/qinglong/ql3/refuse"
)

// The five release annotations, in the order of the lock report's annotations member.
const (
	AnnotationReleaseVersion = "qinglong.io/release-version"
	AnnotationCatalogDigest  = "qinglong.io/catalog-digest"
	AnnotationCatalogCommit  = "qinglong.io/catalog-commit"
	AnnotationReleaseSet     = "qinglong.io/release-set"
	AnnotationRole           = "qinglong.io/role"
)

// Annotations lists the release annotation keys in report order.
var Annotations = []string{AnnotationReleaseVersion, AnnotationCatalogDigest, AnnotationCatalogCommit, AnnotationReleaseSet, AnnotationRole}

// Reason codes of the workload check.
const (
	CodeWorkloadKind          refuse.Code = "MATERIALIZE_WORKLOAD_KIND"
	CodeWorkloadShape         refuse.Code = "MATERIALIZE_WORKLOAD_SHAPE"
	CodeWorkloadNoContainers  refuse.Code = "MATERIALIZE_WORKLOAD_NO_CONTAINERS"
	CodeWorkloadNamespace     refuse.Code = "MATERIALIZE_WORKLOAD_NAMESPACE"
	CodeRoleAnnotationMissing refuse.Code = "MATERIALIZE_ROLE_ANNOTATION_MISSING"
	CodeRoleUnknown           refuse.Code = "MATERIALIZE_ROLE_UNKNOWN"
	CodeRoleDuplicate         refuse.Code = "MATERIALIZE_ROLE_DUPLICATE"
	CodeRoleOrder             refuse.Code = "MATERIALIZE_ROLE_ORDER"
	CodeRoleMissing           refuse.Code = "MATERIALIZE_ROLE_MISSING"
	CodeRoleMisplaced         refuse.Code = "MATERIALIZE_ROLE_MISPLACED"
	CodeAnnotationPreset      refuse.Code = "MATERIALIZE_ANNOTATION_PRESET"
	CodeImageInvalid          refuse.Code = "MATERIALIZE_IMAGE_INVALID"
	CodeImagePinned           refuse.Code = "MATERIALIZE_IMAGE_PINNED"
	CodeImageRepository       refuse.Code = "MATERIALIZE_IMAGE_REPOSITORY"
	CodeImageVolume           refuse.Code = "MATERIALIZE_IMAGE_VOLUME"
	CodeStrayReference        refuse.Code = "MATERIALIZE_STRAY_REFERENCE"
)

// workloadKinds are the image-authority kinds: built-in apiVersion and the path of the pod spec.
var workloadKinds = map[string]struct {
	apiVersion string
	podSpec    []string
}{
	"Pod":                   {"v1", []string{"spec"}},
	"ReplicationController": {"v1", []string{"spec", "template", "spec"}},
	"PodTemplate":           {"v1", []string{"template", "spec"}},
	"Deployment":            {"apps/v1", []string{"spec", "template", "spec"}},
	"StatefulSet":           {"apps/v1", []string{"spec", "template", "spec"}},
	"DaemonSet":             {"apps/v1", []string{"spec", "template", "spec"}},
	"ReplicaSet":            {"apps/v1", []string{"spec", "template", "spec"}},
	"Job":                   {"batch/v1", []string{"spec", "template", "spec"}},
	"CronJob":               {"batch/v1", []string{"spec", "jobTemplate", "spec", "template", "spec"}},
}

// containerFields are the pod spec lists whose images are pinned, in the order they are visited.
var containerFields = []string{"containers", "initContainers", "ephemeralContainers"}

// unlockedImageRE is an undigested image of the qinglong organisation, with an optional tag.
var unlockedImageRE = regexp.MustCompile(`^(ghcr\.io/qinglong/[a-z0-9]+(?:[._-][a-z0-9]+)*)(?::[A-Za-z0-9_][A-Za-z0-9_.-]{0,127})?$`)

// strayRE finds a mention of the image authority: ghcr.io (any letter case, an optional trailing
// dot and :port) followed by /qinglong that does not go on as a longer name.
var strayRE = regexp.MustCompile(`(?i)ghcr\.io\.?(?::[0-9]*)?/qinglong(?:[^a-z0-9._-]|$)`)

const strayNeedle = "ghcr.io/qinglong"

// authority is a workload found in the unlocked manifest, ready to be pinned.
type authority struct {
	obj         *object
	role        string
	annotations map[string]any
	containers  []map[string]any
	podSpec     []string
}

// lockObjects pins every workload of objs from c and stamps the release annotations, in place.
func lockObjects(objs []*object, c *Catalog, releaseSet string) (int, error) {
	next := 0 // index into Roles of the next workload's role
	for _, o := range objs {
		a, err := findAuthority(o)
		if err != nil {
			return 0, err
		}
		var podSpec []string
		if a != nil {
			podSpec = a.podSpec
		}
		if err := checkStructure(o, podSpec); err != nil {
			return 0, err
		}
		var exempt map[uintptr]bool
		if a != nil {
			if err := checkRole(a, next); err != nil {
				return 0, err
			}
			exempt = map[uintptr]bool{}
			for _, ctr := range a.containers {
				exempt[reflect.ValueOf(ctr).Pointer()] = true
			}
		}
		if stray(o.fields, exempt) {
			return 0, refuse.New(CodeStrayReference, "%s %s/%s holds %q outside a workload's container image", o.kind, o.namespace, o.name, strayNeedle).
				WithHint("every qinglong image must be a container image of a workload that carries %s", AnnotationRole)
		}
		if a == nil {
			continue
		}
		img := c.Images[next]
		for _, ctr := range a.containers {
			if err := checkImage(ctr["image"].(string), img, o); err != nil {
				return 0, err
			}
			ctr["image"] = img.Reference
		}
		a.annotations[AnnotationReleaseVersion] = c.Version
		a.annotations[AnnotationCatalogDigest] = string(c.Digest)
		a.annotations[AnnotationCatalogCommit] = c.Commit
		a.annotations[AnnotationReleaseSet] = releaseSet
		next++
	}
	if next != len(Roles) {
		return 0, refuse.New(CodeRoleMissing, "manifest has no workload of role %q", Roles[next]).
			WithHint("the manifest needs one workload per role, in the order %v", Roles)
	}
	return next, nil
}

// findAuthority returns the workload that o is, or nil when o is not a workload. It refuses
// anything that would make o an authority the materializer cannot lock.
func findAuthority(o *object) (*authority, error) {
	meta := o.fields["metadata"].(map[string]any)
	var ann map[string]any
	if v, ok := meta["annotations"]; ok {
		if ann, ok = v.(map[string]any); !ok {
			return nil, refuse.New(CodeWorkloadShape, "%s %s metadata.annotations is not an object", o.kind, o.name)
		}
		for _, k := range slices.Sorted(maps.Keys(ann)) {
			if _, ok := ann[k].(string); !ok {
				return nil, refuse.New(CodeWorkloadShape, "%s %s annotation %q is not a string", o.kind, o.name, k)
			}
		}
	}
	for _, k := range Annotations[:4] {
		if _, ok := ann[k]; ok {
			return nil, refuse.New(CodeAnnotationPreset, "%s %s already carries %s", o.kind, o.name, k).
				WithHint("the materializer sets the release annotations; the unlocked manifest carries only %s", AnnotationRole)
		}
	}
	wk, isWorkload := workloadKinds[o.kind]
	if !isWorkload {
		for k := range workloadKinds {
			if strings.EqualFold(k, o.kind) {
				return nil, refuse.New(CodeWorkloadKind, "kind %q is not spelled %q", o.kind, k)
			}
		}
		if _, ok := ann[AnnotationRole]; ok {
			return nil, refuse.New(CodeRoleMisplaced, "%s %s carries %s but is not a workload", o.kind, o.name, AnnotationRole)
		}
		return nil, nil
	}
	if o.apiVersion != wk.apiVersion {
		return nil, refuse.New(CodeWorkloadKind, "%s %s has apiVersion %q, want %q", o.kind, o.name, o.apiVersion, wk.apiVersion)
	}
	spec, err := podSpec(o, wk.podSpec)
	if err != nil {
		return nil, err
	}
	a := &authority{obj: o, podSpec: wk.podSpec}
	names := map[string]bool{}
	for _, field := range containerFields {
		v, ok := spec[field]
		if !ok {
			continue
		}
		list, ok := v.([]any)
		if !ok {
			return nil, refuse.New(CodeWorkloadShape, "%s %s %s is not a list", o.kind, o.name, field)
		}
		for i, e := range list {
			ctr, ok := e.(map[string]any)
			name, ok1 := ctr["name"].(string)
			_, ok2 := ctr["image"].(string)
			if !ok || !ok1 || !ok2 || name == "" {
				return nil, refuse.New(CodeWorkloadShape, "%s %s %s[%d] is not a container with a string name and image", o.kind, o.name, field, i)
			}
			if names[name] {
				return nil, refuse.New(CodeWorkloadShape, "%s %s has two containers named %q", o.kind, o.name, name)
			}
			names[name] = true
			a.containers = append(a.containers, ctr)
		}
	}
	if len(a.containers) == 0 {
		return nil, refuse.New(CodeWorkloadNoContainers, "%s %s has no containers to pin", o.kind, o.name)
	}
	if vols, ok := spec["volumes"].([]any); ok {
		for i, v := range vols {
			if vm, ok := v.(map[string]any); ok && vm["image"] != nil {
				return nil, refuse.New(CodeImageVolume, "%s %s volumes[%d] is an image volume, which the lock cannot pin", o.kind, o.name, i)
			}
		}
	}
	if o.namespace == "" {
		return nil, refuse.New(CodeWorkloadNamespace, "%s %s has no metadata.namespace", o.kind, o.name).
			WithHint("every workload must name its namespace explicitly")
	}
	if ann == nil {
		ann = map[string]any{}
		meta["annotations"] = ann
	}
	a.annotations = ann
	role, ok := ann[AnnotationRole].(string)
	if !ok {
		return nil, refuse.New(CodeRoleAnnotationMissing, "%s %s has no string annotation %s", o.kind, o.name, AnnotationRole)
	}
	a.role = role
	return a, nil
}

func podSpec(o *object, path []string) (map[string]any, error) {
	cur := o.fields
	for i, p := range path {
		v, ok := cur[p]
		if !ok {
			return nil, refuse.New(CodeWorkloadNoContainers, "%s %s has no %s", o.kind, o.name, strings.Join(path[:i+1], "."))
		}
		if cur, ok = v.(map[string]any); !ok {
			return nil, refuse.New(CodeWorkloadShape, "%s %s %s is not an object", o.kind, o.name, strings.Join(path[:i+1], "."))
		}
	}
	return cur, nil
}

// checkRole requires a's role to be the next one in role order.
func checkRole(a *authority, next int) error {
	o := a.obj
	idx := -1
	for i, r := range Roles {
		if r == a.role {
			idx = i
		}
	}
	switch {
	case idx < 0:
		return refuse.New(CodeRoleUnknown, "%s %s has role %q, not one of %v", o.kind, o.name, a.role, Roles)
	case idx < next:
		return refuse.New(CodeRoleDuplicate, "%s %s has role %q, which an earlier workload already has", o.kind, o.name, a.role)
	case idx > next:
		return refuse.New(CodeRoleOrder, "%s %s has role %q where role %q is required", o.kind, o.name, a.role, Roles[next]).
			WithHint("workloads must appear one per role in the order %v", Roles)
	}
	return nil
}

func checkImage(image string, img Image, o *object) error {
	if strings.Contains(image, "@") {
		return refuse.New(CodeImagePinned, "%s %s has an image that is already pinned by digest", o.kind, o.name).
			WithHint("the unlocked manifest names images without a digest; the catalog pins them")
	}
	m := unlockedImageRE.FindStringSubmatch(image)
	if m == nil {
		return refuse.New(CodeImageInvalid, "%s %s has an image that is not ghcr.io/qinglong/<name>[:tag]", o.kind, o.name)
	}
	if m[1] != img.Repository() {
		return refuse.New(CodeImageRepository, "%s %s image repository %s is not the catalog's %s for role %s", o.kind, o.name, m[1], img.Repository(), img.Role)
	}
	return nil
}

// stray reports whether v mentions the image authority in a key or a string other than
// the image of a container in exempt.
func stray(v any, exempt map[uintptr]bool) bool {
	switch x := v.(type) {
	case string:
		return strayRE.MatchString(x)
	case []any:
		for _, e := range x {
			if stray(e, exempt) {
				return true
			}
		}
	case map[string]any:
		isCtr := exempt[reflect.ValueOf(x).Pointer()]
		for k, e := range x {
			if strayRE.MatchString(k) || !(isCtr && k == "image") && stray(e, exempt) {
				return true
			}
		}
	}
	return false
}
