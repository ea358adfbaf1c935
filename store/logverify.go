package store

import (
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"fmt"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/opencontainers/go-digest"
	"golang.org/x/mod/sumdb/tlog"
	"golang.org/x/sys/unix"

	"github.com/qinglong/ql3/deploylog"
	"github.com/qinglong/ql3/deploylog/policy"
	"github.com/qinglong/ql3/evidence"
	"github.com/qinglong/ql3/refuse"
)

// Codes raised only as findings of VerifyLog.
const (
	CodeLogLeafMissing   refuse.Code = "LOG_LEAF_MISSING"       // a leaf index below the log's last is missing
	CodeLogEntryMissing  refuse.Code = "LOG_ENTRY_MISSING"      // a leaf's index entry is gone
	CodeLogEntryNoLeaf   refuse.Code = "LOG_ENTRY_NO_LEAF"      // an index entry no leaf records: published outside the log
	CodeLogLeafDuplicate refuse.Code = "LOG_LEAF_DUPLICATE"     // two leaves record one index entry
	CodeLogTileMismatch  refuse.Code = "LOG_TILE_MISMATCH"      // a stored tile differs from the leaves' hashes
	CodeLogPending       refuse.Code = "LOG_PENDING"            // hint: the last leaf's entry is not written yet
	CodeLogTileMissing   refuse.Code = "LOG_TILE_MISSING"       // hint: a full tile is not stored
	CodeLogUnsignedTail  refuse.Code = "LOG_UNSIGNED_TAIL"      // hint: leaves after the last signed checkpoint
	CodeLogSignatureSkip refuse.Code = "LOG_SIGNATURES_SKIPPED" // hint: no key given, signatures not checked
	// CodeLogTombstoneOrphan: a tombstone leaf drops an entry no earlier leaf publishes live with
	// that record (a forged or misplaced tombstone hiding nothing, or hiding a deletion).
	CodeLogTombstoneOrphan refuse.Code = "LOG_TOMBSTONE_ORPHAN"
	CodeLogGCPending       refuse.Code = "LOG_GC_PENDING" // hint: a tombstoned root's entry is still present (interrupted gc)
)

// LogFinding is one finding of VerifyLog; Leaf is the leaf index it concerns, or -1.
type LogFinding struct {
	Code refuse.Code `json:"code"`
	Leaf int64       `json:"leaf"`
	Path string      `json:"path,omitempty"`
	Msg  string      `json:"message"`
}

// LogCheckpoint is one stored checkpoint as VerifyLog judged it.
type LogCheckpoint struct {
	Size int64  `json:"size"`
	Root string `json:"root"`
	Path string `json:"path"`
	// Trusted is true when the verifier given accepted the note (the log key, or a policy's
	// quorum); false when it refused it or no verifier was given.
	Trusted bool `json:"trusted"`
}

// LogReport is the result of VerifyLog: errors make OK false, hints do not.
type LogReport struct {
	Origin string `json:"origin"`
	Size   int64  `json:"size"`
	Root   string `json:"root"`
	// SignaturesChecked is false when no verifier was given: checkpoints are then checked
	// against the leaves only, and no leaf counts as signed.
	SignaturesChecked bool            `json:"signaturesChecked"`
	Checkpoints       []LogCheckpoint `json:"checkpoints"`
	// SignedSize is the size of the largest trusted checkpoint; leaves from it on are the
	// unsigned tail (UnsignedTail of them), reported, not verified by any signature.
	SignedSize   int64 `json:"signedSize"`
	UnsignedTail int64 `json:"unsignedTail"`
	// Since is the auditor's checkpoint the log was required to extend, when given.
	Since  *LogCheckpoint `json:"since,omitempty"`
	Errors []LogFinding   `json:"errors"`
	Hints  []LogFinding   `json:"hints"`
}

// OK is true iff VerifyLog found no error.
func (r *LogReport) OK() bool { return len(r.Errors) == 0 }

// Err is nil when OK, else a refusal with the first error's code and the count of errors.
func (r *LogReport) Err() error {
	if r.OK() {
		return nil
	}
	f := r.Errors[0]
	e := refuse.New(f.Code, "log verify: %d finding(s); first: %s", len(r.Errors), f.Msg)
	return e.WithHint("every finding is listed above (or in -o json); nothing was written")
}

// AddError, AddHint and AddErr collect one finding each; they are exported for the verifiers of
// a log kept elsewhere than a store (an OCI layout's log referrers), whose report is a LogReport.
func (r *LogReport) AddError(code refuse.Code, leaf int64, path, format string, a ...any) {
	r.Errors = append(r.Errors, LogFinding{Code: code, Leaf: leaf, Path: path, Msg: fmt.Sprintf(format, a...)})
}

// AddHint collects a hint: reported, not an error.
func (r *LogReport) AddHint(code refuse.Code, leaf int64, path, format string, a ...any) {
	r.Hints = append(r.Hints, LogFinding{Code: code, Leaf: leaf, Path: path, Msg: fmt.Sprintf(format, a...)})
}

// AddErr collects a refusal as an error finding, its code once (refuse.Detail).
func (r *LogReport) AddErr(leaf int64, path string, err error) {
	r.Errors = append(r.Errors, LogFinding{Code: refuse.CodeOf(err), Leaf: leaf, Path: path, Msg: refuse.Detail(err)})
}

// LogVerifyOptions are VerifyLog's inputs.
type LogVerifyOptions struct {
	// Verifier judges every stored checkpoint's signatures (deploylog.KeyVerifier for a log
	// key; the witness policy for cosignatures). Nil: signatures are not checked.
	Verifier deploylog.CheckpointVerifier
	// Since is the auditor's last signed checkpoint (a note): the log must extend it.
	Since []byte
	// Publication, when set, is handed each publication as VerifyLog read it (ReadLogStoryWith:
	// history reads each record once, where the log's check read it). It is called on the
	// worker goroutines, concurrently, for every leaf that published its index entry last
	// (attestations, tombstones and duplicates excepted) whose entry was read and decoded,
	// before the report is complete: a call says nothing about the log's validity, the report
	// does. Nothing is skipped or added for it; the record is read whole (View's checks) instead
	// of streamed through the hash.
	Publication func(LogPublication)
}

// LogPublication is one publication as VerifyLog read it (LogVerifyOptions.Publication).
type LogPublication struct {
	Leaf  int64
	Kind  deploylog.Kind
	Key   digest.Digest
	Entry evidence.Descriptor // the index entry as read; its digest may differ from the leaf's record (a finding)
	// Record is the record's bytes, read and hashed to Entry.Digest on this call's worker, lent
	// for the call as View lends them: the callee must neither modify them nor keep any part of
	// them after it returns (it copies what it keeps). Nil when another leaf checks that digest
	// (a record two leaves publish), when a tombstone dropped the leaf (its record is not
	// checked), when the entry names another record than the leaf, or when the record failed
	// its check (a finding).
	Record []byte
}

// VerifyLog recomputes the log's tree from its leaves and checks, collecting every finding
// (docs/log.md, "log verify"): the leaves are 0..n-1 without a gap, each canonical; every
// stored tile is the leaves' hashes; every stored checkpoint has the origin, and a size and root
// of this tree (so each extends the one before), and is trusted by the verifier; the log extends
// Since; every leaf's index entry names its record and the record is intact, every index entry
// has exactly one leaf. Nothing is written.
func (s *Store) VerifyLog(o LogVerifyOptions) (*LogReport, error) {
	r, _, err := s.verifyLog(o)
	return r, err
}

// verifyLog is VerifyLog returning also the parsed leaves it read (the first r.Size of them are
// the verified log's), so that a reader of the story does not read every leaf twice.
//
// Its phases (docs/log.md, "log verify: how it reads"): the leaves are listed once and read,
// hashed and parsed by a worker per core; the publications' checks (entries, records, the index
// listings) then run on the workers while this goroutine recomputes the tree from the leaf
// hashes and checks the tiles and checkpoints against it; the findings are reported in the same
// order whatever the workers' timing.
func (s *Store) verifyLog(o LogVerifyOptions) (*LogReport, []deploylog.Leaf, error) {
	l, release, err := s.holdLog()
	if err != nil {
		return nil, nil, err
	}
	defer release()
	r := &LogReport{Origin: l.origin, SignaturesChecked: o.Verifier != nil, Checkpoints: []LogCheckpoint{},
		Errors: []LogFinding{}, Hints: []LogFinding{}}

	leaves, parsed, hashes, err := s.readLogLeaves(l, r)
	if err != nil {
		return nil, nil, err
	}
	n := int64(len(leaves))
	entries := make(chan *entryCheck, 1)
	go func() { entries <- s.checkEntries(leaves, parsed, o.Publication) }()

	tree := &deploylog.Tree{}
	tree.Grow(n)
	for _, h := range hashes {
		if err := tree.AppendHash(h); err != nil {
			<-entries
			return nil, nil, err
		}
	}
	r.Size = n
	root, err := tree.Root(n)
	if err != nil {
		<-entries
		return nil, nil, err
	}
	r.Root = base64.StdEncoding.EncodeToString(root[:])

	s.verifyTiles(l, tree, r)
	s.verifyCheckpoints(l, tree, o, r)
	verifyCosignatureFiles(l, r)
	requireQuorum(r)
	if o.Since != nil {
		r.CheckSince(tree, o)
	}
	if o.Verifier == nil {
		r.AddHint(CodeLogSignatureSkip, -1, checkpointsRel, "no log key given: checkpoints were checked against the leaves, not their signatures")
	}
	r.UnsignedTail = r.Size - r.SignedSize
	(<-entries).report(leaves, parsed, r)
	if r.UnsignedTail > 0 {
		r.AddHint(CodeLogUnsignedTail, r.SignedSize, leavesRel, "leaves %d to %d are after the last trusted checkpoint: not covered by any signature",
			r.SignedSize, r.Size-1)
	}
	return r, leaves, nil
}

// readLogLeaves lists log/leaves once and reads the leaves 0..n-1 (n: the first missing index),
// each once, on a worker per core: its leaf hash for the tree and its parsed record (parsed[i]
// false after a LOG_LEAF_CORRUPT finding). A stray name is LOG_FILE, each missing index below the
// last LOG_LEAF_MISSING; the log is cut before a leaf that cannot be read (its finding says why),
// since no tree can be computed past it.
func (s *Store) readLogLeaves(l *logDirs, r *LogReport) ([]deploylog.Leaf, []bool, []tlog.Hash, error) {
	var idxs []int64
	var strays []string
	err := eachName(l.leaves.fd, leavesRel, func(name []byte) {
		if i, ok := parseNameBytes(name); ok {
			idxs = append(idxs, i)
		} else {
			strays = append(strays, string(name))
		}
	})
	if err != nil {
		return nil, nil, nil, err
	}
	slices.Sort(strays)
	for _, name := range strays {
		r.AddError(CodeLogFile, -1, leavesRel+"/"+name, "stray file in %s", leavesRel)
	}
	slices.Sort(idxs)
	n := int64(0)
	for n < int64(len(idxs)) && idxs[n] == n {
		n++
	}
	// One finding per run of missing indexes, not per index: a single stray name like
	// 00000000010000000000 would otherwise make billions of findings.
	if len(idxs) > 0 {
		last := idxs[len(idxs)-1]
		for j := n; j < int64(len(idxs)); j++ {
			from := n
			if j > 0 {
				from = idxs[j-1] + 1
			}
			if to := idxs[j] - 1; from <= to {
				if from == to {
					r.AddError(CodeLogLeafMissing, from, leavesRel+"/"+leafName(from), "leaf %d is missing (the log has leaves up to %d)", from, last)
				} else {
					r.AddError(CodeLogLeafMissing, from, leavesRel+"/"+leafName(from), "leaves %d to %d are missing, %d leaves (the log has leaves up to %d)", from, to, to-from+1, last)
				}
			}
		}
	}
	leaves := make([]deploylog.Leaf, n)
	hashes := make([]tlog.Hash, n)
	readErr, parseErr := make([]error, n), make([]error, n)
	parallelChunks(n, func(lo, hi int64) {
		var buf [1 + deploylog.MaxLeafSize + 1]byte // 0x00 (RFC 6962's leaf prefix), the leaf, one byte to see it grow
		var files openedFiles
		defer files.closeAll()
		for i := lo; i < hi; i++ {
			files.add(l.leaves.fd, leafName(i))
		}
		files.openAll()
		for i := lo; i < hi; i++ {
			slot := int(i - lo)
			f, err := files.file(slot)
			m, err := readLeafFD(f, err, i, buf[1:])
			files.release(slot)
			if err != nil {
				readErr[i] = err
				continue
			}
			hashes[i] = sha256.Sum256(buf[:1+m]) // tlog.RecordHash, without its allocation
			leaves[i], parseErr[i] = deploylog.ParseLeaf(buf[1 : 1+m])
		}
	})
	parsed := make([]bool, n)
	for i := int64(0); i < n; i++ {
		if readErr[i] != nil {
			r.AddErr(i, leavesRel+"/"+leafName(i), readErr[i])
			n = i
			break
		}
		parsed[i] = parseErr[i] == nil
		if !parsed[i] {
			r.AddErr(i, leavesRel+"/"+leafName(i), parseErr[i])
		}
	}
	return leaves[:n], parsed[:n], hashes[:n], nil
}

// readLeafFD reads leaf i of the held log/leaves, opened as f (or not: openErr), into buf
// (MaxLeafSize+1 bytes) under the log's file rules, as readLogFile does, and returns its length.
// It does not close f: its chunk does (openedFiles).
func readLeafFD(f storeFile, openErr error, i int64, buf []byte) (int, error) {
	rel := func() string { return leavesRel + "/" + leafName(i) }
	if errors.Is(openErr, unix.ENOENT) {
		return 0, refuse.New(CodeObjectNotFound, "%s not found", rel())
	}
	if openErr != nil {
		return 0, refuse.Wrap(CodeLogFile, openErr, "open %s", rel())
	}
	var st unix.Stat_t
	if err := f.fstat(&st); err != nil {
		return 0, refuse.Wrap(CodeStoreIO, err, "stat %s", rel())
	}
	if !statOK(&st, deploylog.MaxLeafSize) {
		if err := checkObjectStat(&st, digest.Digest(rel())); err != nil {
			return 0, refuse.Wrap(CodeLogFile, err, "%s", rel())
		}
		return 0, refuse.New(CodeLogFile, "%s has %d bytes, more than %d", rel(), st.Size, deploylog.MaxLeafSize)
	}
	m, err := f.readFull(buf[:st.Size+1])
	if err != nil || int64(m) != st.Size {
		return 0, refuse.New(CodeLogFile, "%s changed while being read", rel())
	}
	return m, nil
}

func (s *Store) verifyTiles(l *logDirs, tree *deploylog.Tree, r *LogReport) {
	names, err := listDir(l.tiles.fd, tilesRel)
	if err != nil {
		r.AddErr(-1, tilesRel, err)
		return
	}
	have := map[string]bool{}
	for _, name := range names {
		rel := tilesRel + "/" + name
		ls, rest, ok := strings.Cut(name, "-")
		ns, ws, partial := strings.Cut(rest, ".p.")
		level, lerr := strconv.ParseInt(ls, 10, 64)
		idx, iok := parseName(ns)
		w, werr := strconv.Atoi(ws)
		if partial && (werr != nil || w < 1 || w >= deploylog.TileWidth || strconv.Itoa(w) != ws) {
			ok = false
		}
		if !ok || lerr != nil || !iok || strconv.FormatInt(level, 10) != ls || level < 0 || level > 6 {
			r.AddError(CodeLogFile, -1, rel, "stray file in %s", tilesRel)
			continue
		}
		have[name] = true
		size := int64(tileBytes)
		if partial {
			size = int64(w) * tlog.HashSize
		}
		b, err := readLogFile(l.tiles.fd, name, rel, size)
		if err != nil {
			r.AddErr(-1, rel, err)
			continue
		}
		var want []byte
		if partial {
			want, err = tree.PartialTileHashes(int(level), idx, w)
		} else {
			want, err = tree.TileHashes(int(level), idx)
		}
		if err != nil {
			r.AddError(CodeLogTileMismatch, -1, rel, "tile %d/%d lies beyond the log's %d leaves", level, idx, tree.Size())
			continue
		}
		if string(b) != string(want) {
			r.AddError(CodeLogTileMismatch, -1, rel, "tile %d/%d differs from the hashes of the log's leaves", level, idx)
		}
	}
	for m := int64(deploylog.TileWidth); m <= tree.Size(); m += deploylog.TileWidth {
		for _, t := range deploylog.FullTilesCompletedBy(m) {
			if name := tileName(t[0], t[1]); !have[name] {
				r.AddHint(CodeLogTileMissing, -1, tilesRel+"/"+name, "full tile %d/%d is not stored (the next append writes it)", t[0], t[1])
			}
		}
	}
}

func (s *Store) verifyCheckpoints(l *logDirs, tree *deploylog.Tree, o LogVerifyOptions, r *LogReport) {
	names, err := listDir(l.checkpoints.fd, checkpointsRel)
	if err != nil {
		r.AddErr(-1, checkpointsRel, err)
		return
	}
	var prev *deploylog.Checkpoint
	for _, name := range names {
		rel := checkpointsRel + "/" + name
		size, ok := parseName(name)
		if !ok {
			r.AddError(CodeLogFile, -1, rel, "stray file in %s", checkpointsRel)
			continue
		}
		b, err := readLogFile(l.checkpoints.fd, name, rel, deploylog.MaxNoteSize)
		if err == nil {
			b, err = withCosignatures(l, size, b)
		}
		if err != nil {
			r.AddErr(-1, rel, err)
			continue
		}
		c, trusted, ok := s.judgeCheckpoint(b, l.origin, tree, o.Verifier, rel, r)
		if !ok {
			continue
		}
		if c.Size != size {
			r.AddError(CodeLogFile, -1, rel, "%s holds a checkpoint of size %d", rel, c.Size)
			continue
		}
		r.Checkpoints = append(r.Checkpoints, LogCheckpoint{Size: c.Size, Root: base64.StdEncoding.EncodeToString(c.Hash[:]), Path: rel, Trusted: trusted})
		if trusted {
			r.SignedSize = max(r.SignedSize, c.Size)
		}
		if prev != nil {
			p, err := tree.ConsistencyProof(prev.Size, c.Size)
			if err == nil {
				err = deploylog.CheckConsistency(p, prev.Tree(), c.Tree())
			}
			if err != nil {
				r.AddErr(-1, rel, err)
			}
		}
		prev = &c
	}
}

// judgeCheckpoint checks one note against the log: origin, signature (when a verifier is
// given), and that its tree is a prefix of the leaves' tree. ok is false after a finding.
func (s *Store) judgeCheckpoint(b []byte, origin string, tree *deploylog.Tree, v deploylog.CheckpointVerifier, rel string, r *LogReport) (deploylog.Checkpoint, bool, bool) {
	c, _, err := deploylog.ParseSignedCheckpoint(b)
	if err != nil {
		r.AddErr(-1, rel, err)
		return c, false, false
	}
	if c.Origin != origin {
		r.AddError(deploylog.CodeOrigin, -1, rel, "checkpoint of origin %q, the log's origin is %q", c.Origin, origin)
		return c, false, false
	}
	trusted := false
	if v != nil {
		_, err := v.VerifyCheckpoint(b)
		switch {
		case refuse.CodeOf(err) == policy.CodeQuorum:
			// Signed by the log but not (yet) cosigned by the quorum: not trusted, not wrong.
			r.AddHint(policy.CodeQuorum, -1, rel, "signed by the log, not cosigned by the policy's quorum: %v", err)
		case err != nil:
			r.AddErr(-1, rel, err)
			return c, false, false
		default:
			trusted = true
		}
	}
	if c.Size > tree.Size() {
		r.AddError(deploylog.CodeRollback, -1, rel, "checkpoint of size %d, the log has %d leaves: leaves were removed", c.Size, tree.Size())
		return c, trusted, false
	}
	if h, err := tree.Root(c.Size); err != nil || h != c.Hash {
		r.AddError(CodeLogCheckpointStale, -1, rel, "checkpoint of size %d does not match the log's first %d leaves (changed, swapped or forked)", c.Size, c.Size)
		return c, trusted, false
	}
	return c, trusted, true
}

// CheckSince checks the log in r (of origin r.Origin, whose hashes tree holds) against the
// auditor's checkpoint o.Since: same origin, trusted when o.Verifier accepts it, and extended by
// the log (LOG_ROLLBACK naming the missing leaves, LOG_FORK). A layout's log (ociartifact) is
// judged by the same rule.
func (r *LogReport) CheckSince(tree *deploylog.Tree, o LogVerifyOptions) {
	const rel = "--since"
	c, _, err := deploylog.ParseSignedCheckpoint(o.Since)
	if err != nil {
		r.AddErr(-1, rel, err)
		return
	}
	r.Since = &LogCheckpoint{Size: c.Size, Root: base64.StdEncoding.EncodeToString(c.Hash[:]), Path: rel}
	if c.Origin != r.Origin {
		r.AddError(deploylog.CodeOrigin, -1, rel, "the checkpoint to extend is of origin %q, the log's is %q", c.Origin, r.Origin)
		return
	}
	if o.Verifier != nil {
		if _, err := o.Verifier.VerifyCheckpoint(o.Since); err != nil {
			r.AddErr(-1, rel, err)
			return
		}
		r.Since.Trusted = true
	}
	if c.Size > tree.Size() {
		r.AddError(deploylog.CodeRollback, -1, rel, "the log has %d leaves, the checkpoint to extend %d: a rollback, or a copy missing leaves %d to %d",
			tree.Size(), c.Size, tree.Size(), c.Size-1)
		return
	}
	if h, _ := tree.Root(c.Size); h != c.Hash {
		r.AddError(deploylog.CodeFork, -1, rel, "the log's first %d leaves do not hash to the checkpoint to extend: a fork", c.Size)
		return
	}
	if r.Since.Trusted {
		r.SignedSize = max(r.SignedSize, c.Size)
	}
}

// entryKey names an index entry: its publication kind, key and (attestations) bundle.
type entryKey struct {
	kind        deploylog.Kind
	key, bundle digest.Digest
}

// entryLife is an entry's life through the log: published by a leaf, possibly dropped by a
// later tombstone (store gc) of the same record, possibly published again after that.
type entryLife struct {
	leaf   int64 // the leaf that published it last
	record digest.Digest
	live   bool // not dropped since
}

// entryRead is the index entry of one leaf's key as read.
type entryRead struct {
	d   evidence.Descriptor
	ok  bool  // the entry exists
	err error // it could not be read (INDEX_CORRUPT): already a finding
}

// entryCheck is what the publications' checks found, reported by report in leaf order.
type entryCheck struct {
	listFindings []LogFinding // a kind's listing failed, or holds a stray name
	lives        map[entryKey]*entryLife
	lifeOf       []*entryLife // each publication leaf's entry's life (nil for a tombstone, unparsed or orphan leaf)
	orphan       []bool       // a tombstone leaf that drops no live publication
	dup          []bool       // a second live publication of one entry
	dropped      []bool       // a later tombstone drops what this leaf published
	entry        []entryRead  // the entry of each leaf that published its key last; attestations from the listing
	recordOf     []int64      // the leaf whose check of the same record digest stands for this one's (-1: none)
	recErr       []error
	listed       []listedEntry // every index entry, by path
}

// listedEntry is one listed index entry; its path (entryPath) is spelled only for a finding.
type listedEntry struct {
	k entryKey
	d *evidence.Descriptor // attestations: the listed statement; else read by the leaf
}

// checkEntries checks every publication against the store: the index entry of each leaf's key
// (read once, by name, by the leaf that published it last), each distinct record digest hashed
// once (a record published twice is checked once), and the index listings (getdents of each
// kind's held directory: names only, the contents being read by the leaves) for entries no leaf
// records. The reads run on a worker per core.
func (s *Store) checkEntries(leaves []deploylog.Leaf, parsed []bool, publication func(LogPublication)) *entryCheck {
	n := int64(len(leaves))
	c := &entryCheck{lives: make(map[entryKey]*entryLife, n), lifeOf: make([]*entryLife, n), orphan: make([]bool, n), dup: make([]bool, n),
		dropped: make([]bool, n), entry: make([]entryRead, n), recordOf: make([]int64, n), recErr: make([]error, n)}
	for i, leaf := range leaves {
		idx := int64(i)
		if !parsed[i] {
			continue
		}
		k := entryKey{kind: leaf.Published(), key: leaf.Key, bundle: leaf.Bundle}
		lf := c.lives[k]
		if leaf.Kind == deploylog.KindTombstone {
			if lf == nil || !lf.live || lf.record != leaf.Record {
				c.orphan[i] = true
				continue
			}
			lf.live, c.dropped[lf.leaf] = false, true
			continue
		}
		if lf != nil && lf.live {
			c.dup[i], c.lifeOf[i] = true, lf
			continue
		}
		lf = &entryLife{leaf: idx, record: leaf.Record, live: true}
		c.lives[k], c.lifeOf[i] = lf, lf
	}
	// Which leaf checks which record: the first live publication of each digest.
	first := make(map[digest.Digest]int64, n)
	needEntry := make([]bool, n)
	for i, leaf := range leaves {
		c.recordOf[i] = -1
		if !parsed[i] || leaf.Kind == deploylog.KindTombstone || c.dup[i] {
			continue
		}
		if c.lifeOf[i].leaf == int64(i) && leaf.Kind != deploylog.KindAttestation {
			needEntry[i] = true
		}
		if c.dropped[i] {
			continue
		}
		j, ok := first[leaf.Record]
		if !ok {
			j = int64(i)
			first[leaf.Record] = j
		}
		c.recordOf[i] = j
	}

	// The index directories, held for the reads (an optional kind may not exist: no entries).
	dirs := map[deploylog.Kind]int{}
	for _, kind := range []string{evidence.IndexPreflights, evidence.IndexIntents, evidence.IndexReceipts, evidence.IndexLiveAudits} {
		lk, _ := deploylog.KindOfIndex(kind)
		fd, release, ok, err := s.kindDir(kind, false)
		if err != nil {
			c.listFindings = append(c.listFindings, errFinding("index/"+kind, err))
			continue
		}
		defer release()
		if ok {
			dirs[lk] = fd
		}
	}
	var wg sync.WaitGroup
	wg.Go(func() {
		parallelChunks(n, func(lo, hi int64) {
			// The chunk's entries and records are opened together (openedFiles): each leaf's
			// slots, -1 where it reads no entry or no record.
			var files openedFiles
			defer files.closeAll()
			var slots [2 * chunkSize]int
			for i := lo; i < hi; i++ {
				k := 2 * (i - lo)
				slots[k], slots[k+1] = -1, -1
				if fd, ok := dirs[leaves[i].Kind]; ok && needEntry[i] {
					slots[k] = files.add(fd, leaves[i].Key.Encoded())
				}
				if c.recordOf[i] == i {
					slots[k+1] = files.add(s.dirs[dSHA256].fd, leaves[i].Record.Encoded())
				}
			}
			files.openAll()
			for i := lo; i < hi; i++ {
				leaf := leaves[i]
				entrySlot, recordSlot := slots[2*(i-lo)], slots[2*(i-lo)+1]
				if entrySlot >= 0 {
					f, err := files.file(entrySlot)
					d, ok, err := readEntryFD(f, err, leaf.Kind.IndexKind(), leaf.Key)
					files.release(entrySlot)
					c.entry[i] = entryRead{d: d, ok: ok, err: err}
				}
				publish := func(rec []byte) {
					if e := c.entry[i]; publication != nil && e.ok {
						if e.d.Digest != leaf.Record {
							rec = nil
						}
						publication(LogPublication{Leaf: i, Kind: leaf.Kind, Key: leaf.Key, Entry: e.d, Record: rec})
					}
				}
				switch {
				case c.recordOf[i] != i:
					publish(nil)
				case publication != nil && needEntry[i]:
					// The record is lent to the publication, in View's reused buffer: a
					// listing decodes it there and keeps nothing of it.
					lent := false
					f, err := files.file(recordSlot)
					c.recErr[i] = viewObjectFD(f, err, leaf.Record, func(b []byte) error {
						lent = true
						publish(b)
						return nil
					})
					files.release(recordSlot)
					if !lent {
						publish(nil)
					}
				default:
					f, err := files.file(recordSlot)
					_, c.recErr[i] = checkObjectFD(f, err, leaf.Record)
					files.release(recordSlot)
					publish(nil)
				}
			}
		})
	})
	// Meanwhile, the listings.
	for _, kind := range []string{evidence.IndexPreflights, evidence.IndexIntents, evidence.IndexReceipts, evidence.IndexLiveAudits} {
		lk, _ := deploylog.KindOfIndex(kind)
		fd, ok := dirs[lk]
		if !ok {
			continue
		}
		rel := "index/" + kind
		var strays []string
		err := eachName(fd, rel, func(name []byte) {
			key, err := evidence.ParseDigest("sha256:" + string(name))
			if err != nil {
				strays = append(strays, string(name))
				return
			}
			c.listed = append(c.listed, listedEntry{k: entryKey{kind: lk, key: key}})
		})
		if err != nil {
			c.listFindings = append(c.listFindings, errFinding(rel, err))
		}
		slices.Sort(strays)
		for _, name := range strays {
			c.listFindings = append(c.listFindings, LogFinding{Code: CodeIndexCorrupt, Leaf: -1, Path: rel + "/" + name,
				Msg: fmt.Sprintf("index %s has a stray entry %q", kind, name)})
		}
	}
	subjects, err := s.attestationSubjects()
	if err != nil {
		c.listFindings = append(c.listFindings, errFinding(attestationsRel, err))
	}
	for _, subject := range subjects {
		es, err := s.listAttestations(subject)
		if err != nil {
			c.listFindings = append(c.listFindings, errFinding(attestationsRel+"/"+subject.Encoded(), err))
			continue
		}
		for _, e := range es {
			d := e.Statement
			c.listed = append(c.listed, listedEntry{k: entryKey{kind: deploylog.KindAttestation, key: subject, bundle: e.Bundle}, d: &d})
		}
	}
	wg.Wait()
	// The attestations' entries, from their listing, for the leaves that published them last.
	for _, e := range c.listed {
		if lf := c.lives[e.k]; e.d != nil && lf != nil {
			c.entry[lf.leaf] = entryRead{d: *e.d, ok: true}
		}
	}
	return c
}

// report adds the publications' findings to r, in the order: listings, each leaf's tombstone
// and duplicate findings, each leaf's entry and record, the entries published outside the log.
func (c *entryCheck) report(leaves []deploylog.Leaf, parsed []bool, r *LogReport) {
	r.Errors = append(r.Errors, c.listFindings...)
	n := int64(len(leaves))
	for i, leaf := range leaves {
		idx := int64(i)
		if !c.orphan[i] && !c.dup[i] {
			continue
		}
		rel := leavesRel + "/" + leafName(idx)
		switch {
		case c.orphan[i]:
			r.AddError(CodeLogTombstoneOrphan, idx, rel, "tombstone leaf %d drops the %s entry %s naming %s, which no earlier leaf publishes (or another tombstone dropped already)",
				idx, leaf.Dropped, leaf.Key, leaf.Record)
		case c.dup[i]:
			r.AddError(CodeLogLeafDuplicate, idx, rel, "leaves %d and %d record the same %s entry %s", c.lifeOf[i].leaf, idx, leaf.Kind, leaf.Key)
		}
	}
	for i, leaf := range leaves {
		idx := int64(i)
		if !parsed[i] || leaf.Kind == deploylog.KindTombstone || c.dup[i] {
			continue
		}
		k := entryKey{kind: leaf.Kind, key: leaf.Key, bundle: leaf.Bundle}
		lf := c.lifeOf[i]
		e := c.entry[lf.leaf]
		if c.dropped[i] {
			// Retention dropped it: its record and entry may be gone. An entry still naming it,
			// with no later publication, is an interrupted gc, which the next gc finishes.
			if e.ok && !lf.live && lf.leaf == idx && e.d.Digest == leaf.Record {
				r.AddHint(CodeLogGCPending, idx, entryPath(k), "the %s entry %s that a tombstone drops is still present: an interrupted store gc, which the next one finishes", leaf.Kind, leaf.Key)
			}
			continue
		}
		switch {
		case e.err != nil:
			r.AddErr(idx, entryPath(k), e.err)
		case !e.ok && idx == n-1 && idx >= r.SignedSize:
			r.AddHint(CodeLogPending, idx, leavesRel+"/"+leafName(idx), "the last leaf's %s entry %s is not written: an interrupted publication, which the next one completes", leaf.Kind, leaf.Key)
		case !e.ok:
			r.AddError(CodeLogEntryMissing, idx, leavesRel+"/"+leafName(idx), "the %s entry %s that leaf %d records is gone", leaf.Kind, leaf.Key, idx)
		case e.d.Digest != leaf.Record:
			r.AddError(CodeLogEntryMismatch, idx, entryPath(k), "the %s entry %s names %s, leaf %d records %s", leaf.Kind, leaf.Key, e.d.Digest, idx, leaf.Record)
		}
		if j := c.recordOf[i]; j >= 0 && c.recErr[j] != nil {
			r.AddError(CodeLogRecordMissing, idx, "blobs/sha256/"+leaf.Record.Encoded(), "the record %s that leaf %d publishes is missing or corrupt: %v", leaf.Record, idx, c.recErr[j])
		}
	}
	var outside []listedEntry
	for _, e := range c.listed {
		lf := c.lives[e.k]
		if lf == nil {
			outside = append(outside, e)
			continue
		}
		if got := c.entry[lf.leaf]; !lf.live && got.ok && got.d.Digest != lf.record {
			outside = append(outside, e)
		}
	}
	slices.SortFunc(outside, func(a, b listedEntry) int { return strings.Compare(entryPath(a.k), entryPath(b.k)) })
	for _, e := range outside {
		r.AddError(CodeLogEntryNoLeaf, -1, entryPath(e.k), "the %s entry %s has no leaf: published outside the log", e.k.kind, e.k.key)
	}
}

// entryPath is the store path of the index entry k.
func entryPath(k entryKey) string {
	if k.kind == deploylog.KindAttestation {
		return attestationsRel + "/" + k.key.Encoded() + "/" + k.bundle.Encoded()
	}
	return "index/" + k.kind.IndexKind() + "/" + k.key.Encoded()
}

// LogProof builds a C2SP tlog-proof for the leaf that publishes record: its inclusion in the
// largest stored checkpoint the verifier trusts (any stored checkpoint when v is nil) that
// covers it. LOG_RECORD_NOT_LOGGED without such a leaf, LOG_UNSIGNED when no trusted
// checkpoint covers it yet (sign one). The proof is checked before it is returned.
//
// The leaf is the one the record's lookup names (log/records, logrecords.go: the newest leaf
// publishing it), when that leaf does publish it; otherwise the newest such leaf, found by
// reading the leaves backwards from the last.
func (s *Store) LogProof(record digest.Digest, v deploylog.CheckpointVerifier) (deploylog.Proof, error) {
	if _, err := evidence.ParseDigest(string(record)); err != nil {
		return deploylog.Proof{}, err
	}
	l, release, err := s.holdLog()
	if err != nil {
		return deploylog.Proof{}, err
	}
	defer release()
	n, err := logSize(l.leaves.fd)
	if err != nil {
		return deploylog.Proof{}, err
	}
	if idx, raw, ok := s.lookupLeaf(l, record, n); ok {
		return s.proveLeaf(l, idx, raw, v)
	}
	idx := int64(-1)
	var raw []byte
	for i := n - 1; i >= 0; i-- { // recent records first: the common question is about them
		leaf, b, err := s.readLeaf(l, i)
		if err != nil {
			return deploylog.Proof{}, err
		}
		if leaf.Kind != deploylog.KindTombstone && leaf.Record == record {
			idx, raw = i, b
			break
		}
	}
	if idx < 0 {
		return deploylog.Proof{}, refuse.New(CodeLogNotLogged, "no leaf of the log publishes %s", record)
	}
	return s.proveLeaf(l, idx, raw, v)
}

func (s *Store) proveLeaf(l *logDirs, idx int64, raw []byte, v deploylog.CheckpointVerifier) (deploylog.Proof, error) {
	names, err := listDir(l.checkpoints.fd, checkpointsRel)
	if err != nil {
		return deploylog.Proof{}, err
	}
	for i := len(names) - 1; i >= 0; i-- {
		size, ok := parseName(names[i])
		if !ok || size <= idx {
			continue
		}
		b, err := readLogFile(l.checkpoints.fd, names[i], checkpointsRel+"/"+names[i], deploylog.MaxNoteSize)
		if err == nil {
			b, err = withCosignatures(l, size, b)
		}
		if err != nil {
			return deploylog.Proof{}, err
		}
		c, _, err := deploylog.ParseSignedCheckpoint(b)
		if err != nil || c.Origin != l.origin || c.Size != size {
			continue
		}
		if v != nil {
			if _, err := v.VerifyCheckpoint(b); err != nil {
				continue
			}
		}
		hs, err := deploylog.ProveInclusion(idx, size, newLogReader(s, l, size, size))
		if err != nil {
			return deploylog.Proof{}, err
		}
		if err := deploylog.CheckInclusion(hs, size, c.Hash, idx, tlog.RecordHash(raw)); err != nil {
			return deploylog.Proof{}, refuse.Wrap(CodeLogCheckpointStale, err, "the stored checkpoint of size %d does not match the log", size)
		}
		return deploylog.Proof{Extra: raw, Index: idx, Hashes: hs, Checkpoint: b}, nil
	}
	return deploylog.Proof{}, refuse.New(CodeLogUnsigned, "leaf %d is in the unsigned tail: no trusted checkpoint covers it", idx).
		WithHint("sign one with: ql3 log sign --key FILE")
}

// Checkpoints returns the stored signed checkpoints, smallest first, verbatim (for the witness
// client: the latest is what it submits).
func (s *Store) Checkpoints() ([][]byte, error) {
	l, release, err := s.holdLog()
	if err != nil {
		return nil, err
	}
	defer release()
	names, err := listDir(l.checkpoints.fd, checkpointsRel)
	if err != nil {
		return nil, err
	}
	var out [][]byte
	for _, name := range names {
		if _, ok := parseName(name); !ok {
			continue
		}
		b, err := readLogFile(l.checkpoints.fd, name, checkpointsRel+"/"+name, deploylog.MaxNoteSize)
		if err != nil {
			return nil, err
		}
		out = append(out, b)
	}
	return out, nil
}

// ConsistencyProof proves that the log's tree of size m is a prefix of its tree of size n (for
// the witness's add-checkpoint: the proof from the witness's last size).
func (s *Store) ConsistencyProof(m, n int64) (tlog.TreeProof, error) {
	l, release, err := s.holdLog()
	if err != nil {
		return nil, err
	}
	defer release()
	size, err := logSize(l.leaves.fd)
	if err != nil {
		return nil, err
	}
	if n > size {
		return nil, refuse.New(deploylog.CodeRollback, "the log has %d leaves, not %d", size, n)
	}
	return deploylog.ProveConsistency(m, n, newLogReader(s, l, n, n, m))
}

// parallel runs f(0..n-1) on a few goroutines.
func parallel(n int64, f func(i int64)) {
	parallelChunks(n, func(lo, hi int64) {
		for i := lo; i < hi; i++ {
			f(i)
		}
	})
}

// chunkSize is how many indexes parallelChunks hands f at once.
const chunkSize = 64

// parallelChunks runs f over 0..n-1 in chunks of chunkSize, on one goroutine per core (at least two:
// the work is mostly system calls, and a core waits on none of them).
func parallelChunks(n int64, f func(lo, hi int64)) {
	workers := max(runtime.GOMAXPROCS(0), 2)
	var next atomic.Int64
	var wg sync.WaitGroup
	for w := 0; w < workers; w++ {
		wg.Go(func() {
			for {
				lo := next.Add(chunkSize) - chunkSize
				if lo >= n {
					return
				}
				f(lo, min(lo+chunkSize, n))
			}
		})
	}
	wg.Wait()
}

// errFinding is the finding of a refusal err about path, concerning no one leaf.
func errFinding(path string, err error) LogFinding {
	return LogFinding{Code: refuse.CodeOf(err), Leaf: -1, Path: path, Msg: refuse.Detail(err)}
}
