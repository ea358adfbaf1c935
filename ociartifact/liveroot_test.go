package ociartifact_test

import (
	"path/filepath"

	"github.com/opencontainers/go-digest"
	"testing"

	"github.com/qinglong/ql3/evidence"
	"github.com/qinglong/ql3/internal/testbed/ocitest"
	"github.com/qinglong/ql3/ociartifact"
	"github.com/qinglong/ql3/store"
)

// liveAuditOf publishes in s a live-audit report of the receipt rc, made of the receipt's own
// records (a report of the schema's shape; its verdicts are the live audit's, not this test's).
func liveAuditOf(t testing.TB, s *store.Store, rc evidence.Descriptor) evidence.Descriptor {
	t.Helper()
	b, err := s.GetDescriptor(rc)
	if err != nil {
		t.Fatal(err)
	}
	var r evidence.Receipt
	if err := evidence.DecodeRecord(evidence.MediaTypeReceipt, b, &r); err != nil {
		t.Fatal(err)
	}
	la := evidence.LiveAudit{Schema: evidence.SchemaLiveAudit, Command: r.Command, Receipt: rc, Target: r.Target,
		Inputs:     evidence.LiveAuditInputs{CommandFile: r.Inputs.CommandFile, Kubeconfig: r.Inputs.Kubeconfig, Kubectl: r.Inputs.Kubectl},
		Kubeconfig: r.Kubeconfig, Manifest: r.Manifest, LockReport: r.LockReport, Lock: r.Lock, KubectlDigest: r.KubectlDigest,
		ClusterUID: r.ClusterUID, FieldManager: r.FieldManager, Execs: []evidence.Descriptor{}, Verdicts: []evidence.LiveVerdict{},
		Converged: true, NetworkAccess: true, StartedAt: r.FinishedAt, FinishedAt: r.FinishedAt}
	d, _, err := s.PutRecord(evidence.MediaTypeLiveAudit, la)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.PutIndex(evidence.IndexLiveAudits, d.Digest, d); err != nil {
		t.Fatal(err)
	}
	return d
}

// A live-audit report is a root of its own (it is a publication, with its own leaf): its
// artifact carries its closure, the audited receipt's included, and a copy of it publishes the
// report and the receipt's entries, as a pull writes them.
func TestLiveAuditRoot(t *testing.T) {
	s, rc := ocitest.Receipt1000(t)
	la := liveAuditOf(t, s, rc)
	c, err := ociartifact.Collect(s, la.Digest, nil)
	if err != nil {
		t.Fatal(err)
	}
	if c.Root.Kind != ociartifact.KindLiveAudit || c.Closure[0] != la {
		t.Fatalf("root %+v, closure starts at %v", c.Root, c.Closure[0])
	}
	a, err := ociartifact.ParseManifest(c.Manifest)
	if err != nil {
		t.Fatal(err)
	}
	if a.Annotations[ociartifact.AnnotationKind] != "live-audit" {
		t.Fatalf("kind annotation %q", a.Annotations[ociartifact.AnnotationKind])
	}
	root, err := ociartifact.CheckClosure(a, func(d digest.Digest) ([]byte, bool, error) {
		b, ok := c.Blobs[d]
		return b, ok, nil
	})
	if err != nil {
		t.Fatal(err)
	}
	var kinds []string
	for _, e := range root.Index {
		kinds = append(kinds, e.Kind)
	}
	want := []string{evidence.IndexPreflights, evidence.IndexIntents, evidence.IndexReceipts, evidence.IndexLiveAudits}
	if len(kinds) != len(want) || root.Index[2].Descriptor != rc || root.Index[3].Descriptor != la {
		t.Fatalf("entries %v (%+v), want %v", kinds, root.Index, want)
	}
	for i := range want {
		if kinds[i] != want[i] {
			t.Fatalf("entries %v, want %v", kinds, want)
		}
	}
	dir := filepath.Join(t.TempDir(), "layout")
	if _, err := ociartifact.Export(c, dir, ""); err != nil {
		t.Fatal(err)
	}
	l, err := ociartifact.OpenLayout(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	rep, err := l.Verify()
	if err != nil || !rep.OK() || len(rep.LiveAudits) != 1 || len(rep.Receipts) != 1 || len(rep.Preflights) != 1 {
		t.Fatalf("layout verify: %v %+v", err, rep)
	}
	for _, e := range root.Index {
		d, ok, err := l.GetIndex(e.Kind, e.Key)
		if err != nil || !ok || d != e.Descriptor {
			t.Fatalf("layout index %s %s: %v %v %v", e.Kind, e.Key, d, ok, err)
		}
	}
}
