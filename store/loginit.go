package store

import (
	"errors"
	"sort"
	"sync"

	"github.com/opencontainers/go-digest"
	"golang.org/x/sys/unix"

	"github.com/qinglong/ql3/deploylog"
	"github.com/qinglong/ql3/evidence"
	"github.com/qinglong/ql3/refuse"
)

// publication is one index entry as log init finds it.
type publication struct {
	leaf  deploylog.Leaf
	mtime int64 // the entry file's modification time, ns: when it was committed
}

// kindOrder breaks ties of equal modification times: a preflight is published before an intent,
// an intent before its receipt, a receipt before its live audit and attestations.
var kindOrder = map[deploylog.Kind]int{deploylog.KindPreflight: 0, deploylog.KindIntent: 1, deploylog.KindReceipt: 2,
	deploylog.KindLiveAudit: 3, deploylog.KindAttestation: 4}

// publications lists every index entry of the store in publication order: by the entry file's
// modification time (an entry is written once, by its commit), then kind, key and bundle.
func (s *Store) publications() ([]publication, error) {
	var out []publication
	mtime := func(dirfd int, name, rel string) (int64, error) {
		var st unix.Stat_t
		if err := unix.Fstatat(dirfd, name, &st, unix.AT_SYMLINK_NOFOLLOW); err != nil {
			return 0, refuse.Wrap(CodeStoreIO, err, "stat %s", rel)
		}
		return st.Mtim.Nano(), nil
	}
	for _, kind := range []string{evidence.IndexPreflights, evidence.IndexIntents, evidence.IndexReceipts, evidence.IndexLiveAudits} {
		es, err := s.listIndex(kind)
		if err != nil {
			return nil, err
		}
		dirfd, release, ok, err := s.kindDir(kind, false)
		if err != nil {
			return nil, err
		}
		lk, _ := deploylog.KindOfIndex(kind)
		for _, e := range es {
			if !ok {
				break
			}
			t, err := mtime(dirfd, e.Key.Encoded(), "index/"+kind+"/"+e.Key.Encoded())
			if err != nil {
				release()
				return nil, err
			}
			out = append(out, publication{leaf: deploylog.Leaf{Kind: lk, Key: e.Key, Record: e.Descriptor.Digest}, mtime: t})
		}
		release()
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
		dir, _, synced, err := s.attestationDir(subject, false)
		synced()
		if err != nil {
			return nil, err
		}
		for _, e := range es {
			t, err := mtime(dir.fd, e.Bundle.Encoded(), attestationsRel+"/"+subject.Encoded()+"/"+e.Bundle.Encoded())
			if err != nil {
				unix.Close(dir.fd)
				return nil, err
			}
			out = append(out, publication{leaf: deploylog.Leaf{Kind: deploylog.KindAttestation, Key: subject, Bundle: e.Bundle,
				Record: e.Statement.Digest}, mtime: t})
		}
		unix.Close(dir.fd)
	}
	sort.SliceStable(out, func(i, j int) bool {
		a, b := out[i], out[j]
		if a.mtime != b.mtime {
			return a.mtime < b.mtime
		}
		if kindOrder[a.leaf.Kind] != kindOrder[b.leaf.Kind] {
			return kindOrder[a.leaf.Kind] < kindOrder[b.leaf.Kind]
		}
		if a.leaf.Key != b.leaf.Key {
			return a.leaf.Key < b.leaf.Key
		}
		return a.leaf.Bundle < b.leaf.Bundle
	})
	return out, nil
}

// attestationSubjects lists the subjects of index/attestations (none when it does not exist).
func (s *Store) attestationSubjects() ([]digest.Digest, error) {
	var st unix.Stat_t
	if err := unix.Fstatat(s.dirs[dIndex].fd, evidence.IndexAttestations, &st, unix.AT_SYMLINK_NOFOLLOW); errors.Is(err, unix.ENOENT) {
		return nil, nil
	}
	dir, err := openDir(s.dirs[dIndex].fd, evidence.IndexAttestations, attestationsRel)
	if err != nil {
		return nil, err
	}
	names, err := listDir(dir.fd, attestationsRel)
	unix.Close(dir.fd)
	if err != nil {
		return nil, err
	}
	out := make([]digest.Digest, 0, len(names))
	for _, name := range names {
		d, err := evidence.ParseDigest("sha256:" + name)
		if err != nil {
			return nil, refuse.Wrap(CodeIndexCorrupt, err, "attestation index has a stray entry")
		}
		out = append(out, d)
	}
	return out, nil
}

// InitLog starts the store's deployment log under origin, backfilling one leaf for every index
// entry the store holds, in publication order (docs/log.md, "log init"). The log exists once
// log/origin is written, last: an interrupted init is resumed by the next (the leaves it wrote
// must be the same prefix), and until then publications append nothing. Initializing again
// with the same origin backfills nothing: it repairs the log's last leaf as a publication does
// and writes the record lookups that are missing or stale; with another origin, LOG_INITIALIZED.
// It returns the number of leaves backfilled.
func (s *Store) InitLog(origin string) (int64, error) {
	if err := CheckOrigin(origin); err != nil {
		return 0, err
	}
	if err := s.acquire(); err != nil {
		return 0, err
	}
	defer s.mu.RUnlock()
	unlock, err := s.lockPublish()
	if err != nil {
		return 0, err
	}
	defer unlock()
	if err := s.checkRoot(); err != nil {
		return 0, err
	}
	if err := s.makeLogDirs(); err != nil {
		return 0, err
	}
	l, _, err := s.openLog(true)
	if err != nil {
		return 0, err
	}
	defer l.close()
	if l.origin != "" {
		if l.origin != origin {
			return 0, refuse.New(CodeLogInitialized, "the store's log has origin %q, not %q", l.origin, origin)
		}
		// Nothing to backfill: the log is repaired as by a publication (the pending last leaf's
		// entry, tiles and lookup), and the record lookups a log made before them lacks (or that
		// a power loss took) are written, so that its proofs stop scanning.
		if _, err := s.logRepair(l); err != nil {
			return 0, err
		}
		s.refreshLookups(l)
		return 0, nil
	}
	pubs, err := s.publications()
	if err != nil {
		return 0, err
	}
	names, err := listDir(l.leaves.fd, leavesRel)
	if err != nil {
		return 0, err
	}
	have := map[int64]bool{}
	for _, name := range names {
		i, ok := parseName(name)
		if !ok || i >= int64(len(pubs)) {
			return 0, refuse.New(CodeLogAppendConflict, "an interrupted log init left %s/%s, which is not one of the store's %d publications", leavesRel, name, len(pubs))
		}
		leaf, _, err := s.readLeaf(l, i)
		if err != nil {
			return 0, err
		}
		if leaf != pubs[i].leaf {
			return 0, refuse.New(CodeLogAppendConflict, "an interrupted log init left leaf %d, which is not the store's publication %d", i, i)
		}
		have[i] = true
	}
	tree := &deploylog.Tree{}
	var todo []int64
	raws := make([][]byte, len(pubs))
	for i, p := range pubs {
		b, err := p.leaf.Marshal()
		if err != nil {
			return 0, err
		}
		raws[i] = b
		if err := tree.Append(b); err != nil {
			return 0, err
		}
		if !have[int64(i)] {
			todo = append(todo, int64(i))
		}
	}
	// Leaves are written a chunk at a time: staged, synced concurrently, renamed in index order,
	// then the directory synced once.
	for len(todo) > 0 {
		chunk := todo[:min(len(todo), 256)]
		todo = todo[len(chunk):]
		sts := make([]*staged, len(chunk))
		for k, i := range chunk {
			if sts[k], err = s.stage(raws[i], false); err != nil {
				discardAll(s, sts)
				return 0, err
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
			return 0, refuse.Wrap(CodeStoreIO, err, "sync backfilled leaves")
		}
		for k, i := range chunk {
			hook("backfill")
			if err := s.link(sts[k], l.leaves.fd, leafName(i)); err != nil {
				discardAll(s, sts)
				return 0, err
			}
		}
		discardAll(s, sts)
		if err := unix.Fsync(l.leaves.fd); err != nil {
			return 0, refuse.Wrap(CodeStoreIO, err, "fsync %s", leavesRel)
		}
	}
	for n := int64(deploylog.TileWidth); n <= tree.Size(); n += deploylog.TileWidth {
		for _, t := range deploylog.FullTilesCompletedBy(n) {
			data, err := tree.TileHashes(int(t[0]), t[1])
			if err != nil {
				return 0, err
			}
			if err := s.commitAt(l.tiles.fd, tilesRel, tileName(t[0], t[1]), data); err != nil && !errors.Is(err, errExists) {
				return 0, err
			}
		}
	}
	// The record lookups, once every leaf they name is durable, and before the log exists: an
	// init killed before its origin writes them all again.
	hook("init-lookups")
	leaves := make([]deploylog.Leaf, len(pubs))
	for i, p := range pubs {
		leaves[i] = p.leaf
	}
	s.writeLookups(l, leaves, 0, false)
	hook("origin")
	if err := s.commitAt(l.log.fd, logDirName, logOriginName, []byte(origin+"\n")); err != nil {
		return 0, err
	}
	return int64(len(pubs)), nil
}

func discardAll(s *Store, sts []*staged) {
	for _, st := range sts {
		if st != nil {
			st.discard(s)
		}
	}
}

// makeLogDirs makes log/ and its subdirectories (0700) where missing, each made name synced in
// its parent.
func (s *Store) makeLogDirs() error {
	made := false
	if err := unix.Mkdirat(s.dirs[dRoot].fd, logDirName, 0o700); err == nil {
		made = true
	} else if !errors.Is(err, unix.EEXIST) {
		return refuse.Wrap(CodeStoreIO, err, "create %s", logDirName)
	}
	if made {
		if err := unix.Fsync(s.dirs[dRoot].fd); err != nil {
			return refuse.Wrap(CodeStoreIO, err, "fsync the store root")
		}
	}
	d, err := openDir(s.dirs[dRoot].fd, logDirName, logDirName)
	if err != nil {
		return err
	}
	defer unix.Close(d.fd)
	made = false
	for _, sub := range []string{"leaves", "tiles", "checkpoints"} {
		if err := unix.Mkdirat(d.fd, sub, 0o700); err == nil {
			made = true
		} else if !errors.Is(err, unix.EEXIST) {
			return refuse.Wrap(CodeStoreIO, err, "create %s/%s", logDirName, sub)
		}
	}
	if made {
		if err := unix.Fsync(d.fd); err != nil {
			return refuse.Wrap(CodeStoreIO, err, "fsync %s", logDirName)
		}
	}
	return nil
}
