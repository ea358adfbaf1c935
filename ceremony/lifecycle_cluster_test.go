package ceremony_test

import (
	"context"
	"strings"
	"testing"

	"github.com/opencontainers/go-digest"

	"github.com/qinglong/ql3/audit"
	"github.com/qinglong/ql3/ceremony"
	"github.com/qinglong/ql3/evidence"
	"github.com/qinglong/ql3/internal/testbed/ceremonytest"
	"github.com/qinglong/ql3/internal/testbed/testcluster"
	"github.com/qinglong/ql3/refuse"
	"github.com/qinglong/ql3/store"
)

// release342 is the synthetic release 3.4.2 in b's namespace and store.
func release342(t *testing.T, b *bed) *bed {
	t.Helper()
	b2 := &bed{t: t, Release: ceremonytest.NewRelease(t, cluster, ceremonytest.ReleaseOptions{
		Namespace: b.Namespace, NamespaceMode: ceremonytest.EnsureNamespace, Store: b.Store, Release: "release-3.4.2"})}
	t.Cleanup(b2.check)
	return b2
}

// The upgrade 3.4.1 -> 3.4.2 and back, as a roll-forward, on the real cluster.
func TestUpgradeAndRollForward(t *testing.T) {
	testcluster.Need(t)
	b1 := newBed(t, true, nil)
	_, rc1, af1 := b1.mustApply()
	if res, err := b1.liveAudit(af1); err != nil || !res.OK {
		t.Fatalf("live audit of 3.4.1 before the upgrade: %v", err)
	}

	b2 := release342(t, b1)
	pre2, err := b2.preflight()
	if err != nil {
		t.Fatalf("preflight 3.4.2: %v\n%s", err, b2.out.String())
	}
	if pre2.Plan == "" {
		t.Fatal("the 3.4.2 preflight stored no plan")
	}
	ns := b1.Namespace
	for _, want := range []string{
		"plan: release 3.4.2 replaces 3.4.1 (receipt " + string(rc1.Receipt),
		"plan: add Service " + ns + "/qinglong-api\n",
		"plan: change ConfigMap " + ns + "/qinglong-config (uid ",
		"plan: image Deployment " + ns + "/qinglong-api spec.template.spec.containers[name=api].image: ghcr.io/qinglong/qinglong-api@sha256:3b7a624c",
		"plan: left behind Service " + ns + "/qinglong-web: release 3.4.2 lacks it; ql3 never deletes, so it stays in the cluster",
	} {
		if !strings.Contains(b2.out.String(), want) {
			t.Errorf("preflight output lacks %q:\n%s", want, b2.out.String())
		}
	}
	af2 := b2.applyFile(string(pre2.Preflight))
	rc2, err := b2.apply(af2)
	if err != nil {
		t.Fatalf("apply 3.4.2: %v", err)
	}
	// The offline audit re-derives the stored plan, of the preflight and through the receipt.
	b2.wantPlanAudited(pre2.Preflight, "plan", "1 added, 5 changed, 0 unchanged, 1 left behind")
	b2.wantPlanAudited(rc2.Receipt, "preflight.plan", "1 added, 5 changed, 0 unchanged, 1 left behind")

	// The cluster now runs 3.4.2: the live audit of 3.4.1 is refused, naming the 3.4.2 receipt,
	// before any kubectl run.
	if _, err := b1.liveAudit(af1); refuse.CodeOf(err) != ceremony.CodeLiveSuperseded ||
		!strings.Contains(err.Error(), "by receipt "+string(rc2.Receipt)+" of release 3.4.2") {
		t.Fatalf("live audit of the superseded 3.4.1: %v", err)
	}
	// Asked to, it compares anyway and reports drift, naming the objects and the manager that
	// moved them, ours, and the receipt that superseded it; no repair (that would roll back).
	res, err := ceremony.LiveAudit(context.Background(), ceremony.Options{CommandFile: af1, Progress: &b1.out, AllowSuperseded: true})
	if refuse.CodeOf(err) != ceremony.CodeLiveDrift || res == nil {
		t.Fatalf("live audit of 3.4.1 after the upgrade: %v", err)
	}
	if res.SupersededBy == nil || res.SupersededBy.Receipt != rc2.Receipt || res.Repair != nil {
		t.Fatalf("superseded %+v, repair %+v", res.SupersededBy, res.Repair)
	}
	nc := notConverged(res)
	for _, name := range []string{"ConfigMap/qinglong-config", "Deployment/qinglong-api", "Deployment/qinglong-scheduler", "Deployment/qinglong-runner", "Deployment/qinglong-web"} {
		v, ok := nc[name]
		if !ok || !strings.Contains(v.Manager, evidence.FieldManager) {
			t.Errorf("%s: verdict %+v, want drift owned by %s", name, v, evidence.FieldManager)
		}
	}
	if v := nc["Deployment/qinglong-api"]; v.Verdict != evidence.VerdictImageDiffers {
		t.Errorf("qinglong-api verdict %s", v.Verdict)
	}
	if len(nc) != 5 {
		t.Errorf("%d objects drifted, want 5 (the Service qinglong-web is left behind, still 3.4.1's): %+v", len(nc), nc)
	}
	b1.wantAudited(res.Report)
	if res, err := b2.liveAudit(af2); err != nil || !res.OK {
		t.Fatalf("live audit of 3.4.2: %v", err)
	} else {
		b2.wantAudited(res.Report)
	}

	// Rerunning the 3.4.1 apply command answers offline, and says it is superseded.
	b1.out.Reset()
	again, err := b1.apply(af1)
	if err != nil || !again.Offline || again.Receipt != rc1.Receipt {
		t.Fatalf("rerun: %+v %v", again, err)
	}
	if again.SupersededBy == nil || again.SupersededBy.Receipt != rc2.Receipt || again.SupersededBy.Release != "3.4.2" || again.Release != "3.4.1" || again.FinishedAt == "" {
		t.Fatalf("rerun does not say it is superseded: %+v", again)
	}
	for _, want := range []string{
		"offline: returned the stored receipt " + string(rc1.Receipt) + " of release 3.4.1",
		"the cluster was not contacted",
		"offline: SUPERSEDED by receipt " + string(rc2.Receipt) + " of release 3.4.2",
		"to re-assert release 3.4.1, roll forward: run a new preflight of its lock",
	} {
		if !strings.Contains(b1.out.String(), want) {
			t.Errorf("rerun output lacks %q:\n%s", want, b1.out.String())
		}
	}

	// The roll-back is a roll-forward: a new preflight of the 3.4.1 lock and its apply.
	pre3, err := b1.preflight()
	if err != nil {
		t.Fatalf("preflight 3.4.1 again: %v", err)
	}
	if !strings.Contains(b1.out.String(), "plan: left behind Service "+ns+"/qinglong-api") {
		t.Errorf("roll-forward plan does not name the Service 3.4.2 added:\n%s", b1.out.String())
	}
	af3 := b1.WriteCommand("apply-rollforward.json", evidence.CommandApply, string(pre3.Preflight))
	rc3, err := b1.apply(af3)
	if err != nil || rc3.Offline {
		t.Fatalf("roll-forward: %+v %v", rc3, err)
	}
	if res, err := b1.liveAudit(af3); err != nil || !res.OK {
		t.Fatalf("live audit after the roll-forward: %v", err)
	}
	// Now the 3.4.2 receipt is the superseded one.
	if again, err := ceremony.Apply(context.Background(), ceremony.Options{CommandFile: af2}); err != nil || again.SupersededBy == nil || again.SupersededBy.Receipt != rc3.Receipt {
		t.Fatalf("3.4.2 rerun after the roll-forward: %+v %v", again, err)
	}
}

// wantPlanAudited audits root offline and requires its plan check (name) to have passed, re-deriving
// a plan that says what.
func (b *bed) wantPlanAudited(root digest.Digest, name, what string) {
	b.t.Helper()
	st, err := store.Open(b.Store)
	if err != nil {
		b.t.Fatal(err)
	}
	ar, err := audit.Audit(st, root)
	if err != nil || ar.Err() != nil {
		b.t.Fatalf("audit of %s: %v %v", root, err, ar.Err())
	}
	for _, c := range ar.Checks {
		if c.Name == name {
			if !c.OK || !strings.Contains(c.Detail, what) {
				b.t.Fatalf("audit of %s: check %s %+v, want a re-derived plan of %s", root, name, c, what)
			}
			return
		}
	}
	b.t.Fatalf("audit of %s ran no %s check", root, name)
}
