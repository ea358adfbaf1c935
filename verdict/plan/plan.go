// Package plan computes, offline, what a preflight's release will change on a cluster relative
// to the latest receipt of the same cluster in the same store that shares an object with it
// (docs/issues.md#issue-9; by objects and publication order since issue 22 (docs/issues.md#issue-22), see Lineage): the objects added and
// changed with the paths of their changing fields, the images and release annotations that move,
// and the objects the previous release had that this one lacks, which stay because ql3 never
// deletes. It reads the two stored manifests and the previous receipt's objects, and runs no
// kubectl.
package plan

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"

	"github.com/opencontainers/go-digest"

	"github.com/qinglong/ql3/evidence"
	"github.com/qinglong/ql3/evidence/lock"
	"github.com/qinglong/ql3/evidence/manifest"
	"github.com/qinglong/ql3/refuse"
)

// CodePreviousInvalid: the latest receipt of the cluster does not decode, or the manifest it
// binds cannot be read again into the objects the receipt lists, so no honest plan can be made.
const CodePreviousInvalid refuse.Code = "PLAN_PREVIOUS_INVALID"

// Source is the read side of the store the plan needs. GetDescriptor re-hashes what it returns
// and refuses an object that does not hash to its name (*store.Store does).
type Source interface {
	GetDescriptor(d evidence.Descriptor) ([]byte, error)
}

// Compute builds the plan of cur (the preflight's verified lock, its manifest blob and target)
// against the previous receipt prev (its descriptor and record), reading prev's manifest from src.
//
// The previous release is not verified again as a lock: its receipt was published only after its
// own preflight verified that lock, the receipt binds the manifest by digest, and src re-hashes
// the blob, so these are the very bytes that passed. What the plan needs of them is their objects,
// read as kubectl read them (manifest.Reread: one reading, and none at all for a document this
// release carries byte for byte). The receipt's objects (the uids its convergence read saw) must
// be those objects, in order. Docs/lifecycle.md gives the reasoning; the offline auditor runs
// this same function to re-derive a stored plan.
func Compute(src Source, prevDesc evidence.Descriptor, prev *evidence.Receipt, cur *lock.Result, curManifest evidence.Descriptor, target digest.Digest) (*evidence.Plan, error) {
	if prev.Manifest.MediaType != evidence.MediaTypeManifest || prev.LockReport.MediaType != evidence.MediaTypeLockReport {
		return nil, refuse.New(CodePreviousInvalid, "receipt %s names its manifest and lock report with media types %q and %q", prevDesc.Digest, prev.Manifest.MediaType, prev.LockReport.MediaType)
	}
	if prev.Manifest.Digest != prev.Lock.ManifestDigest {
		return nil, refuse.New(CodePreviousInvalid, "receipt %s binds manifest %s, its lock binding names %s", prevDesc.Digest, prev.Manifest.Digest, prev.Lock.ManifestDigest)
	}
	man, err := src.GetDescriptor(prev.Manifest)
	if err != nil {
		return nil, err
	}
	// The lock report is not read for the plan, but the stored previous release must be whole.
	if _, err := src.GetDescriptor(prev.LockReport); err != nil {
		return nil, err
	}
	objs, err := manifest.Reread(man, cur.Objects)
	if err != nil {
		return nil, refuse.Wrap(CodePreviousInvalid, err, "the manifest of receipt %s", prevDesc.Digest)
	}
	if len(objs) != len(prev.Objects) {
		return nil, refuse.New(CodePreviousInvalid, "receipt %s lists %d objects, its manifest %d", prevDesc.Digest, len(prev.Objects), len(objs))
	}
	for i := range objs {
		o, l := &objs[i], &prev.Objects[i]
		if o.APIVersion != l.APIVersion || o.Kind != l.Kind || o.Name != l.Name || (o.Namespace != "" && o.Namespace != l.Namespace) {
			return nil, refuse.New(CodePreviousInvalid, "receipt %s lists object %d as %s %s, its manifest as %s %s",
				prevDesc.Digest, i, l.Kind, l.Name, o.Kind, o.Name)
		}
	}
	p := Diff(objs, prev.Objects, cur)
	p.Previous, p.PreviousRelease, p.PreviousAt, p.PreviousMan = prevDesc, prev.Lock.ReleaseVersion, prev.FinishedAt, prev.Manifest
	p.ClusterUID, p.Manifest, p.Target = prev.ClusterUID, curManifest, target
	return p, nil
}

type key struct{ group, kind, namespace, name string }

func keyOf(o *manifest.Object) key {
	g, _, found := strings.Cut(o.APIVersion, "/")
	if !found {
		g = ""
	}
	return key{g, o.Kind, o.Namespace, o.Name}
}

func planObject(o *manifest.Object) evidence.PlanObject {
	return evidence.PlanObject{APIVersion: o.APIVersion, Kind: o.Kind, Namespace: o.Namespace, Name: o.Name}
}

// Diff compares the previous release's objects (and the uids its receipt read, in the same order)
// with cur.
func Diff(prev []manifest.Object, prevObjects []evidence.LiveObject, cur *lock.Result) *evidence.Plan {
	p := &evidence.Plan{Schema: evidence.SchemaPlan, Release: cur.ReleaseVersion, Added: []evidence.PlanObject{},
		Changed: []evidence.PlanChange{}, Left: []evidence.PlanObject{}, Images: []evidence.PlanMove{}, Annotations: []evidence.PlanMove{}}
	before := make(map[key]int, len(prev))
	for i := range prev {
		before[keyOf(&prev[i])] = i
	}
	seen := make(map[key]bool, len(cur.Objects))
	for i := range cur.Objects {
		o := &cur.Objects[i]
		k := keyOf(o)
		seen[k] = true
		j, ok := before[k]
		if !ok {
			p.Added = append(p.Added, planObject(o))
			continue
		}
		// The same JSON is the same object (Fields are decoded from it): nothing to walk.
		if bytes.Equal(prev[j].JSON, o.JSON) && len(o.JSON) > 0 {
			p.Unchanged++
			continue
		}
		var paths []string
		diffValue(prev[j].Fields, o.Fields, nil, &paths)
		if o.APIVersion != prev[j].APIVersion {
			paths = append([]string{"apiVersion"}, paths...)
		}
		if len(paths) == 0 {
			p.Unchanged++
			continue
		}
		p.Changed = append(p.Changed, evidence.PlanChange{Object: planObject(o), UID: prevObjects[j].UID, Paths: paths})
	}
	for i := range prev {
		if !seen[keyOf(&prev[i])] {
			p.Left = append(p.Left, planObject(&prev[i]))
		}
	}
	moves(p, prev, before, cur)
	return p
}

// moves lists the images and release annotations of cur's image authorities that differ from what
// the previous release's object of the same group, kind, namespace and name set at the same place
// (an object new in cur, or a field the previous one lacks, moves from nothing). The previous
// object is read where cur's authority has its pod spec; in a verified lock an object of a
// workload kind is always an image authority with its pod spec there.
func moves(p *evidence.Plan, prev []manifest.Object, before map[key]int, cur *lock.Result) {
	for i := range cur.Authorities {
		a := &cur.Authorities[i]
		o := &cur.Objects[a.ObjectIndex]
		var was map[string]any
		if j, ok := before[keyOf(o)]; ok {
			was = prev[j].Fields
		}
		for _, c := range a.Containers {
			if from := imageAt(was, a.PodSpecPath, c.Field, c.Name); from != c.Image {
				p.Images = append(p.Images, evidence.PlanMove{Object: planObject(o),
					Path: strings.Join(a.PodSpecPath, ".") + "." + c.Field + "[name=" + c.Name + "].image", From: from, To: c.Image})
			}
		}
		ks := make([]string, 0, len(a.Annotations))
		for k := range a.Annotations {
			ks = append(ks, k)
		}
		slices.Sort(ks)
		for _, k := range ks {
			if from := annotationAt(was, k); from != a.Annotations[k] {
				p.Annotations = append(p.Annotations, evidence.PlanMove{Object: planObject(o),
					Path: "metadata.annotations[" + strconv.Quote(k) + "]", From: from, To: a.Annotations[k]})
			}
		}
	}
}

// lookup follows the members p from v; nil when one is absent or not a mapping.
func lookup(v any, p ...string) any {
	for _, k := range p {
		m, ok := v.(map[string]any)
		if !ok {
			return nil
		}
		v = m[k]
	}
	return v
}

// imageAt is the image string of the container named name in list field of the pod spec at
// podSpec of fields; "" when there is none.
func imageAt(fields map[string]any, podSpec []string, field, name string) string {
	list, _ := lookup(lookup(fields, podSpec...), field).([]any)
	for _, e := range list {
		if c, ok := e.(map[string]any); ok && c["name"] == name {
			img, _ := c["image"].(string)
			return img
		}
	}
	return ""
}

// annotationAt is the string value of metadata.annotations[k] of fields; "" when there is none.
func annotationAt(fields map[string]any, k string) string {
	v, _ := lookup(fields, "metadata", "annotations", k).(string)
	return v
}

// diffValue appends the paths where a and b differ: a member or element only one side sets, or
// a scalar that differs. Lists of objects with a name are matched by name, others by position.
func diffValue(a, b any, path []string, out *[]string) {
	switch x := a.(type) {
	case map[string]any:
		y, ok := b.(map[string]any)
		if !ok {
			*out = append(*out, render(path))
			return
		}
		keys := make([]string, 0, len(x)+len(y))
		for k := range x {
			keys = append(keys, k)
		}
		for k := range y {
			if _, dup := x[k]; !dup {
				keys = append(keys, k)
			}
		}
		slices.Sort(keys)
		for _, k := range keys {
			if len(path) == 0 && (k == "apiVersion" || k == "kind") {
				continue
			}
			seg := k
			if !plain(k) {
				seg = "[" + strconv.Quote(k) + "]"
			}
			va, ina := x[k]
			vb, inb := y[k]
			if !ina || !inb {
				*out = append(*out, render(append(path, seg)))
				continue
			}
			diffValue(va, vb, append(path, seg), out)
		}
	case []any:
		y, ok := b.([]any)
		if !ok {
			*out = append(*out, render(path))
			return
		}
		if na, nb := names(x), names(y); na != nil && nb != nil {
			ia := map[string]int{}
			for i, n := range na {
				ia[n] = i
			}
			for j, n := range nb {
				seg := "[name=" + n + "]"
				if i, ok := ia[n]; ok {
					diffValue(x[i], y[j], append(path, seg), out)
					delete(ia, n)
				} else {
					*out = append(*out, render(append(path, seg)))
				}
			}
			for _, n := range na {
				if _, left := ia[n]; left {
					*out = append(*out, render(append(path, "[name="+n+"]")))
				}
			}
			return
		}
		if len(x) != len(y) {
			*out = append(*out, render(path))
			return
		}
		for i := range x {
			diffValue(x[i], y[i], append(path, "["+strconv.Itoa(i)+"]"), out)
		}
	default:
		if !scalarEqual(a, b) {
			*out = append(*out, render(path))
		}
	}
}

// names returns the plain, distinct name members of a list of objects, nil when it is not one.
func names(l []any) []string {
	out := make([]string, 0, len(l))
	seen := map[string]bool{}
	for _, e := range l {
		m, ok := e.(map[string]any)
		if !ok {
			return nil
		}
		n, ok := m["name"].(string)
		if !ok || !plain(n) || seen[n] {
			return nil
		}
		seen[n] = true
		out = append(out, n)
	}
	return out
}

func scalarEqual(a, b any) bool {
	switch x := a.(type) {
	case json.Number:
		y, ok := b.(json.Number)
		return ok && x == y
	case string:
		y, ok := b.(string)
		return ok && x == y
	case bool:
		y, ok := b.(bool)
		return ok && x == y
	case nil:
		return b == nil
	}
	return false
}

func plain(s string) bool {
	if s == "" || len(s) > 64 {
		return false
	}
	for _, r := range s {
		if !(r == '-' || r == '_' || r >= '0' && r <= '9' || r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z') {
			return false
		}
	}
	return true
}

func render(path []string) string {
	if len(path) == 0 {
		return "(object)"
	}
	var b strings.Builder
	for i, s := range path {
		if i > 0 && !strings.HasPrefix(s, "[") {
			b.WriteByte('.')
		}
		b.WriteString(s)
	}
	return b.String()
}

// WriteText prints the plan, one line per fact, each starting with "plan:".
func WriteText(w io.Writer, p *evidence.Plan) {
	fmt.Fprintf(w, "plan: release %s replaces %s (receipt %s of %s) on cluster %s: %d added, %d changed, %d unchanged, %d left behind\n",
		p.Release, p.PreviousRelease, p.Previous.Digest, p.PreviousAt, p.ClusterUID, len(p.Added), len(p.Changed), p.Unchanged, len(p.Left))
	for _, o := range p.Added {
		fmt.Fprintf(w, "plan: add %s %s\n", o.Kind, name(o))
	}
	for _, c := range p.Changed {
		shown := c.Paths
		more := ""
		if len(shown) > 8 {
			shown, more = shown[:8], fmt.Sprintf(" and %d more", len(c.Paths)-8)
		}
		fmt.Fprintf(w, "plan: change %s %s (uid %s): %s%s\n", c.Object.Kind, name(c.Object), c.UID, strings.Join(shown, ", "), more)
	}
	for _, m := range p.Images {
		fmt.Fprintf(w, "plan: image %s %s %s: %s -> %s\n", m.Object.Kind, name(m.Object), m.Path, orNone(m.From), orNone(m.To))
	}
	for _, m := range p.Annotations {
		fmt.Fprintf(w, "plan: annotation %s %s %s: %s -> %s\n", m.Object.Kind, name(m.Object), m.Path, orNone(m.From), orNone(m.To))
	}
	for _, o := range p.Left {
		fmt.Fprintf(w, "plan: left behind %s %s: release %s lacks it; ql3 never deletes, so it stays in the cluster (delete it yourself if it must go)\n",
			o.Kind, name(o), p.Release)
	}
}

func name(o evidence.PlanObject) string {
	if o.Namespace == "" {
		return o.Name
	}
	return o.Namespace + "/" + o.Name
}

func orNone(s string) string {
	if s == "" {
		return "(none)"
	}
	return s
}
