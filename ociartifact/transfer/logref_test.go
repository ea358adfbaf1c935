package transfer_test

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/opencontainers/go-digest"
	ocispec "github.com/opencontainers/image-spec/specs-go/v1"
	"golang.org/x/mod/sumdb/note"

	"github.com/qinglong/ql3/attest"
	"github.com/qinglong/ql3/audit"
	"github.com/qinglong/ql3/deploylog"
	"github.com/qinglong/ql3/evidence"
	"github.com/qinglong/ql3/internal/testbed/ocitest"
	"github.com/qinglong/ql3/ociartifact"
	"github.com/qinglong/ql3/ociartifact/transfer"
	"github.com/qinglong/ql3/refuse"
	"github.com/qinglong/ql3/store"
)

const testOrigin = "example.com/ql3/test"

// logKey is a note key pair of testOrigin.
func logKey(t testing.TB) (note.Signer, deploylog.KeyVerifier) {
	t.Helper()
	skey, vkey, err := deploylog.GenerateKey(testOrigin)
	if err != nil {
		t.Fatal(err)
	}
	s, err := deploylog.NewSigner(skey)
	if err != nil {
		t.Fatal(err)
	}
	v, err := deploylog.NewVerifier(vkey)
	if err != nil {
		t.Fatal(err)
	}
	return s, deploylog.KeyVerifier{V: v}
}

// loggedSource is source() with a log: the preflight, intent, receipt and the receipt's
// attestation backfilled as leaves 0..3, and a checkpoint of size 4 signed by k.
func loggedSource(t testing.TB, k note.Signer) (*store.Store, evidence.Descriptor, digest.Digest, []byte) {
	t.Helper()
	src, rc, _ := source(t)
	if n, err := src.InitLog(testOrigin); err != nil || n != 4 {
		t.Fatalf("log init: %d %v", n, err)
	}
	cp, _, err := src.SignCheckpoint(k)
	if err != nil {
		t.Fatal(err)
	}
	rep, err := src.Verify()
	if err != nil || len(rep.Preflights) != 1 {
		t.Fatalf("%v %+v", err, rep)
	}
	return src, rc, rep.Preflights[0].Descriptor.Digest, cp
}

// pushLogged pushes root's artifact with its attestations and its log referrer.
func pushLogged(t testing.TB, r *ocitest.Registry, src *store.Store, root digest.Digest, ref string) *ociartifact.Collected {
	t.Helper()
	att, err := ociartifact.StoreAttachments(src, root)
	if err != nil {
		t.Fatal(err)
	}
	c, err := ociartifact.Collect(src, root, att)
	if err != nil {
		t.Fatal(err)
	}
	none, err := c.AttachStoreLog(src)
	if err != nil || none != nil || c.Log == nil {
		t.Fatalf("attach log: %v %v", none, err)
	}
	if _, err := transfer.PushCollected(context.Background(), c, ref, opts(r)); err != nil {
		t.Fatalf("push: %v", err)
	}
	return c
}

// pushLogReferrer attaches a hand-made log referrer (proof and entry bundle) to the artifact
// c at ref, with oras-go directly: what anyone who can push to the repository can do.
func pushLogReferrer(t testing.TB, r *ocitest.Registry, ref string, c *ociartifact.Collected, proof, entries []byte) {
	t.Helper()
	ctx := context.Background()
	repo, _, err := transfer.Repository(ref, opts(r))
	if err != nil {
		t.Fatal(err)
	}
	pd := evidence.Descriptor{MediaType: ociartifact.MediaTypeTlogProof, Digest: evidence.FromBytes(proof), Size: int64(len(proof))}
	ed := evidence.Descriptor{MediaType: ociartifact.MediaTypeLogEntries, Digest: evidence.FromBytes(entries), Size: int64(len(entries))}
	for _, b := range []struct {
		d evidence.Descriptor
		b []byte
	}{{pd, proof}, {ed, entries}} {
		od := ocispec.Descriptor{MediaType: b.d.MediaType, Digest: b.d.Digest, Size: b.d.Size}
		if ok, _ := repo.Exists(ctx, od); !ok {
			if err := repo.Push(ctx, od, bytes.NewReader(b.b)); err != nil {
				t.Fatal(err)
			}
		}
	}
	mb, md, err := ociartifact.LogReferrerManifest(c.Desc, c.Root.Descriptor.Digest, pd, ed)
	if err != nil {
		t.Fatal(err)
	}
	if err := repo.Push(ctx, md, bytes.NewReader(mb)); err != nil {
		t.Fatal(err)
	}
}

// pushPlain pushes root's artifact without any referrer.
func pushPlain(t testing.TB, r *ocitest.Registry, src *store.Store, root digest.Digest, ref string) *ociartifact.Collected {
	t.Helper()
	c, err := ociartifact.Collect(src, root, nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := transfer.PushCollected(context.Background(), c, ref, opts(r)); err != nil {
		t.Fatal(err)
	}
	return c
}

// nothingWritten: the store holds no object, no index entry and no log.
func nothingWritten(t testing.TB, dst *store.Store) {
	t.Helper()
	if fs := files(t, dst); len(fs) != 0 {
		t.Fatalf("a refused pull wrote %v", fs)
	}
	if _, err := os.Lstat(filepath.Join(dst.Root(), "log")); !os.IsNotExist(err) {
		t.Fatalf("a refused pull made log/: %v", err)
	}
}

func pullLog(dst *store.Store, ref string, r *ocitest.Registry, lo transfer.LogOptions) (*deploylog.Checkpoint, error) {
	_, _, cp, err := transfer.PullWithLog(context.Background(), ref, dst, opts(r), lo)
	return cp, err
}

// TestLogPushPull: push with the log, pull into an empty store with the log key, audit there with
// the key (inclusion from the pulled store's own log), and log verify --since the source's
// checkpoint passes; pulling again is a no-op; a newer checkpoint is a second referrer and the
// pull takes the largest; a pull into a store with publications and no log is refused.
func TestLogPushPull(t *testing.T) {
	r := registry(t)
	k, v := logKey(t)
	src, rc, _, cp := loggedSource(t, k)
	ref := r.Host + "/ql3/logged:receipt"
	c := pushLogged(t, r, src, rc.Digest, ref)
	rp, err := src.LogProof(rc.Digest, nil)
	if err != nil {
		t.Fatal(err)
	}
	if c.Log.Checkpoint.Size != 4 || c.Log.Index != rp.Index {
		t.Fatalf("log referrer of leaf %d in size %d", c.Log.Index, c.Log.Checkpoint.Size)
	}
	dst := freshStore(t)
	got, err := pullLog(dst, ref, r, transfer.LogOptions{Verifier: v, Since: cp})
	if err != nil {
		t.Fatalf("pull --log-key: %v", err)
	}
	if got.Size != 4 || got.Origin != testOrigin {
		t.Fatalf("pulled checkpoint %+v", got)
	}
	lr, err := dst.VerifyLog(store.LogVerifyOptions{Verifier: v, Since: cp})
	if err != nil || !lr.OK() {
		t.Fatalf("log verify --since on the pulled store: %v %+v", err, lr)
	}
	ar, err := audit.AuditWith(dst, rc.Digest, audit.Options{LogVerifier: v, Keys: []*attest.PublicKey{signer.Public()}})
	if err != nil || !ar.OK || ar.Log == nil || ar.Log.Index != rp.Index || ar.Log.Source != "store" {
		t.Fatalf("audit --log-key of the pulled store: %v %+v", err, ar)
	}
	if rep, err := dst.Verify(); err != nil || !rep.OK() || len(rep.Receipts) != 1 || rep.Attestations != 1 {
		t.Fatalf("store verify: %v %+v", err, rep)
	}
	// Again: the same log, nothing new.
	if _, err := pullLog(dst, ref, r, transfer.LogOptions{Verifier: v}); err != nil {
		t.Fatalf("second pull: %v", err)
	}
	if lr, err := dst.VerifyLog(store.LogVerifyOptions{Verifier: v}); err != nil || !lr.OK() || lr.Size != 4 {
		t.Fatalf("log after the second pull: %v %+v", err, lr)
	}

	// A newer checkpoint (a second attestation, signed): pushed again, the artifact has two log
	// referrers; the pull takes the larger, and extends the store's log from 4 to 5 leaves.
	if _, err := attest.Attest(src, rc.Digest, signer, attest.Options{QL3Version: "test"}); err != nil {
		t.Fatal(err)
	}
	cp5, _, err := src.SignCheckpoint(k)
	if err != nil {
		t.Fatal(err)
	}
	pushLogged(t, r, src, rc.Digest, ref)
	if got, err := pullLog(dst, ref, r, transfer.LogOptions{Verifier: v, Since: cp5}); err != nil || got.Size != 5 {
		t.Fatalf("pull of the newer log: %v %+v", err, got)
	}
	if lr, err := dst.VerifyLog(store.LogVerifyOptions{Verifier: v, Since: cp5}); err != nil || !lr.OK() || lr.Size != 5 {
		t.Fatalf("log after the newer pull: %v %+v", err, lr)
	}
	if rep, err := dst.Verify(); err != nil || !rep.OK() || rep.Attestations != 2 {
		t.Fatalf("store verify: %v %+v", err, rep)
	}

	// A store with publications and no log cannot take the log.
	plain := freshStore(t)
	if _, _, err := transfer.Pull(context.Background(), ref, plain, opts(r)); err != nil {
		t.Fatal(err)
	}
	before := files(t, plain)
	if _, err := pullLog(plain, ref, r, transfer.LogOptions{Verifier: v}); code(err) != store.CodeLogImportUnlogged {
		t.Fatalf("pull into a store without a log: %v", err)
	}
	if after := files(t, plain); strings.Join(after, "\n") != strings.Join(before, "\n") {
		t.Fatalf("refused pull wrote %v", after)
	}
}

// TestLogPullAttacks: each attack on the log referrer is refused with its code, and the pull
// writes nothing.
func TestLogPullAttacks(t *testing.T) {
	r := registry(t)
	k, v := logKey(t)
	src, rc, pf, cp := loggedSource(t, k)
	other, _ := logKey(t) // another key of the same origin name
	leaves, err := src.LogLeaves(4)
	if err != nil {
		t.Fatal(err)
	}
	good, err := src.LogProof(rc.Digest, nil)
	if err != nil {
		t.Fatal(err)
	}
	c4, err := deploylog.ParseCheckpoint(string(cp[:bytes.Index(cp, []byte("\n\n"))+1]))
	if err != nil {
		t.Fatal(err)
	}
	forged, err := deploylog.Sign(c4, other)
	if err != nil {
		t.Fatal(err)
	}
	pfProof, err := src.LogProof(pf, nil)
	if err != nil {
		t.Fatal(err)
	}
	withCheckpoint := func(p deploylog.Proof, note []byte) []byte { p.Checkpoint = note; return p.Marshal() }

	// A forked log of the same size, signed by the same key: the same store's evidence with
	// another attestation (ECDSA signs anew), logged and signed.
	fork, frc, _ := source(t)
	if _, err := fork.InitLog(testOrigin); err != nil {
		t.Fatal(err)
	}
	if _, _, err := fork.SignCheckpoint(k); err != nil {
		t.Fatal(err)
	}

	cases := []struct {
		name string
		push func(ref string)
		dst  func() *store.Store
		lo   transfer.LogOptions
		want refuse.Code
	}{
		{"no log referrer", func(ref string) { pushPlain(t, r, src, rc.Digest, ref) }, nil, transfer.LogOptions{Verifier: v}, ociartifact.CodeLogMissing},
		{"proof of another record", func(ref string) {
			c := pushPlain(t, r, src, rc.Digest, ref)
			pushLogReferrer(t, r, ref, c, pfProof.Marshal(), ociartifact.MarshalEntries(leaves))
		}, nil, transfer.LogOptions{Verifier: v}, deploylog.CodeProofRecord},
		{"checkpoint signed by another key", func(ref string) {
			c := pushPlain(t, r, src, rc.Digest, ref)
			pushLogReferrer(t, r, ref, c, withCheckpoint(good, forged), ociartifact.MarshalEntries(leaves))
		}, nil, transfer.LogOptions{Verifier: v}, deploylog.CodeCheckpointSig},
		{"truncated log", func(ref string) {
			c := pushPlain(t, r, src, rc.Digest, ref)
			pushLogReferrer(t, r, ref, c, good.Marshal(), ociartifact.MarshalEntries(leaves[:3]))
		}, nil, transfer.LogOptions{Verifier: v}, deploylog.CodeRollback},
		{"swapped leaves", func(ref string) {
			c := pushPlain(t, r, src, rc.Digest, ref)
			sw := [][]byte{leaves[1], leaves[0], leaves[2], leaves[3]}
			pushLogReferrer(t, r, ref, c, good.Marshal(), ociartifact.MarshalEntries(sw))
		}, nil, transfer.LogOptions{Verifier: v}, store.CodeLogCheckpointStale},
		{"the wrong key given", func(ref string) { pushLogged(t, r, src, rc.Digest, ref) }, nil,
			transfer.LogOptions{Verifier: func() deploylog.KeyVerifier { _, v := logKey(t); return v }()}, deploylog.CodeCheckpointSig},
		{"stale: older than the --since checkpoint", func(ref string) { pushLogged(t, r, src, rc.Digest, ref) }, nil,
			transfer.LogOptions{Verifier: v, Since: func() []byte {
				b, err := deploylog.Sign(deploylog.Checkpoint{Origin: testOrigin, Size: 5, Hash: c4.Hash}, k)
				if err != nil {
					t.Fatal(err)
				}
				return b
			}()}, deploylog.CodeRollback},
		{"fork of the store's log", func(ref string) { pushLogged(t, r, fork, frc.Digest, ref) }, func() *store.Store {
			dst := freshStore(t)
			ref := r.Host + "/ql3/attack-forkbase:receipt"
			pushLogged(t, r, src, rc.Digest, ref)
			if _, err := pullLog(dst, ref, r, transfer.LogOptions{Verifier: v}); err != nil {
				t.Fatal(err)
			}
			return dst
		}, transfer.LogOptions{Verifier: v}, deploylog.CodeFork},
	}
	for i, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			ref := r.Host + "/ql3/attack" + string(rune('a'+i)) + ":receipt"
			tc.push(ref)
			var dst *store.Store
			var before []string
			if tc.dst != nil {
				dst = tc.dst()
				before = files(t, dst)
			} else {
				dst = freshStore(t)
			}
			_, err := pullLog(dst, ref, r, tc.lo)
			if code(err) != tc.want {
				t.Fatalf("got %v, want %s", err, tc.want)
			}
			if tc.dst == nil {
				nothingWritten(t, dst)
			} else if after := files(t, dst); strings.Join(after, "\n") != strings.Join(before, "\n") {
				t.Fatalf("a refused pull wrote into the store: %v", after)
			}
		})
	}
}

// TestLogPartialCopy: a copy holding only some roots' pulls says what it lacks. The preflight
// report alone is pulled (its leaf 0, with the log up to the checkpoint): log verify --since
// names the intent's, the receipt's and the attestation's leaves as missing; pulling the receipt
// too completes the copy.
func TestLogPartialCopy(t *testing.T) {
	r := registry(t)
	k, v := logKey(t)
	src, rc, pf, cp := loggedSource(t, k)
	pushLogged(t, r, src, pf, r.Host+"/ql3/partial:preflight")
	pushLogged(t, r, src, rc.Digest, r.Host+"/ql3/partial:receipt")
	dst := freshStore(t)
	if _, err := pullLog(dst, r.Host+"/ql3/partial:preflight", r, transfer.LogOptions{Verifier: v}); err != nil {
		t.Fatal(err)
	}
	lr, err := dst.VerifyLog(store.LogVerifyOptions{Verifier: v, Since: cp})
	if err != nil || lr.OK() {
		t.Fatalf("log verify of a partial copy passed: %v %+v", err, lr)
	}
	// The backfill orders leaves by the entries' file times: the preflight's leaf is found, not
	// assumed.
	pp, err := src.LogProof(pf, nil)
	if err != nil {
		t.Fatal(err)
	}
	missing := map[int64][]refuse.Code{}
	for _, f := range lr.Errors {
		missing[f.Leaf] = append(missing[f.Leaf], f.Code)
	}
	for i := int64(0); i < 4; i++ {
		if i != pp.Index && len(missing[i]) != 2 {
			t.Errorf("leaf %d is not named missing (entry and record): %+v", i, lr.Errors)
		}
	}
	if len(missing[pp.Index]) != 0 || len(missing) != 3 {
		t.Errorf("findings beyond the three leaves not pulled: %+v", lr.Errors)
	}
	if err := lr.Err(); refuse.CodeOf(err) != store.CodeLogEntryMissing && refuse.CodeOf(err) != store.CodeLogRecordMissing {
		t.Errorf("first error %v", err)
	}
	if _, err := pullLog(dst, r.Host+"/ql3/partial:receipt", r, transfer.LogOptions{Verifier: v}); err != nil {
		t.Fatalf("pull of the receipt into the partial copy: %v", err)
	}
	if lr, err := dst.VerifyLog(store.LogVerifyOptions{Verifier: v, Since: cp}); err != nil || !lr.OK() {
		t.Fatalf("log verify of the completed copy: %v %+v", err, lr)
	}
}
