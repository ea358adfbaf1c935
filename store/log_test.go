package store

import (
	"bytes"
	"crypto/sha256"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/opencontainers/go-digest"
	"golang.org/x/mod/sumdb/note"

	"github.com/qinglong/ql3/deploylog"
	"github.com/qinglong/ql3/evidence"
	"github.com/qinglong/ql3/internal/uring/uringtest"
	"github.com/qinglong/ql3/refuse"
)

const testOrigin = "example.com/ql3/test"

func logKey(t testing.TB, origin string) (note.Signer, deploylog.KeyVerifier) {
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

// publishIntent publishes intent number i (its own record, under its own key) and returns the
// record's descriptor and key.
func publishIntent(t testing.TB, s *Store, i int) (evidence.Descriptor, digest.Digest) {
	t.Helper()
	d, err := s.PutBlob(evidence.MediaTypeOctets, fmt.Appendf(nil, "object %d", i))
	if err != nil {
		t.Fatal(err)
	}
	rec, _, err := s.PutRecord(evidence.MediaTypeIntent, testIntent(d))
	if err != nil {
		t.Fatal(err)
	}
	key := evidence.FromBytes(fmt.Appendf(nil, "key %d", i))
	if err := s.PutIndex(evidence.IndexIntents, key, rec); err != nil {
		t.Fatal(err)
	}
	return rec, key
}

func newLogStore(t testing.TB) *Store {
	t.Helper()
	root := filepath.Join(t.(interface{ TempDir() string }).TempDir(), "s")
	if r, err := filepath.EvalSymlinks(filepath.Dir(root)); err == nil {
		root = filepath.Join(r, "s")
	}
	s, err := Init(root)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	if _, err := s.InitLog(testOrigin); err != nil {
		t.Fatal(err)
	}
	return s
}

// verifyLog runs VerifyLog, and again with a Publication consumer (history's path), which must
// report the same findings and be handed only what the check read: each publication once, its
// record's bytes hashing to the entry's digest.
func verifyLog(t testing.TB, s *Store, o LogVerifyOptions) *LogReport {
	t.Helper()
	r, err := s.VerifyLog(o)
	if err != nil {
		t.Fatal(err)
	}
	if o.Publication == nil {
		var mu sync.Mutex
		seen := map[int64]bool{}
		var bad []string
		o.Publication = func(p LogPublication) {
			mu.Lock()
			defer mu.Unlock()
			if seen[p.Leaf] {
				bad = append(bad, fmt.Sprintf("leaf %d handed twice", p.Leaf))
			}
			seen[p.Leaf] = true
			if p.Record != nil && digest.FromBytes(p.Record) != p.Entry.Digest {
				bad = append(bad, fmt.Sprintf("leaf %d: record bytes not of %s", p.Leaf, p.Entry.Digest))
			}
		}
		r2, err := s.VerifyLog(o)
		if err != nil {
			t.Fatal(err)
		}
		if len(bad) > 0 {
			t.Fatalf("publications: %v", bad)
		}
		if !reflect.DeepEqual(r, r2) {
			t.Fatalf("log verify with a publication consumer differs:\n%+v\n%+v", r, r2)
		}
	}
	return r
}

func wantLogOK(t testing.TB, r *LogReport) {
	t.Helper()
	if !r.OK() {
		t.Fatalf("log verify: %+v", r.Errors)
	}
}

func codes(fs []LogFinding) map[refuse.Code]int {
	out := map[refuse.Code]int{}
	for _, f := range fs {
		out[f.Code]++
	}
	return out
}

func wantFinding(t testing.TB, r *LogReport, code refuse.Code) {
	t.Helper()
	if codes(r.Errors)[code] == 0 {
		t.Fatalf("want a %s finding, got %+v", code, r.Errors)
	}
}

// snapshot is every file under root with its bytes and mode: "nothing written" is compared on it.
func snapshot(t testing.TB, root string) string {
	t.Helper()
	var b bytes.Buffer
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		fi, err := d.Info()
		if err != nil {
			return err
		}
		fmt.Fprintf(&b, "%s %v\n", p, fi.Mode())
		if d.Type().IsRegular() {
			c, err := os.ReadFile(p)
			if err != nil && !os.IsPermission(err) {
				return err
			}
			fmt.Fprintf(&b, "%x\n", sha256.Sum256(c))
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return b.String()
}

func TestLogAppendVerifySign(t *testing.T) {
	s := newLogStore(t)
	sg, kv := logKey(t, testOrigin)
	for i := 0; i < 5; i++ {
		publishIntent(t, s, i)
	}
	rec, key := publishIntent(t, s, 2) // the same entry again: no leaf
	_ = rec
	if err := s.PutIndex(evidence.IndexIntents, key, evidence.Descriptor{MediaType: evidence.MediaTypeIntent,
		Digest: evidence.FromBytes([]byte("other")), Size: 5}); refuse.CodeOf(err) != CodeIndexConflict {
		t.Fatalf("conflicting entry: %v", err)
	}
	subject, statement, bundle := attestedData()
	if _, _, err := s.PutAttested(subject, statement, bundle); err != nil {
		t.Fatal(err)
	}
	r := verifyLog(t, s, LogVerifyOptions{Verifier: kv})
	wantLogOK(t, r)
	if r.Size != 6 || r.SignedSize != 0 || r.UnsignedTail != 6 {
		t.Fatalf("report %+v", r)
	}
	msg, cp, err := s.SignCheckpoint(sg)
	if err != nil || cp.Size != 6 {
		t.Fatalf("sign: %v %+v", err, cp)
	}
	if _, _, err := s.SignCheckpoint(sg); err != nil { // same size, same key: a no-op
		t.Fatal(err)
	}
	r = verifyLog(t, s, LogVerifyOptions{Verifier: kv, Since: msg})
	wantLogOK(t, r)
	if r.SignedSize != 6 || r.UnsignedTail != 0 || len(r.Checkpoints) != 1 || !r.Checkpoints[0].Trusted {
		t.Fatalf("report %+v", r)
	}
	publishIntent(t, s, 9)
	r = verifyLog(t, s, LogVerifyOptions{Verifier: kv, Since: msg})
	wantLogOK(t, r)
	if r.UnsignedTail != 1 || codes(r.Hints)[CodeLogUnsignedTail] != 1 {
		t.Fatalf("report %+v", r)
	}
	// A proof for the attestation's statement and for an intent, checked by deploylog alone.
	p, err := s.LogProof(evidence.FromBytes(statement), kv)
	if err != nil {
		t.Fatal(err)
	}
	q, err := deploylog.ParseProof(p.Marshal())
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := q.Verify(kv, evidence.FromBytes(statement)); err != nil {
		t.Fatal(err)
	}
	_, err = s.LogProof(evidence.FromBytes([]byte("never published")), kv)
	if refuse.CodeOf(err) != CodeLogNotLogged {
		t.Fatalf("proof of an unlogged digest: %v", err)
	}
	last, _ := publishIntent(t, s, 10)
	_, err = s.LogProof(last.Digest, kv)
	if refuse.CodeOf(err) != CodeLogUnsigned {
		t.Fatalf("proof of an unsigned leaf: %v", err)
	}
	sr, err := s.Verify()
	if err != nil || !sr.OK() {
		t.Fatalf("store verify: %+v %v", sr, err)
	}
}

func TestLogBackfill(t *testing.T) {
	s := newStore(t)
	var keys []digest.Digest
	for i := 0; i < 260; i++ {
		_, k := publishIntent(t, s, i)
		keys = append(keys, k)
	}
	if _, err := s.LogOrigin(); refuse.CodeOf(err) != CodeLogNotInitialized {
		t.Fatalf("origin before init: %v", err)
	}
	n, err := s.InitLog(testOrigin)
	if err != nil || n != 260 {
		t.Fatalf("init: %d %v", n, err)
	}
	if n, err := s.InitLog(testOrigin); err != nil || n != 0 {
		t.Fatalf("init again: %d %v", n, err)
	}
	if _, err := s.InitLog("example.com/other"); refuse.CodeOf(err) != CodeLogInitialized {
		t.Fatalf("init with another origin: %v", err)
	}
	if err := CheckOrigin("bad origin"); refuse.CodeOf(err) != deploylog.CodeOrigin {
		t.Fatalf("origin with a space: %v", err)
	}
	r := verifyLog(t, s, LogVerifyOptions{})
	wantLogOK(t, r)
	if r.Size != 260 || len(r.Hints) != 2 { // signatures skipped, unsigned tail
		t.Fatalf("report %+v", r)
	}
	// Backfill follows publication order: the entries' commit times.
	l, _, _ := s.openLog(false)
	defer l.close()
	for i := range keys {
		leaf, _, err := s.readLeaf(l, int64(i))
		if err != nil || leaf.Key != keys[i] {
			t.Fatalf("leaf %d: %+v %v", i, leaf, err)
		}
	}
}

// TestLogConcurrentPublications: 8 publishers, each with its own Store on one directory (as 8
// processes would be), publish 20 entries each, some of them the same, at once: one linear log,
// one leaf per entry, and it verifies.
func TestLogConcurrentPublications(t *testing.T) {
	s := newLogStore(t)
	var wg sync.WaitGroup
	errs := make(chan error, 8)
	for g := 0; g < 8; g++ {
		wg.Go(func() {
			o, err := Open(s.Root())
			if err != nil {
				errs <- err
				return
			}
			defer o.Close()
			for i := 0; i < 20; i++ {
				publishIntent(t, o, g*100+i%15) // i >= 15 repeats an entry of this publisher
				if g%2 == 0 {
					publishIntent(t, o, 9999) // every even publisher publishes one shared entry
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	r := verifyLog(t, s, LogVerifyOptions{})
	wantLogOK(t, r)
	if r.Size != 8*15+1 {
		t.Fatalf("log of %d leaves, want %d", r.Size, 8*15+1)
	}
	es, err := s.ListIndex(evidence.IndexIntents)
	if err != nil || int64(len(es)) != r.Size {
		t.Fatalf("%d entries for %d leaves: %v", len(es), r.Size, err)
	}
}

// damage makes a store file writable (or its directory) for a test that tampers with it.
func chmodW(t testing.TB, p string) {
	t.Helper()
	if err := os.Chmod(p, 0o600); err != nil {
		t.Fatal(err)
	}
}

// TestLogAttacks: each tampering is found by log verify with its code, and verify writes nothing,
// on both of the bulk readers' paths (uringtest.BothPaths).
func TestLogAttacks(t *testing.T) { uringtest.BothPaths(t, testLogAttacks) }

func testLogAttacks(t *testing.T) {
	sg, kv := logKey(t, testOrigin)
	// The store every attack starts from: 300 intents (a full tile and a right edge), signed;
	// built once, copied (cp -a) for each attack.
	const N = 300
	var recs []evidence.Descriptor
	var keys []digest.Digest
	base := newLogStore(t)
	for i := 0; i < N; i++ {
		r, k := publishIntent(t, base, i)
		recs, keys = append(recs, r), append(keys, k)
	}
	baseMsg, _, err := base.SignCheckpoint(sg)
	if err != nil {
		t.Fatal(err)
	}
	setup := func(t *testing.T) (*Store, []evidence.Descriptor, []digest.Digest, []byte) {
		root := filepath.Join(t.TempDir(), "copy")
		if r, err := filepath.EvalSymlinks(filepath.Dir(root)); err == nil {
			root = filepath.Join(r, "copy")
		}
		if out, err := exec.Command("cp", "-a", base.Root(), root).CombinedOutput(); err != nil {
			t.Fatalf("cp -a: %v %s", err, out)
		}
		s, err := Open(root)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { s.Close() })
		return s, recs, keys, baseMsg
	}
	leafPath := func(s *Store, i int64) string { return filepath.Join(s.Root(), leavesRel, leafName(i)) }
	entryPath := func(s *Store, k digest.Digest) string {
		return filepath.Join(s.Root(), "index", evidence.IndexIntents, k.Encoded())
	}
	run := func(t *testing.T, s *Store, o LogVerifyOptions, code refuse.Code) {
		t.Helper()
		before := snapshot(t, s.Root())
		r := verifyLog(t, s, o)
		wantFinding(t, r, code)
		if refuse.CodeOf(r.Err()) == "" {
			t.Fatal("report not OK but no error")
		}
		if snapshot(t, s.Root()) != before {
			t.Fatal("log verify wrote to the store")
		}
	}
	t.Run("record deleted, leaf and entry kept", func(t *testing.T) {
		s, recs, _, _ := setup(t)
		os.Remove(blobPath(s, recs[10].Digest))
		run(t, s, LogVerifyOptions{Verifier: kv}, CodeLogRecordMissing)
	})
	t.Run("index entry deleted", func(t *testing.T) {
		s, _, keys, _ := setup(t)
		os.Remove(entryPath(s, keys[10]))
		run(t, s, LogVerifyOptions{Verifier: kv}, CodeLogEntryMissing)
	})
	t.Run("entry and record deleted", func(t *testing.T) {
		s, recs, keys, _ := setup(t)
		os.Remove(entryPath(s, keys[299]))
		os.Remove(blobPath(s, recs[299].Digest))
		run(t, s, LogVerifyOptions{Verifier: kv}, CodeLogEntryMissing) // signed: not a pending append
		run(t, s, LogVerifyOptions{Verifier: kv}, CodeLogRecordMissing)
	})
	t.Run("swapped leaves", func(t *testing.T) {
		s, _, _, _ := setup(t)
		a, b := leafPath(s, 3), leafPath(s, 290)
		tmp := a + ".x"
		os.Rename(a, tmp)
		os.Rename(b, a)
		os.Rename(tmp, b)
		run(t, s, LogVerifyOptions{Verifier: kv}, CodeLogCheckpointStale)
		run(t, s, LogVerifyOptions{Verifier: kv}, CodeLogTileMismatch)
	})
	t.Run("truncated and re-signed", func(t *testing.T) {
		s, _, keys, old := setup(t)
		// The attacker removes the last two publications whole (leaves, entries, checkpoint)
		// and signs the smaller log: the store is consistent on its own; --since is not.
		for i := int64(298); i < 300; i++ {
			os.Remove(leafPath(s, i))
			os.Remove(entryPath(s, keys[i]))
		}
		os.Remove(filepath.Join(s.Root(), checkpointsRel, checkpointName(300)))
		for _, pt := range deploylog.PartialTilesAt(300) { // and the right edge kept for it
			os.Remove(filepath.Join(s.Root(), tilesRel, partialTileName(pt.Level, pt.Index, pt.Width)))
		}
		if _, _, err := s.SignCheckpoint(sg); err != nil {
			t.Fatal(err)
		}
		wantLogOK(t, verifyLog(t, s, LogVerifyOptions{Verifier: kv}))
		run(t, s, LogVerifyOptions{Verifier: kv, Since: old}, deploylog.CodeRollback)
	})
	t.Run("same-size fork", func(t *testing.T) {
		s, _, _, _ := setup(t)
		// The auditor holds a checkpoint of the same size from another history, signed by the
		// same key.
		c, _, err := deploylog.ParseSignedCheckpoint(baseMsg)
		if err != nil {
			t.Fatal(err)
		}
		c.Hash[0] ^= 1
		fork, err := deploylog.Sign(c, sg)
		if err != nil {
			t.Fatal(err)
		}
		run(t, s, LogVerifyOptions{Verifier: kv, Since: fork}, deploylog.CodeFork)
	})
	t.Run("checkpoint signed by another key", func(t *testing.T) {
		s, _, _, _ := setup(t)
		_, kv2 := logKey(t, testOrigin)
		run(t, s, LogVerifyOptions{Verifier: kv2}, deploylog.CodeCheckpointSig)
	})
	t.Run("another origin", func(t *testing.T) {
		s, _, _, _ := setup(t)
		sg2, _ := logKey(t, "example.com/other")
		root, _, _ := s.SignCheckpoint(sg)
		c, _, _ := deploylog.ParseSignedCheckpoint(root)
		c.Origin = "example.com/other"
		msg, err := deploylog.Sign(c, sg2)
		if err != nil {
			t.Fatal(err)
		}
		run(t, s, LogVerifyOptions{Verifier: kv, Since: msg}, deploylog.CodeOrigin)
		if _, _, err := s.SignCheckpoint(sg2); refuse.CodeOf(err) != deploylog.CodeOrigin {
			t.Fatalf("sign with a key of another origin: %v", err)
		}
	})
	t.Run("index entry with no leaf", func(t *testing.T) {
		s, recs, _, _ := setup(t)
		k := evidence.FromBytes([]byte("smuggled"))
		b, _ := evidence.MarshalRecord(recs[0])
		p := entryPath(s, k)
		if err := os.WriteFile(p, b, 0o400); err != nil {
			t.Fatal(err)
		}
		run(t, s, LogVerifyOptions{Verifier: kv}, CodeLogEntryNoLeaf)
	})
	t.Run("trailing garbage in a note", func(t *testing.T) {
		s, _, _, old := setup(t)
		p := filepath.Join(s.Root(), checkpointsRel, checkpointName(300))
		chmodW(t, p)
		os.WriteFile(p, append(old, "garbage\n"...), 0o400)
		os.Chmod(p, 0o400)
		run(t, s, LogVerifyOptions{Verifier: kv}, deploylog.CodeCheckpointMalformed)
	})
	t.Run("leaf missing in the middle", func(t *testing.T) {
		s, _, _, _ := setup(t)
		os.Remove(leafPath(s, 100))
		run(t, s, LogVerifyOptions{Verifier: kv}, CodeLogLeafMissing)
	})
	// Runs of missing indexes are one finding each: 100..149 removed and 200 removed are two,
	// and a stray copy of a leaf under a huge index adds one, not 10^10.
	t.Run("leaves missing in runs", func(t *testing.T) {
		s, _, _, _ := setup(t)
		for i := int64(100); i < 150; i++ {
			os.Remove(leafPath(s, i))
		}
		os.Remove(leafPath(s, 200))
		b, _ := os.ReadFile(leafPath(s, 5))
		os.WriteFile(leafPath(s, 10_000_000_000), b, 0o400)
		r := verifyLog(t, s, LogVerifyOptions{Verifier: kv})
		var got []string
		for _, f := range r.Errors {
			if f.Code == CodeLogLeafMissing {
				got = append(got, fmt.Sprintf("%d %s", f.Leaf, f.Msg))
			}
		}
		want := []string{
			"100 leaves 100 to 149 are missing, 50 leaves (the log has leaves up to 10000000000)",
			"200 leaf 200 is missing (the log has leaves up to 10000000000)",
			"300 leaves 300 to 9999999999 are missing, 9999999700 leaves (the log has leaves up to 10000000000)",
		}
		if !slices.Equal(got, want) {
			t.Fatalf("LOG_LEAF_MISSING findings:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
		}
	})
	t.Run("leaf duplicated", func(t *testing.T) {
		s, _, _, _ := setup(t)
		b, _ := os.ReadFile(leafPath(s, 5))
		// A leaf repeating another's entry, appended as if published.
		os.WriteFile(leafPath(s, 300), b, 0o400)
		run(t, s, LogVerifyOptions{Verifier: kv}, CodeLogLeafDuplicate)
	})
	t.Run("a record two leaves publish, deleted", func(t *testing.T) {
		s, recs, _, _ := setup(t)
		// verify hashes each record digest once: both leaves publishing it are reported.
		if err := s.PutIndex(evidence.IndexIntents, evidence.FromBytes([]byte("second key")), recs[7]); err != nil {
			t.Fatal(err)
		}
		os.Remove(blobPath(s, recs[7].Digest))
		r := verifyLog(t, s, LogVerifyOptions{Verifier: kv})
		var leaves []int64
		for _, f := range r.Errors {
			if f.Code == CodeLogRecordMissing {
				leaves = append(leaves, f.Leaf)
			}
		}
		if !slices.Equal(leaves, []int64{7, 300}) {
			t.Fatalf("LOG_RECORD_MISSING for leaves %v, want 7 and 300: %+v", leaves, r.Errors)
		}
	})
	t.Run("stray name in an index directory", func(t *testing.T) {
		s, _, _, _ := setup(t)
		p := filepath.Join(s.Root(), "index", evidence.IndexIntents, "not-a-digest")
		if err := os.WriteFile(p, []byte("x"), 0o400); err != nil {
			t.Fatal(err)
		}
		run(t, s, LogVerifyOptions{Verifier: kv}, CodeIndexCorrupt)
		// The other entries are still checked, each by its leaf: nothing else is found.
		if r := verifyLog(t, s, LogVerifyOptions{Verifier: kv}); len(r.Errors) != 1 || r.Errors[0].Path != "index/intents/not-a-digest" {
			t.Fatalf("want one finding for the stray name: %+v", r.Errors)
		}
	})
	t.Run("index entry breaks the file rules", func(t *testing.T) {
		s, _, keys, _ := setup(t)
		if err := os.Chmod(entryPath(s, keys[12]), 0o644); err != nil {
			t.Fatal(err)
		}
		run(t, s, LogVerifyOptions{Verifier: kv}, CodeIndexCorrupt)
		r := verifyLog(t, s, LogVerifyOptions{Verifier: kv})
		if len(r.Errors) != 1 || r.Errors[0].Leaf != 12 || r.Errors[0].Path != "index/intents/"+keys[12].Encoded() {
			t.Fatalf("want one finding for leaf 12's entry: %+v", r.Errors)
		}
	})
	t.Run("leaf breaks the file rules", func(t *testing.T) {
		s, _, _, _ := setup(t)
		if err := os.Chmod(leafPath(s, 40), 0o644); err != nil {
			t.Fatal(err)
		}
		run(t, s, LogVerifyOptions{Verifier: kv}, CodeLogFile)
		// The tree cannot be computed past it: the checkpoint of 300 is beyond the log read.
		run(t, s, LogVerifyOptions{Verifier: kv}, deploylog.CodeRollback)
	})
	t.Run("leaf not canonical", func(t *testing.T) {
		s, _, _, _ := setup(t)
		p := leafPath(s, 41)
		b, _ := os.ReadFile(p)
		chmodW(t, p)
		os.WriteFile(p, append(b, '\n'), 0o400)
		os.Chmod(p, 0o400)
		run(t, s, LogVerifyOptions{Verifier: kv}, deploylog.CodeLeafCorrupt)
		run(t, s, LogVerifyOptions{Verifier: kv}, CodeLogCheckpointStale)
	})
	t.Run("entry names another record", func(t *testing.T) {
		s, recs, keys, _ := setup(t)
		p := entryPath(s, keys[4])
		os.Remove(p)
		b, _ := evidence.MarshalRecord(recs[5])
		os.WriteFile(p, b, 0o400)
		run(t, s, LogVerifyOptions{Verifier: kv}, CodeLogEntryMismatch)
	})
}

// TestLogPartialTiles: log sign keeps the right edge of each signed size as immutable partial
// tiles (C2SP tlog-tiles .p/W), so that proofs against a checkpoint read tiles, not leaves: with
// the leaves past the last full tile deleted, the consistency proof between two signed sizes is
// still made and checks against their roots. A partial tile that disagrees with the leaves is
// LOG_TILE_MISMATCH in log verify, and log sign refuses to sign over it.
func TestLogPartialTiles(t *testing.T) {
	s := newLogStore(t)
	sg, kv := logKey(t, testOrigin)
	var cps []deploylog.Checkpoint
	for i := 0; i < 300; i++ {
		publishIntent(t, s, i)
		if n := i + 1; n == 1 || n == 255 || n == 256 || n == 270 || n == 300 {
			_, cp, err := s.SignCheckpoint(sg)
			if err != nil {
				t.Fatal(err)
			}
			cps = append(cps, cp)
		}
	}
	tiles := filepath.Join(s.Root(), tilesRel)
	for _, name := range []string{"0-00000000000000000000.p.1", "0-00000000000000000000.p.255", "0-00000000000000000000",
		"0-00000000000000000001.p.14", "0-00000000000000000001.p.44", "1-00000000000000000000.p.1"} {
		if _, err := os.Stat(filepath.Join(tiles, name)); err != nil {
			t.Fatalf("tile %s: %v", name, err)
		}
	}
	wantLogOK(t, verifyLog(t, s, LogVerifyOptions{Verifier: kv}))

	// Proofs from tiles alone: the leaves of the right edge are garbage (a leaf read would fail).
	c := copyStore(t, s.Root())
	for i := int64(256); i < 300; i++ {
		p := filepath.Join(c.Root(), leavesRel, leafName(i))
		chmodW(t, p)
		if err := os.WriteFile(p, []byte("not a leaf\n"), 0o400); err != nil {
			t.Fatal(err)
		}
		os.Chmod(p, 0o400)
	}
	p, err := c.ConsistencyProof(270, 300)
	if err != nil {
		t.Fatal(err)
	}
	if err := deploylog.CheckConsistency(p, cps[3].Tree(), cps[4].Tree()); err != nil {
		t.Fatal(err)
	}

	// A partial tile that disagrees with the leaves.
	bad := filepath.Join(tiles, "0-00000000000000000001.p.44")
	chmodW(t, bad)
	b, _ := os.ReadFile(bad)
	b[0] ^= 1
	if err := os.WriteFile(bad, b, 0o400); err != nil {
		t.Fatal(err)
	}
	os.Chmod(bad, 0o400)
	wantFinding(t, verifyLog(t, s, LogVerifyOptions{Verifier: kv}), CodeLogTileMismatch)
	if _, _, err := s.SignCheckpoint(sg); refuse.CodeOf(err) != CodeLogCheckpointStale {
		t.Fatalf("sign over a changed right edge: %v", err)
	}
}

// VerifyLog's Publication consumer is handed every publication whose entry the check read, once,
// with the record bytes it read and hashed: none for a leaf whose entry is gone, no bytes for a
// record that fails its check or that another leaf checks. On both read paths.
func TestLogVerifyPublication(t *testing.T) { uringtest.BothPaths(t, testLogVerifyPublication) }

func testLogVerifyPublication(t *testing.T) {
	s := newLogStore(t)
	const N = 40
	var recs []evidence.Descriptor
	var keys []digest.Digest
	for i := 0; i < N; i++ {
		r, k := publishIntent(t, s, i)
		recs, keys = append(recs, r), append(keys, k)
	}
	// Leaf N publishes record 0 again, as a receipt: checked once, by leaf 0.
	if err := s.PutIndex(evidence.IndexReceipts, keys[0], recs[0]); err != nil {
		t.Fatal(err)
	}
	collect := func() map[int64]LogPublication {
		var mu sync.Mutex
		got := map[int64]LogPublication{}
		r, err := s.VerifyLog(LogVerifyOptions{Publication: func(p LogPublication) {
			mu.Lock()
			defer mu.Unlock()
			if _, dup := got[p.Leaf]; dup {
				t.Errorf("leaf %d handed twice", p.Leaf)
			}
			// The record is lent for the call: kept as a copy, and the lent bytes
			// scribbled over, so that a listing that kept them would show it.
			rec := p.Record
			p.Record = bytes.Clone(rec)
			for j := range rec {
				rec[j] = 'X'
			}
			got[p.Leaf] = p
		}})
		if err != nil || r.Size != N+1 {
			t.Fatalf("%v %+v", err, r)
		}
		return got
	}
	got := collect()
	if len(got) != N+1 {
		t.Fatalf("%d publications handed, want %d", len(got), N+1)
	}
	for i := int64(0); i < N; i++ {
		p := got[i]
		want, err := s.Get(recs[i].Digest)
		if err != nil {
			t.Fatal(err)
		}
		if p.Kind != deploylog.KindIntent || p.Key != keys[i] || p.Entry != recs[i] || !bytes.Equal(p.Record, want) {
			t.Fatalf("leaf %d: %+v", i, p)
		}
	}
	if p := got[N]; p.Kind != deploylog.KindReceipt || p.Entry != recs[0] || p.Record != nil {
		t.Fatalf("leaf %d (record checked by leaf 0): %+v", N, p)
	}
	// An entry gone: not handed; a record changed: handed without bytes.
	if err := os.Remove(filepath.Join(s.Root(), "index", evidence.IndexIntents, keys[3].Encoded())); err != nil {
		t.Fatal(err)
	}
	p := filepath.Join(s.Root(), "blobs", "sha256", recs[5].Digest.Encoded())
	_ = os.Chmod(p, 0o600)
	if err := os.WriteFile(p, []byte("changed"), 0o400); err != nil {
		t.Fatal(err)
	}
	_ = os.Chmod(p, 0o400)
	got = collect()
	if _, ok := got[3]; ok || len(got) != N {
		t.Fatalf("%d handed, leaf 3 (entry gone) among them: %v", len(got), ok)
	}
	if got[5].Record != nil || got[5].Entry != recs[5] {
		t.Fatalf("leaf 5 (record changed): %+v", got[5])
	}
	r := verifyLog(t, s, LogVerifyOptions{})
	if c := codes(r.Errors); c[CodeLogEntryMissing] != 1 || c[CodeLogRecordMissing] != 1 {
		t.Fatalf("findings %+v", r.Errors)
	}
}
