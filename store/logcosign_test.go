package store

import (
	"context"
	"encoding/base64"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"golang.org/x/mod/sumdb/note"
	"golang.org/x/mod/sumdb/tlog"

	"github.com/qinglong/ql3/deploylog"
	"github.com/qinglong/ql3/deploylog/policy"
	"github.com/qinglong/ql3/deploylog/witness"
	"github.com/qinglong/ql3/internal/testbed/witnesstest"
	"github.com/qinglong/ql3/refuse"
)

// logKeyText is logKey with the verifier key's text (for a policy's log line).
func logKeyText(t testing.TB) (note.Signer, string) {
	t.Helper()
	skey, vkey, err := deploylog.GenerateKey(testOrigin)
	if err != nil {
		t.Fatal(err)
	}
	sg, err := deploylog.NewSigner(skey)
	if err != nil {
		t.Fatal(err)
	}
	return sg, vkey
}

func testPolicy(t testing.TB, logVKey string, quorum string, ws ...*policy.CosignatureVerifier) policy.Verifier {
	t.Helper()
	return witnesstest.Policy(t, testOrigin, logVKey, quorum, ws...)
}

func TestLogCosignatures(t *testing.T) {
	s := newLogStore(t)
	signer, vkey := logKeyText(t)
	first, _ := publishIntent(t, s, 0)
	publishIntent(t, s, 1)
	publishIntent(t, s, 2)
	cp3, _, err := s.SignCheckpoint(signer)
	if err != nil {
		t.Fatal(err)
	}
	w1, w2 := witnesstest.NewCosigner(t, "w1.example"), witnesstest.NewCosigner(t, "w2.example")
	stranger := witnesstest.NewCosigner(t, "w1.example") // w1's name, another key

	stored, err := s.PutCosignatures(3, w1.Verifier, w1.Cosign(t, cp3, 100))
	if err != nil || !stored {
		t.Fatalf("stored %v: %v", stored, err)
	}
	// Asked again, the witness signs with a later timestamp: the first one stays.
	if stored, err := s.PutCosignatures(3, w1.Verifier, w1.Cosign(t, cp3, 200)); err != nil || stored {
		t.Fatalf("second put: stored %v: %v", stored, err)
	}
	// Lines that are not the named witness's valid cosignature of that checkpoint.
	_, err = s.PutCosignatures(3, w1.Verifier, stranger.Cosign(t, cp3, 100))
	wantCode(t, err, policy.CodeCosignatureInvalid)
	_, err = s.PutCosignatures(3, w1.Verifier, []byte("garbage\n"))
	wantCode(t, err, policy.CodeCosignatureInvalid)
	_, err = s.PutCosignatures(4, w1.Verifier, w1.Cosign(t, cp3, 100))
	wantCode(t, err, CodeObjectNotFound)
	if n, err := s.WitnessedSize(w1.Verifier); err != nil || n != 3 {
		t.Fatalf("w1 witnessed %d: %v", n, err)
	}
	if n, err := s.WitnessedSize(w2.Verifier); err != nil || n != 0 {
		t.Fatalf("w2 witnessed %d: %v", n, err)
	}

	// The policy sees the kept cosignature beside the checkpoint.
	one := testPolicy(t, vkey, "quorum W1", w1.Verifier, w2.Verifier)
	r := verifyLog(t, s, LogVerifyOptions{Verifier: one})
	wantLogOK(t, r)
	if r.SignedSize != 3 || len(r.Checkpoints) != 1 || !r.Checkpoints[0].Trusted {
		t.Fatalf("report %+v", r)
	}
	// A later checkpoint not cosigned yet: a hint, the tail after 3 unsigned.
	publishIntent(t, s, 3)
	cp4, _, err := s.SignCheckpoint(signer)
	if err != nil {
		t.Fatal(err)
	}
	r = verifyLog(t, s, LogVerifyOptions{Verifier: one})
	wantLogOK(t, r)
	if codes(r.Hints)[policy.CodeQuorum] != 1 {
		t.Fatalf("hints %+v", r.Hints)
	}
	if r.SignedSize != 3 || r.UnsignedTail != 1 {
		t.Fatalf("signed %d tail %d", r.SignedSize, r.UnsignedTail)
	}
	// A proof under the policy carries the cosigned checkpoint and verifies offline.
	proof, err := s.LogProof(first.Digest, one)
	if err != nil {
		t.Fatal(err)
	}
	if _, c, err := proof.Verify(one, first.Digest); err != nil || c.Size != 3 {
		t.Fatalf("proof against size %d: %v", c.Size, err)
	}

	// A policy whose quorum needs both witnesses: nothing is trusted, and log verify refuses.
	both := testPolicy(t, vkey, "group G all W1 W2\nquorum G", w1.Verifier, w2.Verifier)
	r = verifyLog(t, s, LogVerifyOptions{Verifier: both})
	if r.OK() || refuse.CodeOf(r.Err()) != policy.CodeQuorum || r.SignedSize != 0 {
		t.Fatalf("report %+v", r)
	}
	// w2 cosigns size 4: still not both on one checkpoint.
	if _, err := s.PutCosignatures(4, w2.Verifier, w2.Cosign(t, cp4, 300)); err != nil {
		t.Fatal(err)
	}
	if r = verifyLog(t, s, LogVerifyOptions{Verifier: both}); r.OK() {
		t.Fatalf("quorum met by cosignatures of two checkpoints: %+v", r)
	}
	if _, err := s.PutCosignatures(4, w1.Verifier, w1.Cosign(t, cp4, 300)); err != nil {
		t.Fatal(err)
	}
	r = verifyLog(t, s, LogVerifyOptions{Verifier: both})
	wantLogOK(t, r)
	if r.SignedSize != 4 {
		t.Fatalf("signed %d", r.SignedSize)
	}

	// A policy that knows only a stranger under w1's name: its key's cosignatures are not there.
	strange := testPolicy(t, vkey, "quorum W1", stranger.Verifier)
	r = verifyLog(t, s, LogVerifyOptions{Verifier: strange})
	if refuse.CodeOf(r.Err()) != policy.CodeQuorum {
		t.Fatalf("a stranger's policy: %+v", r)
	}
}

func TestLogCosignatureTamper(t *testing.T) {
	s := newLogStore(t)
	signer, vkey := logKeyText(t)
	publishIntent(t, s, 0)
	cp, _, err := s.SignCheckpoint(signer)
	if err != nil {
		t.Fatal(err)
	}
	w1 := witnesstest.NewCosigner(t, "w1.example")
	if _, err := s.PutCosignatures(1, w1.Verifier, w1.Cosign(t, cp, 100)); err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(s.Root(), "log", "cosignatures")
	names, err := os.ReadDir(dir)
	if err != nil || len(names) != 1 {
		t.Fatalf("%v %v", names, err)
	}
	file := filepath.Join(dir, names[0].Name())
	pol := testPolicy(t, vkey, "quorum W1", w1.Verifier)

	// The kept cosignature replaced by one over another timestamp than it claims.
	forged := w1.Cosign(t, cp, 100)
	raw, _ := base64.StdEncoding.DecodeString(strings.Fields(string(forged))[2])
	raw[11]++
	if err := os.Chmod(file, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(file, []byte("— w1.example "+base64.StdEncoding.EncodeToString(raw)+"\n"), 0o400); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(file, 0o400); err != nil {
		t.Fatal(err)
	}
	r := verifyLog(t, s, LogVerifyOptions{Verifier: pol})
	wantFinding(t, r, policy.CodeCosignatureInvalid)

	// A stray file, and cosignatures of a size with no checkpoint.
	if err := os.WriteFile(filepath.Join(dir, "stray"), nil, 0o400); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, pad20(7)+"-0123456789abcdef"), nil, 0o400); err != nil {
		t.Fatal(err)
	}
	r = verifyLog(t, s, LogVerifyOptions{})
	if codes(r.Errors)[CodeLogFile] != 2 {
		t.Fatalf("errors %+v", r.Errors)
	}
}

func wantCode(t testing.TB, err error, code refuse.Code) {
	t.Helper()
	if got := refuse.CodeOf(err); got != code {
		t.Fatalf("got %v (code %q), want %s", err, got, code)
	}
}

// TestLogWitnessedByLitewitness: the real witness cosigns the store's own checkpoints as its log
// grows (proofs from the store's tiles), and refuses a copy of the store taken before (a
// rollback) and a copy that published something else at the same sizes (a fork).
func TestLogWitnessedByLitewitness(t *testing.T) {
	s := newLogStore(t)
	signer, vkey := logKeyText(t)
	w := witnesstest.Start(t, "witness.example/ql3-store", testOrigin, vkey)
	c, err := witness.New(w.URL, w.Verifier, 10*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	submit := func(st *Store) (*witness.Result, error) {
		cps, err := st.Checkpoints()
		if err != nil {
			t.Fatal(err)
		}
		latest := cps[len(cps)-1]
		cp, _, err := deploylog.ParseSignedCheckpoint(latest)
		if err != nil {
			t.Fatal(err)
		}
		hint, err := st.WitnessedSize(w.Verifier)
		if err != nil {
			t.Fatal(err)
		}
		res, err := c.Submit(context.Background(), latest, hint, func(old int64) (tlog.TreeProof, error) {
			return st.ConsistencyProof(old, cp.Size)
		})
		if err != nil {
			return nil, err
		}
		if _, err := st.PutCosignatures(cp.Size, w.Verifier, res.Cosignatures); err != nil {
			t.Fatal(err)
		}
		return res, nil
	}
	var copyAt string
	next := 0
	for round, n := range []int{1, 2, 5, 9, 20} {
		for range n {
			publishIntent(t, s, next)
			next++
		}
		if _, _, err := s.SignCheckpoint(signer); err != nil {
			t.Fatal(err)
		}
		res, err := submit(s)
		if err != nil {
			t.Fatalf("round %d: %v", round, err)
		}
		if res.Size != int64(next) {
			t.Fatalf("round %d: cosigned size %d, the log has %d", round, res.Size, next)
		}
		if round == 2 {
			copyAt = filepath.Join(t.TempDir(), "copy")
			if out, err := exec.Command("cp", "-a", s.Root(), copyAt).CombinedOutput(); err != nil {
				t.Fatalf("cp -a: %v\n%s", err, out)
			}
		}
	}
	pol := testPolicy(t, vkey, "quorum W1", w.Verifier)
	r := verifyLog(t, s, LogVerifyOptions{Verifier: pol})
	wantLogOK(t, r)
	if r.SignedSize != int64(next) || len(r.Checkpoints) != 5 {
		t.Fatalf("signed %d of %d, %d checkpoints", r.SignedSize, next, len(r.Checkpoints))
	}

	// The copy taken at size 8: the witness has cosigned 37.
	old, err := Open(copyAt)
	if err != nil {
		t.Fatal(err)
	}
	defer old.Close()
	_, err = submit(old)
	wantCode(t, err, witness.CodeAhead)
	// The copy publishes other records up to the size the witness saw, and beyond.
	for i := 8; i < next+3; i++ {
		publishIntent(t, old, 1000+i)
	}
	if _, _, err := old.SignCheckpoint(signer); err != nil {
		t.Fatal(err)
	}
	_, err = submit(old)
	wantCode(t, err, witness.CodeInconsistent)
}
