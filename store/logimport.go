package store

import (
	"bytes"
	"errors"
	"sync"

	"golang.org/x/mod/sumdb/tlog"
	"golang.org/x/sys/unix"

	"github.com/qinglong/ql3/deploylog"
	"github.com/qinglong/ql3/refuse"
)

// A log travels with pulled evidence (docs/oci.md, "The log referrer"; docs/log.md, "A copy of
// the log"): `store pull --log-key` installs the source's leaves up to a signed checkpoint into
// the destination's log, and the index entries of what it pulled from their leaves, so that
// `log verify --since` on the copy names every publication the copy lacks.

// CodeLogImportUnlogged: the destination store has publications but no log, so a carried log
// cannot become its log (its entries would be published outside it).
const CodeLogImportUnlogged refuse.Code = "LOG_IMPORT_UNLOGGED"

// LogLeaves returns the bytes of the log's leaves 0..n-1 (the leaves a signed checkpoint of size
// n covers), for a log referrer.
func (s *Store) LogLeaves(n int64) ([][]byte, error) {
	if err := s.acquire(); err != nil {
		return nil, err
	}
	defer s.mu.RUnlock()
	l, err := s.mustOpenLog()
	if err != nil {
		return nil, err
	}
	defer l.close()
	size, err := logSize(l.leaves.fd)
	if err != nil {
		return nil, err
	}
	if n > size {
		return nil, refuse.New(deploylog.CodeRollback, "the log has %d leaves, not %d", size, n)
	}
	out := make([][]byte, n)
	errs := make([]error, n)
	parallel(n, func(i int64) { _, out[i], errs[i] = s.readLeaf(l, i) })
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	return out, nil
}

// LogImport is a carried log, already proven by the caller (ociartifact.CheckCarriedLog): the
// leaves 0..Size-1 whose tree root is Hash, and the checkpoint of that tree as the store keeps it
// (the log key's signature lines only).
type LogImport struct {
	Origin     string
	Raws       [][]byte
	Leaves     []deploylog.Leaf
	Tree       *deploylog.Tree
	Checkpoint []byte
}

func (li *LogImport) size() int64 { return int64(len(li.Raws)) }

// CheckLogImport says, reading only, whether li can become (or extend, or is already a prefix of)
// this store's log: a store without a log must hold no publication (LOG_IMPORT_UNLOGGED); a log
// must be of li's origin (LOG_ORIGIN) and agree with li on every leaf both hold (LOG_FORK), and a
// checkpoint stored for li's size must be li's (LOG_CHECKPOINT_CONFLICT). A pull runs it before it
// writes anything; ImportLog runs it again under the publication lock.
func (s *Store) CheckLogImport(li *LogImport) error {
	if err := s.acquire(); err != nil {
		return err
	}
	defer s.mu.RUnlock()
	unlock, err := s.lockPublish()
	if err != nil {
		return err
	}
	defer unlock()
	l, _, err := s.checkLogImport(li)
	if l != nil {
		l.close()
	}
	return err
}

// checkLogImport returns the open log (nil when there is none yet, or an interrupted import left
// one without its origin) and its size.
func (s *Store) checkLogImport(li *LogImport) (*logDirs, int64, error) {
	l, ok, err := s.openLog(true)
	if err != nil || !ok || l.origin == "" {
		// No log, or what an interrupted import or init left (log/ without its origin, perhaps
		// without all its directories: ImportLog makes them and checks the leaves again).
		if l != nil {
			if err == nil {
				err = s.checkPartialImport(l, li)
			}
			l.close()
		} else if s.hasLogOrigin() {
			return nil, 0, err // a log whose directories cannot be opened: its own refusal
		}
		pubs, perr := s.publications()
		if perr != nil {
			return nil, 0, perr
		}
		if len(pubs) > 0 {
			return nil, 0, refuse.New(CodeLogImportUnlogged, "the store holds %d publications and no log: the pulled log cannot become its log (pull it into an empty store)", len(pubs))
		}
		if l != nil {
			return nil, 0, err
		}
		return nil, 0, nil
	}
	fail := func(err error) (*logDirs, int64, error) { l.close(); return nil, 0, err }
	if l.origin != li.Origin {
		return fail(refuse.New(deploylog.CodeOrigin, "the store's log has origin %s, the pulled log %s", refuse.Ident(l.origin), refuse.Ident(li.Origin)))
	}
	n, err := logSize(l.leaves.fd)
	if err != nil {
		return fail(err)
	}
	if m := min(n, li.size()); m > 0 {
		have, err := tlog.TreeHash(m, newLogReader(s, l, n))
		if err != nil {
			return fail(err)
		}
		want, err := li.Tree.Root(m)
		if err != nil {
			return fail(err)
		}
		if have != want {
			return fail(refuse.New(deploylog.CodeFork, "the store's log and the pulled log differ in their first %d leaves: a fork", m))
		}
	}
	cp, err := readLogFile(l.checkpoints.fd, checkpointName(li.size()), checkpointsRel+"/"+checkpointName(li.size()), deploylog.MaxNoteSize)
	switch {
	case err == nil && !bytes.Equal(cp, li.Checkpoint):
		return fail(refuse.New(CodeLogCheckpointClash, "the store keeps another checkpoint note of size %d than the pulled one", li.size()))
	case err != nil && refuse.CodeOf(err) != CodeObjectNotFound:
		return fail(err)
	}
	return l, n, nil
}

// checkPartialImport: a log without its origin is what an interrupted import (or log init) left;
// its leaves must be a prefix of li's for the import to complete it.
func (s *Store) checkPartialImport(l *logDirs, li *LogImport) error {
	names, err := listDir(l.leaves.fd, leavesRel)
	if err != nil {
		return err
	}
	for _, name := range names {
		i, ok := parseName(name)
		if !ok || i >= li.size() {
			return refuse.New(CodeLogAppendConflict, "an interrupted log init or import left %s/%s, which the pulled log does not hold", leavesRel, name)
		}
		_, b, err := s.readLeaf(l, i)
		if err != nil {
			return err
		}
		if !bytes.Equal(b, li.Raws[i]) {
			return refuse.New(CodeLogAppendConflict, "an interrupted log init or import left leaf %d, which is not the pulled log's", i)
		}
	}
	return nil
}

// importHook, when set by tests, runs at each step of ImportLog: "leaves" before the leaves are
// renamed, "lookups" before the record lookups, "checkpoint" before the checkpoint, "origin" before log/origin, "entries" before the
// index entries.
var importHook func(step string)

func importStep(step string) {
	if importHook != nil {
		importHook(step)
	}
}

// ImportLog installs li into the store's log and writes the index entries of the leaves numbered
// in complete, under the publication lock, after CheckLogImport's checks again. Order of writes,
// each durable before the next: the leaves the store lacks (staged, synced, renamed in index
// order, log/leaves synced), every full tile, the checkpoint, log/origin when the log is new,
// then each entry (from its leaf: the record must be in the store already, written by the pull
// before). A kill at any step leaves either no log (no origin yet: publications append nothing,
// and the pull run again completes it) or a log whose leaves are the pulled log's prefix and some
// of whose entries are missing (`log verify` names them), which the pull run again completes. An
// entry present with another record is INDEX_CONFLICT.
func (s *Store) ImportLog(li *LogImport, complete []int64) error {
	if err := s.acquire(); err != nil {
		return err
	}
	defer s.mu.RUnlock()
	unlock, err := s.lockPublish()
	if err != nil {
		return err
	}
	defer unlock()
	if err := s.checkRoot(); err != nil {
		return err
	}
	l, n, err := s.checkLogImport(li)
	if err != nil {
		return err
	}
	fresh := l == nil
	if fresh {
		if err := s.makeLogDirs(); err != nil {
			return err
		}
		if l, _, err = s.openLog(true); err != nil {
			return err
		}
		if err := s.checkPartialImport(l, li); err != nil {
			l.close()
			return err
		}
		if n, err = logSize(l.leaves.fd); err != nil {
			l.close()
			return err
		}
	}
	defer l.close()
	if err := s.importLeaves(l, li, n); err != nil {
		return err
	}
	if n < li.size() {
		for k := int64(deploylog.TileWidth); k <= li.size(); k += deploylog.TileWidth {
			for _, t := range deploylog.FullTilesCompletedBy(k) {
				data, err := li.Tree.TileHashes(int(t[0]), t[1])
				if err != nil {
					return err
				}
				if err := s.commitAt(l.tiles.fd, tilesRel, tileName(t[0], t[1]), data); err != nil && !errors.Is(err, errExists) {
					return err
				}
			}
		}
	}
	// The record lookups of the leaves installed, once they are durable: of the whole log when it
	// is new (a rerun of an interrupted import writes them all again), else of the leaves after
	// the store's own.
	if from := n; fresh || from < li.size() {
		if fresh {
			from = 0
		}
		importStep("lookups")
		s.writeLookups(l, li.Leaves, from, false)
	}
	importStep("checkpoint")
	if err := s.commitAt(l.checkpoints.fd, checkpointsRel, checkpointName(li.size()), li.Checkpoint); err != nil && !errors.Is(err, errExists) {
		return err
	}
	if fresh {
		importStep("origin")
		if err := s.commitAt(l.log.fd, logDirName, logOriginName, []byte(li.Origin+"\n")); err != nil {
			return err
		}
	}
	importStep("entries")
	for _, i := range complete {
		leaf := li.Leaves[i]
		d, ok, err := s.leafEntry(leaf)
		if err != nil {
			return err
		}
		if ok {
			if d.Digest != leaf.Record {
				return refuse.New(CodeIndexConflict, "the store publishes %s entry %s as %s, the pulled log's leaf %d as %s", leaf.Kind, leaf.Key, d.Digest, i, leaf.Record)
			}
			continue
		}
		if err := s.completeEntry(leaf); err != nil {
			return err
		}
	}
	return nil
}

// importLeaves writes li's leaves n.. that the store lacks, 256 at a time: staged, synced
// together, renamed in index order, log/leaves synced.
func (s *Store) importLeaves(l *logDirs, li *LogImport, n int64) error {
	for start := n; start < li.size(); start += 256 {
		end := min(start+256, li.size())
		sts := make([]*staged, end-start)
		var err error
		for k := range sts {
			if sts[k], err = s.stage(li.Raws[start+int64(k)], false); err != nil {
				discardAll(s, sts)
				return err
			}
		}
		errs := make([]error, len(sts))
		var wg sync.WaitGroup
		for k := range sts {
			wg.Go(func() { errs[k] = sts[k].sync() })
		}
		wg.Wait()
		if err := errors.Join(errs...); err != nil {
			discardAll(s, sts)
			return refuse.Wrap(CodeStoreIO, err, "sync imported leaves")
		}
		importStep("leaves")
		for k := range sts {
			err := s.link(sts[k], l.leaves.fd, leafName(start+int64(k)))
			if errors.Is(err, errExists) {
				err = refuse.New(CodeLogAppendConflict, "leaf %d appeared while the import held the log's lock", start+int64(k))
			}
			if err != nil {
				discardAll(s, sts)
				return err
			}
		}
		discardAll(s, sts)
		if err := unix.Fsync(l.leaves.fd); err != nil {
			return refuse.Wrap(CodeStoreIO, err, "fsync %s", leavesRel)
		}
	}
	return nil
}

// hasLogOrigin reports whether log/origin exists (the log exists), whatever else is wrong.
func (s *Store) hasLogOrigin() bool {
	var st unix.Stat_t
	err := unix.Fstatat(s.dirs[dRoot].fd, logDirName+"/"+logOriginName, &st, unix.AT_SYMLINK_NOFOLLOW)
	return err == nil
}
