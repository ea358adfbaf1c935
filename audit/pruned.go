package audit

import (
	"fmt"

	"github.com/opencontainers/go-digest"

	"github.com/qinglong/ql3/refuse"
	"github.com/qinglong/ql3/store"
)

// CodePruned: the subject was dropped by retention (`ql3 store gc`): its record is gone and a
// tombstone leaf of the store's deployment log says so. The publication's leaf remains, and with
// a log key it is still proven included.
const CodePruned refuse.Code = "AUDIT_PRUNED"

// PruneReader is an evidence source that knows what retention dropped (a store with a log).
type PruneReader interface {
	Pruned(record digest.Digest) (store.PrunedRoot, bool, error)
}

var _ PruneReader = (*store.Store)(nil)

// pruned turns an audit whose subject is missing into the statement that retention dropped it,
// when the source's log has the subject's tombstone; the log inclusion check then proves its
// publishing leaf.
func pruned(src Source, rep *Report, opts Options) {
	pr, ok := src.(PruneReader)
	if !ok || len(rep.Checks) != 1 || rep.Checks[0].Code != store.CodeObjectNotFound {
		return
	}
	p, ok, err := pr.Pruned(rep.Subject)
	if err != nil || !ok {
		return // the subject check's OBJECT_NOT_FOUND stands
	}
	rep.Kind = string(p.Kind)
	rep.Pruned = &p
	rep.Checks[0] = Check{Name: "subject", Code: CodePruned,
		Detail: fmt.Sprintf("the %s %s was dropped by store gc: tombstone leaf %d of the deployment log drops what leaf %d published; its record and closure are gone, so nothing of it can be re-derived", p.Kind, rep.Subject, p.Tombstone, p.Leaf)}
	rep.finishAgain()
	logInclusion(src, rep, opts)
}
