package deploylog

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"strings"
	"testing"

	"github.com/opencontainers/go-digest"
	"golang.org/x/mod/sumdb/note"
	"golang.org/x/mod/sumdb/tlog"

	"github.com/qinglong/ql3/refuse"
)

func dg(s string) digest.Digest {
	sum := sha256.Sum256([]byte(s))
	return digest.Digest("sha256:" + hex.EncodeToString(sum[:]))
}

func wantCode(t *testing.T, err error, code refuse.Code) {
	t.Helper()
	if got := refuse.CodeOf(err); got != code {
		t.Fatalf("code %q (%v), want %q", got, err, code)
	}
}

func TestLeafRoundTrip(t *testing.T) {
	leaves := []Leaf{
		{Kind: KindReceipt, Key: dg("k"), Record: dg("r")},
		{Kind: KindPreflight, Key: dg("k"), Record: dg("r")},
		{Kind: KindIntent, Key: dg("k"), Record: dg("r")},
		{Kind: KindLiveAudit, Key: dg("k"), Record: dg("r")},
		{Kind: KindAttestation, Key: dg("s"), Bundle: dg("b"), Record: dg("st")},
		{Kind: KindTombstone, Dropped: KindReceipt, Key: dg("k"), Record: dg("r")},
		{Kind: KindTombstone, Dropped: KindAttestation, Key: dg("s"), Bundle: dg("b"), Record: dg("st")},
	}
	for _, l := range leaves {
		b, err := l.Marshal()
		if err != nil {
			t.Fatal(err)
		}
		got, err := ParseLeaf(b)
		if err != nil || got != l {
			t.Fatalf("round trip of %+v: %+v %v", l, got, err)
		}
	}
}

func TestLeafRefusals(t *testing.T) {
	good, _ := Leaf{Kind: KindReceipt, Key: dg("k"), Record: dg("r")}.Marshal()
	vectors := []struct {
		name string // what is wrong
		b    string // the leaf bytes
	}{
		{"no newline", strings.TrimSuffix(string(good), "\n")},
		{"trailing line", string(good) + "x y\n"},
		{"unknown kind", strings.Replace(string(good), "kind receipt", "kind manifest", 1)},
		{"bundle on a receipt", strings.Replace(string(good), "record ", "bundle "+string(dg("b"))+"\nrecord ", 1)},
		{"upper-case digest", strings.Replace(string(good), "sha256:", "SHA256:", 1)},
		{"reordered lines", LeafSchema + "\nkind receipt\nrecord " + string(dg("r")) + "\nkey " + string(dg("k")) + "\n"},
		{"other schema", strings.Replace(string(good), "@v1", "@v2", 1)},
		{"dropped on a receipt", strings.Replace(string(good), "kind receipt\n", "kind receipt\ndropped intent\n", 1)},
		{"tombstone of a tombstone", strings.Replace(string(good), "kind receipt\n", "kind tombstone\ndropped tombstone\n", 1)},
		{"crlf", strings.ReplaceAll(string(good), "\n", "\r\n")},
		{"too large", string(good) + strings.Repeat("x", MaxLeafSize)},
	}
	for _, v := range vectors {
		t.Run(v.name, func(t *testing.T) {
			_, err := ParseLeaf([]byte(v.b))
			wantCode(t, err, CodeLeafCorrupt)
		})
	}
}

func testKey(t testing.TB, origin string) (note.Signer, note.Verifier) {
	skey, vkey, err := GenerateKey(origin)
	if err != nil {
		t.Fatal(err)
	}
	s, err := NewSigner(skey)
	if err != nil {
		t.Fatal(err)
	}
	v, err := NewVerifier(vkey)
	if err != nil {
		t.Fatal(err)
	}
	return s, v
}

func testTree(t testing.TB, n int) *Tree {
	var tr Tree
	for i := 0; i < n; i++ {
		b, err := Leaf{Kind: KindReceipt, Key: dg("k" + string(rune(i))), Record: dg("r" + string(rune(i)))}.Marshal()
		if err != nil {
			t.Fatal(err)
		}
		if err := tr.Append(b); err != nil {
			t.Fatal(err)
		}
	}
	return &tr
}

func TestCheckpoint(t *testing.T) {
	const origin = "example.com/ql3/test"
	s, v := testKey(t, origin)
	tr := testTree(t, 5)
	root, err := tr.Root(5)
	if err != nil {
		t.Fatal(err)
	}
	cp := Checkpoint{Origin: origin, Size: 5, Hash: root}
	msg, err := Sign(cp, s)
	if err != nil {
		t.Fatal(err)
	}
	got, _, err := OpenCheckpoint(msg, origin, v)
	if err != nil || got.Size != 5 || got.Hash != root || got.Origin != origin {
		t.Fatalf("open: %+v %v", got, err)
	}

	t.Run("another key", func(t *testing.T) {
		_, v2 := testKey(t, origin)
		_, _, err := OpenCheckpoint(msg, origin, v2)
		wantCode(t, err, CodeCheckpointSig)
	})
	t.Run("another origin", func(t *testing.T) {
		s2, v2 := testKey(t, "example.com/other")
		m2, err := Sign(Checkpoint{Origin: "example.com/other", Size: 5, Hash: root}, s2)
		if err != nil {
			t.Fatal(err)
		}
		_, _, err = OpenCheckpoint(m2, origin, v2)
		wantCode(t, err, CodeOrigin)
		_, err = Sign(cp, s2)
		wantCode(t, err, CodeOrigin)
	})
	t.Run("trailing garbage", func(t *testing.T) {
		for _, tail := range []string{"garbage\n", "garbage", "\n", "— x\n"} {
			_, _, err := OpenCheckpoint(append(bytes.Clone(msg), tail...), origin, v)
			wantCode(t, err, CodeCheckpointMalformed)
		}
	})
	t.Run("altered body", func(t *testing.T) {
		m := bytes.Replace(msg, []byte("\n5\n"), []byte("\n6\n"), 1)
		_, _, err := OpenCheckpoint(m, origin, v)
		wantCode(t, err, CodeCheckpointSig)
	})
	t.Run("non-canonical size", func(t *testing.T) {
		_, err := ParseCheckpoint(origin + "\n05\n" + strings.Split(string(cp.Marshal()), "\n")[2] + "\n")
		wantCode(t, err, CodeCheckpointMalformed)
	})
}

func TestProof(t *testing.T) {
	const origin = "example.com/ql3/test"
	s, v := testKey(t, origin)
	var tr Tree
	var leaves [][]byte
	for i := 0; i < 9; i++ {
		b, _ := Leaf{Kind: KindReceipt, Key: dg("k" + string(rune(i))), Record: dg("r" + string(rune(i)))}.Marshal()
		leaves = append(leaves, b)
		tr.Append(b)
	}
	sign := func(n int64) []byte {
		root, err := tr.Root(n)
		if err != nil {
			t.Fatal(err)
		}
		m, err := Sign(Checkpoint{Origin: origin, Size: n, Hash: root}, s)
		if err != nil {
			t.Fatal(err)
		}
		return m
	}
	hashes, err := tr.InclusionProof(3, 9)
	if err != nil {
		t.Fatal(err)
	}
	p := Proof{Extra: leaves[3], Index: 3, Hashes: hashes, Checkpoint: sign(9)}
	b := p.Marshal()
	q, err := ParseProof(b)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(q.Marshal(), b) {
		t.Fatal("proof does not round-trip")
	}
	kv := KeyVerifier{V: v, Origin: origin}
	if _, _, err := q.Verify(kv, dg("r"+string(rune(3)))); err != nil {
		t.Fatal(err)
	}
	t.Run("another record", func(t *testing.T) {
		_, _, err := q.Verify(kv, dg("r"+string(rune(4))))
		wantCode(t, err, CodeProofRecord)
	})
	t.Run("another leaf in extra", func(t *testing.T) {
		r := q
		r.Extra = leaves[4]
		_, _, err := r.Verify(kv, dg("r"+string(rune(4))))
		wantCode(t, err, CodeInclusion)
	})
	t.Run("stale checkpoint", func(t *testing.T) {
		r := q
		r.Checkpoint = sign(7)
		_, _, err := r.Verify(kv, dg("r"+string(rune(3))))
		wantCode(t, err, CodeInclusion)
	})
	t.Run("another key", func(t *testing.T) {
		_, v2 := testKey(t, origin)
		_, _, err := q.Verify(KeyVerifier{V: v2}, dg("r"+string(rune(3))))
		wantCode(t, err, CodeCheckpointSig)
	})
	t.Run("malformed", func(t *testing.T) {
		for _, m := range [][]byte{
			b[1:],
			bytes.Replace(b, []byte("index 3"), []byte("index 03"), 1),
			bytes.Replace(b, []byte("\n\n"), []byte("\n"), 1),
			append(bytes.Clone(b), "trailing\n"...),
		} {
			_, err := ParseProof(m)
			wantCode(t, err, CodeProofMalformed)
		}
	})
}

func TestFullTilesCompletedBy(t *testing.T) {
	vectors := []struct {
		n    int64      // tree size reached
		want [][2]int64 // tiles completed
	}{
		{1, nil}, {255, nil}, {256, [][2]int64{{0, 0}}}, {512, [][2]int64{{0, 1}}},
		{65536, [][2]int64{{0, 255}, {1, 0}}},
	}
	for _, v := range vectors {
		got := FullTilesCompletedBy(v.n)
		if len(got) != len(v.want) {
			t.Fatalf("%d: %v, want %v", v.n, got, v.want)
		}
		for i := range got {
			if got[i] != v.want[i] {
				t.Fatalf("%d: %v, want %v", v.n, got, v.want)
			}
		}
	}
}

func TestTreeRefusals(t *testing.T) {
	tr := testTree(t, 6)
	_, err := tr.Root(7)
	wantCode(t, err, CodeRollback)
	_, err = tr.ConsistencyProof(5, 4)
	wantCode(t, err, CodeConsistency)
	r4, _ := tr.Root(4)
	r6, _ := tr.Root(6)
	p, err := tr.ConsistencyProof(4, 6)
	if err != nil {
		t.Fatal(err)
	}
	if err := CheckConsistency(p, tlog.Tree{N: 4, Hash: r4}, tlog.Tree{N: 6, Hash: r6}); err != nil {
		t.Fatal(err)
	}
	other := testTree(t, 7)
	o4, _ := other.Root(4)
	o4[0] ^= 1
	err = CheckConsistency(p, tlog.Tree{N: 4, Hash: o4}, tlog.Tree{N: 6, Hash: r6})
	wantCode(t, err, CodeFork)
	err = CheckConsistency(p, tlog.Tree{N: 7, Hash: r4}, tlog.Tree{N: 6, Hash: r6})
	wantCode(t, err, CodeRollback)
	_, err = NewSigner("PRIVATE+KEY+x+1+AAAA")
	wantCode(t, err, CodeKey)
	_, err = NewVerifier("not a key")
	wantCode(t, err, CodeKey)
}

// TestTreeMatchesTlog holds Tree's in-place AppendHash to tlog's own stored hashes
// (tlog.StoredHashes, reading from a plain slice) for every size up to 1,100 (past four full
// tiles' levels of carries), and Hash to tlog's numbering.
func TestTreeMatchesTlog(t *testing.T) {
	var tree Tree
	tree.Grow(1100)
	var want hashSlice
	for i := int64(0); i < 1100; i++ {
		leaf := []byte("leaf " + strings.Repeat("x", int(i%7)) + string(rune('a'+i%26)))
		hs, err := tlog.StoredHashes(i, leaf, want)
		if err != nil {
			t.Fatal(err)
		}
		want = append(want, hs...)
		if err := tree.Append(leaf); err != nil {
			t.Fatal(err)
		}
		if len(tree.hashes) != len(want) {
			t.Fatalf("size %d: %d stored hashes, tlog %d", i+1, len(tree.hashes), len(want))
		}
		for j := range want {
			if tree.hashes[j] != want[j] {
				t.Fatalf("size %d: stored hash %d differs from tlog's", i+1, j)
			}
		}
	}
	for _, c := range []struct {
		level int
		n     int64
		ok    bool
	}{{0, 0, true}, {0, 1099, true}, {0, 1100, false}, {1, 549, true}, {1, 550, false}, {10, 0, true}, {10, 1, false}, {8, 3, true}, {8, 4, false}, {0, -1, false}, {63, 0, false}} {
		h, err := tree.Hash(c.level, c.n)
		if (err == nil) != c.ok {
			t.Fatalf("Hash(%d, %d): %v, want ok %v", c.level, c.n, err, c.ok)
		}
		if c.ok && h != want[tlog.StoredHashIndex(c.level, c.n)] {
			t.Fatalf("Hash(%d, %d) is not tlog's stored hash", c.level, c.n)
		}
	}
}

type hashSlice []tlog.Hash

func (h hashSlice) ReadHashes(indexes []int64) ([]tlog.Hash, error) {
	out := make([]tlog.Hash, len(indexes))
	for i, x := range indexes {
		out[i] = h[x]
	}
	return out, nil
}
