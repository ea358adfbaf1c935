package store

import (
	"errors"
	"sync/atomic"

	"github.com/opencontainers/go-digest"
	"golang.org/x/sys/unix"

	"github.com/qinglong/ql3/deploylog"
	"github.com/qinglong/ql3/refuse"
)

// Record lookups (docs/log.md, "In the store"): log/records/<64 hex of a record's sha256> holds
// "<leaf index, 20 digits>\n", the newest leaf (not a tombstone) that publishes that record as of
// the lookup's write, so that a proof of an old record reads a few files instead of every leaf
// after its own. They are written where a proof first becomes possible, by log sign for the
// leaves its checkpoint is the first to cover (a publication writes none: its cost stays the
// leaf's), and by log init's backfill and a log import for the leaves they write. A lookup is a
// cache, never trusted: its reader uses it only when the leaf it names exists, is below the log's
// size, is not a tombstone and publishes exactly that record; anything else (missing, torn, not
// one line, another record's leaf) is a miss, and the reader scans the leaves as a log without
// lookups is read. So a lookup is written without fsync (neither the file nor log/records is
// synced: a lookup lost or torn by a power loss is a miss, never a wrong answer), is replaced when
// a newer leaf publishes its record (rename over it), and a failure to write one never fails the
// operation that writes it.
const (
	recordsName = "records"
	recordsRel  = "log/records"
	lookupSize  = 21 // 20 digits and a newline
)

// leafReads counts the leaves readLeaf has read: the tests' witness that a proof reads O(1)
// leaves (no test runs in parallel in this package).
var leafReads atomic.Int64

// recordsDir is the held log/records, opened on first use (-1 when it does not exist); with
// create it is made first (0700, not synced: it holds a cache).
func (l *logDirs) recordsDir(create bool) int {
	if l.records.fd >= 0 || (l.recordsTried && !create) {
		return l.records.fd
	}
	l.recordsTried = true
	if create {
		if err := unix.Mkdirat(l.log.fd, recordsName, 0o700); err != nil && !errors.Is(err, unix.EEXIST) {
			return -1
		}
	}
	d, err := openDir(l.log.fd, recordsName, recordsRel)
	if err != nil {
		return -1
	}
	l.records = d
	return d.fd
}

// readLookup is the leaf index the lookup of record names; ok is false when there is no usable
// lookup (no file, a file that breaks the log's file rules, or not one 20-digit line).
func readLookup(l *logDirs, record digest.Digest) (int64, bool) {
	dirfd := l.recordsDir(false)
	if dirfd < 0 || record.Algorithm() != digest.SHA256 || record.Validate() != nil {
		return 0, false
	}
	fd, err := openRO(dirfd, record.Encoded())
	if err != nil {
		return 0, false
	}
	defer unix.Close(fd)
	var st unix.Stat_t
	if unix.Fstat(fd, &st) != nil || !statOK(&st, lookupSize) || st.Size != lookupSize {
		return 0, false
	}
	var buf [lookupSize + 1]byte
	m, err := preadFull(fd, buf[:])
	if err != nil {
		return 0, false
	}
	return parseLookup(buf[:m])
}

// parseLookup parses a lookup's bytes: exactly one 20-digit leaf index (pad20) and a newline.
func parseLookup(b []byte) (int64, bool) {
	if len(b) != lookupSize || b[lookupSize-1] != '\n' {
		return 0, false
	}
	return parseNameBytes(b[:lookupSize-1])
}

// writeLookup makes the lookup of record name leaf i: staged in tmp/ (0400, not synced) and
// renamed over any lookup there. Errors are returned for the tests; writers ignore them (a
// missing lookup is a miss).
func (s *Store) writeLookup(l *logDirs, record digest.Digest, i int64) error {
	st, err := s.stageLookupOf(l, record, i)
	if err != nil {
		return err
	}
	defer st.discard(s)
	return s.renameLookup(l, st, record)
}

// stageLookupOf stages the lookup of record naming leaf i in tmp/ (0400, not synced, its
// descriptor closed), after making sure log/records is there.
func (s *Store) stageLookupOf(l *logDirs, record digest.Digest, i int64) (*staged, error) {
	if l.recordsDir(true) < 0 {
		return nil, refuse.New(CodeStoreIO, "%s cannot be opened", recordsRel)
	}
	if record.Algorithm() != digest.SHA256 || record.Validate() != nil {
		return nil, refuse.New(CodeStoreIO, "record %q is not a sha256 digest", record)
	}
	var b [lookupSize]byte
	putPad20(b[:], i)
	b[lookupSize-1] = '\n'
	st, err := s.stage(b[:], false)
	if err != nil {
		return nil, err
	}
	unix.Close(st.fd)
	st.fd = -1
	return st, nil
}

// renameLookup renames a staged lookup over the lookup of record.
func (s *Store) renameLookup(l *logDirs, st *staged, record digest.Digest) error {
	if err := unix.Renameat(s.dirs[dTmp].fd, st.name, l.records.fd, record.Encoded()); err != nil {
		return refuse.Wrap(CodeStoreIO, err, "rename the lookup of %s into %s", record, recordsRel)
	}
	st.renamed = true
	return nil
}

// writeLookups writes the lookups of leaves[k] for k in [from, len(leaves)): for each record, the
// newest of those leaves that publishes it (tombstones name none), on a few goroutines; with
// check, only those that do not name it already. Used by log sign, log init's backfill and a log
// import, after the leaves are durable.
func (s *Store) writeLookups(l *logDirs, leaves []deploylog.Leaf, from int64, check bool) {
	newest := map[digest.Digest]int64{}
	for i := from; i < int64(len(leaves)); i++ {
		if leaves[i].Kind != deploylog.KindTombstone {
			newest[leaves[i].Record] = i
		}
	}
	if len(newest) == 0 || l.recordsDir(true) < 0 {
		return
	}
	idx := make([]int64, 0, len(newest))
	for _, i := range newest {
		idx = append(idx, i)
	}
	parallel(int64(len(idx)), func(k int64) {
		rec := leaves[idx[k]].Record
		if check {
			if j, ok := readLookup(l, rec); ok && j == idx[k] {
				return
			}
		}
		_ = s.writeLookup(l, rec, idx[k])
	})
}

// refreshLookups writes every lookup of the log that is missing or does not name the newest
// leaf publishing its record (log init run again on a log: a log made before lookups, or one a
// power loss took lookups from). It reads every leaf; a leaf it cannot read ends it (log verify
// is what reports that leaf).
func (s *Store) refreshLookups(l *logDirs) {
	n, err := logSize(l.leaves.fd)
	if err != nil {
		return
	}
	leaves, err := s.readLeaves(l, n)
	if err != nil {
		return
	}
	s.writeLookups(l, leaves, 0, true)
}

// lookupLeaf is the leaf the lookup of record names, in a log of n leaves, when it is one that
// publishes record (not a tombstone); ok is false otherwise, and the caller scans.
func (s *Store) lookupLeaf(l *logDirs, record digest.Digest, n int64) (int64, []byte, bool) {
	i, ok := readLookup(l, record)
	if !ok || i >= n {
		return 0, nil, false
	}
	leaf, raw, err := s.readLeaf(l, i)
	if err != nil || leaf.Kind == deploylog.KindTombstone || leaf.Record != record {
		return 0, nil, false
	}
	return i, raw, true
}

// signLookups writes the lookups of leaves from..n-1 (the leaves a signature is the first to
// cover) that do not name their newest leaf already. A leaf it cannot read ends it: the
// signature does not depend on a cache.
func (s *Store) signLookups(l *logDirs, from, n int64) {
	if from >= n {
		return
	}
	leaves := make([]deploylog.Leaf, n)
	errs := make([]error, n)
	parallel(n-from, func(k int64) { leaves[from+k], _, errs[from+k] = s.readLeaf(l, from+k) })
	for _, err := range errs[from:] {
		if err != nil {
			return
		}
	}
	s.writeLookups(l, leaves, from, true)
}
