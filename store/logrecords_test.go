package store

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/opencontainers/go-digest"

	"github.com/qinglong/ql3/deploylog"
	"github.com/qinglong/ql3/evidence"
)

// lookupPath is the file of record's lookup in s.
func lookupPath(s *Store, record digest.Digest) string {
	return filepath.Join(s.Root(), recordsRel, record.Encoded())
}

// wantLookups checks that every record the log's leaves publish has a lookup naming the newest
// leaf (not a tombstone) that publishes it, a 0400 file of its 20 digits and a newline, and that
// log/records holds nothing else.
func wantLookups(t testing.TB, s *Store) {
	t.Helper()
	l, err := s.mustOpenLog()
	if err != nil {
		t.Fatal(err)
	}
	defer l.close()
	n, err := logSize(l.leaves.fd)
	if err != nil {
		t.Fatal(err)
	}
	leaves, err := s.readLeaves(l, n)
	if err != nil {
		t.Fatal(err)
	}
	want := map[digest.Digest]int64{}
	for i, lf := range leaves {
		if lf.Kind != deploylog.KindTombstone {
			want[lf.Record] = int64(i)
		}
	}
	for rec, i := range want {
		p := lookupPath(s, rec)
		b, err := os.ReadFile(p)
		if err != nil {
			t.Fatalf("the lookup of %s (leaf %d): %v", rec, i, err)
		}
		if string(b) != pad20(i)+"\n" {
			t.Fatalf("the lookup of %s holds %q, want leaf %d", rec, b, i)
		}
		if fi, err := os.Lstat(p); err != nil || fi.Mode() != 0o400 {
			t.Fatalf("the lookup of %s: mode %v %v", rec, fi.Mode(), err)
		}
	}
	ents, err := os.ReadDir(filepath.Join(s.Root(), recordsRel))
	if err != nil || len(ents) != len(want) {
		t.Fatalf("%s holds %d files, want %d: %v", recordsRel, len(ents), len(want), err)
	}
}

// proofReads is LogProof(record) and the number of leaves it read.
func proofReads(t testing.TB, s *Store, record digest.Digest, v deploylog.CheckpointVerifier) (deploylog.Proof, int64) {
	t.Helper()
	before := leafReads.Load()
	p, err := s.LogProof(record, v)
	if err != nil {
		t.Fatalf("proof of %s: %v", record, err)
	}
	return p, leafReads.Load() - before
}

// TestLogRecordLookups: a publication writes no lookup; log sign writes the lookup of every
// record its checkpoint is the first to cover (the newest leaf: a record published again under
// another key moves it); a proof of the oldest record reads one leaf through it, where a log
// without it reads every leaf from the last; and a lookup that is missing, torn, garbage, breaks
// the file rules, names a leaf past the log, another record's leaf or a tombstone is not
// trusted: the proof is the same, found by the scan. log verify and store verify accept
// log/records; log init run again writes the lookups a log lacks or has stale.
func TestLogRecordLookups(t *testing.T) {
	s := newLogStore(t)
	var recs []evidence.Descriptor
	for i := 0; i < 300; i++ {
		r, _ := publishIntent(t, s, i)
		recs = append(recs, r)
	}
	// Record 7 published again under another key: its lookup names the new leaf 300.
	if err := s.PutIndex(evidence.IndexIntents, evidence.FromBytes([]byte("another key")), recs[7]); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(s.Root(), recordsRel)); !os.IsNotExist(err) {
		t.Fatalf("publications wrote lookups: %v", err)
	}
	sg, kv := logKey(t, testOrigin)
	if _, _, err := s.SignCheckpoint(sg); err != nil {
		t.Fatal(err)
	}
	wantLookups(t, s)
	wantLogOK(t, verifyLog(t, s, LogVerifyOptions{Verifier: kv}))
	if sr, err := s.Verify(); err != nil || !sr.OK() {
		t.Fatalf("store verify: %v %+v", err, sr.Corruption)
	}

	oldest := recs[0].Digest
	good, reads := proofReads(t, s, oldest, kv)
	if good.Index != 0 || reads != 1 {
		t.Fatalf("the proof of the oldest record: leaf %d, %d leaves read; want leaf 0 from 1 read", good.Index, reads)
	}
	if p, _ := proofReads(t, s, recs[7].Digest, kv); p.Index != 300 {
		t.Fatalf("the proof of a record published twice names leaf %d, want the newest, 300", p.Index)
	}

	path := lookupPath(s, oldest)
	saved, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	put := func(t *testing.T, b []byte, mode os.FileMode) {
		t.Helper()
		os.Remove(path)
		if err := os.WriteFile(path, b, mode); err != nil {
			t.Fatal(err)
		}
	}
	for _, c := range []struct {
		name  string
		spoil func(t *testing.T)
	}{
		{"missing", func(t *testing.T) { os.Remove(path) }},
		{"empty (torn)", func(t *testing.T) { put(t, nil, 0o400) }},
		{"half written (torn)", func(t *testing.T) { put(t, saved[:10], 0o400) }},
		{"garbage", func(t *testing.T) { put(t, []byte("not a leaf index ...\n"), 0o400) }},
		{"no newline", func(t *testing.T) { put(t, []byte(pad20(0)+"x"), 0o400) }},
		{"too long", func(t *testing.T) { put(t, []byte(pad20(0)+"\n\n"), 0o400) }},
		{"writable", func(t *testing.T) { put(t, saved, 0o600) }},
		{"a symlink", func(t *testing.T) {
			os.Remove(path)
			other := lookupPath(s, recs[1].Digest)
			if err := os.Symlink(other, path); err != nil {
				t.Fatal(err)
			}
		}},
		{"past the log", func(t *testing.T) { put(t, []byte(pad20(301)+"\n"), 0o400) }},
		{"far past the log", func(t *testing.T) { put(t, []byte("99999999999999999999\n"), 0o400) }},
		{"another record's leaf", func(t *testing.T) { put(t, []byte(pad20(5)+"\n"), 0o400) }},
		{"a directory", func(t *testing.T) {
			os.Remove(path)
			if err := os.Mkdir(path, 0o700); err != nil {
				t.Fatal(err)
			}
		}},
	} {
		t.Run(c.name, func(t *testing.T) {
			c.spoil(t)
			t.Cleanup(func() { os.RemoveAll(path); put(t, saved, 0o400) })
			p, reads := proofReads(t, s, oldest, kv)
			if p.Index != 0 || string(p.Marshal()) != string(good.Marshal()) {
				t.Fatalf("proof of leaf %d, want the proof of leaf 0", p.Index)
			}
			if reads < 300 {
				t.Fatalf("%d leaves read: the spoiled lookup was trusted", reads)
			}
			if _, _, err := p.Verify(kv, oldest); err != nil {
				t.Fatal(err)
			}
		})
	}
	if _, err := os.Stat(filepath.Join(s.Root(), recordsRel)); err != nil {
		t.Fatal(err)
	}
	// A log made before lookups (no log/records): proofs scan; log init run again writes them.
	if err := os.RemoveAll(filepath.Join(s.Root(), recordsRel)); err != nil {
		t.Fatal(err)
	}
	if p, reads := proofReads(t, s, oldest, kv); p.Index != 0 || reads != 301 {
		t.Fatalf("without lookups: leaf %d, %d leaves read, want 0 and 301", p.Index, reads)
	}
	if n, err := s.InitLog(testOrigin); err != nil || n != 0 {
		t.Fatalf("init again: %d %v", n, err)
	}
	wantLookups(t, s)
	// ... and one a power loss left naming an older leaf is made to name the newest.
	os.Remove(lookupPath(s, recs[7].Digest))
	if err := os.WriteFile(lookupPath(s, recs[7].Digest), []byte(pad20(7)+"\n"), 0o400); err != nil {
		t.Fatal(err)
	}
	if p, _ := proofReads(t, s, recs[7].Digest, kv); p.Index != 7 {
		t.Fatalf("a stale lookup naming leaf 7, which publishes the record: proof of leaf %d", p.Index)
	}
	if _, err := s.InitLog(testOrigin); err != nil {
		t.Fatal(err)
	}
	wantLookups(t, s)

	// Published again after the signature: the lookup still names the signed leaf, whose proof
	// a proof of the record is (where the scan, finding the unsigned leaf first, is LOG_UNSIGNED);
	// the next signature moves it to the new leaf.
	if err := s.PutIndex(evidence.IndexIntents, evidence.FromBytes([]byte("a third key")), recs[7]); err != nil {
		t.Fatal(err)
	}
	if p, _ := proofReads(t, s, recs[7].Digest, kv); p.Index != 300 {
		t.Fatalf("a record published again in the unsigned tail: proof of leaf %d, want the signed 300", p.Index)
	}
	if _, _, err := s.SignCheckpoint(sg); err != nil {
		t.Fatal(err)
	}
	wantLookups(t, s)
	if p, _ := proofReads(t, s, recs[7].Digest, kv); p.Index != 301 {
		t.Fatalf("after the next signature: proof of leaf %d, want 301", p.Index)
	}
}

// TestLogRecordLookupTombstone: tombstones get no lookup (a signature covering store gc's
// tombstones leaves the dropped record's lookup naming the leaf that published it, which its
// proof proves); a lookup naming the tombstone is not trusted.
func TestLogRecordLookupTombstone(t *testing.T) {
	s, recs, keys := gcFixture(t)
	sg, kv := logKey(t, testOrigin)
	if _, _, err := s.SignCheckpoint(sg); err != nil {
		t.Fatal(err)
	}
	if _, err := s.GC(dropIntents(keys[2]), GCOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, _, err := s.SignCheckpoint(sg); err != nil {
		t.Fatal(err)
	}
	wantLookups(t, s)
	good, reads := proofReads(t, s, recs[2].Digest, kv)
	if good.Index != 2 || reads != 1 {
		t.Fatalf("the dropped record's proof: leaf %d, %d reads", good.Index, reads)
	}
	r := verifyLog(t, s, LogVerifyOptions{Verifier: kv})
	tomb := r.Size - 1
	path := lookupPath(s, recs[2].Digest)
	os.Remove(path)
	if err := os.WriteFile(path, []byte(pad20(tomb)+"\n"), 0o400); err != nil {
		t.Fatal(err)
	}
	p, reads := proofReads(t, s, recs[2].Digest, kv)
	if p.Index != 2 || reads != 1+(r.Size-2) || string(p.Marshal()) != string(good.Marshal()) {
		t.Fatalf("a lookup naming tombstone leaf %d: proof of leaf %d after %d reads", tomb, p.Index, reads)
	}
}

// TestLogRecordLookupBackfill: log init's backfill writes the lookup of every record (the newest
// of the leaves publishing it), and so does the import of a carried log into a new log.
func TestLogRecordLookupBackfill(t *testing.T) {
	s := newStore(t)
	var recs []evidence.Descriptor
	for i := 0; i < 20; i++ {
		r, _ := publishIntent(t, s, i)
		recs = append(recs, r)
	}
	if err := s.PutIndex(evidence.IndexIntents, evidence.FromBytes([]byte("another key")), recs[3]); err != nil {
		t.Fatal(err)
	}
	if n, err := s.InitLog(testOrigin); err != nil || n != 21 {
		t.Fatalf("init: %d %v", n, err)
	}
	wantLookups(t, s)
	if b, _ := os.ReadFile(lookupPath(s, recs[3].Digest)); string(b) != pad20(20)+"\n" {
		t.Fatalf("the record published twice: %q", b)
	}

	base, _ := loggedBase(t)
	dst := objectsOnly(t, base)
	li := importOf(t, base)
	if err := dst.ImportLog(li, allLeaves(li)); err != nil {
		t.Fatal(err)
	}
	wantLookups(t, dst)
	// The leaf, and the 44 leaves of the right edge that an import keeps no partial tile of; a
	// scan would read 300 more.
	if _, reads := proofReads(t, dst, li.Leaves[0].Record, nil); reads != 1+44 {
		t.Fatalf("the proof of leaf 0 of the imported log read %d leaves", reads)
	}
}

// intentRecord is the digest of the record publishIntent(i) publishes.
func intentRecord(t testing.TB, s *Store, i int) digest.Digest {
	t.Helper()
	blob := fmt.Appendf(nil, "object %d", i)
	rec, err := evidence.MarshalRecord(testIntent(evidence.Descriptor{MediaType: evidence.MediaTypeOctets, Digest: evidence.FromBytes(blob), Size: int64(len(blob))}))
	if err != nil {
		t.Fatal(err)
	}
	return evidence.FromBytes(rec)
}

// FuzzParseLookup: a lookup parses only as the 20 digits of an index and a newline, exactly
// what writeLookup writes for it.
func FuzzParseLookup(f *testing.F) {
	for _, s := range []string{"00000000000000000000\n", "00000000000000000255\n", "99999999999999999999\n",
		"0000000000000000025\n", "00000000000000000255", "00000000000000000255\n\n", "0000000000000000025x\n", ""} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		i, ok := parseLookup(b)
		if ok && pad20(i)+"\n" != string(b) {
			t.Fatalf("%q parsed as %d", b, i)
		}
		if !ok && len(b) == lookupSize && b[lookupSize-1] == '\n' {
			if _, nameOK := parseName(string(b[:lookupSize-1])); nameOK {
				t.Fatalf("%q refused", b)
			}
		}
	})
}
