package ceremony_test

import (
	"context"
	"encoding/json"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/opencontainers/go-digest"

	"github.com/qinglong/ql3/audit"
	"github.com/qinglong/ql3/ceremony"
	"github.com/qinglong/ql3/evidence"
	"github.com/qinglong/ql3/evidence/command"
	"github.com/qinglong/ql3/internal/stablefile"
	"github.com/qinglong/ql3/internal/testbed/testcluster"
	"github.com/qinglong/ql3/refuse"
	"github.com/qinglong/ql3/store"
	"github.com/qinglong/ql3/verdict/convergence"
)

// liveAudit runs the live audit of file and records what it printed.
func (b *bed) liveAudit(file string) (*ceremony.LiveAuditResult, error) {
	res, err := ceremony.LiveAudit(context.Background(), ceremony.Options{CommandFile: file, Progress: &b.out})
	if res != nil {
		res.WriteText(&b.out)
	}
	b.note(err)
	return res, err
}

// liveAuditFile writes the live-audit command of receipt.
func (b *bed) liveAuditFile(name string, receipt digest.Digest) string {
	b.Cmd["receipt"] = string(receipt)
	defer delete(b.Cmd, "receipt")
	return b.WriteCommand(name, evidence.CommandLiveAudit, "")
}

// liveReport reads the published live-audit report d.
func (b *bed) liveReport(d digest.Digest) evidence.LiveAudit {
	b.t.Helper()
	var la evidence.LiveAudit
	b.decodeRecord(d, evidence.MediaTypeLiveAudit, &la)
	return la
}

// decodeRecord reads the record d of media type mt from the bed's store into v.
func (b *bed) decodeRecord(d digest.Digest, mt string, v any) {
	b.t.Helper()
	st, err := store.Open(b.Store)
	if err != nil {
		b.t.Fatal(err)
	}
	defer st.Close()
	raw, err := st.Get(d)
	if err != nil {
		b.t.Fatal(err)
	}
	if err := evidence.DecodeRecord(mt, raw, v); err != nil {
		b.t.Fatal(err)
	}
}

// wantAudited asserts the offline audit passes on the live-audit report d.
func (b *bed) wantAudited(d digest.Digest) {
	b.t.Helper()
	st, err := store.Open(b.Store)
	if err != nil {
		b.t.Fatal(err)
	}
	ar, err := audit.Audit(st, d)
	if err != nil || ar.Err() != nil {
		b.t.Fatalf("audit of live-audit report %s: %v %v", d, err, ar.Err())
	}
	if ar.Kind != audit.KindLiveAudit {
		b.t.Fatalf("audit kind %s", ar.Kind)
	}
}

// notConverged returns the verdicts that are not converged, by object name.
func notConverged(res *ceremony.LiveAuditResult) map[string]evidence.LiveVerdict {
	m := map[string]evidence.LiveVerdict{}
	for _, v := range res.Verdicts {
		if v.Verdict != evidence.VerdictConverged {
			m[v.Kind+"/"+v.Name] = v
		}
	}
	return m
}

func TestLiveAuditConverged(t *testing.T) {
	testcluster.Need(t)
	b := newBed(t, true, nil)
	_, rc, af := b.mustApply()
	for _, file := range []string{af, b.liveAuditFile("live.json", rc.Receipt)} {
		res, err := b.liveAudit(file)
		if err != nil {
			t.Fatalf("live audit: %v\n%s", err, b.out.String())
		}
		if !res.OK || res.Converged != 6 || res.Objects != 6 || res.Receipt != rc.Receipt || res.Release != "3.4.1" {
			t.Fatalf("result %+v", res)
		}
		la := b.liveReport(res.Report)
		if !la.Converged || !la.NetworkAccess || la.KubernetesMutation || la.Receipt.Digest != rc.Receipt || len(la.Execs) != 4 || len(la.Verdicts) != 6 {
			t.Fatalf("report %+v", la)
		}
		b.wantAudited(res.Report)
	}
	if !strings.Contains(b.out.String(), ": 6 of 6 objects converged: converged\n") {
		t.Fatalf("summary line missing:\n%s", b.out.String())
	}
	if n := b.Count(evidence.IndexLiveAudits); n != 2 {
		t.Fatalf("%d live audits indexed, want 2", n)
	}
}

// drift applies a change by hand after the receipt and returns the live audit's result, which must
// be LIVE_DRIFT with its report published and passing the offline audit.
func drift(t *testing.T, change func(b *bed)) (*bed, *ceremony.LiveAuditResult) {
	t.Helper()
	b := newBed(t, true, nil)
	_, _, af := b.mustApply()
	change(b)
	res, err := b.liveAudit(af)
	if got := refuse.CodeOf(err); got != ceremony.CodeLiveDrift {
		t.Fatalf("code %q, want %s (%v)\n%s", got, ceremony.CodeLiveDrift, err, b.out.String())
	}
	if res == nil || res.OK || res.Report == "" {
		t.Fatalf("result %+v", res)
	}
	if la := b.liveReport(res.Report); la.Converged {
		t.Fatal("a drifted report claims converged")
	}
	b.wantAudited(res.Report)
	return b, res
}

func TestLiveAuditDriftForcedManager(t *testing.T) {
	testcluster.Need(t)
	b, res := drift(t, func(b *bed) {
		cm := "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: qinglong-config\n  namespace: " + b.Namespace + "\ndata:\n  QL_LOG_LEVEL: debug\n"
		kubectl(t, []byte(cm), "apply", "--server-side", "--field-manager=intruder", "--force-conflicts", "-f=-")
	})
	nc := notConverged(res)
	v, ok := nc["ConfigMap/qinglong-config"]
	if len(nc) != 1 || !ok || v.Verdict != evidence.VerdictFieldDiffers || v.Path != "data.QL_LOG_LEVEL" ||
		v.Live != `"debug"` || v.Expected != `"info"` || !strings.Contains(v.Manager, "intruder (Apply)") {
		t.Fatalf("verdicts %+v", nc)
	}
	if !strings.Contains(b.out.String(), "drift: ConfigMap "+b.Namespace+`/qinglong-config: field-differs at data.QL_LOG_LEVEL live "debug" expected "info" (manager intruder (Apply))`) {
		t.Fatalf("drift line missing:\n%s", b.out.String())
	}
}

func TestLiveAuditDriftAnnotationByHand(t *testing.T) {
	testcluster.Need(t)
	_, res := drift(t, func(b *bed) {
		kubectl(t, nil, "annotate", "-n", b.Namespace, "deployment/qinglong-api", "--overwrite", "qinglong.io/release-version=9.9.9")
	})
	nc := notConverged(res)
	v := nc["Deployment/qinglong-api"]
	if len(nc) != 1 || v.Verdict != evidence.VerdictAnnotationDiffers || v.Path != `metadata.annotations["qinglong.io/release-version"]` ||
		v.Live != `"9.9.9"` || v.Expected != `"3.4.1"` || !strings.Contains(v.Manager, "kubectl-annotate") {
		t.Fatalf("verdicts %+v", nc)
	}
}

func TestLiveAuditDriftDeleted(t *testing.T) {
	testcluster.Need(t)
	_, res := drift(t, func(b *bed) {
		kubectl(t, nil, "delete", "-n", b.Namespace, "service/qinglong-web")
	})
	nc := notConverged(res)
	v := nc["Service/qinglong-web"]
	if len(nc) != 1 || v.Verdict != evidence.VerdictMissing || v.UID != "" || v.ReceiptUID == "" {
		t.Fatalf("verdicts %+v", nc)
	}
}

func TestLiveAuditDriftRecreated(t *testing.T) {
	testcluster.Need(t)
	_, res := drift(t, func(b *bed) {
		live := kubectl(t, nil, "get", "-n", b.Namespace, "configmap/qinglong-config", "-o=json")
		var cm map[string]any
		if err := json.Unmarshal(live, &cm); err != nil {
			t.Fatal(err)
		}
		meta := cm["metadata"].(map[string]any)
		for _, k := range []string{"uid", "resourceVersion", "creationTimestamp", "managedFields"} {
			delete(meta, k)
		}
		again, _ := json.Marshal(cm)
		kubectl(t, nil, "delete", "-n", b.Namespace, "configmap/qinglong-config")
		kubectl(t, again, "create", "-f=-")
	})
	nc := notConverged(res)
	v := nc["ConfigMap/qinglong-config"]
	if len(nc) != 1 || v.Verdict != evidence.VerdictRecreated || v.UID == "" || v.UID == v.ReceiptUID {
		t.Fatalf("verdicts %+v", nc)
	}
}

func TestLiveAuditDriftSetImage(t *testing.T) {
	testcluster.Need(t)
	b, res := drift(t, func(b *bed) {
		kubectl(t, nil, "set", "image", "-n", b.Namespace, "deployment/qinglong-web", "web=ghcr.io/qinglong/qinglong-web:hand")
	})
	nc := notConverged(res)
	v := nc["Deployment/qinglong-web"]
	if len(nc) != 1 || v.Verdict != evidence.VerdictImageDiffers || v.Path != "spec.template.spec.containers[name=web].image" ||
		v.Live != `"ghcr.io/qinglong/qinglong-web:hand"` || !strings.HasPrefix(v.Expected, `"ghcr.io/qinglong/qinglong-web@sha256:`) ||
		!strings.Contains(v.Manager, "kubectl-set") {
		t.Fatalf("verdicts %+v", nc)
	}
	if !strings.Contains(b.out.String(), "5 of 6 objects converged: DRIFT (1 image-differs)") {
		t.Fatalf("summary missing:\n%s", b.out.String())
	}
}

// A live-audit report with a verdict flipped to converged, canonically rewritten with its digest
// chain (the index entry names the forged report), fails the offline audit with its code.
func TestLiveAuditTamperedVerdict(t *testing.T) {
	testcluster.Need(t)
	b, res := drift(t, func(b *bed) {
		kubectl(t, nil, "delete", "-n", b.Namespace, "service/qinglong-web")
	})
	st, err := store.Open(b.Store)
	if err != nil {
		t.Fatal(err)
	}
	la := b.liveReport(res.Report)
	for i := range la.Verdicts {
		if la.Verdicts[i].Verdict == evidence.VerdictMissing {
			v := &la.Verdicts[i]
			v.Verdict, v.UID, v.ResourceVersion, v.Detail = evidence.VerdictConverged, v.ReceiptUID, "1", ""
		}
	}
	la.Converged = true
	d, _, err := st.PutRecord(evidence.MediaTypeLiveAudit, la)
	if err != nil {
		t.Fatal(err)
	}
	if err := st.PutIndex(evidence.IndexLiveAudits, d.Digest, d); err != nil {
		t.Fatal(err)
	}
	ar, err := audit.Audit(st, d.Digest)
	if err != nil {
		t.Fatal(err)
	}
	if got := refuse.CodeOf(ar.Err()); got != audit.CodeLiveVerdicts {
		t.Fatalf("tampered report: code %q, want %s (%v)", got, audit.CodeLiveVerdicts, ar.Err())
	}
	b.forged = append(b.forged, d.Digest)

	// Finding 6 of issue 22: the report's own finishedAt moved to 2099 (published again) fails
	// the binding of its times to its exec records'.
	la = b.liveReport(res.Report)
	la.FinishedAt = "2099-01-01T00:00:00Z"
	d, _, err = st.PutRecord(evidence.MediaTypeLiveAudit, la)
	if err != nil {
		t.Fatal(err)
	}
	if err := st.PutIndex(evidence.IndexLiveAudits, d.Digest, d); err != nil {
		t.Fatal(err)
	}
	if ar, err = audit.Audit(st, d.Digest); err != nil {
		t.Fatal(err)
	}
	if got := refuse.CodeOf(ar.Err()); got != audit.CodeRecordTime {
		t.Fatalf("report finished in 2099: code %q, want %s (%v)", got, audit.CodeRecordTime, ar.Err())
	}
	b.forged = append(b.forged, d.Digest)
}

func TestLiveAuditBadInput(t *testing.T) {
	testcluster.Need(t)
	b := newBed(t, true, nil)
	_, rc, af := b.mustApply()
	before := b.Count(evidence.IndexLiveAudits)
	absent := digest.FromString("no such receipt")
	// An apply command without a receipt: the preflight's apply command of another bed.
	other := newBed(t, true, nil)
	pre, err := other.preflight()
	if err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		name string
		file func() string
		code refuse.Code
	}{
		{"absent receipt", func() string { return b.liveAuditFile("absent.json", absent) }, ceremony.CodeLiveReceiptNotFound},
		{"not a receipt", func() string {
			return b.liveAuditFile("notreceipt.json", b.readIndex(evidence.IndexPreflights))
		}, ceremony.CodeLiveReceiptNotFound},
		{"apply without receipt", func() string { return other.applyFile(string(pre.Preflight)) }, ceremony.CodeLiveReceiptNotFound},
		{"another target", func() string {
			// The receipt of b named from other's command (its own store holds no such object):
			// copy b's receipt digest into a command of b's store with another manifest pin.
			old := b.Field("manifest", "digest")
			defer b.Set("manifest", "digest", old)
			b.Set("manifest", "digest", string(digest.FromString("another manifest")))
			return b.liveAuditFile("othertarget.json", rc.Receipt)
		}, ceremony.CodeLiveReceiptMismatch},
		{"another cluster", func() string {
			old := b.Cmd["expectedClusterUid"]
			defer func() { b.Cmd["expectedClusterUid"] = old }()
			b.Cmd["expectedClusterUid"] = "00000000-0000-0000-0000-000000000000"
			return b.liveAuditFile("othercluster.json", rc.Receipt)
		}, ceremony.CodeLiveReceiptMismatch},
		{"preflight command", func() string { return b.WriteCommand("pre2.json", evidence.CommandPreflight, "") }, command.CodeCommandMismatch},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			res, err := b.liveAudit(c.file())
			if got := refuse.CodeOf(err); got != c.code || res != nil {
				t.Fatalf("code %q, want %q (%v)", got, c.code, err)
			}
		})
	}
	if n := b.Count(evidence.IndexLiveAudits); n != before {
		t.Fatalf("a refused live audit published: %d live audits, want %d", n, before)
	}
	if n := other.Count(evidence.IndexLiveAudits); n != 0 {
		t.Fatalf("a refused live audit published %d reports", n)
	}
	_ = af
}

// readIndex returns the key of the only entry of kind.
func (b *bed) readIndex(kind string) digest.Digest {
	b.t.Helper()
	st, err := store.Open(b.Store)
	if err != nil {
		b.t.Fatal(err)
	}
	es, err := st.ListIndex(kind)
	if err != nil || len(es) == 0 {
		b.t.Fatalf("index %s: %v", kind, err)
	}
	return es[0].Descriptor.Digest
}

// A live audit refused after a kubectl step publishes nothing, and still leaves the exec record of
// that step in the store (its evidence is written in a batch, made durable at the end of the run
// whatever the outcome).
func TestLiveAuditRefusedKeepsEvidence(t *testing.T) {
	testcluster.Need(t)
	b := newBed(t, true, nil)
	_, _, af := b.mustApply()
	if n := len(b.unreferencedExecs()); n != 0 {
		t.Fatalf("%d unreferenced exec records before the live audit", n)
	}
	fired := false
	defer ceremony.SetAfterStep(func(s string) {
		if s == evidence.StepIdentity && !fired {
			fired = true
			later := time.Now().Add(time.Hour)
			if err := os.Chtimes(af, later, later); err != nil {
				t.Error(err)
			}
		}
	})()
	_, err := b.liveAudit(af)
	if !fired || refuse.CodeOf(err) != stablefile.CodeChanged {
		t.Fatalf("fired %v, code %q, want %s (%v)", fired, refuse.CodeOf(err), stablefile.CodeChanged, err)
	}
	if n := b.Count(evidence.IndexLiveAudits); n != 0 {
		t.Fatalf("%d live audits indexed, want 0", n)
	}
	execs := b.unreferencedExecs()
	if len(execs) != 1 || execs[0].Step != evidence.StepIdentity || execs[0].ExitCode != 0 {
		t.Fatalf("unreferenced exec records %+v, want the live audit's identity read", execs)
	}
}

// TestLiveAuditReportOfAnotherReceipt: a live-audit report rewritten (canonically, and indexed)
// so that it no longer matches the receipt it names fails the offline audit's receipt binding
// with AUDIT_LIVE_RECEIPT: the report names a manifest the receipt does not bind, and, run from
// a live-audit command, names a receipt the command does not.
func TestLiveAuditReportOfAnotherReceipt(t *testing.T) {
	testcluster.Need(t)
	b := newBed(t, true, nil)
	pre, rc, af := b.mustApply()
	st, err := store.Open(b.Store)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	raw, err := st.Get(pre.Preflight)
	if err != nil {
		t.Fatal(err)
	}
	preSize := int64(len(raw)) // a descriptor of the right size: the store itself stays whole
	vectors := []struct {
		name  string                       // the forgery
		file  string                       // the live audit's command file
		edit  func(la *evidence.LiveAudit) // applied to the genuine report
		check string                       // the audit check that must refuse it
	}{
		{"another manifest than the receipt's", af, func(la *evidence.LiveAudit) { la.Manifest = la.LockReport }, "receipt"},
		{"another receipt than the command's", b.liveAuditFile("live.json", rc.Receipt), func(la *evidence.LiveAudit) {
			la.Receipt = evidence.Descriptor{MediaType: evidence.MediaTypeReceipt, Digest: pre.Preflight, Size: preSize}
		}, "command"},
	}
	for _, v := range vectors {
		res, err := b.liveAudit(v.file)
		if err != nil {
			t.Fatalf("%s: live audit: %v\n%s", v.name, err, b.out.String())
		}
		la := b.liveReport(res.Report)
		v.edit(&la)
		d, _, err := st.PutRecord(evidence.MediaTypeLiveAudit, la)
		if err != nil {
			t.Fatal(err)
		}
		if err := st.PutIndex(evidence.IndexLiveAudits, d.Digest, d); err != nil {
			t.Fatal(err)
		}
		b.forged = append(b.forged, d.Digest)
		ar, err := audit.Audit(st, d.Digest)
		if err != nil {
			t.Fatal(err)
		}
		found := false
		for _, c := range ar.Checks {
			found = found || c.Name == v.check && !c.OK && c.Code == audit.CodeLiveReceipt
		}
		if !found || ar.Err() == nil {
			t.Fatalf("%s: no %s finding on check %q: %+v", v.name, audit.CodeLiveReceipt, v.check, ar.Checks)
		}
	}
}

// Findings 8 and 14 of issue 22: fields another manager adds to a Deployment's pod template, which
// the release never sets (host namespaces, a hostPath volume of /, SYS_ADMIN, an AppArmor
// unconfined annotation), are each drift, named with their manager, security-relevant first; the
// live audit exits LIVE_DRIFT and its report passes the offline audit.
func TestLiveAuditDriftAddedByOther(t *testing.T) {
	testcluster.Need(t)
	b, res := drift(t, func(b *bed) {
		patch := "apiVersion: apps/v1\nkind: Deployment\nmetadata:\n  name: qinglong-api\n  namespace: " + b.Namespace + "\n" +
			"spec:\n  template:\n    metadata:\n      annotations:\n        container.apparmor.security.beta.kubernetes.io/api: unconfined\n" +
			"    spec:\n      hostPID: true\n      hostNetwork: true\n" +
			"      volumes:\n        - name: host\n          hostPath:\n            path: /\n" +
			"      containers:\n        - name: api\n          securityContext:\n            capabilities:\n              add: [SYS_ADMIN]\n"
		kubectl(t, []byte(patch), "apply", "--server-side", "--field-manager=intruder", "-f=-")
		kubectl(t, nil, "label", "-n", b.Namespace, "configmap/qinglong-config", "team=other")
	})
	nc := notConverged(res)
	v := nc["Deployment/qinglong-api"]
	if len(nc) != 2 || v.Verdict != evidence.VerdictAddedByOther || !strings.Contains(v.Manager, "intruder (Apply)") || v.Code != string(convergence.CodeAddedByOther) {
		t.Fatalf("verdicts %+v", nc)
	}
	if c := nc["ConfigMap/qinglong-config"]; c.Verdict != evidence.VerdictAddedByOther || c.Path != `metadata.labels.team` || !strings.Contains(c.Manager, "kubectl-label") {
		t.Fatalf("label verdict %+v", c)
	}
	want := map[string]string{
		"spec.template.spec.hostPID":                                                               "true",
		"spec.template.spec.hostNetwork":                                                           "true",
		"spec.template.spec.volumes[name=host]":                                                    `{"hostPath":{"path":"/","type":""},"name":"host"}`,
		"spec.template.spec.containers[name=api].securityContext.capabilities.add":                 `["SYS_ADMIN"]`,
		`spec.template.metadata.annotations["container.apparmor.security.beta.kubernetes.io/api"]`: `"unconfined"`,
	}
	security := 0
	for i, a := range res.Added {
		if a.Kind != "Deployment" {
			if a.Security || i < len(want) {
				t.Fatalf("addition %d %+v: not security-relevant, listed among them: %+v", i, a, res.Added)
			}
			continue
		}
		live, ok := want[a.Path]
		if !ok || !a.Security || a.Manager != "intruder (Apply)" || (live != "" && a.Live != live) {
			t.Errorf("addition %+v", a)
			continue
		}
		security++
		line := ceremony.AddedLine(a)
		if !strings.Contains(b.out.String(), line+"\n") {
			t.Errorf("drift line %q missing:\n%s", line, b.out.String())
		}
	}
	if security != len(want) {
		t.Fatalf("%d of %d security-relevant additions reported: %+v\n%s", security, len(want), res.Added, b.out.String())
	}
	if la := b.liveReport(res.Report); la.Judge != evidence.LiveJudgeNamespaces || len(la.Added) != len(res.Added) {
		t.Fatalf("report judge %q, %d additions", la.Judge, len(la.Added))
	}
	if !strings.Contains(b.out.String(), "4 of 6 objects converged: DRIFT (2 added-by-other)") {
		t.Fatalf("summary:\n%s", b.out.String())
	}
}
