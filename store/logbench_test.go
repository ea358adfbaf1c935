package store

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/opencontainers/go-digest"

	"github.com/qinglong/ql3/deploylog"
	"github.com/qinglong/ql3/evidence"
)

// benchPublish measures one publication (PutIndex of a new entry, its record already stored),
// with or without a log, and reports the median as well as the mean: the fsyncs dominate and
// their time on a shared disk has a long tail. The fsync counts are in docs/log.md (counted with
// strace -c -e trace=fsync over this benchmark).
func benchPublish(b *testing.B, withLog bool) {
	s, err := Init(filepath.Join(b.TempDir(), "s"))
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	if withLog {
		if _, err := s.InitLog(testOrigin); err != nil {
			b.Fatal(err)
		}
	}
	rec, err := s.PutBlob(evidence.MediaTypeOctets, []byte("the record"))
	if err != nil {
		b.Fatal(err)
	}
	var times []time.Duration
	i := 0
	for b.Loop() {
		i++
		key := evidence.FromBytes(fmt.Appendf(nil, "key %d", i))
		t0 := time.Now()
		if err := s.PutIndex(evidence.IndexPreflights, key, rec); err != nil {
			b.Fatal(err)
		}
		times = append(times, time.Since(t0))
	}
	slices.Sort(times)
	b.ReportMetric(float64(times[len(times)/2].Microseconds()), "median-µs")
}

func BenchmarkPublishNoLog(b *testing.B)   { benchPublish(b, false) }
func BenchmarkPublishWithLog(b *testing.B) { benchPublish(b, true) }

// logFixture lays out a store with n intents published and a log of their n leaves, written
// directly (no fsync: a fixture, not a store under test), then signs it once.
func logFixture(b *testing.B, n int) *Store {
	b.Helper()
	root := filepath.Join(b.TempDir(), "s")
	if r, err := filepath.EvalSymlinks(filepath.Dir(root)); err == nil {
		root = filepath.Join(r, "s")
	}
	s, err := Init(root)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { s.Close() })
	for _, d := range []string{"log", "log/leaves", "log/tiles", "log/checkpoints"} {
		if err := os.Mkdir(filepath.Join(root, d), 0o700); err != nil {
			b.Fatal(err)
		}
	}
	write := func(p string, data []byte) {
		if err := os.WriteFile(p, data, 0o400); err != nil {
			b.Fatal(err)
		}
	}
	tree := &deploylog.Tree{}
	for i := 0; i < n; i++ {
		blob := fmt.Appendf(nil, "object %d", i)
		bd := evidence.FromBytes(blob)
		write(filepath.Join(root, "blobs/sha256", bd.Encoded()), blob)
		rec, err := evidence.MarshalRecord(testIntent(evidence.Descriptor{MediaType: evidence.MediaTypeOctets, Digest: bd, Size: int64(len(blob))}))
		if err != nil {
			b.Fatal(err)
		}
		rd := evidence.FromBytes(rec)
		write(filepath.Join(root, "blobs/sha256", rd.Encoded()), rec)
		key := evidence.FromBytes(fmt.Appendf(nil, "key %d", i))
		entry, _ := evidence.MarshalRecord(evidence.Descriptor{MediaType: evidence.MediaTypeIntent, Digest: rd, Size: int64(len(rec))})
		write(filepath.Join(root, "index/intents", key.Encoded()), entry)
		leaf, _ := deploylog.Leaf{Kind: deploylog.KindIntent, Key: key, Record: rd}.Marshal()
		write(filepath.Join(root, leavesRel, leafName(int64(i))), leaf)
		tree.Append(leaf)
	}
	for m := int64(deploylog.TileWidth); m <= tree.Size(); m += deploylog.TileWidth {
		for _, t := range deploylog.FullTilesCompletedBy(m) {
			data, _ := tree.TileHashes(int(t[0]), t[1])
			write(filepath.Join(root, tilesRel, tileName(t[0], t[1])), data)
		}
	}
	write(filepath.Join(root, "log/origin"), []byte(testOrigin+"\n"))
	return s
}

// BenchmarkLogVerify100k: log verify of 100,000 leaves with every entry and record (goal ≤ 2 s).
func BenchmarkLogVerify100k(b *testing.B) {
	s := logFixture(b, 100000)
	sg, kv := logKey(b, testOrigin)
	if _, _, err := s.SignCheckpoint(sg); err != nil {
		b.Fatal(err)
	}
	for b.Loop() {
		r, err := s.VerifyLog(LogVerifyOptions{Verifier: kv})
		if err != nil || !r.OK() || r.Size != 100000 {
			b.Fatalf("%v %+v", err, r.Errors)
		}
	}
}

// BenchmarkLogProof: a proof written from the store's log (leaf found, proof built from tiles and
// leaves, checked) and checked again by deploylog from its bytes, in a log of 100,000 leaves
// (goal ≤ 1 ms). The leaf is near the end, as the question usually is about a recent record.
func BenchmarkLogProof(b *testing.B) {
	s := logFixture(b, 100000)
	sg, kv := logKey(b, testOrigin)
	if _, _, err := s.SignCheckpoint(sg); err != nil {
		b.Fatal(err)
	}
	l, _ := s.mustOpenLog()
	leaf, _, err := s.readLeaf(l, 99990)
	l.close()
	if err != nil {
		b.Fatal(err)
	}
	var rec digest.Digest = leaf.Record
	for b.Loop() {
		p, err := s.LogProof(rec, kv)
		if err != nil {
			b.Fatal(err)
		}
		q, err := deploylog.ParseProof(p.Marshal())
		if err != nil {
			b.Fatal(err)
		}
		if _, _, err := q.Verify(kv, rec); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkProofCheck: checking a tlog-proof file alone (parse, signature, inclusion).
func BenchmarkProofCheck(b *testing.B) {
	s := logFixture(b, 1000)
	sg, kv := logKey(b, testOrigin)
	if _, _, err := s.SignCheckpoint(sg); err != nil {
		b.Fatal(err)
	}
	l, _ := s.mustOpenLog()
	leaf, _, _ := s.readLeaf(l, 500)
	l.close()
	p, err := s.LogProof(leaf.Record, kv)
	if err != nil {
		b.Fatal(err)
	}
	raw := p.Marshal()
	for b.Loop() {
		q, err := deploylog.ParseProof(raw)
		if err != nil {
			b.Fatal(err)
		}
		if _, _, err := q.Verify(kv, leaf.Record); err != nil {
			b.Fatal(err)
		}
	}
}
