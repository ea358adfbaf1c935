package audittest

import (
	"encoding/json"
	"testing"

	"github.com/opencontainers/go-digest"

	"github.com/qinglong/ql3/audit"
	"github.com/qinglong/ql3/evidence"
	"github.com/qinglong/ql3/refuse"
	"github.com/qinglong/ql3/store"
)

// Roots are the published records of a store holding two apply ceremonies of the same release
// into two namespaces: one ran straight through, the other was killed after the server-side apply
// and recovered from its intent on the rerun.
type Roots struct {
	Receipt, Preflight                   evidence.Descriptor // the ceremony that ran straight through
	RecoveredReceipt, RecoveredPreflight evidence.Descriptor // the ceremony that recovered
}

// FindRoots reads the roots from the store's index.
func FindRoots(t testing.TB, st *store.Store) Roots {
	t.Helper()
	rep, err := st.Verify()
	if err != nil || !rep.OK() {
		t.Fatalf("audittest: store verify: %v %+v", err, rep)
	}
	var r Roots
	for _, e := range rep.Receipts {
		rc := Decode[evidence.Receipt](t, st, e.Descriptor)
		if rc.Recovered {
			r.RecoveredReceipt, r.RecoveredPreflight = e.Descriptor, rc.Preflight
		} else {
			r.Receipt, r.Preflight = e.Descriptor, rc.Preflight
		}
	}
	if r.Receipt.Digest == "" || r.RecoveredReceipt.Digest == "" {
		t.Fatalf("audittest: the store lacks a straight or a recovered receipt: %+v", rep.Receipts)
	}
	return r
}

// Decode reads the record d names into a T, strictly.
func Decode[T any](t testing.TB, st *store.Store, d evidence.Descriptor) T {
	t.Helper()
	var v T
	b, err := st.GetDescriptor(d)
	if err != nil {
		t.Fatalf("audittest: read %s: %v", d.Digest, err)
	}
	if err := evidence.DecodeRecord(d.MediaType, b, &v); err != nil {
		t.Fatalf("audittest: decode %s: %v", d.Digest, err)
	}
	return v
}

// Audit opens the store at root afresh (as ql3 audit does), audits subject, and checks what every
// report must satisfy whatever its verdict.
func Audit(t testing.TB, root string, subject digest.Digest) *audit.Report {
	t.Helper()
	st, err := store.Open(root)
	if err != nil {
		t.Fatalf("audittest: open store: %v", err)
	}
	defer st.Close()
	rep, err := audit.Audit(st, subject)
	if err != nil {
		t.Fatalf("audittest: audit %s: %v", subject, err)
	}
	Invariants(t, rep)
	return rep
}

// Invariants are what every report states, passed or failed: it never claims a replay or
// atomicity, lists what it cannot check, is OK exactly when every check passed, and then carries
// no code; a failed report carries the first failed check's code, which its refusal carries too.
func Invariants(t testing.TB, rep *audit.Report) {
	t.Helper()
	if rep.Schema != audit.SchemaReport || rep.ExternalResultsReplayed || rep.CrossResourceAtomicity || len(rep.NotChecked) == 0 {
		t.Fatalf("report claims more than the evidence shows: %+v", rep)
	}
	var first *audit.Check
	for i := range rep.Checks {
		if !rep.Checks[i].OK && first == nil {
			first = &rep.Checks[i]
		}
	}
	switch {
	case rep.OK && (first != nil || rep.Code != "" || len(rep.Checks) == 0 || rep.Err() != nil):
		t.Fatalf("report OK with a failed check, a code, no checks or a refusal: %+v", rep)
	case !rep.OK && first == nil:
		t.Fatalf("report failed without a failed check: %+v", rep)
	case !rep.OK:
		want := first.Code
		if want == "" {
			want = audit.CodeFailed
		}
		if rep.Code != want || refuse.CodeOf(rep.Err()) != want {
			t.Fatalf("report code %s, refusal code %s, first failed check %s has %s", rep.Code, refuse.CodeOf(rep.Err()), first.Name, first.Code)
		}
	}
	if _, err := json.Marshal(rep); err != nil {
		t.Fatalf("report does not encode: %v", err)
	}
}

// WantPass fails the test unless rep passed.
func WantPass(t testing.TB, rep *audit.Report) {
	t.Helper()
	if !rep.OK {
		t.Fatalf("audit of %s %s failed: %v\n%s", rep.Kind, rep.Subject, rep.Err(), Failed(rep))
	}
}

// WantCode fails the test unless rep failed with code as its first finding.
func WantCode(t testing.TB, rep *audit.Report, code refuse.Code) {
	t.Helper()
	if rep.OK {
		t.Fatalf("audit of %s passed, want %s", rep.Subject, code)
	}
	if rep.Code != code {
		t.Fatalf("audit code %s, want %s\n%s", rep.Code, code, Failed(rep))
	}
}

// CheckOf returns the check named name, if the audit ran it.
func CheckOf(rep *audit.Report, name string) (audit.Check, bool) {
	for _, c := range rep.Checks {
		if c.Name == name {
			return c, true
		}
	}
	return audit.Check{}, false
}

// Failed renders the failed checks for a test message.
func Failed(rep *audit.Report) string {
	s := ""
	for _, c := range rep.Checks {
		if !c.OK {
			s += "  FAIL " + c.Name + ": " + string(c.Code) + ": " + c.Detail + "\n"
		}
	}
	return s
}
