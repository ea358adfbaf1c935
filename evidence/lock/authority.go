package lock

import (
	"slices"
	"strconv"
	"strings"

	"github.com/qinglong/ql3/evidence"
	"github.com/qinglong/ql3/evidence/manifest"
	"github.com/qinglong/ql3/refuse"
)

// Reason codes of an image-authority resource (and of release annotations elsewhere).
const (
	CodeRoleMissing           refuse.Code = "LOCK_ROLE_MISSING"
	CodeRoleUnknown           refuse.Code = "LOCK_ROLE_UNKNOWN"
	CodeRoleOnNonWorkload     refuse.Code = "LOCK_ROLE_ON_NON_WORKLOAD"
	CodeNamespaceMissing      refuse.Code = "LOCK_NAMESPACE_MISSING"
	CodeAnnotationsInvalid    refuse.Code = "LOCK_ANNOTATIONS_INVALID"
	CodeAnnotationMissing     refuse.Code = "LOCK_ANNOTATION_MISSING"
	CodeAnnotationMismatch    refuse.Code = "LOCK_ANNOTATION_MISMATCH"
	CodeNoContainers          refuse.Code = "LOCK_WORKLOAD_NO_CONTAINERS"
	CodeContainerInvalid      refuse.Code = "LOCK_CONTAINER_INVALID"
	CodeImageMissing          refuse.Code = "LOCK_IMAGE_MISSING"
	CodeImageNotPinned        refuse.Code = "LOCK_IMAGE_NOT_PINNED"
	CodeImageTagAndDigest     refuse.Code = "LOCK_IMAGE_TAG_AND_DIGEST"
	CodeImageNotInLock        refuse.Code = "LOCK_IMAGE_NOT_IN_LOCK"
	CodeImageRoleMismatch     refuse.Code = "LOCK_IMAGE_ROLE_MISMATCH"
	CodeImageOutsideContainer refuse.Code = "LOCK_IMAGE_OUTSIDE_CONTAINER"
)

// annotationsAt returns the annotations mapping at path p of o (nil when absent), refusing one
// that is not a mapping of strings.
func annotationsAt(o *manifest.Object, p []string) (map[string]string, error) {
	v, ok := lookup(o.Fields, p)
	if !ok {
		return nil, nil
	}
	m, ok := v.(map[string]any)
	if !ok {
		return nil, refuse.New(CodeAnnotationsInvalid, "%s: %s is not a mapping", desc(o), render(p))
	}
	out := make(map[string]string, len(m))
	for _, k := range sortedKeys(m) {
		s, ok := m[k].(string)
		if !ok {
			return nil, refuse.New(CodeAnnotationsInvalid, "%s: %s.%s is not a string", desc(o), render(p), refuse.Ident(k))
		}
		for _, r := range releaseAnnotations {
			if k != r && strings.EqualFold(k, r) {
				return nil, refuse.New(CodeAnnotationMismatch, "%s: annotation %s at %s differs from release annotation %s only in case", desc(o), refuse.Ident(k), render(p), r)
			}
		}
		out[k] = s
	}
	return out, nil
}

func lookup(v any, p []string) (any, bool) {
	for _, k := range p {
		m, ok := v.(map[string]any)
		if !ok {
			return nil, false
		}
		if v, ok = m[k]; !ok {
			return nil, false
		}
	}
	return v, true
}

// expected returns the release annotation values the lock requires on a resource of role.
func (r *report) expected(role string) map[string]string {
	return map[string]string{
		AnnotationReleaseVersion: r.Release.Version,
		AnnotationCatalogDigest:  string(r.Catalog.Digest),
		AnnotationCatalogCommit:  r.Catalog.Commit,
		AnnotationReleaseSet:     string(r.Catalog.ReleaseSet),
		AnnotationRole:           role,
	}
}

// checkPresent refuses any release annotation in ann whose value differs from want.
func checkPresent(o *manifest.Object, where []string, ann, want map[string]string) error {
	for _, k := range releaseAnnotations {
		if v, ok := ann[k]; ok && v != want[k] {
			return refuse.New(CodeAnnotationMismatch, "%s: annotation %s at %s does not carry the lock's value", desc(o), k, render(where))
		}
	}
	return nil
}

// checkOtherAnnotations applies the annotation rules to a resource that is not a workload: it
// must not claim a role, and any other release annotation it carries must match the lock.
func checkOtherAnnotations(r *report, o *manifest.Object) error {
	where := []string{"metadata", "annotations"}
	ann, err := annotationsAt(o, where)
	if err != nil {
		return err
	}
	if _, ok := ann[AnnotationRole]; ok {
		return refuse.New(CodeRoleOnNonWorkload, "%s: annotation %s on a resource that is not a workload", desc(o), AnnotationRole)
	}
	return checkPresent(o, where, ann, r.expected(""))
}

// checkAuthority applies every rule of an image-authority resource to workload o.
func checkAuthority(r *report, o *manifest.Object, w *workload) (*Authority, error) {
	where := []string{"metadata", "annotations"}
	ann, err := annotationsAt(o, where)
	if err != nil {
		return nil, err
	}
	role, ok := ann[AnnotationRole]
	if !ok {
		return nil, refuse.New(CodeRoleMissing, "%s: workload without annotation %s", desc(o), AnnotationRole)
	}
	if !slices.Contains(r.Roles, role) {
		return nil, refuse.New(CodeRoleUnknown, "%s: role annotation names no role of the lock", desc(o))
	}
	if o.Namespace == "" {
		return nil, refuse.New(CodeNamespaceMissing, "%s: image authority without an explicit metadata.namespace", desc(o))
	}
	want := r.expected(role)
	a := &Authority{
		ObjectIndex: o.Index, Role: role, APIVersion: o.APIVersion, Kind: o.Kind, Namespace: o.Namespace, Name: o.Name,
		PodSpecPath: slices.Clone(w.podSpec), Annotations: make(map[string]string, len(releaseAnnotations)),
	}
	for _, k := range releaseAnnotations {
		v, ok := ann[k]
		if !ok {
			return nil, refuse.New(CodeAnnotationMissing, "%s: image authority without annotation %s", desc(o), k)
		}
		if v != want[k] {
			return nil, refuse.New(CodeAnnotationMismatch, "%s: annotation %s does not carry the lock's value", desc(o), k)
		}
		a.Annotations[k] = v
	}
	// Release annotations on the templates inside the workload must not contradict the lock.
	for i, k := range w.podSpec {
		if slices.Contains(templateKeys, k) {
			p := append(slices.Clone(w.podSpec[:i+1]), "metadata", "annotations")
			t, err := annotationsAt(o, p)
			if err != nil {
				return nil, err
			}
			if err := checkPresent(o, p, t, want); err != nil {
				return nil, err
			}
		}
	}
	if a.Containers, err = containers(r, o, w, role); err != nil {
		return nil, err
	}
	return a, nil
}

// containers reads and checks every container of o's pod spec.
func containers(r *report, o *manifest.Object, w *workload, role string) ([]Container, error) {
	v, ok := lookup(o.Fields, w.podSpec)
	spec, isMap := v.(map[string]any)
	if !ok || !isMap {
		return nil, refuse.New(CodeNoContainers, "%s: no pod spec mapping at %s", desc(o), render(w.podSpec))
	}
	var out []Container
	names := map[string]bool{}
	for _, field := range containerLists {
		lv, present := spec[field]
		if !present {
			continue
		}
		at := append(slices.Clone(w.podSpec), field)
		list, ok := lv.([]any)
		if !ok {
			return nil, refuse.New(CodeContainerInvalid, "%s: %s is not a list", desc(o), render(at))
		}
		for i, e := range list {
			ep := append(slices.Clone(at), "["+strconv.Itoa(i)+"]")
			c, ok := e.(map[string]any)
			if !ok {
				return nil, refuse.New(CodeContainerInvalid, "%s: %s is not a mapping", desc(o), render(ep))
			}
			name, ok := c["name"].(string)
			if !ok || name == "" || names[name] {
				return nil, refuse.New(CodeContainerInvalid, "%s: %s has no name, or a name another container of the pod has", desc(o), render(ep))
			}
			names[name] = true
			iv, present := c["image"]
			if !present {
				return nil, refuse.New(CodeImageMissing, "%s: %s has no image", desc(o), render(ep))
			}
			img, ok := iv.(string)
			if !ok {
				return nil, refuse.New(CodeContainerInvalid, "%s: %s.image is not a string", desc(o), render(ep))
			}
			if err := r.checkImage(o, append(ep, "image"), img, role); err != nil {
				return nil, err
			}
			out = append(out, Container{Field: field, Name: name, Image: img})
		}
	}
	if len(out) == 0 {
		return nil, refuse.New(CodeNoContainers, "%s: workload without containers", desc(o))
	}
	return out, nil
}

// checkImage requires img, the image of a container of a workload of role, to be exactly the
// lock's reference for that role.
func (r *report) checkImage(o *manifest.Object, at []string, img, role string) error {
	name, dig, pinned := strings.Cut(img, "@")
	if !pinned {
		return refuse.New(CodeImageNotPinned, "%s: image at %s is not pinned by @sha256:<64 hex>", desc(o), render(at))
	}
	if _, err := evidence.ParseDigest(dig); err != nil {
		return refuse.New(CodeImageNotPinned, "%s: image at %s carries a malformed digest (not @sha256:<64 hex>)", desc(o), render(at))
	}
	if strings.Contains(name[strings.LastIndexByte(name, '/')+1:], ":") {
		return refuse.New(CodeImageTagAndDigest, "%s: image at %s has both a tag and a digest", desc(o), render(at))
	}
	for _, im := range r.Images {
		if im.Reference != img {
			continue
		}
		if im.Role != role {
			return refuse.New(CodeImageRoleMismatch, "%s: image at %s is the lock's image for role %s, not for role %s", desc(o), render(at), im.Role, role)
		}
		return nil
	}
	return refuse.New(CodeImageNotInLock, "%s: image at %s is not the lock's image for role %s", desc(o), render(at), role)
}
