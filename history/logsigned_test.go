package history_test

import (
	"bytes"
	"fmt"
	"strings"
	"testing"

	"golang.org/x/mod/sumdb/note"

	"github.com/qinglong/ql3/deploylog"
	"github.com/qinglong/ql3/deploylog/policy"
	"github.com/qinglong/ql3/history"
	"github.com/qinglong/ql3/internal/testbed/witnesstest"
	"github.com/qinglong/ql3/refuse"
	"github.com/qinglong/ql3/store"
)

const testOrigin = "example.com/ql3/test"

// logKey is a new note signer of testOrigin, its verifier and the verifier key's text.
func logKey(t testing.TB) (note.Signer, deploylog.KeyVerifier, string) {
	t.Helper()
	skey, vkey, err := deploylog.GenerateKey(testOrigin)
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
	return sg, deploylog.KeyVerifier{V: v}, vkey
}

func newPolicy(t testing.TB, logVKey, quorum string, ws ...*witnesstest.Cosigner) policy.Verifier {
	t.Helper()
	vs := make([]*policy.CosignatureVerifier, len(ws))
	for i, w := range ws {
		vs[i] = w.Verifier
	}
	return witnesstest.Policy(t, "", logVKey, quorum, vs...)
}

func text(t testing.TB, r *history.Report) []string {
	t.Helper()
	var b bytes.Buffer
	if err := r.WriteText(&b); err != nil {
		t.Fatal(err)
	}
	return strings.Split(strings.TrimSpace(b.String()), "\n")
}

func leaves(r *history.Report) string {
	var got []string
	for _, e := range r.Entries {
		got = append(got, fmt.Sprint(*e.LogIndex, " ", e.Unsigned))
	}
	return strings.Join(got, ",")
}

// With the log key, history checks every stored checkpoint's signature and says how far the
// story is signed; with a policy, how far the quorum cosigned it (a later checkpoint the quorum
// has not cosigned is named, its leaves stay unsigned). In text and JSON; describe says the same.
func TestHistorySignedByKeyAndPolicy(t *testing.T) {
	s := newSynth(t)
	const a = "11111111-aaaa"
	s.preflight("3.4.1", a, 0)
	s.apply("3.4.1", a, 1, true, false) // leaves 0..2: preflight, intent, receipt
	if _, err := s.st.InitLog(testOrigin); err != nil {
		t.Fatal(err)
	}
	signer, kv, vkey := logKey(t)
	w1, w2 := witnesstest.NewCosigner(t, "w1.example"), witnesstest.NewCosigner(t, "w2.example")
	pol := newPolicy(t, vkey, "quorum W1", w1, w2)

	// No checkpoint yet: with a key, nothing is signed.
	rep, err := history.HistoryWith(s.st, history.Filter{}, history.Options{LogVerifier: kv})
	if err != nil {
		t.Fatal(err)
	}
	if l := text(t, rep); l[1] != "log: no signed checkpoint: all 3 leaves are in the unsigned tail" || leaves(rep) != "2 true,0 true" {
		t.Fatalf("no checkpoint:\n%s\n%s", strings.Join(l, "\n"), leaves(rep))
	}

	cp3, _, err := s.st.SignCheckpoint(signer)
	if err != nil {
		t.Fatal(err)
	}
	if ok, err := s.st.PutCosignatures(3, w1.Verifier, w1.Cosign(t, cp3, 100)); err != nil || !ok {
		t.Fatalf("cosign: %v %v", ok, err)
	}
	rc2 := s.preflight("3.4.2", a, 10) // leaf 3
	s.preflight("3.4.3", a, 20)        // leaf 4
	if _, _, err := s.st.SignCheckpoint(signer); err != nil {
		t.Fatal(err)
	}
	s.preflight("3.4.4", a, 30) // leaf 5: after every checkpoint

	// The log key: every checkpoint's signature verifies; signed up to 5.
	rep, err = history.HistoryWith(s.st, history.Filter{}, history.Options{LogVerifier: kv})
	if err != nil {
		t.Fatal(err)
	}
	if st := rep.Log; !st.SignatureChecked || st.CheckedBy != history.CheckedByLogKey || st.Checkpoint != 5 || st.UnsignedTail != 1 ||
		st.Witnesses != nil || st.Uncosigned != 0 || st.Cosignatures != 0 {
		t.Fatalf("key state %+v", st)
	}
	if l := text(t, rep); l[1] != "log: signed up to size 5 (checkpoint of example.com/ql3/test), witnesses not checked (0 cosignatures kept; give --policy FILE to check them), 1 leaves in the unsigned tail" ||
		!strings.HasPrefix(l[3], "5 unsigned ") || !strings.HasPrefix(l[4], "4  ") {
		t.Fatalf("key text:\n%s", strings.Join(l, "\n"))
	}
	if leaves(rep) != "5 true,4 false,3 false,2 false,0 false" {
		t.Fatalf("key leaves %s", leaves(rep))
	}

	// The policy: W1 cosigned 3 only; 5 is signed by the log, not cosigned: leaves 3.. unsigned.
	rep, err = history.HistoryWith(s.st, history.Filter{}, history.Options{LogVerifier: pol})
	if err != nil {
		t.Fatal(err)
	}
	if st := rep.Log; !st.SignatureChecked || st.CheckedBy != history.CheckedByPolicy || st.Checkpoint != 3 || st.UnsignedTail != 3 ||
		st.Uncosigned != 5 || st.Witnesses == nil || strings.Join(st.Witnesses.Cosigned, " ") != "W1" || st.Witnesses.Of != 2 ||
		st.Witnesses.Quorum != "W1" || !st.Witnesses.QuorumMet || st.Cosignatures != 1 {
		t.Fatalf("policy state %+v %+v", st, st.Witnesses)
	}
	if l := text(t, rep); l[1] != "log: signed up to size 3 (checkpoint of example.com/ql3/test), cosigned by 1 of 2 witnesses (quorum W1 met), checkpoint 5 not yet cosigned by the quorum, 3 leaves in the unsigned tail" {
		t.Fatalf("policy text:\n%s", strings.Join(l, "\n"))
	}
	if leaves(rep) != "5 true,4 true,3 true,2 false,0 false" {
		t.Fatalf("policy leaves %s", leaves(rep))
	}
	var js bytes.Buffer
	if err := rep.WriteJSON(&js); err != nil {
		t.Fatal(err)
	}
	for _, w := range []string{`"signatureChecked": true`, `"checkedBy": "policy"`, `"cosigned": [
        "W1"
      ]`, `"of": 2`, `"quorum": "W1"`, `"quorumMet": true`, `"uncosigned": 5`, `"checkpoint": 3`, `"unsignedTail": 3`} {
		if !strings.Contains(js.String(), w) {
			t.Fatalf("json lacks %s:\n%s", w, js.String())
		}
	}

	// W2 cosigns 5 too: the quorum W1 still lacks it; quorum "any" of both takes 5.
	grp := newPolicy(t, vkey, "group G any W1 W2\nquorum G", w1, w2)
	cp5, err := readCheckpoint(s.st, 5)
	if err != nil {
		t.Fatal(err)
	}
	if ok, err := s.st.PutCosignatures(5, w2.Verifier, w2.Cosign(t, cp5, 200)); err != nil || !ok {
		t.Fatalf("cosign 5: %v %v", ok, err)
	}
	rep, err = history.HistoryWith(s.st, history.Filter{}, history.Options{LogVerifier: grp})
	if err != nil {
		t.Fatal(err)
	}
	if l := text(t, rep); l[1] != "log: signed up to size 5 (checkpoint of example.com/ql3/test), cosigned by 1 of 2 witnesses (quorum G met), 1 leaves in the unsigned tail" {
		t.Fatalf("group text:\n%s", strings.Join(l, "\n"))
	}

	// Describe: the same line, its leaf marked in the tail or not.
	d, err := history.DescribeWith(s.st, rc2.Digest, history.Options{LogVerifier: pol})
	if err != nil {
		t.Fatal(err)
	}
	var dt bytes.Buffer
	d.WriteText(&dt)
	if !d.Unsigned || *d.LogIndex != 3 || !strings.Contains(dt.String(), "\nlog: signed up to size 3 (checkpoint of example.com/ql3/test), cosigned by 1 of 2 witnesses (quorum W1 met), checkpoint 5 not yet cosigned by the quorum, 3 leaves in the unsigned tail\n") ||
		!strings.Contains(dt.String(), "\nlog leaf:       3 (in the unsigned tail)\n") {
		t.Fatalf("describe:\n%s", dt.String())
	}
	if d, err = history.DescribeWith(s.st, rc2.Digest, history.Options{LogVerifier: kv}); err != nil || d.Unsigned || d.Log.Checkpoint != 5 {
		t.Fatalf("describe with key: %+v %v", d, err)
	}
}

// A checkpoint the verifier does not accept refuses the story with the verifier's code: never a
// shorter signed prefix. The same for describe.
func TestHistorySignedRefusals(t *testing.T) {
	s := newSynth(t)
	const a = "11111111-aaaa"
	p1 := s.preflight("3.4.1", a, 0)
	// A store without a log: nothing signed to show, refused when asked for signatures.
	_, otherV, _ := logKey(t)
	if _, err := history.HistoryWith(s.st, history.Filter{}, history.Options{LogVerifier: otherV}); refuse.CodeOf(err) != store.CodeLogNotInitialized {
		t.Fatalf("no log with key: %v", err)
	}
	if _, err := history.DescribeWith(s.st, p1.Digest, history.Options{LogVerifier: otherV}); refuse.CodeOf(err) != store.CodeLogNotInitialized {
		t.Fatalf("describe no log with key: %v", err)
	}
	if _, err := s.st.InitLog(testOrigin); err != nil {
		t.Fatal(err)
	}
	signer, kv, vkey := logKey(t)
	w1, w2 := witnesstest.NewCosigner(t, "w1.example"), witnesstest.NewCosigner(t, "w2.example")
	cp1, _, err := s.st.SignCheckpoint(signer)
	if err != nil {
		t.Fatal(err)
	}
	if ok, err := s.st.PutCosignatures(1, w1.Verifier, w1.Cosign(t, cp1, 100)); err != nil || !ok {
		t.Fatalf("cosign: %v %v", ok, err)
	}
	s.preflight("3.4.2", a, 10)
	if _, _, err := s.st.SignCheckpoint(signer); err != nil {
		t.Fatal(err)
	}
	_, _, otherVKey := logKey(t)
	for _, c := range []struct {
		name string
		v    deploylog.CheckpointVerifier
		code refuse.Code
	}{
		{"another log key", otherV, deploylog.CodeCheckpointSig},
		{"a policy of another log key", newPolicy(t, otherVKey, "quorum W1", w1), policy.CodeLogSignature},
		{"a quorum no checkpoint meets", newPolicy(t, vkey, "quorum W2", w1, w2), policy.CodeQuorum},
		{"a quorum of both, one cosigned", newPolicy(t, vkey, "group G all W1 W2\nquorum G", w1, w2), policy.CodeQuorum},
	} {
		if _, err := history.HistoryWith(s.st, history.Filter{}, history.Options{LogVerifier: c.v}); refuse.CodeOf(err) != c.code {
			t.Errorf("history, %s: %v, want %s", c.name, err, c.code)
		}
		if _, err := history.DescribeWith(s.st, p1.Digest, history.Options{LogVerifier: c.v}); refuse.CodeOf(err) != c.code {
			t.Errorf("describe, %s: %v, want %s", c.name, err, c.code)
		}
	}
	// The right key and a met quorum tell the story.
	for _, v := range []deploylog.CheckpointVerifier{kv, newPolicy(t, vkey, "quorum W1", w1, w2)} {
		if _, err := history.HistoryWith(s.st, history.Filter{}, history.Options{LogVerifier: v}); err != nil {
			t.Errorf("history: %v", err)
		}
	}
}

// readCheckpoint is the note of the largest checkpoint, which must have size n (a cosigner signs
// its text only).
func readCheckpoint(st *store.Store, n int64) ([]byte, error) {
	ls, err := st.ReadLogStory(nil)
	if err != nil {
		return nil, err
	}
	if ls.Checkpoint != n {
		return nil, fmt.Errorf("largest checkpoint %d, want %d", ls.Checkpoint, n)
	}
	return ls.Note, nil
}
