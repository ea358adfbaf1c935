package ceremony_test

import (
	"bytes"
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/qinglong/ql3/ceremony"
	"github.com/qinglong/ql3/evidence"
	"github.com/qinglong/ql3/history"
	"github.com/qinglong/ql3/internal/testbed/testcluster"
	"github.com/qinglong/ql3/refuse"
	"github.com/qinglong/ql3/store"
)

// denyRelease installs a real ValidatingAdmissionPolicy that denies, in namespace ns, every
// create or update of the Deployment qinglong-web (and of the probe ConfigMap vap-probe) that
// carries release annotation 3.4.2, except a dry-run: the ceremony's dry-runs pass, and the
// server-side apply itself is refused for that one object. It waits until the API server enforces
// it (the probe is refused) and removes it when the test ends.
func denyRelease(t *testing.T, ns string) {
	t.Helper()
	name := "ql3-deny-" + ns
	policy := fmt.Sprintf(`apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingAdmissionPolicy
metadata:
  name: %[1]s
spec:
  failurePolicy: Fail
  matchConstraints:
    namespaceSelector:
      matchLabels:
        kubernetes.io/metadata.name: %[2]s
    resourceRules:
      - apiGroups: ["apps"]
        apiVersions: ["v1"]
        operations: ["CREATE", "UPDATE"]
        resources: ["deployments"]
      - apiGroups: [""]
        apiVersions: ["v1"]
        operations: ["CREATE", "UPDATE"]
        resources: ["configmaps"]
  validations:
    - expression: >-
        request.dryRun == true ||
        !(object.metadata.name in ['qinglong-web', 'vap-probe']) ||
        !has(object.metadata.annotations) ||
        !('qinglong.io/release-version' in object.metadata.annotations) ||
        object.metadata.annotations['qinglong.io/release-version'] != '3.4.2'
      message: "release 3.4.2 of this object is held back by policy"
---
apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingAdmissionPolicyBinding
metadata:
  name: %[1]s
spec:
  policyName: %[1]s
  validationActions: ["Deny"]
`, name, ns)
	kubectl(t, []byte(policy), "apply", "-f=-")
	t.Cleanup(func() {
		_, _, _ = cluster.Kubectl(context.Background(), nil, "delete", "validatingadmissionpolicybinding,validatingadmissionpolicy", name)
	})
	probe := fmt.Sprintf("apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: vap-probe\n  namespace: %s\n  annotations:\n    qinglong.io/release-version: \"3.4.2\"\n", ns)
	for i := 0; ; i++ {
		_, stderr, err := cluster.Kubectl(context.Background(), []byte(probe), "apply", "-f=-")
		if err != nil && bytes.Contains(stderr, []byte("held back by policy")) {
			return
		}
		if err == nil {
			_, _, _ = cluster.Kubectl(context.Background(), nil, "delete", "-n", ns, "configmap/vap-probe")
		}
		if i == 600 {
			t.Fatalf("the ValidatingAdmissionPolicy is not enforced: %v %s", err, stderr)
		}
		kubectl(t, nil, "get", "--raw=/readyz") // paces the loop on the API server, not on a clock
	}
}

// A genuine partial apply: a real admission policy refuses one object of the 3.4.2 apply after the
// others changed. The live audit says which object is on which release; the roll-forward with the
// previous lock converges; history tells the story in order.
func TestPartialApplyRollForward(t *testing.T) {
	testcluster.Need(t)
	b1 := newBed(t, true, nil)
	_, rc1, af1 := b1.mustApply()
	denyRelease(t, b1.Namespace)

	b2 := release342(t, b1)
	pre2, err := b2.preflight()
	if err != nil {
		t.Fatalf("preflight 3.4.2 (the policy lets dry-runs pass): %v\n%s", err, b2.out.String())
	}
	af2 := b2.applyFile(string(pre2.Preflight))
	if _, err := b2.apply(af2); refuse.CodeOf(err) != ceremony.CodeApplyFailed {
		t.Fatalf("apply 3.4.2 under the policy: code %q, want %s (%v)", refuse.CodeOf(err), ceremony.CodeApplyFailed, err)
	}
	if b2.Count(evidence.IndexIntents) != 2 || b2.Count(evidence.IndexReceipts) != 1 {
		t.Fatalf("%d intents, %d receipts: want the 3.4.2 intent without receipt", b2.Count(evidence.IndexIntents), b2.Count(evidence.IndexReceipts))
	}

	// The live audit of the 3.4.1 receipt says exactly which objects are on which release.
	res, err := b1.liveAudit(af1)
	if refuse.CodeOf(err) != ceremony.CodeLiveDrift {
		t.Fatalf("live audit after the partial apply: %v", err)
	}
	got := map[string]string{}
	for _, v := range res.Verdicts {
		got[v.Kind+"/"+v.Name] = v.Verdict
	}
	want := map[string]string{
		"ConfigMap/qinglong-config":     evidence.VerdictFieldDiffers,
		"Deployment/qinglong-api":       evidence.VerdictImageDiffers,
		"Deployment/qinglong-scheduler": evidence.VerdictImageDiffers,
		"Deployment/qinglong-runner":    evidence.VerdictImageDiffers,
		"Deployment/qinglong-web":       evidence.VerdictConverged, // refused: still 3.4.1
		"Service/qinglong-web":          evidence.VerdictConverged,
	}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("verdicts after the partial apply:\n%v\nwant\n%v", got, want)
	}
	b1.wantAudited(res.Report)

	// Roll forward with the previous lock: a new preflight of 3.4.1 and its apply.
	pre3, err := b1.preflight()
	if err != nil {
		t.Fatalf("preflight of the previous lock: %v", err)
	}
	af3 := b1.WriteCommand("apply-rollforward.json", evidence.CommandApply, string(pre3.Preflight))
	rc3, err := b1.apply(af3)
	if err != nil {
		t.Fatalf("roll-forward apply: %v", err)
	}
	final, err := b1.liveAudit(af3)
	if err != nil || !final.OK {
		t.Fatalf("live audit after the roll-forward: %v", err)
	}
	b1.wantAudited(final.Report)

	// history shows the whole story, newest first.
	st, err := store.Open(b1.Store)
	if err != nil {
		t.Fatal(err)
	}
	h, err := history.History(st, history.Filter{Cluster: cluster.KubeSystemUID})
	if err != nil {
		t.Fatal(err)
	}
	var story []string
	for i := len(h.Entries) - 1; i >= 0; i-- {
		e := h.Entries[i]
		story = append(story, strings.TrimSpace(e.Kind+" "+e.Release+" "+e.Verdict))
	}
	wantStory := []string{
		"preflight 3.4.1", "receipt 3.4.1",
		"preflight 3.4.2", "unfinished-apply 3.4.2 may be partial",
		"live-audit 3.4.1 drift 4/6",
		"preflight 3.4.1", "receipt 3.4.1", "live-audit 3.4.1 converged",
	}
	if strings.Join(story, "\n") != strings.Join(wantStory, "\n") {
		t.Fatalf("history, oldest first:\n%s\nwant:\n%s", strings.Join(story, "\n"), strings.Join(wantStory, "\n"))
	}
	if h.Entries[1].Digest != rc3.Receipt || h.Entries[len(h.Entries)-2].Digest != rc1.Receipt {
		t.Fatalf("history digests: %+v", h.Entries)
	}
	var text bytes.Buffer
	_ = h.WriteText(&text)
	b1.out.Write(text.Bytes())
}
