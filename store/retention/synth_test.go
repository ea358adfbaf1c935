package retention_test

import (
	"fmt"
	"path/filepath"
	"testing"
	"time"

	"github.com/opencontainers/go-digest"

	"github.com/qinglong/ql3/evidence"
	"github.com/qinglong/ql3/store"
)

// The synth below is history's test fixture (history/history_test.go): records of the
// ceremony's shapes written straight into a store, which is all retention reads.

// synth writes records of the ceremony's shapes straight into a store. History reads only what
// the index names and the records' own fields, so synthetic records of the right shapes stand for
// real ones here; the real-cluster tests of package ceremony read real stores.
type synth struct {
	t   testing.TB
	st  *store.Store
	n   int
	t0  time.Time
	pre map[string]evidence.Descriptor
	// Set by a test before the next record: the receipt the next preflight's plan names (zero for
	// none), the namespace of the next receipt's object ("" for "ns"), and a finishedAt the next
	// receipt claims instead of its minute ("" for none).
	planPrev  evidence.Descriptor
	namespace string
	claim     string
}

func newSynth(t testing.TB) *synth {
	t.Helper()
	dir, err := filepath.EvalSymlinks(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	st, err := store.Init(filepath.Join(dir, "store"))
	if err != nil {
		t.Fatal(err)
	}
	return &synth{t: t, st: st, t0: time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC), pre: map[string]evidence.Descriptor{}}
}

func (s *synth) put(mt string, v any) evidence.Descriptor {
	s.t.Helper()
	d, _, err := s.st.PutRecord(mt, v)
	if err != nil {
		s.t.Fatal(err)
	}
	return d
}

func (s *synth) blob(mt, content string) evidence.Descriptor {
	s.t.Helper()
	d, err := s.st.PutBlob(mt, []byte(content))
	if err != nil {
		s.t.Fatal(err)
	}
	return d
}

func (s *synth) at(minutes int) string {
	return s.t0.Add(time.Duration(minutes) * time.Minute).Format(time.RFC3339Nano)
}

// command stores a distinct command record of cluster and returns it.
func (s *synth) command(kind, cluster string) evidence.Descriptor {
	s.n++
	d := digest.FromString(fmt.Sprint("pin", s.n))
	c := evidence.Command{Schema: evidence.SchemaCommand, Command: kind, Store: s.st.Root(),
		Manifest: evidence.FileRef{Path: "/m", Digest: d}, LockReport: evidence.FileRef{Path: "/r", Digest: d},
		Kubeconfig: evidence.KubeconfigRef{Path: "/k", Digest: d, Context: "ctx-" + cluster}, Kubectl: evidence.FileRef{Path: "/kubectl", Digest: d},
		ExpectedClusterUID: cluster, FieldManager: evidence.FieldManager}
	if kind == evidence.CommandApply {
		c.Preflight = &d
	}
	if kind == evidence.CommandLiveAudit {
		c.Receipt = &d
	}
	return s.put(evidence.MediaTypeCommand, c)
}

func lockOf(release string) evidence.LockBinding {
	d := digest.FromString(release)
	return evidence.LockBinding{ReportDigest: d, ManifestDigest: d, CatalogDigest: d, CatalogCommit: "c0ffee" + release, ReleaseSet: d, ReleaseVersion: release}
}

func (s *synth) preflight(release, cluster string, minute int) evidence.Descriptor {
	x := s.blob(evidence.MediaTypeStdout, fmt.Sprint("x", s.n))
	p := evidence.Preflight{Schema: evidence.SchemaPreflight, Command: s.command(evidence.CommandPreflight, cluster), Target: x.Digest,
		Inputs: evidence.Inputs{CommandFile: x, Manifest: x, LockReport: x, Kubeconfig: x, Kubectl: x}, Kubeconfig: x, Manifest: x, LockReport: x,
		Lock: lockOf(release), ClusterUID: cluster, FieldManager: evidence.FieldManager, Execs: []evidence.Descriptor{x, x},
		NetworkAccess: true, StartedAt: s.at(minute), FinishedAt: s.at(minute)}
	if s.planPrev.Digest != "" {
		pl := evidence.Plan{Schema: evidence.SchemaPlan, Release: release, Previous: s.planPrev, PreviousRelease: "prev", PreviousAt: s.at(0),
			PreviousMan: x, ClusterUID: cluster, Manifest: x, Target: x.Digest, Added: []evidence.PlanObject{}, Changed: []evidence.PlanChange{},
			Left: []evidence.PlanObject{}, Images: []evidence.PlanMove{}, Annotations: []evidence.PlanMove{}}
		pd := s.put(evidence.MediaTypePlan, pl)
		p.Plan = &pd
		s.planPrev = evidence.Descriptor{}
	}
	d := s.put(evidence.MediaTypePreflight, p)
	if err := s.st.PutIndex(evidence.IndexPreflights, d.Digest, d); err != nil {
		s.t.Fatal(err)
	}
	s.pre[release+cluster] = d
	return d
}

// apply stores an intent at minute and, when done, the receipt a minute later.
func (s *synth) apply(release, cluster string, minute int, done, recovered bool) (intent, receipt evidence.Descriptor) {
	pre := s.pre[release+cluster]
	cmd := s.command(evidence.CommandApply, cluster)
	x := s.blob(evidence.MediaTypeStdout, fmt.Sprint("x", s.n))
	in := evidence.Intent{Schema: evidence.SchemaIntent, Command: cmd, Preflight: pre, Target: x.Digest, ClusterUID: cluster,
		Execs: []evidence.Descriptor{x, x}, CreatedAt: s.at(minute)}
	intent = s.put(evidence.MediaTypeIntent, in)
	if err := s.st.PutIndex(evidence.IndexIntents, cmd.Digest, intent); err != nil {
		s.t.Fatal(err)
	}
	if !done {
		return intent, evidence.Descriptor{}
	}
	rc := evidence.Receipt{Schema: evidence.SchemaReceipt, Command: cmd, Preflight: pre, Intent: intent, Recovered: recovered, Target: x.Digest,
		Inputs: evidence.Inputs{CommandFile: x, Manifest: x, LockReport: x, Kubeconfig: x, Kubectl: x}, Kubeconfig: x, Manifest: x, LockReport: x,
		Lock: lockOf(release), KubeconfigDigest: x.Digest, KubectlDigest: x.Digest, ClusterUID: cluster, FieldManager: evidence.FieldManager,
		Execs: []evidence.Descriptor{x}, Objects: []evidence.LiveObject{{APIVersion: "v1", Kind: "ConfigMap", Namespace: "ns", Name: "cm", UID: "uid-" + release, ResourceVersion: "7"}},
		NetworkAccess: true, KubernetesMutation: true, StartedAt: s.at(minute), FinishedAt: s.at(minute + 1)}
	if s.namespace != "" {
		rc.Objects[0].Namespace, s.namespace = s.namespace, ""
	}
	if s.claim != "" {
		rc.FinishedAt, s.claim = s.claim, ""
	}
	receipt = s.put(evidence.MediaTypeReceipt, rc)
	if err := s.st.PutIndex(evidence.IndexReceipts, cmd.Digest, receipt); err != nil {
		s.t.Fatal(err)
	}
	return intent, receipt
}

func (s *synth) liveAudit(release, cluster string, receipt evidence.Descriptor, minute int, converged bool) evidence.Descriptor {
	x := s.blob(evidence.MediaTypeStdout, fmt.Sprint("x", s.n))
	v := evidence.LiveVerdict{APIVersion: "v1", Kind: "ConfigMap", Namespace: "ns", Name: "cm", UID: "u", ResourceVersion: "8", ReceiptUID: "u", Verdict: evidence.VerdictConverged}
	if !converged {
		v.Verdict, v.Path, v.Manager, v.Live, v.Expected = evidence.VerdictFieldDiffers, "data.a", "intruder (Apply)", `"x"`, `"y"`
	}
	la := evidence.LiveAudit{Schema: evidence.SchemaLiveAudit, Command: s.command(evidence.CommandLiveAudit, cluster), Receipt: receipt,
		Target: x.Digest, Inputs: evidence.LiveAuditInputs{CommandFile: x, Kubeconfig: x, Kubectl: x}, Kubeconfig: x, Manifest: x, LockReport: x,
		Lock: lockOf(release), KubectlDigest: x.Digest, ClusterUID: cluster, FieldManager: evidence.FieldManager, Execs: []evidence.Descriptor{x, x, x},
		Verdicts: []evidence.LiveVerdict{v}, Converged: converged, NetworkAccess: true, StartedAt: s.at(minute), FinishedAt: s.at(minute)}
	d := s.put(evidence.MediaTypeLiveAudit, la)
	if err := s.st.PutIndex(evidence.IndexLiveAudits, d.Digest, d); err != nil {
		s.t.Fatal(err)
	}
	return d
}
