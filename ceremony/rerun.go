package ceremony

import (
	"fmt"

	"github.com/opencontainers/go-digest"

	"github.com/qinglong/ql3/evidence"
	"github.com/qinglong/ql3/store"
	"github.com/qinglong/ql3/verdict/plan"
)

// Supersede names the latest receipt of the same cluster, published after a returned receipt,
// that shares an object with it (plan.Lineage.SupersededBy).
type Supersede struct {
	Receipt    digest.Digest `json:"receipt"`
	Release    string        `json:"release"`
	FinishedAt string        `json:"finishedAt"`
	Target     digest.Digest `json:"target"`
}

// offlineAnswer completes the offline answer of an apply command that has a receipt: the stored
// receipt's release and time, that the cluster was not contacted, and the latest receipt of the
// same cluster in the store that shares an object with it and was published after it, by the
// publication order plan.Lineage derives (the cluster may no longer run this release).
func (s *session) offlineAnswer(res *Result, d evidence.Descriptor, r *evidence.Receipt) error {
	res.Release, res.FinishedAt = r.Lock.ReleaseVersion, r.FinishedAt
	sb, err := supersededBy(s.st, d.Digest)
	if err != nil {
		return err
	}
	res.SupersededBy = sb
	if w := s.opts.Progress; w != nil {
		fmt.Fprintf(w, "offline: returned the stored receipt %s of release %s (finished %s); the cluster was not contacted\n",
			d.Digest, res.Release, res.FinishedAt)
		if sb := res.SupersededBy; sb != nil {
			fmt.Fprintf(w, "offline: SUPERSEDED by receipt %s of release %s (finished %s) on cluster %s: the cluster may no longer run release %s\n",
				sb.Receipt, sb.Release, sb.FinishedAt, r.ClusterUID, res.Release)
			fmt.Fprintf(w, "offline: to re-assert release %s, roll forward: run a new preflight of its lock (a preflight command file of target %s), then the apply command it writes\n",
				res.Release, r.Target)
		}
	}
	return nil
}

// supersededBy names the latest receipt that superseded receipt d (plan.Lineage.SupersededBy:
// of the same cluster, published after d, sharing an object with it); nil when none did.
func supersededBy(st *store.Store, d digest.Digest) (*Supersede, error) {
	lin, err := loadLineage(st)
	if err != nil {
		return nil, err
	}
	by := lin.SupersededBy(d)
	if len(by) == 0 {
		return nil, nil
	}
	lr := by[len(by)-1]
	return &Supersede{Receipt: lr.Desc.Digest, Release: lr.Receipt.Lock.ReleaseVersion, FinishedAt: lr.Receipt.FinishedAt, Target: lr.Receipt.Target}, nil
}

// loadLineage orders every receipt the store publishes (plan.Lineage: publication order,
// supersession by objects), for the plan, the superseded notice and status alike.
func loadLineage(st *store.Store) (*plan.Lineage, error) {
	es, err := st.ListIndex(evidence.IndexReceipts)
	if err != nil {
		return nil, err
	}
	rcs := make([]evidence.Descriptor, len(es))
	for i, e := range es {
		rcs[i] = e.Descriptor
	}
	return plan.LoadLineage(st, rcs)
}
