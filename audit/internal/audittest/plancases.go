package audittest

import (
	"github.com/qinglong/ql3/audit"
	"github.com/qinglong/ql3/evidence"
	"github.com/qinglong/ql3/evidence/lock"
	"github.com/qinglong/ql3/verdict/plan"
)

// forgerSource reads what the forger's store holds, for plan.Compute.
type forgerSource struct{ f *Forger }

func (s forgerSource) GetDescriptor(d evidence.Descriptor) ([]byte, error) {
	return s.f.Read(d.Digest), nil
}

// TruePlan is the plan the ceremony makes for the recovered ceremony's preflight against prev, a
// receipt of the straight ceremony's release in f's store (the straight receipt, or a forgery of it).
func TruePlan(f *Forger, fx *Fixture, prev evidence.Descriptor) *evidence.Plan {
	f.t.Helper()
	pre := Rec[evidence.Preflight](f, fx.Roots.RecoveredPreflight)
	l, err := lock.Verify(f.Read(pre.Manifest.Digest), f.Read(pre.LockReport.Digest))
	if err != nil {
		f.t.Fatalf("forger: verify the recovered preflight's lock: %v", err)
	}
	rc := Rec[evidence.Receipt](f, prev)
	p, err := plan.Compute(forgerSource{f}, prev, &rc, l, pre.Manifest, pre.Target)
	if err != nil {
		f.t.Fatalf("forger: plan: %v", err)
	}
	return p
}

// WithPlan stores p and attaches it to the recovered ceremony's preflight (whose finishedAt also
// moves, so that the preflight changes even where the ceremony stored this very plan), and
// returns root (the recovered receipt or preflight) rewritten.
func WithPlan(f *Forger, fx *Fixture, p *evidence.Plan, root evidence.Descriptor) evidence.Descriptor {
	f.t.Helper()
	b, err := evidence.MarshalRecord(p)
	if err != nil {
		f.t.Fatalf("forger: marshal plan: %v", err)
	}
	f.put(b)
	d := evidence.Descriptor{MediaType: evidence.MediaTypePlan, Digest: evidence.FromBytes(b), Size: int64(len(b))}
	Edit(f, fx.Roots.RecoveredPreflight, func(pr *evidence.Preflight) { pr.Plan = &d })
	return f.Rewrite(root)
}

// planEdit attaches the recovered preflight's true plan against the straight receipt, with edit
// applied, and audits root: the recovered receipt (the plan audited through its preflight) or,
// with preflight, that preflight.
func planEdit(preflight bool, edit func(*evidence.Plan)) func(*Forger, *Fixture) evidence.Descriptor {
	return func(f *Forger, fx *Fixture) evidence.Descriptor {
		p := TruePlan(f, fx, fx.Roots.Receipt)
		edit(p)
		root := fx.Roots.RecoveredReceipt
		if preflight {
			root = fx.Roots.RecoveredPreflight
		}
		return WithPlan(f, fx, p, root)
	}
}

// planCases: the plan a preflight stored must be the plan re-derived offline from the records it
// names (docs/issues.md#issue-9), through a receipt's preflight and with the preflight as the subject.
func planCases() []Rewrite {
	return []Rewrite{
		{"control: recovered receipt, its preflight with its true plan against the straight receipt", "", planEdit(false, func(*evidence.Plan) {})},
		{"control: recovered preflight with its true plan", "", planEdit(true, func(*evidence.Plan) {})},

		{"plan: an object left behind dropped", audit.CodePlanMismatch, planEdit(false, func(p *evidence.Plan) { p.Left = p.Left[1:] })},
		{"plan: an added object renamed", audit.CodePlanMismatch, planEdit(false, func(p *evidence.Plan) { p.Added[0].Name += "-x" })},
		{"plan: an image move from another image", audit.CodePlanMismatch, planEdit(false, func(p *evidence.Plan) { p.Images[0].From = p.Images[0].To })},
		{"plan: an annotation move dropped", audit.CodePlanMismatch, planEdit(false, func(p *evidence.Plan) { p.Annotations = p.Annotations[1:] })},
		{"plan: a change claimed", audit.CodePlanMismatch, planEdit(false, func(p *evidence.Plan) {
			p.Changed = append(p.Changed, evidence.PlanChange{Object: p.Added[0], UID: "u", Paths: []string{"data.x"}})
		})},
		{"plan: unchanged count", audit.CodePlanMismatch, planEdit(false, func(p *evidence.Plan) { p.Unchanged++ })},
		{"plan: deletes claimed", audit.CodePlanMismatch, planEdit(false, func(p *evidence.Plan) { p.Deletes = true })},
		{"plan: another previous release", audit.CodePlanMismatch, planEdit(false, func(p *evidence.Plan) { p.PreviousRelease = "3.4.0" })},
		{"plan: another target", audit.CodePlanMismatch, planEdit(false, func(p *evidence.Plan) { p.Target = otherDigest })},
		{"plan: the previous manifest as this release's", audit.CodePlanMismatch, planEdit(false, func(p *evidence.Plan) { p.Manifest = p.PreviousMan })},
		{"plan: preflight as the subject, left behind emptied", audit.CodePlanMismatch, planEdit(true, func(p *evidence.Plan) { p.Left = p.Left[:0] })},
		{"plan: previous names the straight preflight report", audit.CodePlanPrevious, func(f *Forger, fx *Fixture) evidence.Descriptor {
			p := TruePlan(f, fx, fx.Roots.Receipt)
			p.Previous = fx.Roots.Preflight
			return WithPlan(f, fx, p, fx.Roots.RecoveredReceipt)
		}},
		{"plan: previous receipt of another cluster", audit.CodePlanPrevious, func(f *Forger, fx *Fixture) evidence.Descriptor {
			Edit(f, fx.Roots.Receipt, func(r *evidence.Receipt) { r.ClusterUID = otherUID(r.ClusterUID) })
			other := f.Rewrite(fx.Roots.Receipt)
			return WithPlan(f, fx, TruePlan(f, fx, other), fx.Roots.RecoveredReceipt)
		}},
		{"plan: previous receipt never published", audit.CodePlanPrevious, func(f *Forger, fx *Fixture) evidence.Descriptor {
			Edit(f, fx.Roots.Receipt, func(r *evidence.Receipt) { r.FinishedAt = "2001-02-03T04:05:06Z" })
			unpublished := f.Rewrite(fx.Roots.Receipt)
			return WithPlan(f, fx, TruePlan(f, fx, unpublished), fx.Roots.RecoveredReceipt)
		}},
		// Finding 6 of issue 22: a receipt whose whole chain was moved to 2099 and published again
		// cannot be the previous receipt of a preflight whose execs ran in 2026.
		{"record time: the preflight's execs ran before the receipt its plan names finished", audit.CodeRecordTime, func(f *Forger, fx *Fixture) evidence.Descriptor {
			rc := Rec[evidence.Receipt](f, fx.Roots.Receipt)
			last := rc.Execs[len(rc.Execs)-1]
			Edit(f, last, func(e *evidence.Exec) { e.StartedAt, e.FinishedAt = "2099-01-01T00:00:00Z", "2099-01-01T00:00:01Z" })
			moved2099 := f.Rewrite(last)
			Edit(f, fx.Roots.Receipt, func(r *evidence.Receipt) { r.Execs[len(r.Execs)-1], r.FinishedAt = moved2099, "2099-01-01T00:00:02Z" })
			moved := f.Rewrite(fx.Roots.Receipt)
			f.Publish(moved)
			return WithPlan(f, fx, TruePlan(f, fx, moved), fx.Roots.RecoveredReceipt)
		}},
		{"plan: previous receipt with two objects swapped, published", plan.CodePreviousInvalid, func(f *Forger, fx *Fixture) evidence.Descriptor {
			p := TruePlan(f, fx, fx.Roots.Receipt)
			Edit(f, fx.Roots.Receipt, func(r *evidence.Receipt) { r.Objects[0], r.Objects[1] = r.Objects[1], r.Objects[0] })
			swapped := f.Rewrite(fx.Roots.Receipt)
			f.Publish(swapped)
			p.Previous = swapped
			return WithPlan(f, fx, p, fx.Roots.RecoveredReceipt)
		}},
	}
}
