package store

import (
	"errors"
	"sync"

	"github.com/opencontainers/go-digest"
	"golang.org/x/sys/unix"

	"github.com/qinglong/ql3/evidence"
	"github.com/qinglong/ql3/refuse"
)

// Batch writes objects whose durability is made at once, by Sync, rather than one by one. A run
// that publishes nothing until its end (a live audit) stores its evidence through one: each
// object is written to its own staging file in tmp/ and not synced; Sync syncs every staged file
// concurrently (a journaling filesystem commits them in one transaction instead of one each),
// renames each into blobs/sha256 without replacing, and syncs that directory once.
//
// The commit protocol's promise holds for every object of a batch: its content is durable before
// its name appears, so a root record that names it, written after Sync returned, never outlives
// it in a crash, and another process never finds under its name an object that a crash could
// still lose. Before Sync the batch's objects are not in the store at all: a reader, and Get,
// does not see them, and a run that ends without Sync (killed) leaves staging files, which
// Verify reports as hints. Objects the store already holds are checked as Get checks them when
// put, and not staged again.
//
// A Batch is for one goroutine; it holds staging descriptors open until Sync or Discard.
type Batch struct {
	s      *Store
	staged []*batchObject
	names  map[digest.Digest]bool // staged in this batch
}

type batchObject struct {
	st *staged
	d  digest.Digest
}

// batchHook, when set by tests, runs in Sync before each rename with the number of objects
// renamed so far, and once more, with all of them renamed, before the directory fsync.
var batchHook func(renamed int)

// NewBatch starts a batch of writes to s.
func (s *Store) NewBatch() *Batch {
	return &Batch{s: s, names: map[digest.Digest]bool{}}
}

// PutBlob is Store.PutBlob, with the durability of a new object deferred to Sync.
func (b *Batch) PutBlob(mediaType string, data []byte) (evidence.Descriptor, error) {
	if err := b.s.acquire(); err != nil {
		return evidence.Descriptor{}, err
	}
	defer b.s.mu.RUnlock()
	return b.put(mediaType, data)
}

// PutRecord is Store.PutRecord, with the durability of a new record deferred to Sync. A root
// record gets the root identity check now, as Store.PutRecord gives it, and its index entry,
// written by Store.PutIndex after Sync, gets it again.
func (b *Batch) PutRecord(mediaType string, v any) (evidence.Descriptor, []byte, error) {
	if err := b.s.acquire(); err != nil {
		return evidence.Descriptor{}, nil, err
	}
	defer b.s.mu.RUnlock()
	data, err := b.s.recordBytes(mediaType, v)
	if err != nil {
		return evidence.Descriptor{}, nil, err
	}
	d, err := b.put(mediaType, data)
	return d, data, err
}

func (b *Batch) put(mediaType string, data []byte) (evidence.Descriptor, error) {
	desc, exists, err := b.s.present(mediaType, data)
	if err != nil || exists || b.names[desc.Digest] {
		return desc, err
	}
	st, err := b.s.stage(data, false)
	if err != nil {
		return evidence.Descriptor{}, err
	}
	b.staged = append(b.staged, &batchObject{st: st, d: desc.Digest})
	b.names[desc.Digest] = true
	return desc, nil
}

// Sync makes every object put since the last Sync durable and puts it in place, as described on
// Batch. After an error, the objects not yet in place are discarded.
func (b *Batch) Sync() error {
	objs := b.staged
	b.staged, b.names = nil, map[digest.Digest]bool{}
	if len(objs) == 0 {
		return nil
	}
	if err := b.s.acquire(); err != nil {
		closeStaged(objs) // the store's descriptors are gone: the staging files stay, for Verify to report
		return err
	}
	defer b.s.mu.RUnlock()
	return b.syncLocked(objs)
}

// syncLocked is Sync for a caller holding the store's read lock. Each of also runs beside the
// staged files' fsyncs, in the same round, and must be done before any object is renamed into
// place: a caller's own writes that need durability but not the objects' names (PutAttested's
// index entry content and the directories made for it) cost no round of their own.
func (b *Batch) syncLocked(objs []*batchObject, also ...func() error) error {
	defer b.discard(objs)
	errs := make([]error, len(objs)+len(also))
	var wg sync.WaitGroup
	for i, o := range objs {
		wg.Go(func() { errs[i] = o.st.sync() })
	}
	for i, f := range also {
		wg.Go(func() { errs[len(objs)+i] = f() })
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		return refuse.Wrap(CodeStoreIO, err, "sync staged objects")
	}
	if commitHook != nil {
		commitHook()
	}
	for i, o := range objs {
		if batchHook != nil {
			batchHook(i)
		}
		err := b.s.link(o.st, b.s.dirs[dSHA256].fd, o.d.Encoded())
		if errors.Is(err, errExists) { // put by another process since
			err = b.s.same(o.d)
		}
		if err != nil {
			return err
		}
	}
	if batchHook != nil {
		batchHook(len(objs))
	}
	if len(objs) == 0 {
		return nil
	}
	if err := unix.Fsync(b.s.dirs[dSHA256].fd); err != nil {
		return refuse.Wrap(CodeStoreIO, err, "fsync %s", layout[dSHA256].rel)
	}
	return nil
}

// Discard drops every object put since the last Sync: none of them reaches the store.
func (b *Batch) Discard() {
	objs := b.staged
	b.staged, b.names = nil, map[digest.Digest]bool{}
	if len(objs) == 0 {
		return
	}
	if err := b.s.acquire(); err != nil {
		closeStaged(objs)
		return
	}
	defer b.s.mu.RUnlock()
	b.discard(objs)
}

func (b *Batch) discard(objs []*batchObject) {
	for _, o := range objs {
		o.st.discard(b.s)
	}
}

func closeStaged(objs []*batchObject) {
	for _, o := range objs {
		if o.st.fd >= 0 {
			_ = unix.Close(o.st.fd)
			o.st.fd = -1
		}
	}
}
