package deploylog

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"testing"
)

// The fuzzers' seed corpora are committed under testdata/fuzz/<Fuzzer>/ (written once by
// TestWriteFuzzSeeds with QL3_WRITE_SEEDS=1); TestFuzzSeedsExist keeps them from going missing.
var fuzzers = []string{"FuzzParseLeaf", "FuzzOpenCheckpoint", "FuzzParseProof"}

// FuzzParseLeaf: whatever parses re-marshals to the same bytes.
func FuzzParseLeaf(f *testing.F) {
	f.Fuzz(func(t *testing.T, b []byte) {
		l, err := ParseLeaf(b)
		if err != nil {
			return
		}
		again, err := l.Marshal()
		if err != nil || !bytes.Equal(again, b) {
			t.Fatalf("parsed leaf does not re-marshal: %v", err)
		}
	})
}

// FuzzOpenCheckpoint: a parsed checkpoint re-marshals to its note text; no input verifies under
// a key that did not sign it.
func FuzzOpenCheckpoint(f *testing.F) {
	_, v := testKey(f, "example.com/ql3/fuzz")
	f.Fuzz(func(t *testing.T, b []byte) {
		c, n, err := ParseSignedCheckpoint(b)
		if err != nil {
			return
		}
		if string(c.Marshal()) != n.Text {
			t.Fatalf("checkpoint does not re-marshal to its note text")
		}
		if _, _, err := OpenCheckpoint(b, "", v); err == nil {
			t.Fatalf("a fuzzed note verifies under a fresh key")
		}
	})
}

// FuzzParseProof: a parsed proof re-marshals to the same bytes.
func FuzzParseProof(f *testing.F) {
	f.Fuzz(func(t *testing.T, b []byte) {
		p, err := ParseProof(b)
		if err != nil {
			return
		}
		if !bytes.Equal(p.Marshal(), b) {
			t.Fatalf("parsed proof does not re-marshal")
		}
	})
}

func TestFuzzSeedsExist(t *testing.T) {
	for _, name := range fuzzers {
		es, err := os.ReadDir(filepath.Join("testdata", "fuzz", name))
		if err != nil || len(es) < 3 {
			t.Fatalf("fuzzer %s has no committed seed corpus (%d files, %v)", name, len(es), err)
		}
	}
}

func TestWriteFuzzSeeds(t *testing.T) {
	if os.Getenv("QL3_WRITE_SEEDS") != "1" {
		t.Skip("writes the committed seed corpora; run with QL3_WRITE_SEEDS=1 only to regenerate them")
	}
	const origin = "example.com/ql3/fuzz"
	s, _ := testKey(t, origin)
	tr := testTree(t, 9)
	root, _ := tr.Root(9)
	cp, err := Sign(Checkpoint{Origin: origin, Size: 9, Hash: root}, s)
	if err != nil {
		t.Fatal(err)
	}
	leaf, _ := Leaf{Kind: KindReceipt, Key: dg("k"), Record: dg("r")}.Marshal()
	att, _ := Leaf{Kind: KindAttestation, Key: dg("s"), Bundle: dg("b"), Record: dg("st")}.Marshal()
	tomb, _ := Leaf{Kind: KindTombstone, Dropped: KindIntent, Key: dg("k"), Record: dg("r")}.Marshal()
	hs, _ := tr.InclusionProof(2, 9)
	l2, _ := Leaf{Kind: KindReceipt, Key: dg("k" + string(rune(2))), Record: dg("r" + string(rune(2)))}.Marshal()
	proof := Proof{Extra: l2, Index: 2, Hashes: hs, Checkpoint: cp}.Marshal()
	seeds := map[string][][]byte{
		"FuzzParseLeaf":      {leaf, att, tomb, leaf[:len(leaf)-1], append(bytes.Clone(leaf), "x y\n"...)},
		"FuzzOpenCheckpoint": {cp, append(bytes.Clone(cp), "garbage\n"...), cp[:len(cp)-1], bytes.Replace(cp, []byte("\n9\n"), []byte("\n09\n"), 1)},
		"FuzzParseProof":     {proof, bytes.Replace(proof, []byte("index 2"), []byte("index 02"), 1), proof[:60], append(bytes.Clone(proof), '\n')},
	}
	for name, ss := range seeds {
		dir := filepath.Join("testdata", "fuzz", name)
		if err := os.MkdirAll(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		for i, b := range ss {
			body := fmt.Sprintf("go test fuzz v1\n[]byte(%s)\n", strconv.Quote(string(b)))
			if err := os.WriteFile(filepath.Join(dir, "seed-"+strconv.Itoa(i)), []byte(body), 0o644); err != nil {
				t.Fatal(err)
			}
		}
	}
}
