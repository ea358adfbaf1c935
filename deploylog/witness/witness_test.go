package witness_test

import (
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"encoding/base64"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"golang.org/x/mod/sumdb/note"
	"golang.org/x/mod/sumdb/tlog"

	"github.com/qinglong/ql3/deploylog/policy"
	"github.com/qinglong/ql3/deploylog/witness"
	"github.com/qinglong/ql3/internal/testbed/witnesstest"
	"github.com/qinglong/ql3/refuse"
)

// memLog is an RFC 6962 log in memory, hashed by x/mod's tlog (deploylog's own hashing), signed
// by an Ed25519 note key: the log side of the exchange, independent of the store.
type memLog struct {
	origin string
	signer note.Signer
	vkey   string
	stored []tlog.Hash
	n      int64
}

func newMemLog(t testing.TB, origin string) *memLog {
	t.Helper()
	skey, vkey, err := note.GenerateKey(rand.Reader, origin)
	if err != nil {
		t.Fatal(err)
	}
	s, err := note.NewSigner(skey)
	if err != nil {
		t.Fatal(err)
	}
	return &memLog{origin: origin, signer: s, vkey: vkey}
}

// withKey is a log of the same origin and key but no leaves: a fork or a rollback to build.
func (l *memLog) withKey() *memLog { return &memLog{origin: l.origin, signer: l.signer, vkey: l.vkey} }

func (l *memLog) ReadHashes(idx []int64) ([]tlog.Hash, error) {
	out := make([]tlog.Hash, len(idx))
	for i, x := range idx {
		if x >= int64(len(l.stored)) {
			return nil, fmt.Errorf("hash %d not stored", x)
		}
		out[i] = l.stored[x]
	}
	return out, nil
}

func (l *memLog) append(t testing.TB, leaves ...string) {
	t.Helper()
	for _, d := range leaves {
		h, err := tlog.StoredHashes(l.n, []byte(d), l)
		if err != nil {
			t.Fatal(err)
		}
		l.stored = append(l.stored, h...)
		l.n++
	}
}

func (l *memLog) grow(t testing.TB, to int64, tag string) {
	for l.n < to {
		l.append(t, fmt.Sprintf("%s leaf %d", tag, l.n))
	}
}

func (l *memLog) checkpoint(t testing.TB) []byte {
	t.Helper()
	root, err := tlog.TreeHash(l.n, l)
	if err != nil {
		t.Fatal(err)
	}
	msg, err := note.Sign(&note.Note{Text: fmt.Sprintf("%s\n%d\n%s\n", l.origin, l.n, root)}, l.signer)
	if err != nil {
		t.Fatal(err)
	}
	return msg
}

func (l *memLog) proof(old int64) (tlog.TreeProof, error) { return tlog.ProveTree(l.n, old, l) }

func wantCode(t testing.TB, err error, code refuse.Code) {
	t.Helper()
	if got := refuse.CodeOf(err); got != code {
		t.Fatalf("got %v (code %q), want %s", err, got, code)
	}
}

func client(t testing.TB, url string, v *policy.CosignatureVerifier) *witness.Client {
	t.Helper()
	c, err := witness.New(url, v, 10*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func onePolicy(t testing.TB, logVKey, witnessVKey string) *policy.Policy {
	t.Helper()
	p, err := policy.Parse([]byte("log " + logVKey + "\nwitness W " + witnessVKey + "\nquorum W\n"))
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// TestLitewitnessCosignsGrowingLog: the real witness cosigns each checkpoint as the log grows,
// each from the size it cosigned before, and the cosignatures meet a one-witness policy.
func TestLitewitnessCosignsGrowingLog(t *testing.T) {
	log := newMemLog(t, "example.com/ql3-test/grow")
	w := witnesstest.Start(t, "witness.example/ql3-grow", log.origin, log.vkey)
	c := client(t, w.URL, w.Verifier)
	pol := onePolicy(t, log.vkey, w.VKey)
	ctx := context.Background()

	var last int64
	var rtt []time.Duration
	for _, size := range []int64{1, 2, 3, 5, 8, 13, 21, 34, 55, 89, 144, 1000} {
		log.grow(t, size, "grow")
		signed := log.checkpoint(t)
		start := time.Now()
		res, err := c.Submit(ctx, signed, last, log.proof)
		rtt = append(rtt, time.Since(start))
		if err != nil {
			t.Fatalf("size %d: %v", size, err)
		}
		if res.OldSize != last || res.Size != size {
			t.Fatalf("size %d: accepted from %d, size %d", size, res.OldSize, res.Size)
		}
		r, err := pol.Check(append(signed, res.Cosignatures...))
		if err != nil {
			t.Fatalf("size %d: the witness's cosignature does not meet the policy: %v", size, err)
		}
		if len(r.Cosigned) != 1 || r.Cosigned[0].KeyName != w.Name || time.Since(time.Unix(r.Cosigned[0].Timestamp, 0)) > time.Minute {
			t.Fatalf("size %d: %+v", size, r.Cosigned)
		}
		last = size
	}
	t.Logf("add-checkpoint round trips against litewitness: %v", rtt)

	// The same checkpoint again: the witness cosigns its own size anew.
	if _, err := c.Submit(ctx, log.checkpoint(t), last, log.proof); err != nil {
		t.Fatal(err)
	}
	// A submitter that knows nothing (hint 0) learns the witness's size from its 409 and retries.
	log.grow(t, 1500, "grow")
	res, err := c.Submit(ctx, log.checkpoint(t), 0, log.proof)
	if err != nil {
		t.Fatal(err)
	}
	if res.OldSize != 1000 {
		t.Fatalf("retried from %d, want 1000", res.OldSize)
	}
	// The raw 409: the witness's size in text/x.tlog.size.
	_, err = c.AddCheckpoint(ctx, 7, nil, log.checkpoint(t))
	wantCode(t, err, witness.CodeConflict)
	var conflict *witness.ConflictError
	if !errorsAs(err, &conflict) || conflict.Size != 1500 {
		t.Fatalf("conflict %v", err)
	}
}

// TestLitewitnessRefusesRollback: once the witness cosigned size 10, a copy of the log with 6
// leaves signed by the same key gets no cosignature.
func TestLitewitnessRefusesRollback(t *testing.T) {
	log := newMemLog(t, "example.com/ql3-test/rollback")
	w := witnesstest.Start(t, "witness.example/ql3-rollback", log.origin, log.vkey)
	c := client(t, w.URL, w.Verifier)
	ctx := context.Background()
	log.grow(t, 10, "main")
	if _, err := c.Submit(ctx, log.checkpoint(t), 0, log.proof); err != nil {
		t.Fatal(err)
	}
	old := log.withKey()
	old.grow(t, 6, "main") // the same first 6 leaves: an honest older copy
	for _, hint := range []int64{0, 6, 10} {
		_, err := c.Submit(ctx, old.checkpoint(t), hint, old.proof)
		wantCode(t, err, witness.CodeAhead)
	}
	// The witness itself: old size above the checkpoint's is a 400.
	_, err := c.AddCheckpoint(ctx, 10, nil, old.checkpoint(t))
	wantCode(t, err, witness.CodeRefused)
	// And the rolled-back copy that grows past 10 on another branch is a fork.
	old.grow(t, 12, "rolled back then regrown")
	_, err = c.Submit(ctx, old.checkpoint(t), 6, old.proof)
	wantCode(t, err, witness.CodeInconsistent)
}

// TestLitewitnessRefusesFork: a log of the witness's size under another root, and a larger log
// that does not extend the cosigned tree, both get no cosignature.
func TestLitewitnessRefusesFork(t *testing.T) {
	log := newMemLog(t, "example.com/ql3-test/fork")
	w := witnesstest.Start(t, "witness.example/ql3-fork", log.origin, log.vkey)
	c := client(t, w.URL, w.Verifier)
	ctx := context.Background()
	log.grow(t, 10, "main")
	if _, err := c.Submit(ctx, log.checkpoint(t), 0, log.proof); err != nil {
		t.Fatal(err)
	}
	fork := log.withKey()
	fork.grow(t, 7, "main")
	fork.grow(t, 10, "fork")
	_, err := c.Submit(ctx, fork.checkpoint(t), 10, fork.proof)
	wantCode(t, err, witness.CodeInconsistent)
	fork.grow(t, 20, "fork")
	_, err = c.Submit(ctx, fork.checkpoint(t), 10, fork.proof)
	wantCode(t, err, witness.CodeInconsistent)
	// The honest log still extends what the witness saw.
	log.grow(t, 20, "main")
	if _, err := c.Submit(ctx, log.checkpoint(t), 10, log.proof); err != nil {
		t.Fatal(err)
	}
}

// TestLitewitnessKeys: cosignatures are only accepted under the witness key the caller names,
// and the witness only cosigns checkpoints of logs and keys it knows.
func TestLitewitnessKeys(t *testing.T) {
	log := newMemLog(t, "example.com/ql3-test/keys")
	w := witnesstest.Start(t, "witness.example/ql3-keys", log.origin, log.vkey)
	ctx := context.Background()
	log.grow(t, 4, "main")
	signed := log.checkpoint(t)

	// The caller expects another witness key (same witness name): the answer is refused, and a
	// policy naming that key does not count the cosignature the witness did return.
	pub, _, _ := ed25519.GenerateKey(rand.Reader)
	stranger, err := policy.NewCosignatureVerifierFromKey(w.Name, pub)
	if err != nil {
		t.Fatal(err)
	}
	_, err = client(t, w.URL, stranger).Submit(ctx, signed, 0, log.proof)
	wantCode(t, err, witness.CodeCosignature)
	res, err := client(t, w.URL, w.Verifier).Submit(ctx, signed, 4, log.proof)
	if err != nil {
		t.Fatal(err)
	}
	_, err = onePolicy(t, log.vkey, stranger.String()).Check(append(signed, res.Cosignatures...))
	wantCode(t, err, policy.CodeQuorum)

	c := client(t, w.URL, w.Verifier)
	// An origin the witness does not know: litewitness v0.6.1 answers 403 where the spec says
	// 404 (WITNESS_UNKNOWN_LOG, which TestHostileWitness reaches).
	other := newMemLog(t, "example.com/ql3-test/unknown")
	other.grow(t, 1, "x")
	_, err = c.Submit(ctx, other.checkpoint(t), 0, other.proof)
	wantCode(t, err, witness.CodeRefused)
	// The known origin signed by another key.
	impostor := newMemLog(t, log.origin)
	impostor.grow(t, 5, "main")
	_, err = c.Submit(ctx, impostor.checkpoint(t), 4, impostor.proof)
	wantCode(t, err, witness.CodeRefused)
	// A second key registered for the origin (witnessctl add-key while it runs) is trusted.
	w.AddLog(t, impostor.origin+"/second", impostor.vkey)
	w.Ctl(t, "add-key", "-origin", log.origin, "-key", impostor.vkey)
	if _, err := c.Submit(ctx, impostor.checkpoint(t), 4, impostor.proof); err != nil {
		t.Fatal(err)
	}
}

func TestUnreachable(t *testing.T) {
	log := newMemLog(t, "example.com/ql3-test/unreachable")
	log.grow(t, 1, "x")
	pub, _, _ := ed25519.GenerateKey(rand.Reader)
	v, _ := policy.NewCosignatureVerifierFromKey("w.example", pub)
	// A port nothing listens on: a listener closed at once.
	url := witnesstest.ClosedURL(t)
	_, err := client(t, url, v).Submit(context.Background(), log.checkpoint(t), 0, log.proof)
	wantCode(t, err, witness.CodeUnreachable)
	if !strings.Contains(err.Error(), "connection refused") {
		t.Fatalf("reason not named: %v", err)
	}
}

func TestNewURL(t *testing.T) {
	pub, _, _ := ed25519.GenerateKey(rand.Reader)
	v, _ := policy.NewCosignatureVerifierFromKey("w.example", pub)
	for _, u := range []string{"", "ftp://w.example", "http://", "http://user:secret@w.example/", "http://w.example/?a=1", "http://w.example/#f", "w.example", "mailto:x@y"} {
		_, err := witness.New(u, v, 0)
		wantCode(t, err, witness.CodeURL)
		if strings.Contains(err.Error(), "secret") {
			t.Fatalf("credential in the message: %v", err)
		}
	}
	if _, err := witness.New("https://w.example/prefix/", v, 0); err != nil {
		t.Fatal(err)
	}
}

// TestHostileWitness: answers no real witness gives (malformed, oversized, slow, redirected).
func TestHostileWitness(t *testing.T) {
	log := newMemLog(t, "example.com/ql3-test/hostile")
	log.grow(t, 3, "x")
	signed := log.checkpoint(t)
	pub, _, _ := ed25519.GenerateKey(rand.Reader)
	v, _ := policy.NewCosignatureVerifierFromKey("w.example", pub)
	vectors := []struct {
		name    string
		handler http.HandlerFunc // the hostile witness
		code    refuse.Code      // the refusal Submit must return
	}{
		{"409 without its content type", func(rw http.ResponseWriter, r *http.Request) {
			rw.WriteHeader(http.StatusConflict)
			fmt.Fprint(rw, "5\n")
		}, witness.CodeResponseInvalid},
		{"409 with a non-canonical size", func(rw http.ResponseWriter, r *http.Request) {
			rw.Header().Set("Content-Type", "text/x.tlog.size")
			rw.WriteHeader(http.StatusConflict)
			fmt.Fprint(rw, "05\n")
		}, witness.CodeResponseInvalid},
		{"409 with two lines", func(rw http.ResponseWriter, r *http.Request) {
			rw.Header().Set("Content-Type", "text/x.tlog.size")
			rw.WriteHeader(http.StatusConflict)
			fmt.Fprint(rw, "1\n2\n")
		}, witness.CodeResponseInvalid},
		{"409 that keeps moving", func() http.HandlerFunc {
			n := 0
			return func(rw http.ResponseWriter, r *http.Request) {
				n++
				rw.Header().Set("Content-Type", "text/x.tlog.size")
				rw.WriteHeader(http.StatusConflict)
				fmt.Fprintf(rw, "%d\n", n)
			}
		}(), witness.CodeConflict},
		{"409 at the checkpoint's size after old 3", func(rw http.ResponseWriter, r *http.Request) {
			rw.Header().Set("Content-Type", "text/x.tlog.size")
			rw.WriteHeader(http.StatusConflict)
			fmt.Fprint(rw, "3\n")
		}, witness.CodeInconsistent},
		{"200 empty", func(rw http.ResponseWriter, r *http.Request) {}, witness.CodeResponseInvalid},
		{"200 not signature lines", func(rw http.ResponseWriter, r *http.Request) {
			fmt.Fprint(rw, "hello\n")
		}, witness.CodeResponseInvalid},
		{"200 signature of another key", func(rw http.ResponseWriter, r *http.Request) {
			fmt.Fprintf(rw, "— other.example %s\n", b64(make([]byte, 76)))
		}, witness.CodeCosignature},
		{"200 forged signature of the key", func(rw http.ResponseWriter, r *http.Request) {
			fmt.Fprintf(rw, "— w.example %s\n", forged(v))
		}, witness.CodeCosignature},
		{"200 oversized", func(rw http.ResponseWriter, r *http.Request) {
			fmt.Fprint(rw, strings.Repeat("— x AAAA\n", witness.MaxResponseSize/8))
		}, witness.CodeResponseInvalid},
		{"404 as the spec answers an unknown origin", func(rw http.ResponseWriter, r *http.Request) {
			http.Error(rw, "unknown log", http.StatusNotFound)
		}, witness.CodeUnknownLog},
		{"422", func(rw http.ResponseWriter, r *http.Request) {
			http.Error(rw, "bad proof", http.StatusUnprocessableEntity)
		}, witness.CodeInconsistent},
		{"400", func(rw http.ResponseWriter, r *http.Request) {
			http.Error(rw, "bad request", http.StatusBadRequest)
		}, witness.CodeRefused},
		{"500", func(rw http.ResponseWriter, r *http.Request) { rw.WriteHeader(500) }, witness.CodeUnreachable},
		{"429", func(rw http.ResponseWriter, r *http.Request) { rw.WriteHeader(429) }, witness.CodeRefused},
		{"307 redirect", func(rw http.ResponseWriter, r *http.Request) {
			http.Redirect(rw, r, "http://127.0.0.1:1/add-checkpoint", http.StatusTemporaryRedirect)
		}, witness.CodeResponseInvalid},
		{"slow", func(rw http.ResponseWriter, r *http.Request) {
			select {
			case <-time.After(1500 * time.Millisecond):
			case <-r.Context().Done():
			}
		}, witness.CodeUnreachable},
	}
	for _, vec := range vectors {
		t.Run(vec.name, func(t *testing.T) {
			url := witnesstest.Hostile(t, vec.handler)
			c, err := witness.New(url, v, 500*time.Millisecond)
			if err != nil {
				t.Fatal(err)
			}
			_, err = c.Submit(context.Background(), signed, 3, log.proof)
			wantCode(t, err, vec.code)
		})
	}
}

// forged is a well-formed cosignature of v's name and key ID that v did not make.
func forged(v *policy.CosignatureVerifier) string {
	b := make([]byte, 4+8+64)
	b[0], b[1], b[2], b[3] = byte(v.KeyHash()>>24), byte(v.KeyHash()>>16), byte(v.KeyHash()>>8), byte(v.KeyHash())
	b[11] = 1
	return b64(b)
}

func b64(b []byte) string { return base64.StdEncoding.EncodeToString(b) }

func errorsAs(err error, target any) bool { return errors.As(err, target) }

// BenchmarkLitewitnessAddCheckpoint: one add-checkpoint round trip to the real litewitness
// (the log grows by one leaf per submission; the proof is made outside the timer).
func BenchmarkLitewitnessAddCheckpoint(b *testing.B) {
	log := newMemLog(b, "example.com/ql3-test/bench")
	w := witnesstest.Start(b, "witness.example/ql3-bench", log.origin, log.vkey)
	c := client(b, w.URL, w.Verifier)
	ctx := context.Background()
	var last int64
	for b.Loop() {
		b.StopTimer()
		log.grow(b, log.n+1, "bench")
		signed := log.checkpoint(b)
		var p tlog.TreeProof
		if last > 0 {
			var err error
			if p, err = log.proof(last); err != nil {
				b.Fatal(err)
			}
		}
		b.StartTimer()
		if _, err := c.AddCheckpoint(ctx, last, p, signed); err != nil {
			b.Fatal(err)
		}
		last = log.n
	}
}
