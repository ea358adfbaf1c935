// Package convergence proves, from the stdout of `kubectl get -f=- -o=json
// --show-managed-fields=true` alone, that a server-side apply of a verified manifest converged:
// every object exists with a UID and resourceVersion, every field the manifest sets holds the
// manifest's value, every such field is owned by the ceremony's field manager through an Apply
// operation (proven from the fieldsV1 sets of managedFields), and every image authority carries
// the lock's images and release annotations.
//
// The ceremony runs Verify on the live read right after the apply; the offline auditor runs the
// same Verify on the stored stdout. Nothing but the stdout bytes and the verified manifest and
// lock are trusted. docs/convergence.md is the normative description of what is and is not
// proven.
package convergence

import (
	"github.com/qinglong/ql3/evidence"
	"github.com/qinglong/ql3/evidence/lock"
	"github.com/qinglong/ql3/evidence/manifest"
	"github.com/qinglong/ql3/refuse"
)

// Input is what Verify checks: the verified manifest, the lock's image authorities, the field
// manager the apply used, and the raw stdout of the convergence read.
type Input struct {
	Objects      []manifest.Object // the verified manifest, document order
	Authorities  []lock.Authority  // from lock.Verify
	FieldManager string            // qinglong3-catalog-lock
	Stdout       []byte            // stdout of `kubectl get -f=- -o=json --show-managed-fields=true`
	// Additions makes Judge report the fields other managers added (the live audit's rules
	// evidence.LiveJudgeAdditions); Verify ignores it.
	Additions bool
}

// Output identifies the live objects, in manifest order.
type Output struct{ Objects []evidence.LiveObject }

// MaxStdoutBytes bounds the stdout Verify reads; it is the strict JSON parser's own limit and
// four times the ceremony's 4 MiB stream ceiling.
const MaxStdoutBytes = evidence.MaxInputBytes

// Verify proves convergence of in.Stdout against in.Objects and in.Authorities, or returns the
// first failure as a *refuse.Error. Checks run in a fixed order so that one live state always
// yields the same code: the shape of the output; each object's identity, UID, resourceVersion and
// liveness; the image authorities (images, then annotations, values before ownership); then each
// object's fields, values before ownership.
func Verify(in Input) (*Output, error) {
	if err := checkInput(in); err != nil {
		return nil, err
	}
	items, err := decodeOutput(in.Stdout)
	if err != nil {
		return nil, err
	}
	if len(items) != len(in.Objects) {
		return nil, refuse.New(CodeObjectCount, "convergence read holds %d objects, the manifest %d", len(items), len(in.Objects)).
			WithHint("kubectl get prints only the objects it found: a missing object was deleted or never created")
	}
	objs := make([]*liveObject, len(items))
	out := &Output{Objects: make([]evidence.LiveObject, len(items))}
	for i, it := range items {
		lo, err := identify(&in.Objects[i], it, in.FieldManager)
		if err != nil {
			return nil, err
		}
		objs[i] = lo
		out.Objects[i] = lo.id
	}
	for i := range in.Authorities {
		a := &in.Authorities[i]
		if err := checkAuthority(a, objs[a.ObjectIndex]); err != nil {
			return nil, err
		}
	}
	for i := range in.Objects {
		if err := checkFields(&in.Objects[i], objs[i]); err != nil {
			return nil, err
		}
	}
	return out, nil
}
