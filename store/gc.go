package store

import (
	"context"
	"errors"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/opencontainers/go-digest"
	"golang.org/x/sys/unix"

	"github.com/qinglong/ql3/deploylog"
	"github.com/qinglong/ql3/evidence"
	"github.com/qinglong/ql3/internal/sysfile"
	"github.com/qinglong/ql3/refuse"
)

// Retention (`ql3 store gc`, docs/store.md "Retention" and docs/log.md "store gc"): the store
// drops the roots a policy names, appending one tombstone leaf per dropped root to the log
// before it removes anything, then removes their index entries, then the objects only they
// reached. The policy (which roots) is the caller's (package retention); what is safe to remove,
// in which order, and how an interrupted gc is finished is this file's.

// Reason codes of store gc.
const (
	// CodeGCRoot: the policy named a root that is not a published index entry of the store (or
	// names another record than its entry): gc drops only what the index publishes.
	CodeGCRoot refuse.Code = "GC_ROOT"
	// CodeGCClosure: an object a kept root reaches is missing or corrupt, or a record in a dropped
	// root's closure is corrupt: gc cannot know what it reaches, so it removes nothing.
	CodeGCClosure refuse.Code = "GC_CLOSURE"
)

// GCRoot is one root the policy drops: an index entry (its publication kind, key and, for an
// attestation, bundle) and the record it names.
type GCRoot struct {
	Kind   deploylog.Kind `json:"kind"`
	Key    digest.Digest  `json:"key"`
	Bundle digest.Digest  `json:"bundle,omitempty"`
	Record digest.Digest  `json:"record"`
}

func (r GCRoot) entry() entryKey { return entryKey{kind: r.Kind, key: r.Key, bundle: r.Bundle} }

// GCDrop is one dropped root as gc reports it.
type GCDrop struct {
	GCRoot
	// Leaf is the index of the leaf that published it; Tombstone the index of its tombstone leaf
	// (-1 in a dry run).
	Leaf      int64 `json:"leaf"`
	Tombstone int64 `json:"tombstone"`
	// Resumed marks a root an interrupted gc had tombstoned already: this run finished it.
	Resumed bool `json:"resumed,omitempty"`
}

// GCReport is what a gc did (or, in a dry run, would do).
type GCReport struct {
	DryRun  bool     `json:"dryRun"`
	Origin  string   `json:"origin"`
	Kept    int      `json:"kept"` // index entries kept
	Dropped []GCDrop `json:"dropped"`
	// EntriesRemoved, ObjectsRemoved and BytesRemoved count what was (would be) removed: the
	// dropped roots' entries still present and the objects only dropped roots reach.
	EntriesRemoved int   `json:"entriesRemoved"`
	ObjectsRemoved int   `json:"objectsRemoved"`
	BytesRemoved   int64 `json:"bytesRemoved"`
	LogSize        int64 `json:"logSize"` // leaves after the gc
}

// GCOptions are GC's inputs besides the policy.
type GCOptions struct {
	DryRun bool
	// Wait bounds the wait for the runs that write objects into the store to end (their Store
	// handles hold the writers' lock until Close); STORE_LOCKED after it. Zero: 30 s.
	Wait time.Duration
}

// GCView is what a policy reads of the store: its index entries, under gc's locks, with the
// roots an interrupted gc already tombstoned left out (they are dropped whatever the policy).
type GCView struct {
	Entries      map[string][]IndexEntry // by index kind: preflights, intents, receipts, live-audits
	Attestations []AttestationEntry
}

// gcHook, when set by tests, runs at each named step of a gc (docs/log.md, "store gc"):
// "tombstone" before each tombstone leaf's rename, "entry" before each index entry's removal,
// "object" before each object's removal, "done" after the last.
var gcHook func(step string)

func gcStep(step string) {
	if gcHook != nil {
		gcHook(step)
	}
}

// GC drops the roots policy names, under the writers' lock (no run that writes objects is in
// progress, so none is about to reference an object gc removes) and the publication lock (no
// entry is published meanwhile). policy runs under both locks and reads only. Order of writes,
// each step durable before the next: (1) one tombstone leaf per newly dropped root (and per
// attestation of a dropped record), appended to the log; (2) the index entries of every
// tombstoned root still present, removed; (3) the objects reachable from a tombstoned root's
// record and from no kept root, removed children before the records that name them. A gc
// killed at any step leaves a store that verifies, and the next gc (with any policy) finishes
// it: it finds tombstoned roots whose entries or objects remain. A store without a log is
// refused (LOG_NOT_INITIALIZED): gc's tombstones are its record of what it dropped.
func (s *Store) GC(policy func(GCView) ([]GCRoot, error), o GCOptions) (*GCReport, error) {
	if err := s.acquire(); err != nil {
		return nil, err
	}
	defer s.mu.RUnlock()
	if o.Wait == 0 {
		o.Wait = 30 * time.Second
	}
	release, err := s.lockWritersExclusive(o.Wait)
	if err != nil {
		return nil, err
	}
	defer release()
	unlock, err := s.lockPublish()
	if err != nil {
		return nil, err
	}
	defer unlock()
	l, err := s.mustOpenLog()
	if err != nil {
		return nil, err
	}
	defer l.close()
	if !o.DryRun {
		if err := s.checkRoot(); err != nil {
			return nil, err
		}
	}
	n, err := logSize(l.leaves.fd)
	if err != nil {
		return nil, err
	}
	if !o.DryRun {
		if n, err = s.logRepair(l); err != nil {
			return nil, err
		}
		// An earlier gc killed between its tombstones and their tiles left full tiles unwritten
		// below the last leaf, which the append's repair (the last leaf's tiles only) does not.
		if err := s.writeAllTiles(l, 0, n); err != nil {
			return nil, err
		}
	}
	leaves, err := s.readLeaves(l, n)
	if err != nil {
		return nil, err
	}
	// What the log says: the leaf that published each entry last, and the tombstones.
	published := map[entryKey]int64{}
	tombstoned := map[entryKey]int64{}
	var tombRoots []GCRoot
	for i, leaf := range leaves {
		k := entryKey{kind: leaf.Published(), key: leaf.Key, bundle: leaf.Bundle}
		if leaf.Kind == deploylog.KindTombstone {
			tombstoned[k] = int64(i)
			tombRoots = append(tombRoots, GCRoot{Kind: leaf.Dropped, Key: leaf.Key, Bundle: leaf.Bundle, Record: leaf.Record})
			continue
		}
		published[k] = int64(i)
		delete(tombstoned, k) // republished after a drop
	}
	entries, err := s.gcEntries()
	if err != nil {
		return nil, err
	}
	rep := &GCReport{DryRun: o.DryRun, Origin: l.origin, Dropped: []GCDrop{}}
	// Roots an interrupted gc tombstoned whose entry is still there: dropped whatever the policy.
	drop := map[entryKey]GCDrop{}
	view := GCView{Entries: map[string][]IndexEntry{}}
	for _, e := range entries {
		k := e.root.entry()
		if ti, ok := tombstoned[k]; ok && tombRecord(leaves[ti]) == e.root.Record {
			drop[k] = GCDrop{GCRoot: e.root, Leaf: published[k], Tombstone: ti, Resumed: true}
			continue
		}
		if e.root.Kind == deploylog.KindAttestation {
			view.Attestations = append(view.Attestations, AttestationEntry{Subject: e.root.Key, Bundle: e.root.Bundle, Statement: e.desc})
		} else {
			ik := e.root.Kind.IndexKind()
			view.Entries[ik] = append(view.Entries[ik], IndexEntry{Kind: ik, Key: e.root.Key, Descriptor: e.desc})
		}
	}
	wanted, err := policy(view)
	if err != nil {
		return nil, err
	}
	byKey := map[entryKey]gcEntry{}
	for _, e := range entries {
		byKey[e.root.entry()] = e
	}
	var fresh []GCDrop
	addFresh := func(r GCRoot) error {
		k := r.entry()
		e, ok := byKey[k]
		if !ok || e.root.Record != r.Record {
			return refuse.New(CodeGCRoot, "the policy drops the %s %s naming %s, which the store's index does not publish", r.Kind, r.Key, r.Record)
		}
		if _, done := drop[k]; done {
			return nil
		}
		pi, ok := published[k]
		if !ok {
			return refuse.New(CodeLogEntryNoLeaf, "the %s entry %s has no leaf: published outside the log; run ql3 log verify", r.Kind, r.Key)
		}
		d := GCDrop{GCRoot: r, Leaf: pi, Tombstone: -1}
		drop[k] = d
		fresh = append(fresh, d)
		return nil
	}
	for _, r := range wanted {
		if r.Kind == deploylog.KindAttestation || r.Kind.IndexKind() == "" {
			return nil, refuse.New(CodeGCRoot, "the policy drops a root of kind %q: only preflights, intents, receipts and live audits are chosen by a policy (attestations follow their subject)", r.Kind)
		}
		if err := addFresh(r); err != nil {
			return nil, err
		}
	}
	// Attestations follow their subject: an attestation whose subject is the record of a
	// dropped root, and of no kept one, is dropped with it.
	droppedRecords, keptRecords := map[digest.Digest]bool{}, map[digest.Digest]bool{}
	for _, r := range tombRoots {
		droppedRecords[r.Record] = true
	}
	for _, d := range drop {
		droppedRecords[d.Record] = true
	}
	for _, e := range entries {
		if _, ok := drop[e.root.entry()]; !ok && e.root.Kind != deploylog.KindAttestation {
			keptRecords[e.root.Record] = true
		}
	}
	for _, e := range entries {
		if e.root.Kind == deploylog.KindAttestation && droppedRecords[e.root.Key] && !keptRecords[e.root.Key] {
			if err := addFresh(e.root); err != nil {
				return nil, err
			}
		}
	}
	// Tombstones are appended in the order the dropped roots were published.
	slices.SortFunc(fresh, func(a, b GCDrop) int { return int(a.Leaf - b.Leaf) })

	// The closures. Kept: every entry not dropped; each object must be readable.
	kept := map[digest.Digest]bool{}
	keptWalk := &gcWalk{s: s, seen: kept, strict: true}
	for _, e := range entries {
		if _, ok := drop[e.root.entry()]; ok {
			continue
		}
		if err := keptWalk.roots(e); err != nil {
			return nil, err
		}
	}
	// Dropped: every tombstoned root's record (this run's and earlier runs': an interrupted
	// sweep left objects that only a tombstone's record still reaches) and bundle; an object
	// already gone is what an earlier gc removed.
	dropWalk := &gcWalk{s: s, seen: map[digest.Digest]bool{}, skip: kept}
	for _, r := range tombRoots {
		if err := dropWalk.roots(gcEntry{root: r, desc: evidence.Descriptor{MediaType: recordMediaTypes[r.Kind], Digest: r.Record}}); err != nil {
			return nil, err
		}
	}
	for _, k := range sortedKeys(drop) {
		if err := dropWalk.roots(byKey[k]); err != nil {
			return nil, err
		}
	}
	sweep := dropWalk.order // children before the records that name them
	for _, d := range drop {
		rep.Dropped = append(rep.Dropped, d)
	}
	rep.EntriesRemoved = len(drop)
	rep.Kept = len(entries) - len(drop)
	rep.ObjectsRemoved = len(sweep)
	for _, d := range sweep {
		rep.BytesRemoved += dropWalk.size[d]
	}
	rep.LogSize = n + int64(len(fresh))
	if o.DryRun {
		sortDrops(rep.Dropped)
		return rep, nil
	}

	// (1) Tombstones, durable before anything is removed.
	tombs := make([]deploylog.Leaf, len(fresh))
	for i, d := range fresh {
		tombs[i] = deploylog.Leaf{Kind: deploylog.KindTombstone, Dropped: d.Kind, Key: d.Key, Bundle: d.Bundle, Record: d.Record}
	}
	if err := s.appendLeaves(l, n, tombs); err != nil {
		return nil, err
	}
	for i, d := range fresh {
		d.Tombstone = n + int64(i)
		drop[d.entry()] = d
	}
	rep.Dropped = rep.Dropped[:0]
	for _, d := range drop {
		rep.Dropped = append(rep.Dropped, d)
	}
	sortDrops(rep.Dropped)
	// (2) The entries.
	if err := s.removeEntries(rep.Dropped); err != nil {
		return nil, err
	}
	// (3) The objects.
	for _, d := range sweep {
		gcStep("object")
		if err := unix.Unlinkat(s.dirs[dSHA256].fd, d.Encoded(), 0); err != nil && !errors.Is(err, unix.ENOENT) {
			return nil, refuse.Wrap(CodeStoreIO, err, "remove object %s", d)
		}
	}
	if err := unix.Fsync(s.dirs[dSHA256].fd); err != nil {
		return nil, refuse.Wrap(CodeStoreIO, err, "fsync blobs/sha256")
	}
	gcStep("done")
	return rep, nil
}

// tombRecord is the record a tombstone leaf drops.
func tombRecord(l deploylog.Leaf) digest.Digest { return l.Record }

func sortedKeys(m map[entryKey]GCDrop) []entryKey {
	ks := make([]entryKey, 0, len(m))
	for k := range m {
		ks = append(ks, k)
	}
	slices.SortFunc(ks, func(a, b entryKey) int {
		return strings.Compare(string(a.kind)+string(a.key)+string(a.bundle), string(b.kind)+string(b.key)+string(b.bundle))
	})
	return ks
}

func sortDrops(ds []GCDrop) {
	slices.SortFunc(ds, func(a, b GCDrop) int {
		if a.Leaf != b.Leaf {
			return int(a.Leaf - b.Leaf)
		}
		return strings.Compare(string(a.Bundle), string(b.Bundle))
	})
}

// gcEntry is one index entry: the root and its descriptor (an attestation's statement).
type gcEntry struct {
	root GCRoot
	desc evidence.Descriptor
}

// gcEntries lists every index entry of the store, attestations included.
func (s *Store) gcEntries() ([]gcEntry, error) {
	var out []gcEntry
	for _, kind := range []string{evidence.IndexPreflights, evidence.IndexIntents, evidence.IndexReceipts, evidence.IndexLiveAudits} {
		es, err := s.listIndex(kind)
		if err != nil {
			return nil, err
		}
		lk, _ := deploylog.KindOfIndex(kind)
		for _, e := range es {
			out = append(out, gcEntry{root: GCRoot{Kind: lk, Key: e.Key, Record: e.Descriptor.Digest}, desc: e.Descriptor})
		}
	}
	subjects, err := s.attestationSubjects()
	if err != nil {
		return nil, err
	}
	for _, subject := range subjects {
		es, err := s.listAttestations(subject)
		if err != nil {
			return nil, err
		}
		for _, e := range es {
			out = append(out, gcEntry{root: GCRoot{Kind: deploylog.KindAttestation, Key: subject, Bundle: e.Bundle, Record: e.Statement.Digest}, desc: e.Statement})
		}
	}
	return out, nil
}

// gcWalk walks closures. strict: every object must be readable (a kept closure). Otherwise
// objects in skip (kept) are not entered, a missing object is passed over, and order collects
// the objects reached, children before parents.
type gcWalk struct {
	s      *Store
	seen   map[digest.Digest]bool
	skip   map[digest.Digest]bool
	strict bool
	order  []digest.Digest
	size   map[digest.Digest]int64
}

func (w *gcWalk) roots(e gcEntry) error {
	if e.root.Kind == deploylog.KindAttestation {
		if err := w.walk(evidence.Descriptor{MediaType: evidence.MediaTypeSigstoreBundle, Digest: e.root.Bundle}); err != nil {
			return err
		}
	}
	return w.walk(e.desc)
}

func (w *gcWalk) walk(d evidence.Descriptor) error {
	if w.seen[d.Digest] || w.skip[d.Digest] {
		return nil
	}
	w.seen[d.Digest] = true
	var size int64
	if _, isRec := evidence.RecordSchema(d.MediaType); isRec {
		// A record is read and re-hashed: what it names is kept (or removed) with it, so gc must
		// know exactly what that is.
		b, err := w.s.get(d.Digest)
		if err != nil {
			if !w.strict && refuse.CodeOf(err) == CodeObjectNotFound {
				return nil // removed by an earlier gc
			}
			return refuse.Wrap(CodeGCClosure, err, "record %s", d.Digest)
		}
		ds, err := evidence.Descriptors(b)
		if err != nil {
			return refuse.Wrap(CodeGCClosure, err, "record %s", d.Digest)
		}
		for _, c := range ds {
			if err := w.walk(c); err != nil {
				return err
			}
		}
		size = int64(len(b))
	} else {
		// A blob names nothing: kept, it is only not removed; dropped, it is removed if there.
		if w.strict {
			return nil
		}
		var st unix.Stat_t
		err := unix.Fstatat(w.s.dirs[dSHA256].fd, d.Digest.Encoded(), &st, unix.AT_SYMLINK_NOFOLLOW)
		if errors.Is(err, unix.ENOENT) {
			return nil
		}
		if err != nil {
			return refuse.Wrap(CodeStoreIO, err, "stat object %s", d.Digest)
		}
		size = st.Size
	}
	if !w.strict {
		if w.size == nil {
			w.size = map[digest.Digest]int64{}
		}
		w.order = append(w.order, d.Digest)
		w.size[d.Digest] = size
	}
	return nil
}

// readLeaves reads and parses leaves 0..n-1.
func (s *Store) readLeaves(l *logDirs, n int64) ([]deploylog.Leaf, error) {
	out := make([]deploylog.Leaf, n)
	errs := make([]error, n)
	parallel(n, func(i int64) { out[i], _, errs[i] = s.readLeaf(l, i) })
	for _, err := range errs {
		if err != nil {
			return nil, err
		}
	}
	return out, nil
}

// appendLeaves appends leaves at n, n+1, ... under the publication lock: staged a chunk at a
// time, synced together, renamed in index order (the log never has a gap), log/leaves synced,
// then every full tile they complete.
func (s *Store) appendLeaves(l *logDirs, n int64, leaves []deploylog.Leaf) error {
	for off := 0; off < len(leaves); off += 256 {
		chunk := leaves[off:min(len(leaves), off+256)]
		sts := make([]*staged, len(chunk))
		for k, leaf := range chunk {
			b, err := leaf.Marshal()
			if err == nil {
				sts[k], err = s.stage(b, false)
			}
			if err != nil {
				discardAll(s, sts)
				return err
			}
		}
		errs := make([]error, len(chunk))
		var wg sync.WaitGroup
		for k := range sts {
			wg.Go(func() { errs[k] = sts[k].sync() })
		}
		wg.Wait()
		if err := errors.Join(errs...); err != nil {
			discardAll(s, sts)
			return refuse.Wrap(CodeStoreIO, err, "sync tombstone leaves")
		}
		for k := range chunk {
			gcStep("tombstone")
			i := n + int64(off+k)
			if err := s.link(sts[k], l.leaves.fd, leafName(i)); err != nil {
				discardAll(s, sts)
				if errors.Is(err, errExists) {
					return refuse.New(CodeLogAppendConflict, "leaf %d appeared while gc held the log's lock", i)
				}
				return err
			}
		}
		discardAll(s, sts)
		if err := unix.Fsync(l.leaves.fd); err != nil {
			return refuse.Wrap(CodeStoreIO, err, "fsync %s", leavesRel)
		}
		if err := s.writeAllTiles(l, n+int64(off), n+int64(off+len(chunk))); err != nil {
			return err
		}
	}
	return nil
}

// writeAllTiles writes every full tile that a log growing from from to to leaves completes and
// that is missing.
func (s *Store) writeAllTiles(l *logDirs, from, to int64) error {
	w := int64(deploylog.TileWidth)
	for m := (from/w + 1) * w; m <= to; m += w {
		if err := s.writeTiles(l, m); err != nil {
			return err
		}
	}
	return nil
}

// removeEntries removes the index entries of ds that are still present, then syncs each
// directory it removed from.
func (s *Store) removeEntries(ds []GCDrop) error {
	type dir struct {
		fd      int
		release func()
	}
	touched := map[string]dir{}
	defer func() {
		for _, d := range touched {
			d.release()
		}
	}()
	var order []string
	for _, d := range ds {
		rel, name := "index/"+d.Kind.IndexKind(), d.Key.Encoded()
		if d.Kind == deploylog.KindAttestation {
			rel, name = attestationsRel+"/"+d.Key.Encoded(), d.Bundle.Encoded()
		}
		h, ok := touched[rel]
		if !ok {
			var there bool
			if d.Kind == deploylog.KindAttestation {
				held, ok, synced, err := s.attestationDir(d.Key, false)
				synced()
				if err != nil {
					return err
				}
				there, h = ok, dir{fd: held.fd, release: func() { unix.Close(held.fd) }}
			} else {
				fd, release, ok, err := s.kindDir(d.Kind.IndexKind(), false)
				if err != nil {
					return err
				}
				there, h = ok, dir{fd: fd, release: release}
			}
			if !there {
				continue
			}
			touched[rel] = h
			order = append(order, rel)
		}
		gcStep("entry")
		if err := unix.Unlinkat(h.fd, name, 0); err != nil && !errors.Is(err, unix.ENOENT) {
			return refuse.Wrap(CodeStoreIO, err, "remove %s/%s", rel, name)
		}
	}
	for _, rel := range order {
		if err := unix.Fsync(touched[rel].fd); err != nil {
			return refuse.Wrap(CodeStoreIO, err, "fsync %s", rel)
		}
	}
	return nil
}

// The writers' lock: a Store handle takes a shared flock on a fresh descriptor of blobs/sha256
// at its first object write (or lookup of an object it is about to reference: PutBlob,
// PutRecord, a Batch's puts, PutAttested) and holds it until Close, so that a run's objects,
// written or found present, stay in the store until it has published the records that name
// them. gc takes it exclusively: while it holds it, no run is between writing an object and
// publishing it, so every object a publication will reference is reached from an index entry
// gc sees, or is garbage of a run that ended without publishing.

// holdWriters takes the shared writers' lock for this handle, once.
func (s *Store) holdWriters() error {
	s.writerMu.Lock()
	defer s.writerMu.Unlock()
	if s.writerHeld {
		return nil
	}
	fd, err := s.openWriterFD()
	if err != nil {
		return err
	}
	for {
		err = unix.Flock(fd, unix.LOCK_SH)
		if !errors.Is(err, unix.EINTR) {
			break
		}
	}
	if err != nil {
		unix.Close(fd)
		return refuse.Wrap(CodeStoreIO, err, "lock the store's objects for writing")
	}
	s.writerFD, s.writerHeld = fd, true
	return nil
}

func (s *Store) openWriterFD() (int, error) {
	fd, err := sysfile.RetryEINTR(func() (int, error) {
		return unix.Openat(s.dirs[dSHA256].fd, ".", unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	})
	if err != nil {
		return -1, refuse.Wrap(CodeStoreIO, err, "open blobs/sha256 to lock it")
	}
	return fd, nil
}

// releaseWriters drops this handle's writers' lock (Close).
func (s *Store) releaseWriters() {
	s.writerMu.Lock()
	defer s.writerMu.Unlock()
	if s.writerHeld {
		unix.Close(s.writerFD)
		s.writerHeld = false
	}
}

// lockWritersExclusive takes the writers' lock exclusively, polling until wait has passed
// (STORE_LOCKED then). A handle that holds the shared lock itself converts it; release turns it
// back to shared.
func (s *Store) lockWritersExclusive(wait time.Duration) (func(), error) {
	s.writerMu.Lock()
	own := s.writerHeld
	fd := s.writerFD
	if !own {
		var err error
		if fd, err = s.openWriterFD(); err != nil {
			s.writerMu.Unlock()
			return nil, err
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), wait)
	defer cancel()
	for {
		err := unix.Flock(fd, unix.LOCK_EX|unix.LOCK_NB)
		if err == nil {
			break
		}
		if !errors.Is(err, unix.EWOULDBLOCK) && !errors.Is(err, unix.EINTR) {
			if !own {
				unix.Close(fd)
			}
			s.writerMu.Unlock()
			return nil, refuse.Wrap(CodeStoreIO, err, "lock the store's objects for gc")
		}
		select {
		case <-ctx.Done():
			if own {
				_ = unix.Flock(fd, unix.LOCK_SH)
			} else {
				unix.Close(fd)
			}
			s.writerMu.Unlock()
			return nil, refuse.New(CodeStoreLocked, "a run that writes objects into store %s is in progress (it holds the store until it ends); gc waited %s", s.root, wait).
				WithHint("run gc again when it has ended")
		case <-time.After(20 * time.Millisecond):
		}
	}
	return func() {
		if own {
			_ = unix.Flock(fd, unix.LOCK_SH)
		} else {
			unix.Close(fd)
		}
		s.writerMu.Unlock()
	}, nil
}

// PrunedRoot is what the log says of a record retention dropped.
type PrunedRoot struct {
	Leaf      int64          `json:"leaf"`      // the leaf that published it
	Tombstone int64          `json:"tombstone"` // the tombstone leaf that dropped it
	Kind      deploylog.Kind `json:"kind"`      // the kind it was published as
	Key       digest.Digest  `json:"key"`
}

// Pruned reports whether record was dropped by store gc: the newest leaf naming it is a
// tombstone (a record published again after its tombstone is not pruned). ok is false for a
// store without a log, or a record the log never dropped.
func (s *Store) Pruned(record digest.Digest) (PrunedRoot, bool, error) {
	if _, err := evidence.ParseDigest(string(record)); err != nil {
		return PrunedRoot{}, false, err
	}
	if err := s.acquire(); err != nil {
		return PrunedRoot{}, false, err
	}
	defer s.mu.RUnlock()
	l, ok, err := s.openLog(false)
	if err != nil || !ok {
		return PrunedRoot{}, false, err
	}
	defer l.close()
	n, err := logSize(l.leaves.fd)
	if err != nil {
		return PrunedRoot{}, false, err
	}
	leaves, err := s.readLeaves(l, n)
	if err != nil {
		return PrunedRoot{}, false, err
	}
	for i := n - 1; i >= 0; i-- {
		lf := leaves[i]
		if lf.Record != record || lf.Kind == deploylog.KindAttestation {
			continue
		}
		if lf.Kind != deploylog.KindTombstone || lf.Dropped == deploylog.KindAttestation {
			return PrunedRoot{}, false, nil
		}
		for j := i - 1; j >= 0; j-- {
			p := leaves[j]
			if p.Kind == lf.Dropped && p.Key == lf.Key && p.Record == record {
				return PrunedRoot{Leaf: j, Tombstone: i, Kind: lf.Dropped, Key: lf.Key}, true, nil
			}
		}
		return PrunedRoot{Leaf: -1, Tombstone: i, Kind: lf.Dropped, Key: lf.Key}, true, nil
	}
	return PrunedRoot{}, false, nil
}
