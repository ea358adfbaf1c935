package store

import (
	"errors"
	"sync"

	"github.com/opencontainers/go-digest"
	"golang.org/x/sys/unix"

	"github.com/qinglong/ql3/evidence"
	"github.com/qinglong/ql3/internal/refuse"
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

// Object is one object of PutObjects: its media type and its exact bytes.
type Object struct {
	MediaType string
	Bytes     []byte
}

// PutObjects stores several objects with one durable step, through a Batch: it returns when every
// object is durable and in place. An object already present is checked like Get, never replaced.
//
// A record media type's bytes must already be its canonical record (GetDescriptor's rule), so a
// caller that signs the bytes stores exactly what it signed; a root record is refused with
// STORE_ROOT_MOVED when the store path no longer names the directory held, as PutRecord refuses
// it. Every object is checked before any is staged: a refused batch writes nothing.
//
// Nothing names the objects until the caller's index entry, written after PutObjects returned,
// so a crash anywhere inside it leaves at most unreferenced objects and staging files, as a crash
// inside PutBlob does (docs/store.md).
func (s *Store) PutObjects(objs []Object) ([]evidence.Descriptor, error) {
	if err := s.acquire(); err != nil {
		return nil, err
	}
	b, descs, err := s.stageObjects(objs)
	s.mu.RUnlock()
	if err != nil {
		b.Discard()
		return nil, err
	}
	if err := b.Sync(); err != nil {
		return nil, err
	}
	return descs, nil
}

// stageObjects checks every object, then stages them in a new batch; the caller holds the
// store's read lock.
func (s *Store) stageObjects(objs []Object) (*Batch, []evidence.Descriptor, error) {
	b := s.NewBatch()
	if err := s.checkObjects(objs); err != nil {
		return b, nil, err
	}
	descs, err := b.stage(objs)
	return b, descs, err
}

// checkObjects applies PutObjects' checks to every object, writing nothing.
func (s *Store) checkObjects(objs []Object) error {
	root := false
	for _, o := range objs {
		if len(o.Bytes) > MaxObjectSize {
			return refuse.New(CodeObjectTooLarge, "object of %d bytes exceeds %d", len(o.Bytes), MaxObjectSize)
		}
		if _, ok := evidence.RecordSchema(o.MediaType); ok {
			var probe map[string]any
			if err := evidence.DecodeRecord(o.MediaType, o.Bytes, &probe); err != nil {
				return err
			}
			root = root || rootMediaTypes[o.MediaType]
		}
	}
	if root {
		return s.checkRoot()
	}
	return nil
}

// stage puts checked objects into the batch.
func (b *Batch) stage(objs []Object) ([]evidence.Descriptor, error) {
	descs := make([]evidence.Descriptor, len(objs))
	for i, o := range objs {
		d, err := b.put(o.MediaType, o.Bytes)
		if err != nil {
			return nil, err
		}
		descs[i] = d
	}
	return descs, nil
}
