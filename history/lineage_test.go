package history_test

import (
	"testing"

	"github.com/qinglong/ql3/evidence"
	"github.com/qinglong/ql3/history"
	"github.com/qinglong/ql3/verdict/plan"
)

func lineage(t *testing.T, s *synth) *plan.Lineage {
	t.Helper()
	es, err := s.st.ListIndex(evidence.IndexReceipts)
	if err != nil {
		t.Fatal(err)
	}
	rcs := make([]evidence.Descriptor, len(es))
	for i, e := range es {
		rcs[i] = e.Descriptor
	}
	l, err := plan.LoadLineage(s.st, rcs)
	if err != nil {
		t.Fatal(err)
	}
	return l
}

// Finding 7 of issue 22 (docs/issues.md#issue-22): two teams deploy to two namespaces of one cluster. Team A's receipt is
// superseded only by A's next one, never by B's; A's next plan compares with A's receipt, so B's
// objects are never changed or left behind in it; B's receipt stays current.
func TestSupersessionByObjectsTwoNamespaces(t *testing.T) {
	s := newSynth(t)
	const c = "11111111-aaaa"
	s.preflight("a-1", c, 0)
	s.namespace = "team-a"
	_, rcA1 := s.apply("a-1", c, 1, true, false)
	s.preflight("b-1", c, 10) // no receipt shares an object with B's release: no plan
	s.namespace = "team-b"
	_, rcB1 := s.apply("b-1", c, 11, true, false)
	s.planPrev = rcA1
	s.preflight("a-2", c, 20)
	s.namespace = "team-a"
	_, rcA2 := s.apply("a-2", c, 21, true, false)

	l := lineage(t, s)
	keysA := []plan.Key{{Kind: "ConfigMap", Namespace: "team-a", Name: "cm"}}
	keysB := []plan.Key{{Kind: "ConfigMap", Namespace: "team-b", Name: "cm"}}
	if p, ok := l.Latest(c, keysB); !ok || p.Desc.Digest != rcB1.Digest {
		t.Fatalf("B's plan would compare with %v, want B's receipt %s", p.Desc.Digest, rcB1.Digest)
	}
	if p, ok := l.Latest(c, keysA); !ok || p.Desc.Digest != rcA2.Digest {
		t.Fatalf("A's plan would compare with %v, want %s", p.Desc.Digest, rcA2.Digest)
	}
	if cur := l.Current(c, append(keysA, keysB...)); len(cur) != 2 || cur[0].Desc.Digest != rcB1.Digest || cur[1].Desc.Digest != rcA2.Digest {
		t.Fatalf("current receipts of both namespaces: %+v", cur)
	}
	if by := l.SupersededBy(rcB1.Digest); len(by) != 0 {
		t.Fatalf("B's receipt superseded by another namespace's: %+v", by)
	}
	if by := l.SupersededBy(rcA1.Digest); len(by) != 1 || by[0].Desc.Digest != rcA2.Digest {
		t.Fatalf("A's first receipt superseded by %+v, want only %s", by, rcA2.Digest)
	}
	dB, err := history.Describe(s.st, rcB1.Digest)
	if err != nil || dB.Supersedes != nil || dB.SupersededBy != nil {
		t.Fatalf("describe B: %+v %v", dB, err)
	}
	dA, err := history.Describe(s.st, rcA2.Digest)
	if err != nil || dA.Supersedes == nil || dA.Supersedes.Receipt != rcA1.Digest || dA.SupersededBy != nil {
		t.Fatalf("describe A2: %+v %v", dA, err)
	}
	// A manifest object without a namespace lands in the context's namespace, which a preflight
	// does not see: it may be either team's, so it shares with both (over-sharing can only show a
	// receipt as superseded, never hide one).
	if cur := l.Current(c, []plan.Key{{Kind: "ConfigMap", Name: "cm"}}); len(cur) != 1 || cur[0].Desc.Digest != rcA2.Digest {
		t.Fatalf("namespace-less key: %+v", cur)
	}
}

// Finding 6 of issue 22 (docs/issues.md#issue-22): a receipt whose finishedAt was edited to 2099 does not become the latest.
// The 3.4.2 preflight's plan names the 3.4.1 receipt, so 3.4.1 was published first whatever it
// claims: describe says 3.4.2 superseded 3.4.1, never the reverse, and history lists 3.4.2 above it.
func TestPublicationOrderIgnoresClaimedTime(t *testing.T) {
	s := newSynth(t)
	const c = "11111111-aaaa"
	s.preflight("3.4.1", c, 0)
	s.claim = "2099-01-01T00:00:00Z"
	_, rc1 := s.apply("3.4.1", c, 1, true, false)
	s.planPrev = rc1
	s.preflight("3.4.2", c, 10)
	_, rc2 := s.apply("3.4.2", c, 11, true, false)

	d1, err := history.Describe(s.st, rc1.Digest)
	if err != nil || d1.SupersededBy == nil || d1.SupersededBy.Receipt != rc2.Digest || d1.Supersedes != nil {
		t.Fatalf("describe 3.4.1: %+v %v", d1, err)
	}
	d2, err := history.Describe(s.st, rc2.Digest)
	if err != nil || d2.SupersededBy != nil || d2.Supersedes == nil || d2.Supersedes.Receipt != rc1.Digest {
		t.Fatalf("describe 3.4.2: %+v %v", d2, err)
	}
	if p, ok := lineage(t, s).Latest(c, []plan.Key{{Kind: "ConfigMap", Namespace: "ns", Name: "cm"}}); !ok || p.Desc.Digest != rc2.Digest {
		t.Fatalf("the plan would compare with %s, want 3.4.2's receipt", p.Desc.Digest)
	}
	rep, err := history.History(s.st, history.Filter{})
	if err != nil {
		t.Fatal(err)
	}
	pos := map[string]int{}
	for i, e := range rep.Entries {
		pos[string(e.Digest)] = i
	}
	if pos[string(rc2.Digest)] > pos[string(rc1.Digest)] {
		t.Fatalf("history lists the forged-2099 receipt 3.4.1 above 3.4.2: %+v", rep.Entries)
	}
}
