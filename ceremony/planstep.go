package ceremony

import (
	"fmt"

	"github.com/qinglong/ql3/evidence"
	"github.com/qinglong/ql3/verdict/plan"
)

// plan compares this preflight's release with the latest published receipt of the same cluster in
// the same store that shares an object with it (plan.Lineage: publication order, supersession by
// objects), stores the plan and prints it; nil when no receipt of the cluster shares an object. It
// runs no kubectl: it reads the two stored manifests and the previous receipt's objects.
func (s *session) plan(res *Result) (*evidence.Descriptor, error) {
	lin, err := loadLineage(s.st)
	if err != nil {
		return nil, err
	}
	prev, ok := lin.Latest(s.pc.Command.ExpectedClusterUID, plan.KeysOfManifest(s.lock.Objects))
	if !ok {
		if s.opts.Progress != nil {
			fmt.Fprintf(s.opts.Progress, "plan: store holds no receipt of cluster %s that shares an object with release %s: every object of it is new to ql3\n",
				s.pc.Command.ExpectedClusterUID, s.lock.ReleaseVersion)
		}
		return nil, nil
	}
	p, err := plan.Compute(s.st, prev.Desc, prev.Receipt, s.lock, s.manDesc, s.pc.Target)
	if err != nil {
		return nil, err
	}
	d, err := s.putRecord(evidence.MediaTypePlan, p)
	if err != nil {
		return nil, storeErr(err, "plan")
	}
	if s.opts.Progress != nil {
		plan.WriteText(s.opts.Progress, p)
	}
	res.Plan = d.Digest
	return &d, nil
}
