package convergence

import (
	"github.com/qinglong/ql3/evidence/manifest"
	"github.com/qinglong/ql3/refuse"
)

// Reason codes of the per-field checks.
const (
	// CodeFieldMissing: a field the manifest sets is absent from the live object.
	CodeFieldMissing refuse.Code = "CONVERGENCE_FIELD_MISSING"
	// CodeFieldDiffers: a field the manifest sets has another JSON type or value in the live
	// object, a list has another length, or the object is served in another API version.
	CodeFieldDiffers refuse.Code = "CONVERGENCE_FIELD_DIFFERS"
	// CodeFieldNotOwned: a field the manifest sets holds the manifest's value but is not in the
	// field set of our manager's Apply entry; the message names the managers that own it.
	CodeFieldNotOwned refuse.Code = "CONVERGENCE_FIELD_NOT_OWNED"
)

// fieldWalker compares one manifest object with its live object, field by field.
type fieldWalker struct {
	o        *manifest.Object
	lo       *liveObject
	path     fieldPath // the current path, used as a stack
	notOwned fieldPath // the first leaf that is not ours, nil when none

	// The manifest and live values of the node walk entered last, and the failure they led to:
	// the live audit names the path and both values of a field that differs.
	curM, curL any
	fail       *fieldFailure

	// collect makes the walk go on past a failure and record every field that has not
	// converged in drifts (a repair must hand back all of them, not the first).
	collect bool
	drifts  []fieldFailure
}

// fieldFailure is where a field check failed, with the two values it compared.
type fieldFailure struct {
	path       fieldPath
	want, live any
	present    bool
	notOwned   bool // the value is the manifest's, the ownership is not ours
}

// checkFields proves that every field the manifest sets is present with its value, then that every
// such leaf is owned by our manager's Apply entry.
func checkFields(o *manifest.Object, lo *liveObject) error {
	_, err := walkFields(o, lo)
	return err
}

// walkFields is checkFields, returning the walker so that a failure's place can be read.
func walkFields(o *manifest.Object, lo *liveObject) (*fieldWalker, error) {
	w := &fieldWalker{o: o, lo: lo}
	return w, w.check()
}

func (w *fieldWalker) check() error {
	o, lo := w.o, w.lo
	if lo.id.APIVersion != o.APIVersion {
		return refuse.New(CodeFieldDiffers, "object %d (%s): field apiVersion: the live object is served in another version of the api group", o.Index, lo.res)
	}
	if err := w.walk(o.Fields, lo.raw, true, rootOwner(lo.ours)); err != nil {
		return err
	}
	if w.notOwned != nil {
		return refuse.New(CodeFieldNotOwned, "object %d (%s): field %s is not owned by manager %s with operation Apply; owned by %s",
			o.Index, lo.res, w.notOwned, safeManager(lo), ownersOf(lo, w.notOwned)).
			WithHint("another manager took the field after the apply: resolve it with that manager's owner, then rerun the ceremony (it never forces conflicts)")
	}
	return nil
}

// safeManager names our field manager, noting when the object carries no entry of it at all.
func safeManager(lo *liveObject) string {
	if lo.ours == nil {
		return refuse.Ident(lo.fieldManager) + " (no entry on this object)"
	}
	return refuse.Ident(lo.fieldManager)
}

// skipped reports whether key k at the current path is an identity field, compared by identify
// and checkFields and never part of a field set.
func (w *fieldWalker) skipped(k string) bool {
	switch len(w.path) {
	case 0:
		return k == "apiVersion" || k == "kind"
	case 1:
		return w.path[0].key == "metadata" && (k == "name" || k == "namespace")
	}
	return false
}

func (w *fieldWalker) walk(m, l any, present bool, o owner) error {
	w.curM, w.curL = m, l
	switch x := m.(type) {
	case map[string]any:
		if len(x) == 0 {
			return w.empty(l, present, false)
		}
		if !present {
			return w.missing()
		}
		lm, ok := l.(map[string]any)
		if !ok {
			return w.differs("the live value is a json %s, the manifest's an object", typeName(l))
		}
		for _, k := range sortedKeys(x) {
			if w.skipped(k) {
				continue
			}
			lv, ok := lm[k]
			w.path = append(w.path, pathElem{key: k, index: -1})
			err := w.walk(x[k], lv, ok, o.field(k, len(w.path)))
			w.path = w.path[:len(w.path)-1]
			if err != nil {
				return err
			}
		}
		return nil
	case []any:
		if len(x) == 0 {
			return w.empty(l, present, true)
		}
		if !present {
			return w.missing()
		}
		ll, ok := l.([]any)
		if !ok {
			return w.differs("the live value is a json %s, the manifest's an array", typeName(l))
		}
		if len(ll) != len(x) {
			return w.differs("the live list has %d elements, the manifest's %d", len(ll), len(x))
		}
		els, err := o.elements(ll, len(w.path)+1)
		if err != nil {
			return refuse.Wrap(CodeManagedFieldsInvalid, err, "object %d (%s): field %s", w.o.Index, w.lo.res, w.path)
		}
		for i := range x {
			w.path = append(w.path, listElem(i, x[i]))
			err := w.walk(x[i], ll[i], true, els[i])
			w.path = w.path[:len(w.path)-1]
			if err != nil {
				return err
			}
		}
		return nil
	}
	if !present {
		return w.missing()
	}
	if !scalarsEqual(m, l) {
		if typeName(m) != typeName(l) {
			return w.differs("the live value is a json %s, the manifest's a %s", typeName(l), typeName(m))
		}
		return w.differs("the live value differs from the manifest's")
	}
	if (w.collect || w.notOwned == nil) && !(o.owns() && w.lo.consistent(o, w.path, w.lo.ours)) {
		if w.notOwned == nil {
			w.notOwned = append(fieldPath(nil), w.path...)
		}
		if w.collect {
			w.drifts = append(w.drifts, fieldFailure{path: append(fieldPath(nil), w.path...), want: m, live: l, present: true, notOwned: true})
		}
	}
	return nil
}

// empty checks a manifest {} or []: it sets no field, so it needs no ownership; the server drops
// empty collections of omitempty fields, so absence converges too, but a live list must be empty.
func (w *fieldWalker) empty(l any, present, list bool) error {
	if !present {
		return nil
	}
	if !list {
		if _, ok := l.(map[string]any); !ok {
			return w.differs("the live value is a json %s, the manifest's an object", typeName(l))
		}
		return nil
	}
	ll, ok := l.([]any)
	if !ok {
		return w.differs("the live value is a json %s, the manifest's an array", typeName(l))
	}
	if len(ll) != 0 {
		return w.differs("the live list has %d elements, the manifest's none", len(ll))
	}
	return nil
}

func (w *fieldWalker) missing() error {
	w.fail = &fieldFailure{path: append(fieldPath(nil), w.path...), want: w.curM}
	if w.collect {
		w.drifts = append(w.drifts, *w.fail)
		return nil
	}
	return refuse.New(CodeFieldMissing, "object %d (%s): field %s is absent from the live object", w.o.Index, w.lo.res, w.path).
		WithHint("another manager or a controller removed it after the apply, or the server omits it: " +
			`it leaves out "", false and 0 of optional fields, so a manifest must not set them`)
}

func (w *fieldWalker) differs(format string, args ...any) error {
	w.fail = &fieldFailure{path: append(fieldPath(nil), w.path...), want: w.curM, live: w.curL, present: true}
	if w.collect {
		w.drifts = append(w.drifts, *w.fail)
		return nil
	}
	args = append([]any{w.o.Index, w.lo.res, w.path}, args...)
	return refuse.New(CodeFieldDiffers, "object %d (%s): field %s: "+format, args...).WithHint("another manager or a controller changed it after the apply, or the server normalizes the value as written " +
		"(write quantities such as 500m and 128Mi in canonical form)")
}
