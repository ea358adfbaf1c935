package retention_test

import (
	"bytes"
	"strings"
	"testing"

	"github.com/opencontainers/go-digest"

	"github.com/qinglong/ql3/audit"
	"github.com/qinglong/ql3/deploylog"
	"github.com/qinglong/ql3/evidence"
	"github.com/qinglong/ql3/history"
	"github.com/qinglong/ql3/refuse"
	"github.com/qinglong/ql3/store"
	"github.com/qinglong/ql3/store/retention"
)

const (
	c1 = "11111111-aaaa"
	c2 = "22222222-bbbb"
)

// fixture: cluster c1 runs release a in namespace team-a (a1, a2, a3, each superseding the one
// before) and release b in team-b (b1); cluster c2 runs c (c1, c2). a1 has a live audit; c2
// has an unfinished apply (an intent, no receipt); c1 has a preflight no apply used.
type fixture struct {
	s                          *synth
	a1, a2, a3, b1, cr1, cr2   evidence.Descriptor
	la1, unfinished, unapplied evidence.Descriptor
}

func newFixture(t *testing.T) *fixture {
	s := newSynth(t)
	if _, err := s.st.InitLog("example.com/ql3/retention"); err != nil {
		t.Fatal(err)
	}
	f := &fixture{s: s}
	s.preflight("a1", c1, 0)
	s.namespace = "team-a"
	_, f.a1 = s.apply("a1", c1, 1, true, false)
	f.la1 = s.liveAudit("a1", c1, f.a1, 3, true)
	f.unapplied = s.preflight("u1", c1, 5)
	s.preflight("b1", c1, 10)
	s.namespace = "team-b"
	_, f.b1 = s.apply("b1", c1, 11, true, false)
	s.planPrev = f.a1
	s.preflight("a2", c1, 20)
	s.namespace = "team-a"
	_, f.a2 = s.apply("a2", c1, 21, true, false)
	s.planPrev = f.a2
	s.preflight("a3", c1, 40)
	s.namespace = "team-a"
	_, f.a3 = s.apply("a3", c1, 41, true, false)
	s.preflight("c1", c2, 0)
	_, f.cr1 = s.apply("c1", c2, 1, true, false)
	s.planPrev = f.cr1
	s.preflight("c2", c2, 20)
	_, f.cr2 = s.apply("c2", c2, 21, true, false)
	s.preflight("c3", c2, 50)
	f.unfinished, _ = s.apply("c3", c2, 51, false, false)
	return f
}

func decide(t *testing.T, st *store.Store, p retention.Policy) (*retention.Decision, map[deploylog.Kind][]digest.Digest) {
	t.Helper()
	var dec *retention.Decision
	_, err := st.GC(func(v store.GCView) ([]store.GCRoot, error) {
		var err error
		dec, err = retention.Decide(st, v, p)
		return nil, err
	}, store.GCOptions{DryRun: true})
	if err != nil {
		t.Fatal(err)
	}
	by := map[deploylog.Kind][]digest.Digest{}
	for _, r := range dec.Drop {
		by[r.Kind] = append(by[r.Kind], r.Record)
	}
	return dec, by
}

func same(got []digest.Digest, want ...evidence.Descriptor) bool {
	if len(got) != len(want) {
		return false
	}
	for _, w := range want {
		found := false
		for _, g := range got {
			found = found || g == w.Digest
		}
		if !found {
			return false
		}
	}
	return true
}

// TestPolicy: which receipts each policy keeps, over two clusters and two namespaces of one:
// the current receipt of each release is kept by every policy (b1 in team-b is current beside
// a3 in team-a: they share no object); --keep-last counts per cluster; --keep-since keeps what
// finished since. Intents, live audits and preflights follow their receipts; the unfinished
// apply is kept; the preflight no apply used is kept unless --keep-since drops it.
func TestPolicy(t *testing.T) {
	f := newFixture(t)
	dec, by := decide(t, f.s.st, retention.Policy{LastSet: true, KeepLast: 0})
	if !same(by[deploylog.KindReceipt], f.a1, f.a2, f.cr1) {
		t.Fatalf("--keep-last 0 drops receipts %v", by[deploylog.KindReceipt])
	}
	for _, d := range []evidence.Descriptor{f.a3, f.b1, f.cr2} {
		if dec.Kept[d.Digest] != retention.ReasonCurrent {
			t.Fatalf("receipt %s kept as %q, want current", d.Digest, dec.Kept[d.Digest])
		}
	}
	if len(by[deploylog.KindIntent]) != 3 || !same(by[deploylog.KindLiveAudit], f.la1) || len(by[deploylog.KindPreflight]) != 3 {
		t.Fatalf("--keep-last 0 drops %v", by)
	}
	if _, by := decide(t, f.s.st, retention.Policy{LastSet: true, KeepLast: 2}); !same(by[deploylog.KindReceipt], f.a1) {
		t.Fatalf("--keep-last 2 drops receipts %v, want a1 only (c1's last two are a3 and a2)", by[deploylog.KindReceipt])
	}
	since, err := retention.ParseDate(f.s.at(21))
	if err != nil {
		t.Fatal(err)
	}
	_, by = decide(t, f.s.st, retention.Policy{SinceSet: true, KeepSince: since})
	if !same(by[deploylog.KindReceipt], f.a1, f.cr1) || !same(by[deploylog.KindPreflight], f.s.pre["a1"+c1], f.s.pre["c1"+c2], f.unapplied) {
		t.Fatalf("--keep-since drops %v", by)
	}
	if err := (retention.Policy{}).Check(); refuse.CodeOf(err) != retention.CodePolicy {
		t.Fatalf("no rule: %v", err)
	}
	if err := (retention.Policy{LastSet: true, KeepLast: -1}).Check(); refuse.CodeOf(err) != retention.CodePolicy {
		t.Fatalf("negative: %v", err)
	}
	if _, err := retention.ParseDate("yesterday"); refuse.CodeOf(err) != retention.CodePolicy {
		t.Fatalf("date: %v", err)
	}
}

// TestGCThenHistoryAndAudit: gc with --keep-last 0, then store verify, log verify and history
// are clean, history shows the tombstones, and the audit of a dropped receipt says AUDIT_PRUNED
// with its publishing leaf proven in a signed checkpoint.
func TestGCThenHistoryAndAudit(t *testing.T) {
	f := newFixture(t)
	st := f.s.st
	rep, _, err := retention.GC(st, retention.Policy{LastSet: true}, store.GCOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if len(rep.Dropped) != 10 { // 3 receipts, 3 intents, 1 live audit, 3 preflights
		t.Fatalf("dropped %+v", rep.Dropped)
	}
	if r, err := st.Verify(); err != nil || !r.OK() {
		t.Fatalf("store verify: %+v %v", r, err)
	}
	if r, err := st.VerifyLog(store.LogVerifyOptions{}); err != nil || !r.OK() {
		t.Fatalf("log verify: %+v %v", r, err)
	}
	h, err := history.History(st, history.Filter{})
	if err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	if err := h.WriteText(&out); err != nil {
		t.Fatal(err)
	}
	if strings.Count(out.String(), "\n"+"") == 0 || h.Log == nil || h.Log.Size != rep.LogSize {
		t.Fatalf("history: %s", out.String())
	}
	for _, e := range h.Entries {
		if e.Digest == f.a1.Digest && e.Kind != history.KindPruned {
			t.Fatalf("history still lists the dropped receipt: %+v", e)
		}
	}
	if n := countKind(h, history.KindPruned); n != 10 {
		t.Fatalf("history shows %d tombstones, want 10:\n%s", n, out.String())
	}
	signer, verifier := logKey(t, "example.com/ql3/retention")
	if _, _, err := st.SignCheckpoint(signer); err != nil {
		t.Fatal(err)
	}
	// The dropped live audit: no kept root reaches its record. (a1's receipt record stays: a2's
	// plan names it, so a kept root reaches it, and its audit re-derives it as before.)
	a, err := audit.AuditWith(st, f.la1.Digest, audit.Options{LogVerifier: verifier})
	if err != nil {
		t.Fatal(err)
	}
	if a.OK || a.Code != audit.CodePruned || a.Pruned == nil || a.Kind != "live-audit" || a.Log == nil || a.Log.Index != a.Pruned.Leaf {
		t.Fatalf("audit of a dropped receipt: %+v", a)
	}
	if refuse.CodeOf(a.Err()) != audit.CodePruned {
		t.Fatalf("audit refusal %v", a.Err())
	}
	// A kept one audits as before (its own findings aside, it is not pruned).
	if k, err := audit.Audit(st, f.a3.Digest); err != nil || k.Code == audit.CodePruned || k.Pruned != nil {
		t.Fatalf("audit of a kept receipt: %+v %v", k, err)
	}
	// A digest the store never held is not pruned.
	if u, err := audit.Audit(st, evidence.FromBytes([]byte("never"))); err != nil || u.Code != store.CodeObjectNotFound {
		t.Fatalf("audit of an unknown digest: %+v %v", u, err)
	}
}

func countKind(h *history.Report, kind string) int {
	n := 0
	for _, e := range h.Entries {
		if e.Kind == kind {
			n++
		}
	}
	return n
}

func logKey(t *testing.T, origin string) (interface {
	Name() string
	KeyHash() uint32
	Sign([]byte) ([]byte, error)
}, deploylog.KeyVerifier) {
	t.Helper()
	skey, vkey, err := deploylog.GenerateKey(origin)
	if err != nil {
		t.Fatal(err)
	}
	sg, err := deploylog.NewSigner(skey)
	if err != nil {
		t.Fatal(err)
	}
	v, err := deploylog.NewVerifier(vkey)
	if err != nil {
		t.Fatal(err)
	}
	return sg, deploylog.KeyVerifier{V: v, Origin: origin}
}
