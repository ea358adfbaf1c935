package convergence

import (
	"bytes"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"unicode/utf8"

	"github.com/qinglong/ql3/evidence"
	"github.com/qinglong/ql3/evidence/lock"
	"github.com/qinglong/ql3/evidence/manifest"
	"github.com/qinglong/ql3/refuse"
)

// Finding is the live audit's verdict on one manifest object: Verify stops at the first object
// that has not converged, the live audit must say where every object stands.
type Finding struct {
	Object   evidence.LiveObject // the manifest's identity; UID and ResourceVersion as read (empty when missing)
	Verdict  string              // one of evidence.Verdict*
	Code     refuse.Code         // the convergence code behind a verdict other than converged and missing
	Path     string              // the field that differs or is no longer ours
	Manager  string              // the managers that own Path now ("no manager" when none)
	Live     string              // the live value, short; "" when absent
	Expected string              // the value the manifest and lock set, short
	Detail   string              // the convergence verifier's message
	Added    []Addition          // fields other managers added (Input.Additions), security-relevant first
}

// maxShownValue bounds a value a finding repeats: manifests hold no Secret, yet a line of a
// report is not the place for a whole ConfigMap.
const maxShownValue = 96

// Judge gives one Finding per manifest object, in manifest order, from the stdout of the
// convergence read of the live audit. kubectl prints only the objects it found, in manifest order,
// so an object whose identity is not next in the read is missing. receipt is the object list of
// the receipt whose manifest this is; an object whose UID differs from it was recreated. An error
// is returned only when the read itself cannot be judged (malformed, or not of this manifest).
func Judge(in Input, receipt []evidence.LiveObject) ([]Finding, error) {
	if err := checkInput(in); err != nil {
		return nil, err
	}
	if len(receipt) != len(in.Objects) {
		return nil, refuse.New(CodeInputInvalid, "receipt lists %d objects, the manifest %d", len(receipt), len(in.Objects))
	}
	var items []map[string]any
	if len(bytes.TrimSpace(in.Stdout)) > 0 {
		var err error
		if items, err = decodeOutput(in.Stdout); err != nil {
			return nil, err
		}
	}
	auth := make(map[int]*lock.Authority, len(in.Authorities))
	for i := range in.Authorities {
		auth[in.Authorities[i].ObjectIndex] = &in.Authorities[i]
	}
	out := make([]Finding, len(in.Objects))
	next := 0
	for i := range in.Objects {
		o := &in.Objects[i]
		f := &out[i]
		f.Object = evidence.LiveObject{APIVersion: o.APIVersion, Kind: o.Kind, Namespace: o.Namespace, Name: o.Name}
		if next >= len(items) || !sameIdentity(o, items[next]) {
			f.Verdict = evidence.VerdictMissing
			f.Detail = "kubectl get did not find the object"
			continue
		}
		it := items[next]
		next++
		lo, err := identify(o, it, in.FieldManager)
		if err != nil {
			f.Verdict, f.Code, f.Detail = evidence.VerdictUnreadable, refuse.CodeOf(err), message(err)
			continue
		}
		f.Object = lo.id
		judgeObject(f, o, lo, auth[i])
		if in.Additions {
			f.Added = additions(o.Fields, lo)
			if a := f.Added; f.Verdict == evidence.VerdictConverged && len(a) > 0 {
				f.Verdict, f.Code, f.Path, f.Manager, f.Live = evidence.VerdictAddedByOther, CodeAddedByOther, a[0].Path, a[0].Manager, a[0].Live
				f.Detail = fmt.Sprintf("%d field(s) the release does not set, owned by another manager", len(a))
			}
		}
		if receipt[i].UID != lo.id.UID {
			f.Verdict, f.Code = evidence.VerdictRecreated, ""
			f.Detail = "uid " + lo.id.UID + " is not the receipt's " + refuse.Ident(receipt[i].UID) + "; " + f.Detail
			f.Detail = strings.TrimSuffix(f.Detail, "; ")
		}
	}
	if next != len(items) {
		return nil, refuse.New(CodeObjectMismatch, "the live read holds %d objects that are not the manifest's, in its order", len(items)-next).
			WithHint("kubectl get -f prints objects in manifest order; a different object here means the read is not of this manifest")
	}
	return out, nil
}

// sameIdentity reports whether live item it is manifest object o (group, kind, namespace, name).
func sameIdentity(o *manifest.Object, it map[string]any) bool {
	apiVersion, _ := it["apiVersion"].(string)
	kind, _ := it["kind"].(string)
	meta, _ := it["metadata"].(map[string]any)
	name, _ := meta["name"].(string)
	ns, _ := meta["namespace"].(string)
	return apiVersion != "" && kind == o.Kind && name == o.Name && group(apiVersion) == group(o.APIVersion) &&
		(o.Namespace == "" || ns == o.Namespace)
}

// judgeObject fills f for a live object whose identity is established: the lock's images and
// release annotations first (their own verdicts), then every field, values before ownership, as
// Verify orders them.
func judgeObject(f *Finding, o *manifest.Object, lo *liveObject, a *lock.Authority) {
	if a != nil {
		if authorityDiff(f, a, lo) {
			return
		}
		if err := checkAuthority(a, lo); err != nil {
			f.Code, f.Detail = refuse.CodeOf(err), message(err)
			switch f.Code {
			case CodeImageNotOwned, CodeAnnotationNotOwned:
				f.Verdict = evidence.VerdictOwnershipLost
			default:
				f.Verdict = evidence.VerdictImageDiffers
			}
			return
		}
	}
	w, err := walkFields(o, lo)
	if err == nil {
		f.Verdict = evidence.VerdictConverged
		return
	}
	f.Code, f.Detail = refuse.CodeOf(err), message(err)
	switch {
	case f.Code == CodeFieldNotOwned && w.notOwned != nil:
		f.Verdict, f.Path, f.Manager = evidence.VerdictOwnershipLost, w.notOwned.String(), ownersOf(lo, w.notOwned)
		f.Expected = shown(valueAt(o.Fields, w.notOwned), true)
		f.Live = f.Expected
	case w.fail != nil:
		f.Verdict, f.Path, f.Manager = evidence.VerdictFieldDiffers, w.fail.path.String(), ownersAll(lo, w.fail.path)
		f.Expected, f.Live = shown(w.fail.want, true), shown(w.fail.live, w.fail.present)
	default:
		f.Verdict = evidence.VerdictFieldDiffers
	}
}

// authorityDiff reports an image or release annotation whose live value is not the lock's.
func authorityDiff(f *Finding, a *lock.Authority, lo *liveObject) bool {
	spec, sp := podSpec(a, lo)
	for _, c := range a.Containers {
		list, _ := spec[c.Field].([]any)
		p := sp.key(c.Field)
		live, at := any(nil), -1
		for i, e := range list {
			if em, ok := e.(map[string]any); ok && em["name"] == c.Name {
				live, at = em["image"], i
				break
			}
		}
		if at >= 0 {
			p = append(p, pathElem{index: at, name: identName(c.Name)}, pathElem{key: "image", index: -1})
		}
		if s, ok := live.(string); at < 0 || !ok || s != c.Image {
			f.Verdict, f.Code = evidence.VerdictImageDiffers, CodeImageMismatch
			f.Path, f.Expected, f.Live = p.String(), shown(c.Image, true), shown(live, at >= 0)
			f.Manager = ownersAll(lo, p)
			f.Detail = "image authority " + refuse.Ident(a.Role) + ": container " + refuse.Ident(c.Name) + " does not run the lock's image"
			return true
		}
	}
	keys := make([]string, 0, len(a.Annotations))
	for k := range a.Annotations {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	meta, _ := lo.raw["metadata"].(map[string]any)
	anns, _ := meta["annotations"].(map[string]any)
	for _, k := range keys {
		v, present := anns[k]
		if s, ok := v.(string); ok && s == a.Annotations[k] {
			continue
		}
		p := fieldPath{{key: "metadata", index: -1}, {key: "annotations", index: -1}, {key: k, index: -1}}
		f.Verdict, f.Code = evidence.VerdictAnnotationDiffers, CodeAnnotationMismatch
		f.Path, f.Expected, f.Live = p.String(), shown(a.Annotations[k], true), shown(v, present)
		f.Manager = ownersAll(lo, p)
		f.Detail = "image authority " + refuse.Ident(a.Role) + ": release annotation differs from the lock"
		return true
	}
	return false
}

func identName(s string) string {
	if isIdent(s) {
		return s
	}
	return ""
}

// ownersAll names every manager that owns path, ours included.
func ownersAll(lo *liveObject, path fieldPath) string {
	var names []string
	for _, m := range lo.managers {
		if o := rootOwner(m).at(lo.raw, path); o.owns() && lo.consistent(o, path, m) {
			names = append(names, m.String())
		}
	}
	if len(names) == 0 {
		return "no manager"
	}
	if len(names) > 4 {
		names = append(names[:4], "...")
	}
	return strings.Join(names, ", ")
}

// valueAt returns the manifest value at path, nil when the path leaves it.
func valueAt(v any, path fieldPath) any {
	for _, e := range path {
		if e.index < 0 {
			m, _ := v.(map[string]any)
			v = m[e.key]
			continue
		}
		l, _ := v.([]any)
		if e.index >= len(l) {
			return nil
		}
		v = l[e.index]
	}
	return v
}

// shown renders a value as short JSON, cut at a rune boundary; "" for an absent value.
func shown(v any, present bool) string { return shownMax(v, present, maxShownValue) }

func shownMax(v any, present bool, max int) string {
	if !present {
		return ""
	}
	b, err := json.Marshal(v)
	if err != nil {
		return "(unprintable)"
	}
	s := string(b)
	if len(s) > max {
		cut := max
		for cut > 0 && !utf8.RuneStart(s[cut]) {
			cut--
		}
		s = s[:cut] + "..."
	}
	return s
}

func message(err error) string {
	if r, ok := refuse.As(err); ok {
		return r.Message()
	}
	return err.Error()
}
