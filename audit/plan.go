package audit

import (
	"bytes"
	"encoding/json"
	"fmt"
	"slices"
	"strings"

	"github.com/qinglong/ql3/evidence"
	"github.com/qinglong/ql3/refuse"
	"github.com/qinglong/ql3/verdict/plan"
)

// Reason codes of the plan check.
const (
	// CodePlanMismatch: the plan stored with a preflight differs from the plan re-derived offline
	// from the records it names: what the operator was shown is not what the evidence says.
	CodePlanMismatch refuse.Code = "AUDIT_PLAN_MISMATCH"
	// CodePlanPrevious: the plan names a previous receipt that is absent, is not a receipt, is of
	// another cluster than the preflight, or was never published.
	CodePlanPrevious refuse.Code = "AUDIT_PLAN_PREVIOUS"
)

// planCheck re-derives the plan a preflight stored (p.Plan) with the ceremony's own code
// (plan.Compute) from the records it names: the previous receipt, its stored manifest and its
// objects, and this preflight's verified lock, manifest and target. The stored record must be
// exactly the re-derived one, byte for byte. It runs only when the preflight stored a plan and
// the lock check established this preflight's lock.
func (a *auditor) planCheck(r *run, p *evidence.Preflight) {
	if p.Plan == nil || r.lockResult == nil {
		return
	}
	a.check(r.name("plan"), func() (string, error) {
		// One read: the bytes are decoded here and compared with the re-derived record below.
		have, err := a.blob(*p.Plan, evidence.MediaTypePlan)
		if err != nil {
			return "", err
		}
		var stored evidence.Plan
		if err := evidence.DecodeRecord(evidence.MediaTypePlan, have, &stored); err != nil {
			return "", err
		}
		prevDesc := stored.Previous
		if prevDesc.MediaType != evidence.MediaTypeReceipt {
			return "", refuse.New(CodePlanPrevious, "plan %s names %s of media type %q as its previous receipt", p.Plan.Digest, prevDesc.Digest, prevDesc.MediaType)
		}
		var prev evidence.Receipt
		if err := a.load(prevDesc, evidence.MediaTypeReceipt, &prev); err != nil {
			return "", refuse.Wrap(CodePlanPrevious, err, "plan %s names previous receipt %s, which cannot be read as a receipt", p.Plan.Digest, prevDesc.Digest)
		}
		if prev.ClusterUID != r.clusterUID {
			return "", refuse.New(CodePlanPrevious, "plan %s names receipt %s of cluster %s; the preflight is of cluster %s", p.Plan.Digest, prevDesc.Digest, prev.ClusterUID, r.clusterUID)
		}
		// The ceremony plans against a receipt it finds in the receipts index: a published one.
		got, ok, err := a.src.GetIndex(evidence.IndexReceipts, prev.Command.Digest)
		if err != nil {
			return "", err
		}
		if !ok || got != prevDesc {
			return "", refuse.New(CodePlanPrevious, "plan %s names receipt %s, which the receipts index does not name under its apply command %s", p.Plan.Digest, prevDesc.Digest, prev.Command.Digest)
		}
		derived, err := plan.Compute(a.src, prevDesc, &prev, r.lockResult, r.manifest, r.target)
		if err != nil {
			return "", err
		}
		want, err := evidence.MarshalRecord(derived)
		if err != nil {
			return "", err
		}
		if !bytes.Equal(have, want) {
			return "", refuse.New(CodePlanMismatch, "plan %s differs from the plan re-derived from receipt %s and this preflight's lock in: %s",
				p.Plan.Digest, prevDesc.Digest, strings.Join(differingMembers(have, want), ", "))
		}
		return fmt.Sprintf("plan %s re-derived against receipt %s (release %s): %d added, %d changed, %d unchanged, %d left behind, %d image and %d annotation moves",
			p.Plan.Digest, prevDesc.Digest, derived.PreviousRelease, len(derived.Added), len(derived.Changed), derived.Unchanged, len(derived.Left), len(derived.Images), len(derived.Annotations)), nil
	})
}

// differingMembers names the top-level members in which two plan records differ.
func differingMembers(a, b []byte) []string {
	var ma, mb map[string]json.RawMessage
	if json.Unmarshal(a, &ma) != nil || json.Unmarshal(b, &mb) != nil {
		return []string{"(the record)"}
	}
	var out []string
	for k, v := range ma {
		if w, ok := mb[k]; !ok || !bytes.Equal(v, w) {
			out = append(out, k)
		}
	}
	for k := range mb {
		if _, ok := ma[k]; !ok {
			out = append(out, k)
		}
	}
	slices.Sort(out)
	return out
}
