package history_test

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/opencontainers/go-digest"

	"github.com/qinglong/ql3/deploylog"
	"github.com/qinglong/ql3/deploylog/policy"
	"github.com/qinglong/ql3/evidence"
	"github.com/qinglong/ql3/history"
	"github.com/qinglong/ql3/internal/gcfloor"
	"github.com/qinglong/ql3/internal/testbed/witnesstest"
)

// directLog lays out a store's objects, index entries and log as files, without fsync (a
// benchmark's fixture, not a store under test): the layout of docs/store.md and docs/log.md,
// which the store then verifies as it would any other (ReadLogStory recomputes the tree, checks
// every entry's leaf and re-hashes every record).
type directLog struct {
	leaves [][]byte
}

var leafKinds = map[string]deploylog.Kind{
	evidence.IndexPreflights: deploylog.KindPreflight, evidence.IndexIntents: deploylog.KindIntent,
	evidence.IndexReceipts: deploylog.KindReceipt, evidence.IndexLiveAudits: deploylog.KindLiveAudit,
}

func writeFixture(t testing.TB, path string, b []byte) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, b, 0o400); err != nil && !os.IsExist(err) && !os.IsPermission(err) {
		t.Fatal(err)
	}
}

func (l *directLog) object(t testing.TB, st interface{ Root() string }, mt string, b []byte) evidence.Descriptor {
	d := evidence.FromBytes(b)
	writeFixture(t, filepath.Join(st.Root(), "blobs", "sha256", d.Encoded()), b)
	return evidence.Descriptor{MediaType: mt, Digest: d, Size: int64(len(b))}
}

func (l *directLog) entry(t testing.TB, st interface{ Root() string }, kind string, key digest.Digest, d evidence.Descriptor) {
	b, err := evidence.MarshalRecord(d)
	if err != nil {
		t.Fatal(err)
	}
	writeFixture(t, filepath.Join(st.Root(), "index", kind, key.Encoded()), b)
	leaf, err := deploylog.Leaf{Kind: leafKinds[kind], Key: key, Record: d.Digest}.Marshal()
	if err != nil {
		t.Fatal(err)
	}
	l.leaves = append(l.leaves, leaf)
}

// writeLog lays out the log of every entry published so far: leaves, full tiles, the origin.
func (l *directLog) writeLog(t testing.TB, root, origin string) {
	tree := &deploylog.Tree{}
	for i, leaf := range l.leaves {
		writeFixture(t, filepath.Join(root, "log", "leaves", pad20(int64(i))), leaf)
		if err := tree.Append(leaf); err != nil {
			t.Fatal(err)
		}
	}
	for m := int64(deploylog.TileWidth); m <= tree.Size(); m += deploylog.TileWidth {
		for _, tl := range deploylog.FullTilesCompletedBy(m) {
			data, err := tree.TileHashes(int(tl[0]), tl[1])
			if err != nil {
				t.Fatal(err)
			}
			writeFixture(t, filepath.Join(root, "log", "tiles", strconv.FormatInt(tl[0], 10)+"-"+pad20(tl[1])), data)
		}
	}
	for _, d := range []string{"checkpoints"} {
		if err := os.MkdirAll(filepath.Join(root, "log", d), 0o700); err != nil {
			t.Fatal(err)
		}
	}
	writeFixture(t, filepath.Join(root, "log", "origin"), []byte(origin+"\n"))
}

func pad20(n int64) string {
	s := strconv.FormatInt(n, 10)
	return strings.Repeat("0", 20-len(s)) + s
}

// historyFixture is a store of n/4 releases on one cluster, each a preflight, an apply (intent
// and receipt) and a live audit: n publications, n/4*3 history lines (an intent with its receipt
// is not a line), each record with its own command; a log of n leaves, signed at size n-n/10
// (the last tenth is the unsigned tail) and cosigned there by one witness of the policy.
func historyFixture(b *testing.B, n int) (*synth, deploylog.KeyVerifier, policy.Verifier) {
	s := newSynth(b)
	s.direct = &directLog{}
	for i := 0; i < n/4; i++ {
		rel := fmt.Sprintf("3.%d.%d", i/100, i%100)
		s.preflight(rel, "cluster", 3*i)
		_, rc := s.apply(rel, "cluster", 3*i+1, true, false)
		s.liveAudit(rel, "cluster", rc, 3*i+2, i%2 == 0)
	}
	all := s.direct.leaves
	signedAt := len(all) - n/10
	s.direct.leaves = all[:signedAt]
	s.direct.writeLog(b, s.st.Root(), testOrigin)
	signer, kv, vkey := logKey(b)
	cp, _, err := s.st.SignCheckpoint(signer)
	if err != nil {
		b.Fatal(err)
	}
	w := witnesstest.NewCosigner(b, "w1.example")
	if _, err := s.st.PutCosignatures(int64(signedAt), w.Verifier, w.Cosign(b, cp, 100)); err != nil {
		b.Fatal(err)
	}
	s.direct.leaves = all
	s.direct.writeLog(b, s.st.Root(), testOrigin)
	return s, kv, newPolicy(b, vkey, "quorum W1", w)
}

// BenchmarkHistory10k: history of a store of 10,000 publications from its log (goal ≤ 200 ms), by
// leaf index with the unsigned tail marked: the log verified without a key, with the log key, and
// under a witness policy. The goal is judged by wall time (ns/op), as log verify's is;
// cpu-ms/op is the process's CPU time per listing, reported beside it: the load of a shared
// machine inflates it far less than wall time. The fixture is the documented worst case: every
// record with its own command record.
func BenchmarkHistory10k(b *testing.B) {
	defer gcfloor.Set(gcfloor.Default)() // as cmd/ql3 runs history
	const n = 10000
	s, kv, pol := historyFixture(b, n)
	for _, c := range []struct {
		name string
		o    history.Options
	}{{"nokey", history.Options{}}, {"logkey", history.Options{LogVerifier: kv}}, {"policy", history.Options{LogVerifier: pol}}} {
		b.Run(c.name, func(b *testing.B) {
			cpu0 := cpuTime()
			k := 0
			for b.Loop() {
				rep, err := history.HistoryWith(s.st, history.Filter{}, c.o)
				if err != nil || len(rep.Entries) != n/4*3 || rep.Log.Size != n || rep.Log.UnsignedTail != n/10 {
					b.Fatalf("%v %d %+v", err, len(rep.Entries), rep.Log)
				}
				k++
			}
			b.ReportMetric(float64((cpuTime()-cpu0).Microseconds())/1000/float64(k), "cpu-ms/op")
		})
	}
}
