package audit_test

import (
	"strings"
	"testing"

	"github.com/qinglong/ql3/audit"
	"github.com/qinglong/ql3/audit/internal/audittest"
	"github.com/qinglong/ql3/evidence"
	"github.com/qinglong/ql3/refuse"
	"github.com/qinglong/ql3/store"
	"github.com/qinglong/ql3/verdict/plan"
)

// TestPlanCheck: a preflight's stored plan is re-derived by its own check, as the subject
// ("plan") and through a receipt ("preflight.plan"); a plan naming a previous receipt that is not
// in the store fails the closure with the store's code and the plan check with
// AUDIT_PLAN_PREVIOUS; one whose previous manifest cannot be read fails with
// PLAN_PREVIOUS_INVALID.
func TestPlanCheck(t *testing.T) {
	fx := committed(t)
	vectors := []struct {
		name      string
		preflight bool // audit the recovered preflight, not its receipt
		forge     func(f *audittest.Forger) *evidence.Plan
		first     string // the report's code; "" for a pass
		check     string // the plan check's code; "" for a pass
	}{
		{"true plan through the receipt", false, func(f *audittest.Forger) *evidence.Plan {
			return audittest.TruePlan(f, fx, fx.Roots.Receipt)
		}, "", ""},
		{"true plan, preflight as the subject", true, func(f *audittest.Forger) *evidence.Plan {
			return audittest.TruePlan(f, fx, fx.Roots.Receipt)
		}, "", ""},
		{"previous receipt absent", false, func(f *audittest.Forger) *evidence.Plan {
			p := audittest.TruePlan(f, fx, fx.Roots.Receipt)
			p.Previous.Digest = evidence.FromBytes([]byte("absent"))
			return p
		}, string(store.CodeObjectNotFound), string(audit.CodePlanPrevious)},
		{"previous receipt's manifest not yaml, published", false, func(f *audittest.Forger) *evidence.Plan {
			p := audittest.TruePlan(f, fx, fx.Roots.Receipt)
			bad := []byte("apiVersion: v1\nkind: [\n")
			md := f.Replace(audittest.Rec[evidence.Receipt](f, fx.Roots.Receipt).Manifest.Digest, bad)
			r1 := f.Rewrite(fx.Roots.Receipt)
			// The receipt must name the new blob in its lock binding too.
			audittest.Edit(f, r1, func(r *evidence.Receipt) { r.Lock.ManifestDigest = md.Digest })
			prev := f.Rewrite(r1)
			f.Publish(prev)
			p.Previous = prev
			return p
		}, string(plan.CodePreviousInvalid), string(plan.CodePreviousInvalid)},
	}
	for _, v := range vectors {
		t.Run(v.name, func(t *testing.T) {
			t.Parallel()
			root := fx.Snap.Materialize(t)
			f := audittest.NewForger(t, root)
			subject := fx.Roots.RecoveredReceipt
			name := "preflight.plan"
			if v.preflight {
				subject, name = fx.Roots.RecoveredPreflight, "plan"
			}
			nr := audittest.WithPlan(f, fx, v.forge(f), subject)
			f.Publish(nr)
			rep := audittest.Audit(t, root, nr.Digest)
			if v.first == "" {
				audittest.WantPass(t, rep)
			} else {
				audittest.WantCode(t, rep, refuse.Code(v.first))
			}
			c, ran := audittest.CheckOf(rep, name)
			if !ran || string(c.Code) != v.check || c.OK != (v.check == "") {
				t.Fatalf("check %s: ran %v, %+v; want code %q", name, ran, c, v.check)
			}
			if v.check == "" && !strings.Contains(c.Detail, "6 added, 0 changed, 0 unchanged, 6 left behind") {
				t.Fatalf("check %s detail: %s", name, c.Detail)
			}
		})
	}
}
