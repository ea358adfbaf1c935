package deploylog

import (
	"slices"

	"golang.org/x/mod/sumdb/tlog"

	"github.com/qinglong/ql3/refuse"
)

// Tree is an RFC 6962 tree held in memory: every stored hash, numbered as tlog numbers them
// (tlog.StoredHashIndex). It is a tlog.HashReader, so tlog's proofs read from it directly.
type Tree struct {
	n      int64
	hashes []tlog.Hash
}

var _ tlog.HashReader = (*Tree)(nil)

// Size is the number of leaves appended.
func (t *Tree) Size() int64 { return t.n }

// Append adds a leaf by its bytes (the record hash is taken here).
func (t *Tree) Append(leaf []byte) error { return t.AppendHash(tlog.RecordHash(leaf)) }

// AppendHash adds a leaf by its leaf hash. It stores what tlog.StoredHashesForRecordHash
// returns (the leaf hash, then the hash of each subtree the leaf completes, lowest first),
// computed in place: a verifier appends every leaf of a large log, and tlog's function
// allocates a slice per leaf. TestTreeMatchesTlog holds the two to the same hashes.
func (t *Tree) AppendHash(h tlog.Hash) error {
	t.hashes = append(t.hashes, h)
	for level := 0; (t.n>>level)&1 == 1; level++ {
		h = tlog.NodeHash(t.hashes[tlog.StoredHashIndex(level, (t.n>>level)-1)], h)
		t.hashes = append(t.hashes, h)
	}
	t.n++
	return nil
}

// Grow makes room for n more leaves, so that appending a log whose size is known does not
// copy the hashes as they grow.
func (t *Tree) Grow(n int64) {
	if n > 0 {
		t.hashes = slices.Grow(t.hashes, int(2*n))
	}
}

// ReadHashes implements tlog.HashReader.
func (t *Tree) ReadHashes(indexes []int64) ([]tlog.Hash, error) {
	out := make([]tlog.Hash, len(indexes))
	for i, x := range indexes {
		if x < 0 || x >= int64(len(t.hashes)) {
			return nil, refuse.New(CodeInclusion, "hash %d is not in a tree of %d leaves", x, t.n)
		}
		out[i] = t.hashes[x]
	}
	return out, nil
}

// Hash returns the stored hash of the complete subtree at level (0 for leaves) and index n.
func (t *Tree) Hash(level int, n int64) (tlog.Hash, error) {
	if level < 0 || level > 62 || n < 0 || (n+1)<<level > t.n {
		return tlog.Hash{}, refuse.New(CodeInclusion, "no complete subtree %d/%d in a tree of %d leaves", level, n, t.n)
	}
	return t.hashes[tlog.StoredHashIndex(level, n)], nil
}

// Root is the root hash of the tree's first n leaves (n ≤ Size).
func (t *Tree) Root(n int64) (tlog.Hash, error) {
	if n < 0 || n > t.n {
		return tlog.Hash{}, refuse.New(CodeRollback, "a tree of %d leaves has no prefix of %d", t.n, n)
	}
	return tlog.TreeHash(n, t)
}

// InclusionProof proves leaf i in the tree of the first n leaves.
func (t *Tree) InclusionProof(i, n int64) (tlog.RecordProof, error) {
	return ProveInclusion(i, n, t)
}

// ConsistencyProof proves that the tree of the first m leaves is a prefix of the tree of n.
func (t *Tree) ConsistencyProof(m, n int64) (tlog.TreeProof, error) {
	return ProveConsistency(m, n, t)
}

// ProveInclusion proves leaf i in the tree of size n, reading stored hashes from r.
func ProveInclusion(i, n int64, r tlog.HashReader) (tlog.RecordProof, error) {
	if i < 0 || i >= n {
		return nil, refuse.New(CodeInclusion, "leaf %d is not in a tree of %d leaves", i, n)
	}
	p, err := tlog.ProveRecord(n, i, r)
	if err != nil {
		return nil, refuse.Wrap(CodeInclusion, err, "prove leaf %d in a tree of %d", i, n)
	}
	return p, nil
}

// ProveConsistency proves that the tree of size m is a prefix of the tree of size n.
func ProveConsistency(m, n int64, r tlog.HashReader) (tlog.TreeProof, error) {
	if m < 0 || m > n {
		return nil, refuse.New(CodeConsistency, "a tree of %d leaves is not a prefix of one of %d", m, n)
	}
	p, err := tlog.ProveTree(n, m, r)
	if err != nil {
		return nil, refuse.Wrap(CodeConsistency, err, "prove tree %d is a prefix of tree %d", m, n)
	}
	return p, nil
}

// CheckInclusion checks that leafHash is leaf i of the tree of size n with root root.
func CheckInclusion(p tlog.RecordProof, n int64, root tlog.Hash, i int64, leafHash tlog.Hash) error {
	if i < 0 || i >= n {
		return refuse.New(CodeInclusion, "leaf %d is not in a tree of %d leaves", i, n)
	}
	if err := tlog.CheckRecord(p, n, root, i, leafHash); err != nil {
		return refuse.Wrap(CodeInclusion, err, "leaf %d in the tree of %d", i, n)
	}
	return nil
}

// CheckConsistency checks that the tree old is a prefix of the tree new.
func CheckConsistency(p tlog.TreeProof, old, new tlog.Tree) error {
	if old.N > new.N {
		return refuse.New(CodeRollback, "a tree of %d leaves cannot extend one of %d", new.N, old.N)
	}
	if err := tlog.CheckTree(p, new.N, new.Hash, old.N, old.Hash); err != nil {
		return refuse.Wrap(CodeFork, err, "the tree of %d does not extend the tree of %d", new.N, old.N)
	}
	return nil
}

// TileHeight is the height of ql3's hash tiles, as C2SP tlog-tiles: 256 hashes a tile.
const TileHeight = 8

// TileWidth is the number of hashes in a full tile.
const TileWidth = 1 << TileHeight

// TileHashes returns the hashes of full tile (level, index): the stored hashes at tree level
// level*TileHeight, index*TileWidth onwards, concatenated (8 KiB).
func (t *Tree) TileHashes(level int, index int64) ([]byte, error) {
	out := make([]byte, 0, TileWidth*tlog.HashSize)
	for j := int64(0); j < TileWidth; j++ {
		h, err := t.Hash(level*TileHeight, index*TileWidth+j)
		if err != nil {
			return nil, err
		}
		out = append(out, h[:]...)
	}
	return out, nil
}

// FullTilesCompletedBy returns the tiles an append that makes the tree n leaves long completes,
// one (level, index) pair each, lowest level first.
func FullTilesCompletedBy(n int64) [][2]int64 {
	var out [][2]int64
	span := int64(TileWidth)
	for level := int64(0); n > 0 && n%span == 0; level++ {
		out = append(out, [2]int64{level, n/span - 1})
		if span > (1<<62)/TileWidth {
			break
		}
		span *= TileWidth
	}
	return out
}

// PartialTileHashes returns the first width hashes of tile (level, index) (C2SP tlog-tiles'
// partial tile `.p/width`): the stored hashes at tree level level*TileHeight from index*TileWidth.
func (t *Tree) PartialTileHashes(level int, index int64, width int) ([]byte, error) {
	if width < 1 || width >= TileWidth {
		return nil, refuse.New(CodeInclusion, "a partial tile has 1 to %d hashes, not %d", TileWidth-1, width)
	}
	out := make([]byte, 0, width*tlog.HashSize)
	for j := int64(0); j < int64(width); j++ {
		h, err := t.Hash(level*TileHeight, index*TileWidth+j)
		if err != nil {
			return nil, err
		}
		out = append(out, h[:]...)
	}
	return out, nil
}

// PartialTile names one partial tile: its level, index and width (1 to TileWidth-1 hashes).
type PartialTile struct {
	Level, Index int64
	Width        int
}

// PartialTilesAt returns the partial tiles of a tree of n leaves (its right edge), lowest level
// first: at each tile level L, the hashes of tree level 8·L past the last full tile, when there
// are any. A log that keeps these for a checkpoint's size proves against that checkpoint from
// O(log n) tiles (C2SP tlog-tiles).
func PartialTilesAt(n int64) []PartialTile {
	var out []PartialTile
	for level := int64(0); level*TileHeight < 63 && n>>(level*TileHeight) > 0; level++ {
		c := n >> (level * TileHeight) // complete hashes at tree level 8·level
		if w := int(c % TileWidth); w > 0 {
			out = append(out, PartialTile{Level: level, Index: c / TileWidth, Width: w})
		}
	}
	return out
}
