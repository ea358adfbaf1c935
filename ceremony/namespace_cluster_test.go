package ceremony_test

import (
	"bytes"
	"testing"

	"github.com/qinglong/ql3/audit"
	"github.com/qinglong/ql3/ceremony"
	"github.com/qinglong/ql3/evidence"
	"github.com/qinglong/ql3/internal/testbed/testcluster"
	"github.com/qinglong/ql3/refuse"
	"github.com/qinglong/ql3/store"
	"github.com/qinglong/ql3/verdict/argv"
	"github.com/qinglong/ql3/verdict/convergence"
)

// TestNamespaceTerminating (issue 22, item 7): the release's namespace, which its manifest does
// not hold, is deleted. The test cluster runs no namespace controller, so the namespace's
// spec.finalizers (kubernetes) hold it Terminating with every object still in it, as a finalizer
// that never finishes holds one in any cluster. The live audit reads it (the namespace read), says
// not converged with CONVERGENCE_NAMESPACE_TERMINATING for every object, and the offline audit
// re-derives that from the stored read and catches a rewritten read; an apply of the release
// refuses with that code after its convergence read.
func TestNamespaceTerminating(t *testing.T) {
	testcluster.Need(t)
	b := newBed(t, true, nil)
	_, _, af := b.mustApply()
	kubectl(t, nil, "delete", "namespace", b.Namespace, "--wait=false")

	res, err := b.liveAudit(af)
	if got := refuse.CodeOf(err); got != ceremony.CodeLiveDrift {
		t.Fatalf("code %q, want %s (%v)\n%s", got, ceremony.CodeLiveDrift, err, b.out.String())
	}
	if res == nil || res.OK || res.Converged != 0 || res.Objects != 6 {
		t.Fatalf("result %+v", res)
	}
	for _, v := range res.Verdicts {
		if v.Verdict != evidence.VerdictUnreadable || v.Code != string(convergence.CodeNamespaceTerminating) || v.UID == "" {
			t.Fatalf("verdict %+v", v)
		}
	}
	la := b.liveReport(res.Report)
	if la.Judge != evidence.LiveJudgeNamespaces || len(la.Execs) != 4 || la.Converged {
		t.Fatalf("report judge %q, %d execs, converged %v", la.Judge, len(la.Execs), la.Converged)
	}
	nsExec := decodeExec(t, b, la.Execs[2])
	if nsExec.Step != evidence.StepNamespaces || nsExec.ExitCode != 0 ||
		!equal(argv.Operands(evidence.StepNamespaces, nsExec.Argv), []string{b.Namespace}) {
		t.Fatalf("namespace read %+v", nsExec)
	}
	if out := b.blob(nsExec.Stdout); !bytes.Contains(out, []byte(`"phase": "Terminating"`)) {
		t.Fatalf("the stored namespace read does not show Terminating:\n%s", out)
	}
	b.wantAudited(res.Report)

	// Tampering with the stored namespace read: the read rewritten to show the namespace Active
	// (a new stdout blob, exec record and report that names them) no longer yields the report's
	// verdicts; the report without the read lacks a step the objects require.
	st, err := store.Open(b.Store)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	active := bytes.ReplaceAll(b.blob(nsExec.Stdout), []byte(`"phase": "Terminating"`), []byte(`"phase": "Active"`))
	active = removeDeletionTimestamp(t, active)
	outD, err := st.PutBlob(evidence.MediaTypeStdout, active)
	if err != nil {
		t.Fatal(err)
	}
	forgedExec := nsExec
	forgedExec.Stdout, forgedExec.StdoutBytes = outD, outD.Size
	execD, _, err := st.PutRecord(evidence.MediaTypeExec, forgedExec)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name  string
		execs []evidence.Descriptor
		code  refuse.Code
	}{
		{"read rewritten to Active", []evidence.Descriptor{la.Execs[0], la.Execs[1], execD, la.Execs[3]}, audit.CodeLiveVerdicts},
		{"read dropped", []evidence.Descriptor{la.Execs[0], la.Execs[1], la.Execs[3]}, audit.CodeExecSequence},
	} {
		forged := b.liveReport(res.Report)
		forged.Execs = c.execs
		d, _, err := st.PutRecord(evidence.MediaTypeLiveAudit, forged)
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
		if got := refuse.CodeOf(ar.Err()); got != c.code {
			t.Fatalf("%s: code %q, want %s (%v)", c.name, got, c.code, ar.Err())
		}
	}

	// The apply's convergence proof: a new preflight and apply of the release (updates of the
	// existing objects are allowed in a Terminating namespace) refuse after the namespace read.
	pre, err := b.preflightFile(b.WriteCommand("preflight-2.json", evidence.CommandPreflight, ""))
	if err != nil {
		t.Fatalf("preflight: %v\n%s", err, b.out.String())
	}
	_, err = b.apply(b.WriteCommand("apply-2.json", evidence.CommandApply, string(pre.Preflight)))
	if got := refuse.CodeOf(err); got != convergence.CodeNamespaceTerminating {
		t.Fatalf("apply: code %q, want %s (%v)\n%s", got, convergence.CodeNamespaceTerminating, err, b.out.String())
	}
	if n := b.Count(evidence.IndexReceipts); n != 1 {
		t.Fatalf("%d receipts, want only the first apply's", n)
	}
}

func decodeExec(t testing.TB, b *bed, d evidence.Descriptor) evidence.Exec {
	t.Helper()
	var e evidence.Exec
	if err := evidence.DecodeRecord(evidence.MediaTypeExec, b.blob(d), &e); err != nil {
		t.Fatal(err)
	}
	return e
}

func equal(a, b []string) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// removeDeletionTimestamp drops the deletionTimestamp line kubectl prints in the namespace's
// metadata.
func removeDeletionTimestamp(t *testing.T, out []byte) []byte {
	t.Helper()
	var kept [][]byte
	for _, l := range bytes.Split(out, []byte("\n")) {
		if !bytes.Contains(l, []byte(`"deletionTimestamp"`)) {
			kept = append(kept, l)
		}
	}
	res := bytes.Join(kept, []byte("\n"))
	if bytes.Equal(res, out) {
		t.Fatal("the namespace read holds no deletionTimestamp")
	}
	return res
}
