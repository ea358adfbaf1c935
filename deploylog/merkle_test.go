package deploylog

import (
	"math/rand/v2"
	"testing"

	"github.com/transparency-dev/merkle/proof"
	"github.com/transparency-dev/merkle/rfc6962"
	"golang.org/x/mod/sumdb/tlog"
)

// judge is an independent RFC 6962 implementation (transparency-dev/merkle): node hashes are
// computed from the leaves with its hasher, never from our Tree.
type judge struct {
	leaves [][]byte
	h      *rfc6962.Hasher
}

// node is the hash of the complete subtree (level, index), or of its part inside size leaves
// for an ephemeral node.
func (j judge) node(level uint, index, size uint64) []byte {
	lo, hi := index<<level, (index+1)<<level
	if hi > size {
		hi = size
	}
	return j.rangeHash(lo, hi)
}

func (j judge) rangeHash(lo, hi uint64) []byte {
	if hi-lo == 1 {
		return j.h.HashLeaf(j.leaves[lo])
	}
	k := uint64(1)
	for k*2 < hi-lo {
		k *= 2
	}
	return j.h.HashChildren(j.rangeHash(lo, lo+k), j.rangeHash(lo+k, hi))
}

func (j judge) hashes(n proof.Nodes, size uint64) ([][]byte, error) {
	hs := make([][]byte, len(n.IDs))
	for i, id := range n.IDs {
		hs[i] = j.node(id.Level, id.Index, size)
	}
	return n.Rehash(hs, j.h.HashChildren)
}

func toBytes(p []tlog.Hash) [][]byte {
	out := make([][]byte, len(p))
	for i := range p {
		out[i] = p[i][:]
	}
	return out
}

func toHashes(t *testing.T, p [][]byte) []tlog.Hash {
	out := make([]tlog.Hash, len(p))
	for i := range p {
		if len(p[i]) != tlog.HashSize {
			t.Fatalf("hash of %d bytes", len(p[i]))
		}
		copy(out[i][:], p[i])
	}
	return out
}

// TestAgainstTransparencyDevMerkle checks inclusion and consistency proofs over random trees of
// 1 to 2000 leaves both ways: ours with transparency-dev/merkle's verifier, its proofs (hashes
// from its own hasher) with ours, and the roots against its hashing.
func TestAgainstTransparencyDevMerkle(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	j := judge{h: rfc6962.DefaultHasher}
	var tr Tree
	sizes := map[uint64]bool{1: true, 2: true, 3: true, 255: true, 256: true, 257: true, 1024: true, 2000: true}
	for len(sizes) < 60 {
		sizes[1+rng.Uint64N(2000)] = true
	}
	for n := uint64(1); n <= 2000; n++ {
		leaf := make([]byte, 1+rng.IntN(40))
		for i := range leaf {
			leaf[i] = byte(rng.Uint32())
		}
		j.leaves = append(j.leaves, leaf)
		if err := tr.Append(leaf); err != nil {
			t.Fatal(err)
		}
		if !sizes[n] {
			continue
		}
		root, err := tr.Root(int64(n))
		if err != nil {
			t.Fatal(err)
		}
		want := j.rangeHash(0, n)
		if string(root[:]) != string(want) {
			t.Fatalf("root of %d differs from transparency-dev/merkle's", n)
		}
		for k := 0; k < 8; k++ {
			i := rng.Uint64N(n)
			ours, err := tr.InclusionProof(int64(i), int64(n))
			if err != nil {
				t.Fatal(err)
			}
			if err := proof.VerifyInclusion(j.h, i, n, j.h.HashLeaf(j.leaves[i]), toBytes(ours), want); err != nil {
				t.Fatalf("merkle refuses our inclusion proof of %d in %d: %v", i, n, err)
			}
			nodes, err := proof.Inclusion(i, n)
			if err != nil {
				t.Fatal(err)
			}
			theirs, err := j.hashes(nodes, n)
			if err != nil {
				t.Fatal(err)
			}
			if err := CheckInclusion(toHashes(t, theirs), int64(n), root, int64(i), tlog.RecordHash(j.leaves[i])); err != nil {
				t.Fatalf("we refuse merkle's inclusion proof of %d in %d: %v", i, n, err)
			}

			m := 1 + rng.Uint64N(n)
			oldRoot, _ := tr.Root(int64(m))
			cons, err := tr.ConsistencyProof(int64(m), int64(n))
			if err != nil {
				t.Fatal(err)
			}
			if err := proof.VerifyConsistency(j.h, m, n, toBytes(cons), oldRoot[:], want); err != nil {
				t.Fatalf("merkle refuses our consistency proof %d -> %d: %v", m, n, err)
			}
			cnodes, err := proof.Consistency(m, n)
			if err != nil {
				t.Fatal(err)
			}
			ctheirs, err := j.hashes(cnodes, n)
			if err != nil {
				t.Fatal(err)
			}
			if err := CheckConsistency(toHashes(t, ctheirs), tlog.Tree{N: int64(m), Hash: oldRoot}, tlog.Tree{N: int64(n), Hash: root}); err != nil {
				t.Fatalf("we refuse merkle's consistency proof %d -> %d: %v", m, n, err)
			}
			// A proof of another leaf, or against another root, is refused by both.
			if n > 1 {
				o := (i + 1) % n
				if CheckInclusion(ours, int64(n), root, int64(i), tlog.RecordHash(j.leaves[o])) == nil &&
					string(j.leaves[o]) != string(j.leaves[i]) {
					t.Fatalf("our check accepts leaf %d for %d", o, i)
				}
			}
		}
	}
}
