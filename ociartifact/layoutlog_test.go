package ociartifact_test

import (
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/opencontainers/go-digest"
	"golang.org/x/mod/sumdb/note"

	"github.com/qinglong/ql3/deploylog"
	"github.com/qinglong/ql3/internal/testbed/ocitest"
	"github.com/qinglong/ql3/ociartifact"
	"github.com/qinglong/ql3/refuse"
	"github.com/qinglong/ql3/store"
)

const layoutOrigin = "example.com/ql3/layout"

func noteKey(t testing.TB, origin string) (note.Signer, deploylog.KeyVerifier) {
	t.Helper()
	skey, vkey, err := deploylog.GenerateKey(origin)
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

// exportLogged exports root of s, its attestations and its log referrer, into a new layout.
func exportLogged(t testing.TB, s *store.Store, root digest.Digest, withLog bool) string {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "layout")
	if _, err := ociartifact.Export(collectLogged(t, s, root, withLog), dir, ""); err != nil {
		t.Fatal(err)
	}
	return dir
}

// collectLogged collects root of s with its attestations and (withLog) its log referrer.
func collectLogged(t testing.TB, s *store.Store, root digest.Digest, withLog bool) *ociartifact.Collected {
	t.Helper()
	att, err := ociartifact.StoreAttachments(s, root)
	if err != nil {
		t.Fatal(err)
	}
	c, err := ociartifact.Collect(s, root, att)
	if err != nil {
		t.Fatal(err)
	}
	if withLog {
		none, err := c.AttachStoreLog(s)
		if err != nil || none != nil {
			t.Fatalf("attach log: %v %v", none, err)
		}
	}
	return c
}

func verifyLayoutLog(t testing.TB, dir string, o store.LogVerifyOptions) (*store.LogReport, error) {
	t.Helper()
	l, err := ociartifact.OpenLayout(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.VerifyLog(o)
}

// codes lists the report's error codes with their leaves, in order.
func codes(r *store.LogReport) string {
	var b strings.Builder
	for _, f := range r.Errors {
		b.WriteString(string(f.Code))
		if f.Leaf >= 0 {
			b.WriteString("@" + strconv.FormatInt(f.Leaf, 10))
		}
		b.WriteString(" ")
	}
	return strings.TrimSpace(b.String())
}

// TestLayoutVerifyLog: `log verify --layout` on what `store export` writes. A layout of the one
// root a store published (with its attestation) holds every leaf's publication; one exported
// before the log grew is a rollback of a later checkpoint; one root of several names the other
// root's leaves; a layout missing its entry bundle, a leaf's record, or the log referrer, and a
// checkpoint of another key, are each refused with their code.
func TestLayoutVerifyLog(t *testing.T) {
	s, rc := ocitest.Receipt1000(t)
	bundle(t, s, rc.Digest)
	if n, err := s.InitLog(layoutOrigin); err != nil || n != 4 {
		t.Fatalf("log init: %d %v", n, err)
	}
	k, v := noteKey(t, layoutOrigin)
	cp4, _, err := s.SignCheckpoint(k)
	if err != nil {
		t.Fatal(err)
	}
	complete := exportLogged(t, s, rc.Digest, true)

	t.Run("complete", func(t *testing.T) {
		r, err := verifyLayoutLog(t, complete, store.LogVerifyOptions{Verifier: v, Since: cp4})
		if err != nil || !r.OK() || len(r.Hints) != 0 {
			t.Fatalf("%v %+v", err, r)
		}
		if r.Origin != layoutOrigin || r.Size != 4 || r.SignedSize != 4 || r.UnsignedTail != 0 || len(r.Checkpoints) != 1 || !r.Checkpoints[0].Trusted || r.Since == nil || !r.Since.Trusted {
			t.Fatalf("%+v", r)
		}
		// Without a key: the same, but nothing is signed and it says so.
		r, err = verifyLayoutLog(t, complete, store.LogVerifyOptions{})
		if err != nil || !r.OK() || r.UnsignedTail != 4 || len(r.Hints) != 2 || r.Hints[0].Code != store.CodeLogSignatureSkip || r.Hints[1].Code != store.CodeLogUnsignedTail {
			t.Fatalf("%v %+v", err, r)
		}
	})

	t.Run("another key", func(t *testing.T) {
		_, other := noteKey(t, layoutOrigin)
		r, err := verifyLayoutLog(t, complete, store.LogVerifyOptions{Verifier: other})
		if err != nil || r.OK() || r.Errors[0].Code != deploylog.CodeCheckpointSig || r.SignedSize != 0 {
			t.Fatalf("%v %+v", err, r)
		}
	})

	// The store publishes a live-audit report (leaf 4) and signs size 5.
	la := liveAuditOf(t, s, rc)
	cp5, _, err := s.SignCheckpoint(k)
	if err != nil {
		t.Fatal(err)
	}

	t.Run("since rollback", func(t *testing.T) {
		r, err := verifyLayoutLog(t, complete, store.LogVerifyOptions{Verifier: v, Since: cp5})
		if err != nil || codes(r) != "LOG_ROLLBACK" || !strings.Contains(r.Errors[0].Msg, "a copy missing leaves 4 to 4") {
			t.Fatalf("%v %+v", err, r)
		}
		if refuse.CodeOf(r.Err()) != deploylog.CodeRollback {
			t.Fatalf("%v", r.Err())
		}
	})

	t.Run("a root missing", func(t *testing.T) {
		// The receipt's layout, exported at size 5: it lacks the live-audit report of leaf 4.
		r, err := verifyLayoutLog(t, exportLogged(t, s, rc.Digest, true), store.LogVerifyOptions{Verifier: v, Since: cp5})
		if err != nil || codes(r) != "LOG_ENTRY_MISSING@4 LOG_RECORD_MISSING@4" {
			t.Fatalf("%v %s %+v", err, codes(r), r)
		}
		if !strings.Contains(r.Errors[0].Msg, "the live-audit entry "+string(la.Digest)+" that leaf 4 records is not in the layout") {
			t.Fatal(r.Errors[0].Msg)
		}
		// The live-audit report's layout carries the receipt's closure and entries, not the
		// receipt's attestation (leaf 3): named, entry and record.
		r, err = verifyLayoutLog(t, exportLogged(t, s, la.Digest, true), store.LogVerifyOptions{Verifier: v, Since: cp5})
		if err != nil || codes(r) != "LOG_ENTRY_MISSING@3 LOG_RECORD_MISSING@3" {
			t.Fatalf("%v %s %+v", err, codes(r), r)
		}
	})

	t.Run("a blob missing", func(t *testing.T) {
		dir := exportLogged(t, s, rc.Digest, true)
		l, err := ociartifact.OpenLayout(dir)
		if err != nil {
			t.Fatal(err)
		}
		r0, err := l.VerifyLog(store.LogVerifyOptions{Verifier: v})
		l.Close()
		if err != nil || r0.Size != 5 {
			t.Fatalf("%v %+v", err, r0)
		}
		// The preflight report (a leaf's record, an object of the closure).
		pf := dir + "/blobs/sha256/"
		rep, err := s.Verify()
		if err != nil {
			t.Fatal(err)
		}
		if err := os.Remove(pf + rep.Preflights[0].Descriptor.Digest.Encoded()); err != nil {
			t.Fatal(err)
		}
		r, err := verifyLayoutLog(t, dir, store.LogVerifyOptions{Verifier: v})
		// The backfill orders the fixture's preflight, intent and receipt by their entries' file
		// times: the preflight is one of leaves 0 to 2.
		if err != nil || !regexp.MustCompile(`^LOG_RECORD_MISSING@[012] LOG_ENTRY_MISSING@4 LOG_RECORD_MISSING@4$`).MatchString(codes(r)) {
			t.Fatalf("%v %s %+v", err, codes(r), r)
		}
		// The entry bundle: the referrer carries no log; nothing else to verify.
		r, err = verifyLayoutLog(t, complete, store.LogVerifyOptions{Verifier: v})
		if err != nil || !r.OK() {
			t.Fatalf("%v %+v", err, r)
		}
		ents, err := os.ReadDir(complete + "/blobs/sha256")
		if err != nil {
			t.Fatal(err)
		}
		removed := false
		for _, e := range ents {
			b, err := os.ReadFile(complete + "/blobs/sha256/" + e.Name())
			if err != nil {
				t.Fatal(err)
			}
			if _, leaves, err := ociartifact.ParseEntries(b); err == nil && len(leaves) == 4 {
				if err := os.Remove(complete + "/blobs/sha256/" + e.Name()); err != nil {
					t.Fatal(err)
				}
				removed = true
			}
		}
		if !removed {
			t.Fatal("no entry bundle of 4 leaves in the layout")
		}
		r, err = verifyLayoutLog(t, complete, store.LogVerifyOptions{Verifier: v})
		if err != nil || codes(r) != string(store.CodeObjectNotFound) || r.Size != 0 {
			t.Fatalf("%v %s %+v", err, codes(r), r)
		}
	})

	t.Run("every root", func(t *testing.T) {
		// One layout of both roots (store export DIGEST... DIR): every leaf's publication is in
		// it; the blobs the closures share are written once; the same root twice is listed once.
		dir := filepath.Join(t.TempDir(), "layout")
		cs := []*ociartifact.Collected{collectLogged(t, s, rc.Digest, true), collectLogged(t, s, la.Digest, true), collectLogged(t, s, rc.Digest, true)}
		ds, err := ociartifact.ExportAll(cs, dir, []string{"", "", ""})
		if err != nil || len(ds) != 3 || ds[0].Digest != cs[0].Desc.Digest || ds[1].Digest != cs[1].Desc.Digest {
			t.Fatalf("%v %v", ds, err)
		}
		r, err := verifyLayoutLog(t, dir, store.LogVerifyOptions{Verifier: v, Since: cp5})
		if err != nil || !r.OK() || len(r.Hints) != 0 || r.Size != 5 || r.SignedSize != 5 || len(r.Checkpoints) != 1 {
			t.Fatalf("%v %s %+v", err, codes(r), r)
		}
		l, err := ociartifact.OpenLayout(dir)
		if err != nil {
			t.Fatal(err)
		}
		defer l.Close()
		if roots := l.Roots(); len(roots) != 2 || roots[0].Kind != ociartifact.KindReceipt || roots[1].Kind != ociartifact.KindLiveAudit {
			t.Fatalf("roots %+v", roots)
		}
		rep, err := l.Verify()
		if err != nil || !rep.OK() || len(rep.Hints) != 0 || len(rep.LiveAudits) != 1 {
			t.Fatalf("%v %+v", err, rep)
		}
	})

	t.Run("published outside the carried log", func(t *testing.T) {
		// A second attestation after the last checkpoint (leaf 5, unsigned): the referrer carries
		// the log up to size 5, the layout carries the attestation, which no carried leaf records.
		bundle(t, s, rc.Digest)
		dir := exportLogged(t, s, rc.Digest, true)
		r, err := verifyLayoutLog(t, dir, store.LogVerifyOptions{Verifier: v})
		if err != nil || codes(r) != "LOG_ENTRY_MISSING@4 LOG_RECORD_MISSING@4 LOG_ENTRY_NO_LEAF" {
			t.Fatalf("%v %s %+v", err, codes(r), r)
		}
	})

	t.Run("no log referrer", func(t *testing.T) {
		_, err := verifyLayoutLog(t, exportLogged(t, s, rc.Digest, false), store.LogVerifyOptions{Verifier: v})
		if refuse.CodeOf(err) != ociartifact.CodeLogMissing {
			t.Fatalf("%v", err)
		}
	})
}
