package convergence

import (
	"slices"

	"github.com/qinglong/ql3/evidence/lock"
	"github.com/qinglong/ql3/refuse"
)

// Reason codes of the image authority checks. They repeat, with their own codes, what the field
// checks prove for every field, so that a refusal about the release's images or annotations says
// so.
const (
	// CodeImageMismatch: a container of an image authority is missing, repeated, or runs another
	// image than the lock's.
	CodeImageMismatch refuse.Code = "CONVERGENCE_IMAGE_MISMATCH"
	// CodeImageNotOwned: a container image equals the lock's but our manager's Apply entry does
	// not own it.
	CodeImageNotOwned refuse.Code = "CONVERGENCE_IMAGE_NOT_OWNED"
	// CodeAnnotationMismatch: a release annotation of an image authority is missing or differs
	// from the lock's value.
	CodeAnnotationMismatch refuse.Code = "CONVERGENCE_ANNOTATION_MISMATCH"
	// CodeAnnotationNotOwned: a release annotation equals the lock's value but our manager's
	// Apply entry does not own it.
	CodeAnnotationNotOwned refuse.Code = "CONVERGENCE_ANNOTATION_NOT_OWNED"
)

// checkAuthority proves an image authority's images and release annotations: values first, then
// ownership, images before annotations.
func checkAuthority(a *lock.Authority, lo *liveObject) error {
	if err := checkContainerCounts(a, lo); err != nil {
		return err
	}
	imagePaths := make([]fieldPath, 0, len(a.Containers))
	for _, c := range a.Containers {
		p, err := imagePath(a, c, lo)
		if err != nil {
			return err
		}
		imagePaths = append(imagePaths, p)
	}
	annPaths := make([]fieldPath, 0, len(a.Annotations))
	keys := make([]string, 0, len(a.Annotations))
	for k := range a.Annotations {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	meta, _ := lo.raw["metadata"].(map[string]any)
	anns, _ := meta["annotations"].(map[string]any)
	for _, k := range keys {
		p := fieldPath{{key: "metadata", index: -1}, {key: "annotations", index: -1}, {key: k, index: -1}}
		v, ok := anns[k].(string)
		if !ok || v != a.Annotations[k] {
			return refuse.New(CodeAnnotationMismatch, "image authority %s (%s): annotation %s is missing or differs from the lock",
				refuse.Ident(a.Role), lo.res, p).
				WithHint("another manager changed the release annotation after the apply")
		}
		annPaths = append(annPaths, p)
	}
	for _, p := range imagePaths {
		if !lo.owned(p) {
			return refuse.New(CodeImageNotOwned, "image authority %s (%s): %s is not owned by manager %s with operation Apply; owned by %s",
				refuse.Ident(a.Role), lo.res, p, safeManager(lo), ownersOf(lo, p)).
				WithHint("another manager took the image field after the apply, even if it holds the lock's value now")
		}
	}
	for _, p := range annPaths {
		if !lo.owned(p) {
			return refuse.New(CodeAnnotationNotOwned, "image authority %s (%s): annotation %s is not owned by manager %s with operation Apply; owned by %s",
				refuse.Ident(a.Role), lo.res, p, safeManager(lo), ownersOf(lo, p)).
				WithHint("another manager took the release annotation after the apply, even if it holds the lock's value now")
		}
	}
	return nil
}

// checkContainerCounts refuses a live pod spec that runs a container the lock does not know, for
// example one another manager added: the lock must name every image that runs.
func checkContainerCounts(a *lock.Authority, lo *liveObject) error {
	spec, p := podSpec(a, lo)
	for _, field := range []string{"initContainers", "containers", "ephemeralContainers"} {
		want := 0
		for _, c := range a.Containers {
			if c.Field == field {
				want++
			}
		}
		list, _ := spec[field].([]any)
		if len(list) != want {
			return refuse.New(CodeImageMismatch, "image authority %s (%s): %s holds %d containers, the lock %d",
				refuse.Ident(a.Role), lo.res, p.key(field), len(list), want).
				WithHint("every container that runs must carry an image of the lock; another manager added or removed one")
		}
	}
	return nil
}

// imagePath finds container c at PodSpecPath.<Field>[name=<Name>] of the live object, checks its
// image against the lock, and returns the path of its image field.
func imagePath(a *lock.Authority, c lock.Container, lo *liveObject) (fieldPath, error) {
	spec, p := podSpec(a, lo)
	list, _ := spec[c.Field].([]any)
	p = p.key(c.Field)
	found, at := 0, -1
	for i, e := range list {
		if em, ok := e.(map[string]any); ok && em["name"] == c.Name {
			found, at = found+1, i
		}
	}
	if found != 1 {
		return nil, refuse.New(CodeImageMismatch, "image authority %s (%s): container %s appears %d times in %s of the live object, not once",
			refuse.Ident(a.Role), lo.res, refuse.Ident(c.Name), found, p)
	}
	shown := pathElem{index: at}
	if isIdent(c.Name) {
		shown.name = c.Name
	}
	p = append(p, shown, pathElem{key: "image", index: -1})
	if img, ok := list[at].(map[string]any)["image"].(string); !ok || img != c.Image {
		return nil, refuse.New(CodeImageMismatch, "image authority %s (%s): %s is not the lock's image", refuse.Ident(a.Role), lo.res, p).
			WithHint("another manager changed the image after the apply (kubectl set image, a patch, a controller)")
	}
	return p, nil
}

// podSpec returns the live object's pod spec at the authority's PodSpecPath (nil where the live
// object has no mapping there) and the path to it.
func podSpec(a *lock.Authority, lo *liveObject) (map[string]any, fieldPath) {
	var p fieldPath
	var cur any = lo.raw
	for _, k := range a.PodSpecPath {
		m, _ := cur.(map[string]any)
		cur = m[k]
		p = p.key(k)
	}
	spec, _ := cur.(map[string]any)
	return spec, p
}
