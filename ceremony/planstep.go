package ceremony

import (
	"fmt"

	"github.com/qinglong/ql3/evidence"
	"github.com/qinglong/ql3/verdict/plan"
)

// plan compares this preflight's release with the latest receipt of the same cluster in the same
// store, stores the plan and prints it; nil when the store holds no receipt of the cluster. It
// runs no kubectl: it reads the two stored manifests and the previous receipt's objects.
func (s *session) plan(res *Result) (*evidence.Descriptor, error) {
	es, err := s.st.ListIndex(evidence.IndexReceipts)
	if err != nil {
		return nil, err
	}
	rcs := make([]evidence.Descriptor, len(es))
	for i, e := range es {
		rcs[i] = e.Descriptor
	}
	prevDesc, prev, ok, err := plan.Latest(s.st, rcs, s.pc.Command.ExpectedClusterUID)
	if err != nil {
		return nil, err
	}
	if !ok {
		if s.opts.Progress != nil {
			fmt.Fprintf(s.opts.Progress, "plan: store holds no receipt of cluster %s: every object of release %s is new to ql3\n",
				s.pc.Command.ExpectedClusterUID, s.lock.ReleaseVersion)
		}
		return nil, nil
	}
	p, err := plan.Compute(s.st, prevDesc, prev, s.lock, s.manDesc, s.pc.Target)
	if err != nil {
		return nil, err
	}
	d, _, err := s.st.PutRecord(evidence.MediaTypePlan, p)
	if err != nil {
		return nil, storeErr(err, "plan")
	}
	if s.opts.Progress != nil {
		plan.WriteText(s.opts.Progress, p)
	}
	res.Plan = d.Digest
	return &d, nil
}
