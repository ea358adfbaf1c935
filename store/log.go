package store

import (
	"errors"
	"slices"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/opencontainers/go-digest"
	"golang.org/x/mod/sumdb/note"
	"golang.org/x/mod/sumdb/tlog"
	"golang.org/x/sys/unix"

	"github.com/qinglong/ql3/deploylog"
	"github.com/qinglong/ql3/evidence"
	"github.com/qinglong/ql3/internal/sysfile"
	"github.com/qinglong/ql3/refuse"
)

// The deployment log lives under log/ (docs/log.md): log/origin (written last by `log init`:
// the log exists once it does), log/leaves/<index>, log/tiles/<level>-<index> (full hash tiles)
// and log/checkpoints/<size> (signed notes). Every file is 0400 and written no-replace like an
// object. Appends are serialized by an flock held on a fresh descriptor of the store root.

// Reason codes of the log in the store.
const (
	CodeLogNotInitialized  refuse.Code = "LOG_NOT_INITIALIZED" // the store has no log (ql3 log init)
	CodeLogInitialized     refuse.Code = "LOG_INITIALIZED"     // log init with another origin than the log's
	CodeLogAppendConflict  refuse.Code = "LOG_APPEND_CONFLICT" // a leaf appeared at the next index without the lock
	CodeLogFile            refuse.Code = "LOG_FILE"            // a log file breaks the file rules (symlink, mode, links, size)
	CodeLogEntryMismatch   refuse.Code = "LOG_ENTRY_MISMATCH"  // an index entry names another record than its leaf
	CodeLogRecordMissing   refuse.Code = "LOG_RECORD_MISSING"  // a leaf's record is missing or corrupt
	CodeLogCheckpointStale refuse.Code = "LOG_CHECKPOINT_MISMATCH"
	CodeLogCheckpointClash refuse.Code = "LOG_CHECKPOINT_CONFLICT" // another note is stored for that size
	CodeLogUnsigned        refuse.Code = "LOG_UNSIGNED"            // no signed checkpoint covers the leaf
	CodeLogNotLogged       refuse.Code = "LOG_RECORD_NOT_LOGGED"   // no leaf records that digest
)

const (
	logDirName      = "log"
	logOriginName   = "origin"
	leavesRel       = "log/leaves"
	tilesRel        = "log/tiles"
	checkpointsRel  = "log/checkpoints"
	maxOriginLength = 256
	tileBytes       = deploylog.TileWidth * tlog.HashSize
)

// logDirs holds the log's directories for one operation.
type logDirs struct {
	log, leaves, tiles, checkpoints heldDir
	origin                          string
	// records is log/records (logrecords.go), opened on first use: -1 until then, and when it
	// does not exist (a log made before lookups).
	records      heldDir
	recordsTried bool
}

func (l *logDirs) close() {
	for _, d := range []heldDir{l.log, l.leaves, l.tiles, l.checkpoints, l.records} {
		if d.fd >= 0 {
			unix.Close(d.fd)
		}
	}
}

func leafName(i int64) string { return pad20(i) }
func tileName(level, n int64) string {
	return strconv.FormatInt(level, 10) + "-" + pad20(n)
}
func checkpointName(n int64) string { return pad20(n) }

// partialTileName is the file of partial tile (level, n) of width w: "<level>-<n, 20 digits>.p.<w>"
// (C2SP tlog-tiles' tile/<level>/<n>.p/<w>).
func partialTileName(level, n int64, w int) string {
	return tileName(level, n) + ".p." + strconv.Itoa(w)
}

// pad20 is the zero-padded 20-digit decimal of n: names sort in numeric order.
func pad20(n int64) string {
	s := strconv.FormatInt(n, 10)
	return strings.Repeat("0", 20-len(s)) + s
}

func parseName(name string) (int64, bool) {
	if len(name) != 20 {
		return 0, false
	}
	n, err := strconv.ParseInt(name, 10, 64)
	return n, err == nil && n >= 0 && pad20(n) == name
}

// CheckOrigin holds a log origin to the checkpoint's origin rules.
func CheckOrigin(origin string) error {
	if origin == "" || len(origin) > maxOriginLength || strings.TrimSpace(origin) != origin || !utf8.ValidString(origin) ||
		strings.ContainsAny(origin, "\n\r\t") || strings.ContainsRune(origin, '+') || strings.ContainsRune(origin, ' ') {
		return refuse.New(deploylog.CodeOrigin, "log origin %q: want a short name without space, tab, plus or newline (e.g. example.com/ql3/prod)", origin)
	}
	return nil
}

// openLog opens the log's directories; ok is false when the store has no log (no log/origin).
// With partial it also opens a log whose origin is not yet written (log init resuming).
func (s *Store) openLog(partial bool) (*logDirs, bool, error) {
	l := &logDirs{log: heldDir{fd: -1}, leaves: heldDir{fd: -1}, tiles: heldDir{fd: -1}, checkpoints: heldDir{fd: -1}, records: heldDir{fd: -1}}
	var st unix.Stat_t
	if err := unix.Fstatat(s.dirs[dRoot].fd, logDirName, &st, unix.AT_SYMLINK_NOFOLLOW); errors.Is(err, unix.ENOENT) {
		return nil, false, nil
	}
	var err error
	if l.log, err = openDir(s.dirs[dRoot].fd, logDirName, logDirName); err != nil {
		return nil, false, err
	}
	b, rerr := readLogFile(l.log.fd, logOriginName, logDirName+"/"+logOriginName, maxOriginLength+1)
	if rerr != nil && !(partial && refuse.CodeOf(rerr) == CodeObjectNotFound) {
		l.close()
		if refuse.CodeOf(rerr) == CodeObjectNotFound {
			return nil, false, nil // log init never finished: no log yet
		}
		return nil, false, rerr
	}
	if rerr == nil {
		o := strings.TrimSuffix(string(b), "\n")
		if o+"\n" != string(b) || CheckOrigin(o) != nil {
			l.close()
			return nil, false, refuse.New(CodeLogFile, "log/origin is not one origin line")
		}
		l.origin = o
	}
	for _, sub := range []struct {
		d    *heldDir
		name string
	}{{&l.leaves, "leaves"}, {&l.tiles, "tiles"}, {&l.checkpoints, "checkpoints"}} {
		if *sub.d, err = openDir(l.log.fd, sub.name, logDirName+"/"+sub.name); err != nil {
			l.close()
			return nil, false, err
		}
	}
	return l, true, nil
}

// readLogFile reads a log file under an object's file rules (no symlink, regular, 0400, owner,
// one link) and at most max bytes. A missing file is OBJECT_NOT_FOUND.
func readLogFile(dirfd int, name, rel string, max int64) ([]byte, error) {
	fd, err := openRO(dirfd, name)
	if errors.Is(err, unix.ENOENT) {
		return nil, refuse.New(CodeObjectNotFound, "%s not found", rel)
	}
	if err != nil {
		return nil, refuse.Wrap(CodeLogFile, err, "open %s", rel)
	}
	defer unix.Close(fd)
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		return nil, refuse.Wrap(CodeStoreIO, err, "stat %s", rel)
	}
	if err := checkObjectStat(&st, digest.Digest(rel)); err != nil {
		return nil, refuse.Wrap(CodeLogFile, err, "%s", rel)
	}
	if st.Size > max {
		return nil, refuse.New(CodeLogFile, "%s has %d bytes, more than %d", rel, st.Size, max)
	}
	b, grew, err := readSized(fd, st.Size)
	if err != nil || grew {
		return nil, refuse.New(CodeLogFile, "%s changed while being read", rel)
	}
	return b, nil
}

// lockPublish takes the store's publication lock: an exclusive flock on a fresh descriptor of
// the root directory (a fresh open file, so that two goroutines of one process exclude each
// other too). Every publication holds it from the check that its entry is new to the entry's
// rename, so that the log's order is the order in which entries appear.
func (s *Store) lockPublish() (func(), error) {
	fd, err := sysfile.RetryEINTR(func() (int, error) {
		return unix.Openat(s.dirs[dRoot].fd, ".", unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	})
	if err != nil {
		return nil, refuse.Wrap(CodeStoreIO, err, "open the store root to lock it")
	}
	for {
		err = unix.Flock(fd, unix.LOCK_EX)
		if !errors.Is(err, unix.EINTR) {
			break
		}
	}
	if err != nil {
		unix.Close(fd)
		return nil, refuse.Wrap(CodeStoreIO, err, "lock the store for publication")
	}
	return func() { unix.Close(fd) }, nil
}

// logHook, when set by tests, runs at each named step of an append (docs/log.md, "Order of
// writes"): "leaf" before the leaf's rename, "tiles" after the leaf is durable and before its
// tiles, "entry" before the index entry's rename; in log sign "partial" before each partial
// tile, "lookups" before the record lookups, "checkpoint" before the checkpoint note; in log init
// "backfill" before each leaf's rename, "init-lookups" before the lookups, "origin" before
// log/origin.
var logHook func(step string)

func hook(step string) {
	if logHook != nil {
		logHook(step)
	}
}

// publish runs place, which renames one index entry into place, as a publication: under the
// publication lock, after the log's last leaf is repaired, with the leaf appended (and made
// durable, with any tile it completes) before the entry. present reports that the entry exists
// already with the same content (a no-op: no leaf) or refuses a conflicting one. A store without
// a log publishes as before.
//
// prepare, when not nil, is work of the publication that needs durability but names nothing (the
// entry's staged content): it runs beside the append, and place runs it itself when there is no
// log.
func (s *Store) publish(leaf deploylog.Leaf, present func() (bool, error), prepare func() error, place func() error) error {
	unlock, err := s.lockPublish()
	if err != nil {
		return err
	}
	defer unlock()
	l, ok, err := s.openLog(false)
	if err != nil {
		return err
	}
	if !ok {
		return place()
	}
	defer l.close()
	n, err := s.logRepair(l)
	if err != nil {
		return err
	}
	if done, err := present(); err != nil || done {
		return err
	}
	prepared := make(chan error, 1)
	if prepare != nil {
		go func() { prepared <- prepare() }()
	} else {
		prepared <- nil
	}
	err = s.logAppend(l, n, leaf)
	if perr := <-prepared; err == nil {
		err = perr
	}
	if err != nil {
		return err
	}
	hook("entry")
	return place()
}

// logSize finds the number of leaves: leaves are named 0..n-1 with no gap, so the first missing
// name is found by doubling then bisecting (about 2·log2 n lookups, no listing).
func logSize(leaves int) (int64, error) {
	exists := func(i int64) (bool, error) {
		var st unix.Stat_t
		err := unix.Fstatat(leaves, leafName(i), &st, unix.AT_SYMLINK_NOFOLLOW)
		if errors.Is(err, unix.ENOENT) {
			return false, nil
		}
		if err != nil {
			return false, refuse.Wrap(CodeStoreIO, err, "stat leaf %d", i)
		}
		return true, nil
	}
	ok, err := exists(0)
	if err != nil || !ok {
		return 0, err
	}
	lo, hi := int64(0), int64(1) // leaf lo exists
	for {
		ok, err := exists(hi)
		if err != nil {
			return 0, err
		}
		if !ok {
			break
		}
		lo, hi = hi, hi*2
	}
	for hi-lo > 1 { // lo exists, hi does not
		mid := lo + (hi-lo)/2
		ok, err := exists(mid)
		if err != nil {
			return 0, err
		}
		if ok {
			lo = mid
		} else {
			hi = mid
		}
	}
	return hi, nil
}

func (s *Store) readLeaf(l *logDirs, i int64) (deploylog.Leaf, []byte, error) {
	leafReads.Add(1)
	rel := leavesRel + "/" + leafName(i)
	b, err := readLogFile(l.leaves.fd, leafName(i), rel, deploylog.MaxLeafSize)
	if err != nil {
		return deploylog.Leaf{}, nil, err
	}
	leaf, err := deploylog.ParseLeaf(b)
	if err != nil {
		return deploylog.Leaf{}, nil, refuse.Wrap(deploylog.CodeLeafCorrupt, err, "%s", rel)
	}
	return leaf, b, nil
}

// recordMediaTypes is the media type of the record each publication kind's entry names.
var recordMediaTypes = map[deploylog.Kind]string{
	deploylog.KindPreflight:   evidence.MediaTypePreflight,
	deploylog.KindIntent:      evidence.MediaTypeIntent,
	deploylog.KindReceipt:     evidence.MediaTypeReceipt,
	deploylog.KindLiveAudit:   evidence.MediaTypeLiveAudit,
	deploylog.KindAttestation: evidence.MediaTypeStatement,
}

// logRepair completes what a crash may have left of the last append, deterministically, and
// returns the log's size: the last leaf's index entry (a leaf is durable before its entry is
// written, so a kill between them leaves a leaf without entry, which is completed from the leaf
// and its durable record), and the tiles the last leaf completed.
func (s *Store) logRepair(l *logDirs) (int64, error) {
	n, err := logSize(l.leaves.fd)
	if err != nil || n == 0 {
		return n, err
	}
	leaf, _, err := s.readLeaf(l, n-1)
	if err != nil {
		return 0, err
	}
	if leaf.Kind != deploylog.KindTombstone {
		d, ok, err := s.leafEntry(leaf)
		if err != nil {
			return 0, err
		}
		if ok && d.Digest != leaf.Record {
			return 0, refuse.New(CodeLogEntryMismatch, "the index entry of leaf %d names %s, the leaf %s", n-1, d.Digest, leaf.Record)
		}
		if !ok {
			if err := s.completeEntry(leaf); err != nil {
				return 0, err
			}
		}
	}
	return n, s.writeTiles(l, n)
}

// leafEntry reads the index entry a publication leaf names.
func (s *Store) leafEntry(leaf deploylog.Leaf) (evidence.Descriptor, bool, error) {
	kind := leaf.Published()
	if kind == deploylog.KindAttestation {
		es, err := s.listAttestations(leaf.Key)
		if err != nil {
			return evidence.Descriptor{}, false, err
		}
		for _, e := range es {
			if e.Bundle == leaf.Bundle {
				return e.Statement, true, nil
			}
		}
		return evidence.Descriptor{}, false, nil
	}
	return s.getIndex(kind.IndexKind(), leaf.Key)
}

// completeEntry writes the index entry of a leaf whose append was interrupted after the leaf was
// durable: the record it names was durable before the leaf was written.
func (s *Store) completeEntry(leaf deploylog.Leaf) error {
	mt := recordMediaTypes[leaf.Kind]
	b, err := s.get(leaf.Record)
	if err != nil {
		return refuse.Wrap(CodeLogRecordMissing, err, "the record of the log's last leaf, whose index entry is to be completed")
	}
	d := evidence.Descriptor{MediaType: mt, Digest: leaf.Record, Size: int64(len(b))}
	if err := checkRecord(mt, b); err != nil {
		return refuse.Wrap(CodeLogRecordMissing, err, "the record of the log's last leaf")
	}
	if err := s.checkRoot(); err != nil {
		return err
	}
	if leaf.Kind == deploylog.KindAttestation {
		entry, err := attestationEntry(leaf.Key, leaf.Bundle, d)
		if err != nil {
			return err
		}
		dir, _, synced, err := s.attestationDir(leaf.Key, true)
		if err != nil {
			return err
		}
		defer unix.Close(dir.fd)
		if err := synced(); err != nil {
			return err
		}
		err = s.commitAt(dir.fd, attestationsRel+"/"+leaf.Key.Encoded(), leaf.Bundle.Encoded(), entry)
		if errors.Is(err, errExists) {
			return nil
		}
		return err
	}
	entry, err := evidence.MarshalRecord(d)
	if err != nil {
		return err
	}
	kind := leaf.Kind.IndexKind()
	dirfd, release, _, err := s.kindDir(kind, true)
	if err != nil {
		return err
	}
	defer release()
	err = s.commitAt(dirfd, "index/"+kind, leaf.Key.Encoded(), entry)
	if errors.Is(err, errExists) {
		return nil
	}
	return err
}

// logAppend writes leaf n, durable (its file synced, then log/leaves synced), then the tiles it
// completes.
func (s *Store) logAppend(l *logDirs, n int64, leaf deploylog.Leaf) error {
	b, err := leaf.Marshal()
	if err != nil {
		return err
	}
	hook("leaf")
	err = s.commitAt(l.leaves.fd, leavesRel, leafName(n), b)
	if errors.Is(err, errExists) {
		return refuse.New(CodeLogAppendConflict, "leaf %d appeared while this publication held the log's lock", n)
	}
	if err != nil {
		return err
	}
	hook("tiles")
	return s.writeTiles(l, n+1)
}

// writeTiles writes each full tile a log of n leaves completes, unless it is there already.
func (s *Store) writeTiles(l *logDirs, n int64) error {
	for _, t := range deploylog.FullTilesCompletedBy(n) {
		name := tileName(t[0], t[1])
		var st unix.Stat_t
		if err := unix.Fstatat(l.tiles.fd, name, &st, unix.AT_SYMLINK_NOFOLLOW); err == nil {
			continue
		}
		r := newLogReader(s, l, n)
		data := make([]byte, 0, tileBytes)
		for j := int64(0); j < deploylog.TileWidth; j++ {
			h, err := r.hash(int(t[0])*deploylog.TileHeight, t[1]*deploylog.TileWidth+j)
			if err != nil {
				return err
			}
			data = append(data, h[:]...)
		}
		if err := s.commitAt(l.tiles.fd, tilesRel, name, data); err != nil && !errors.Is(err, errExists) {
			return err
		}
	}
	return nil
}

// logReader reads the stored hashes of a log of n leaves (a tlog.HashReader): from the full
// tiles where they are, from the partial tiles kept for the sizes in partial (the sizes of
// signed checkpoints: `log sign` writes their right edge), and from the leaves and lower tiles
// otherwise (a right edge not kept, or a tile a crash did not let be written).
type logReader struct {
	s       *Store
	l       *logDirs
	n       int64
	partial []int64             // sizes whose partial tiles may be read, largest first
	tiles   map[[3]int64][]byte // (level, index, width; 0 for a full tile): nil when not stored
}

func newLogReader(s *Store, l *logDirs, n int64, partial ...int64) *logReader {
	var ps []int64
	for _, p := range partial {
		if p > 0 && p <= n {
			ps = append(ps, p)
		}
	}
	slices.Sort(ps)
	slices.Reverse(ps)
	return &logReader{s: s, l: l, n: n, partial: ps, tiles: map[[3]int64][]byte{}}
}

func (r *logReader) ReadHashes(indexes []int64) ([]tlog.Hash, error) {
	out := make([]tlog.Hash, len(indexes))
	for i, x := range indexes {
		level, n := tlog.SplitStoredHashIndex(x)
		h, err := r.hash(level, n)
		if err != nil {
			return nil, err
		}
		out[i] = h
	}
	return out, nil
}

// tile reads tile (level, n) of width w (0: full) once; nil when it is not stored.
func (r *logReader) tile(level, n int64, w int) ([]byte, error) {
	k := [3]int64{level, n, int64(w)}
	if t, ok := r.tiles[k]; ok {
		return t, nil
	}
	name, want := tileName(level, n), tileBytes
	if w > 0 {
		name, want = partialTileName(level, n, w), w*tlog.HashSize
	}
	b, err := readLogFile(r.l.tiles.fd, name, tilesRel+"/"+name, int64(want))
	if refuse.CodeOf(err) == CodeObjectNotFound {
		b, err = nil, nil
	}
	if err != nil {
		return nil, err
	}
	if b != nil && len(b) != want {
		return nil, refuse.New(CodeLogFile, "tile %s has %d bytes, want %d", name, len(b), want)
	}
	r.tiles[k] = b
	return b, nil
}

// stored is the hash at tree level 8·tl, index i from a stored tile, when one holds it: the full
// tile, else a partial tile kept for one of r.partial that covers i.
func (r *logReader) stored(tl, i int64) ([]byte, error) {
	n, j := i/deploylog.TileWidth, i%deploylog.TileWidth
	if (n+1)*deploylog.TileWidth <= r.n>>(tl*deploylog.TileHeight) {
		t, err := r.tile(tl, n, 0)
		if t != nil || err != nil {
			return t, err
		}
	}
	for _, p := range r.partial {
		c := p >> (tl * deploylog.TileHeight)
		w := c % deploylog.TileWidth
		if c/deploylog.TileWidth != n || j >= w {
			continue
		}
		t, err := r.tile(tl, n, int(w))
		if t != nil || err != nil {
			return t, err
		}
	}
	return nil, nil
}

// hash is the hash of the complete subtree at tree level level, index n.
func (r *logReader) hash(level int, n int64) (tlog.Hash, error) {
	if level > 62 || (n+1)<<level > r.n {
		return tlog.Hash{}, refuse.New(deploylog.CodeInclusion, "no complete subtree %d/%d in a log of %d", level, n, r.n)
	}
	if level%deploylog.TileHeight == 0 {
		t, err := r.stored(int64(level/deploylog.TileHeight), n)
		if err != nil {
			return tlog.Hash{}, err
		}
		if t != nil {
			var h tlog.Hash
			copy(h[:], t[(n%deploylog.TileWidth)*tlog.HashSize:])
			return h, nil
		}
		if level == 0 {
			_, b, err := r.s.readLeaf(r.l, n)
			if err != nil {
				return tlog.Hash{}, err
			}
			return tlog.RecordHash(b), nil
		}
	}
	a, err := r.hash(level-1, 2*n)
	if err != nil {
		return tlog.Hash{}, err
	}
	b, err := r.hash(level-1, 2*n+1)
	if err != nil {
		return tlog.Hash{}, err
	}
	return tlog.NodeHash(a, b), nil
}

// writePartialTiles keeps the right edge of the tree of n leaves (its partial tiles, C2SP
// tlog-tiles `.p/W`), each a new immutable file, computed by r (which must not read the partial
// tiles of size n itself). An existing one must hold the same hashes (LOG_TILE_MISMATCH): a
// signer never vouches for a tree its stored tiles contradict.
func (s *Store) writePartialTiles(l *logDirs, r *logReader, n int64) error {
	for _, pt := range deploylog.PartialTilesAt(n) {
		data := make([]byte, 0, pt.Width*tlog.HashSize)
		for j := int64(0); j < int64(pt.Width); j++ {
			h, err := r.hash(int(pt.Level)*deploylog.TileHeight, pt.Index*deploylog.TileWidth+j)
			if err != nil {
				return err
			}
			data = append(data, h[:]...)
		}
		name := partialTileName(pt.Level, pt.Index, pt.Width)
		hook("partial")
		err := s.commitAt(l.tiles.fd, tilesRel, name, data)
		if errors.Is(err, errExists) {
			old, rerr := readLogFile(l.tiles.fd, name, tilesRel+"/"+name, int64(len(data)))
			if rerr != nil {
				return rerr
			}
			if string(old) != string(data) {
				return refuse.New(CodeLogTileMismatch, "%s/%s differs from the hashes of the log's leaves", tilesRel, name).
					WithHint("run ql3 log verify: the log's tiles were changed")
			}
			err = nil
		}
		if err != nil {
			return err
		}
		r.tiles[[3]int64{pt.Level, pt.Index, int64(pt.Width)}] = data
	}
	return nil
}

var _ tlog.HashReader = (*logReader)(nil)

// LogOrigin returns the store's log origin; LOG_NOT_INITIALIZED without a log.
func (s *Store) LogOrigin() (string, error) {
	l, release, err := s.holdLog()
	if err != nil {
		return "", err
	}
	defer release()
	return l.origin, nil
}

// holdLog acquires the store for one read of its log and opens the log (LOG_NOT_INITIALIZED
// without one); release closes the log's directories, then releases the store. Writers that
// also take the publish lock keep their own order (acquire, lockPublish, mustOpenLog).
func (s *Store) holdLog() (l *logDirs, release func(), err error) {
	if err := s.acquire(); err != nil {
		return nil, nil, err
	}
	l, err = s.mustOpenLog()
	if err != nil {
		s.mu.RUnlock()
		return nil, nil, err
	}
	return l, func() { l.close(); s.mu.RUnlock() }, nil
}

func (s *Store) mustOpenLog() (*logDirs, error) {
	l, ok, err := s.openLog(false)
	if err != nil {
		return nil, err
	}
	if !ok {
		return nil, refuse.New(CodeLogNotInitialized, "store %s has no deployment log", s.root).
			WithHint("start it with: ql3 log init --store %s --origin NAME", s.root)
	}
	return l, nil
}

// SignCheckpoint signs the log's current tree with signer (a note key named after the origin)
// and keeps the signed note as log/checkpoints/<size>, no-replace; signing a size already
// signed by the same key is a no-op (Ed25519 signatures are deterministic). Before signing, the
// tree must extend the largest checkpoint stored (LOG_CHECKPOINT_MISMATCH otherwise): a signer
// never vouches for a log that rewrote what it signed. It returns the signed note.
func (s *Store) SignCheckpoint(signer note.Signer) ([]byte, deploylog.Checkpoint, error) {
	if err := s.acquire(); err != nil {
		return nil, deploylog.Checkpoint{}, err
	}
	defer s.mu.RUnlock()
	unlock, err := s.lockPublish()
	if err != nil {
		return nil, deploylog.Checkpoint{}, err
	}
	defer unlock()
	l, err := s.mustOpenLog()
	if err != nil {
		return nil, deploylog.Checkpoint{}, err
	}
	defer l.close()
	if signer.Name() != l.origin {
		return nil, deploylog.Checkpoint{}, refuse.New(deploylog.CodeOrigin, "the log key is named %q, the log's origin is %q", signer.Name(), l.origin)
	}
	n, err := s.logRepair(l)
	if err != nil {
		return nil, deploylog.Checkpoint{}, err
	}
	// The previous checkpoint's right edge (its partial tiles) and the full tiles give every
	// hash but the few leaves appended since: signing reads O(log n) tiles.
	prev, hasPrev, err := s.lastCheckpoint(l)
	if err != nil {
		return nil, deploylog.Checkpoint{}, err
	}
	r := newLogReader(s, l, n, prev.Size)
	if hasPrev {
		if prev.Size > n {
			return nil, deploylog.Checkpoint{}, refuse.New(deploylog.CodeRollback, "the log has %d leaves, a stored checkpoint %d", n, prev.Size)
		}
		if h, err := tlog.TreeHash(prev.Size, r); err != nil || h != prev.Hash {
			return nil, deploylog.Checkpoint{}, refuse.New(CodeLogCheckpointStale, "the log's first %d leaves no longer hash to the stored checkpoint of that size", prev.Size).
				WithHint("run ql3 log verify: the log was changed after it was signed")
		}
	}
	// The right edge of this size is kept before its checkpoint, so that every stored
	// checkpoint's tiles exist (C2SP tlog-tiles) and proofs against it read no leaf.
	if err := s.writePartialTiles(l, r, n); err != nil {
		return nil, deploylog.Checkpoint{}, err
	}
	// The record lookups of the leaves this checkpoint is the first to cover (a proof needs a
	// checkpoint, so a lookup is first worth its write here, not at each publication), before
	// the note: a sign killed before it writes them again.
	from := int64(0)
	if hasPrev {
		from = prev.Size
	}
	hook("lookups")
	s.signLookups(l, from, n)
	root, err := tlog.TreeHash(n, r)
	if err != nil {
		return nil, deploylog.Checkpoint{}, err
	}
	cp := deploylog.Checkpoint{Origin: l.origin, Size: n, Hash: root}
	msg, err := deploylog.Sign(cp, signer)
	if err != nil {
		return nil, deploylog.Checkpoint{}, err
	}
	hook("checkpoint")
	err = s.commitAt(l.checkpoints.fd, checkpointsRel, checkpointName(n), msg)
	if errors.Is(err, errExists) {
		old, rerr := readLogFile(l.checkpoints.fd, checkpointName(n), checkpointsRel+"/"+checkpointName(n), deploylog.MaxNoteSize)
		if rerr != nil {
			return nil, deploylog.Checkpoint{}, rerr
		}
		if string(old) != string(msg) {
			return nil, deploylog.Checkpoint{}, refuse.New(CodeLogCheckpointClash, "log/checkpoints holds another note for size %d", n)
		}
		err = nil
	}
	return msg, cp, err
}

// lastCheckpoint parses the largest stored checkpoint (signatures unchecked: the signer checks
// its tree, the verifier its signatures).
func (s *Store) lastCheckpoint(l *logDirs) (deploylog.Checkpoint, bool, error) {
	names, err := listDir(l.checkpoints.fd, checkpointsRel)
	if err != nil {
		return deploylog.Checkpoint{}, false, err
	}
	for i := len(names) - 1; i >= 0; i-- {
		if _, ok := parseName(names[i]); !ok {
			continue
		}
		b, err := readLogFile(l.checkpoints.fd, names[i], checkpointsRel+"/"+names[i], deploylog.MaxNoteSize)
		if err != nil {
			return deploylog.Checkpoint{}, false, err
		}
		c, _, err := deploylog.ParseSignedCheckpoint(b)
		if err != nil {
			return deploylog.Checkpoint{}, false, err
		}
		return c, true, nil
	}
	return deploylog.Checkpoint{}, false, nil
}
