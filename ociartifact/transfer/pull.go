package transfer

import (
	"context"
	"errors"
	"io"
	"sync"

	"github.com/opencontainers/go-digest"
	ocispec "github.com/opencontainers/image-spec/specs-go/v1"
	"oras.land/oras-go/v2/content"

	"github.com/qinglong/ql3/deploylog"
	"github.com/qinglong/ql3/evidence"
	"github.com/qinglong/ql3/ociartifact"
	"github.com/qinglong/ql3/refuse"
	"github.com/qinglong/ql3/store"
)

// Pull copies the artifact ref names (host[:port]/repository:tag or @sha256:...) into dst. It
// holds everything in memory until the artifact is proven: the manifest is re-hashed (and must
// be the digest ref names, if it names one), every layer is fetched and re-hashed, and the
// layers must be exactly the closure of the root the manifest names (ociartifact.CheckClosure).
// Only then are the objects written, no-replace — an object already present with other content
// is refused with the store's OBJECT_CORRUPT — and the root's index entries written last, so a
// refused or interrupted pull publishes nothing. The artifact's attestation referrers are proven
// in form before anything is written (signatures are the auditor's: ql3 audit --key) and stored
// with their statements and attestation index entries after the closure. It returns the root and
// the manifest's descriptor.
func Pull(parent context.Context, ref string, dst *store.Store, o Options) (*ociartifact.Root, ocispec.Descriptor, error) {
	root, desc, _, err := PullWithLog(parent, ref, dst, o, LogOptions{})
	return root, desc, err
}

// PullWithLog is Pull that, with lo.Verifier set, also proves the root's inclusion in its
// deployment log before anything is written (docs/oci.md, "The log referrer"): the artifact's
// log referrers are fetched and proven (fetchLog), every entry the pull publishes must have its
// leaf in the carried log, and the destination's log must accept it (store.CheckLogImport).
// Then the objects are written, and the log and the entries are installed from the leaves
// (store.ImportLog) instead of appended as new publications. It returns the checkpoint the root
// was proven in (nil without lo.Verifier).
func PullWithLog(parent context.Context, ref string, dst *store.Store, o Options, lo LogOptions) (*ociartifact.Root, ocispec.Descriptor, *deploylog.Checkpoint, error) {
	ctx, cancel := o.bounded(parent)
	defer cancel()
	var cp *deploylog.Checkpoint
	root, desc, err := pull(ctx, ref, dst, o, lo, &cp)
	return root, desc, cp, finish(ctx, parent, err)
}

func pull(ctx context.Context, ref string, dst *store.Store, o Options, lo LogOptions, cpOut **deploylog.Checkpoint) (*ociartifact.Root, ocispec.Descriptor, error) {
	repo, r, err := repository(ref, o)
	if err != nil {
		return nil, ocispec.Descriptor{}, err
	}
	if r.Reference == "" {
		return nil, ocispec.Descriptor{}, refuse.New(CodeReference, "reference %q names neither a tag nor a digest", ref)
	}
	if err := r.ValidateReference(); err != nil {
		return nil, ocispec.Descriptor{}, classifyRef(err, ref)
	}
	desc, rc, err := repo.FetchReference(ctx, r.Reference)
	if err != nil {
		return nil, ocispec.Descriptor{}, classify(err, "fetch manifest %s", r.Reference)
	}
	mb, err := readVerified(rc, desc, ociartifact.MaxManifestBytes)
	if err != nil {
		return nil, ocispec.Descriptor{}, err
	}
	if want, derr := r.Digest(); derr == nil && want != desc.Digest {
		return nil, ocispec.Descriptor{}, refuse.New(ociartifact.CodeBlobDigest, "registry served manifest %s for %s", desc.Digest, want)
	}
	if desc.MediaType != ocispec.MediaTypeImageManifest {
		return nil, ocispec.Descriptor{}, refuse.New(ociartifact.CodeManifest, "%s is a %q, not an OCI image manifest", r.Reference, desc.MediaType)
	}
	a, err := ociartifact.ParseManifest(mb)
	if err != nil {
		return nil, ocispec.Descriptor{}, err
	}
	f := newLazyFetch(ctx, repo, a.Layers, o.concurrency())
	root, err := ociartifact.CheckClosure(a, f.blob)
	blobs := f.finish()
	if err != nil {
		return nil, ocispec.Descriptor{}, err
	}
	closure := make(map[digest.Digest]bool, len(a.Layers))
	for _, l := range a.Layers {
		closure[l.Digest] = true
	}
	atts, err := fetchAttestations(ctx, repo, desc, closure)
	if err != nil {
		return nil, ocispec.Descriptor{}, err
	}
	if lo.Verifier != nil {
		c, err := fetchLog(ctx, repo, desc, root.Descriptor.Digest, lo)
		if err != nil {
			return nil, ocispec.Descriptor{}, err
		}
		li, complete, err := logImport(dst, c, root, atts)
		if err != nil {
			return nil, ocispec.Descriptor{}, err
		}
		objs := append([]evidence.Descriptor(nil), a.Layers...)
		for _, at := range atts {
			objs = append(objs, at.stmtD, at.bundleD)
			blobs[at.stmtD.Digest], blobs[at.bundleD.Digest] = at.stmt, at.bundle
		}
		if err := importObjects(dst, objs, blobs); err != nil {
			return nil, ocispec.Descriptor{}, err
		}
		if err := installLog(dst, li, complete, c, lo); err != nil {
			return nil, ocispec.Descriptor{}, err
		}
		*cpOut = &c.Checkpoint
		return root, desc, nil
	}
	if err := Import(dst, root, a.Layers, blobs); err != nil {
		return nil, ocispec.Descriptor{}, err
	}
	if err := importAttestations(dst, atts); err != nil {
		return nil, ocispec.Descriptor{}, err
	}
	return root, desc, nil
}

// Import writes a proven closure into dst: objects no-replace (each existing object re-hashed by
// the store; other content under the name is OBJECT_CORRUPT), then the root's index entries,
// the receipt's last. The objects go through store batches, so that their fsyncs share rounds:
// every object is durable and in place before the first index entry is written.
func Import(dst *store.Store, root *ociartifact.Root, layers []evidence.Descriptor, blobs map[digest.Digest][]byte) error {
	if err := importObjects(dst, layers, blobs); err != nil {
		return err
	}
	for _, e := range root.Index {
		if err := dst.PutIndex(e.Kind, e.Key, e.Descriptor); err != nil {
			return err
		}
	}
	return nil
}

// importObjects writes proven objects no-replace through store batches, each durable and in
// place before it returns.
func importObjects(dst *store.Store, layers []evidence.Descriptor, blobs map[digest.Digest][]byte) error {
	b := dst.NewBatch()
	for i, d := range layers {
		got, err := b.PutBlob(d.MediaType, blobs[d.Digest])
		if err == nil && got.Digest != d.Digest {
			err = refuse.New(store.CodeObjectCorrupt, "store named object %s as %s", d.Digest, got.Digest)
		}
		if err != nil {
			b.Discard()
			return err
		}
		if (i+1)%importBatch == 0 {
			if err := b.Sync(); err != nil {
				return err
			}
		}
	}
	return b.Sync()
}

// importBatch bounds the objects staged at once: a batch holds one open descriptor per new object
// until it is synced, and a closure may have thousands.
const importBatch = 64

// lazyFetch fetches layers only as the closure walk asks for them (CheckClosure visits the
// closure in its order, and asks only for layers of the manifest), keeping at most a window of
// layers in flight ahead of the one asked for, in manifest order: an honest manifest lists the
// closure in that order, so the window is what the walk asks for next. A manifest that lists
// objects outside the closure, or in another order, costs at most the window in wasted fetches
// before CheckClosure refuses it.
type lazyFetch struct {
	ctx    context.Context
	cancel context.CancelFunc
	repo   interface {
		Fetch(context.Context, ocispec.Descriptor) (io.ReadCloser, error)
	}
	layers  []evidence.Descriptor
	pos     map[digest.Digest]int
	window  int
	sem     chan struct{}
	wg      sync.WaitGroup
	futures []*fetched
	fetches int
}

type fetched struct {
	done chan struct{}
	b    []byte
	err  error
}

func newLazyFetch(ctx context.Context, repo interface {
	Fetch(context.Context, ocispec.Descriptor) (io.ReadCloser, error)
}, layers []evidence.Descriptor, n int) *lazyFetch {
	ctx, cancel := context.WithCancel(ctx)
	f := &lazyFetch{ctx: ctx, cancel: cancel, repo: repo, layers: layers, pos: make(map[digest.Digest]int, len(layers)),
		window: 4 * n, sem: make(chan struct{}, n), futures: make([]*fetched, len(layers))}
	for i, l := range layers {
		if _, dup := f.pos[l.Digest]; !dup {
			f.pos[l.Digest] = i
		}
	}
	return f
}

// blob is CheckClosure's source: the re-hashed bytes of layer d.
func (f *lazyFetch) blob(d digest.Digest) ([]byte, bool, error) {
	i, ok := f.pos[d]
	if !ok {
		return nil, false, nil
	}
	for j := i; j < min(i+f.window, len(f.layers)); j++ {
		f.start(j)
	}
	r := f.futures[i]
	select {
	case <-r.done:
	case <-f.ctx.Done():
		return nil, false, classify(f.ctx.Err(), "fetch layer %s", d)
	}
	if r.err != nil {
		return nil, false, r.err
	}
	return r.b, true, nil
}

func (f *lazyFetch) start(j int) {
	if f.futures[j] != nil {
		return
	}
	r := &fetched{done: make(chan struct{})}
	f.futures[j] = r
	f.fetches++
	l := f.layers[j]
	f.wg.Add(1)
	go func() {
		defer f.wg.Done()
		defer close(r.done)
		select {
		case f.sem <- struct{}{}:
		case <-f.ctx.Done():
			r.err = classify(f.ctx.Err(), "fetch layer %s", l.Digest)
			return
		}
		defer func() { <-f.sem }()
		d := ocispec.Descriptor{MediaType: l.MediaType, Digest: l.Digest, Size: l.Size}
		rc, err := f.repo.Fetch(f.ctx, d)
		if err != nil {
			r.err = classify(err, "fetch layer %s", l.Digest)
			return
		}
		r.b, r.err = readVerified(rc, d, store.MaxObjectSize)
	}()
}

// finish stops the fetches still in flight, waits for them, and returns what was fetched.
func (f *lazyFetch) finish() map[digest.Digest][]byte {
	f.cancel()
	f.wg.Wait()
	out := make(map[digest.Digest][]byte, len(f.layers))
	for j, r := range f.futures {
		if r != nil && r.err == nil {
			out[f.layers[j].Digest] = r.b
		}
	}
	return out
}

// readVerified reads exactly d.Size bytes (at most max) and checks they hash to d.Digest.
func readVerified(rc io.ReadCloser, d ocispec.Descriptor, max int64) ([]byte, error) {
	defer rc.Close()
	if d.Size < 0 || d.Size > max {
		return nil, refuse.New(ociartifact.CodeTooLarge, "%s of %d bytes exceeds %d", d.Digest, d.Size, max)
	}
	b, err := io.ReadAll(io.LimitReader(rc, d.Size+1))
	if err != nil {
		if errors.Is(err, content.ErrMismatchedDigest) || errors.Is(err, content.ErrTrailingData) {
			return nil, refuse.Wrap(ociartifact.CodeBlobDigest, err, "read %s", d.Digest)
		}
		return nil, classify(err, "read %s", d.Digest)
	}
	if int64(len(b)) != d.Size {
		return nil, refuse.New(ociartifact.CodeBlobDigest, "registry served %d bytes for %s of %d", len(b), d.Digest, d.Size)
	}
	if _, err := evidence.ParseDigest(string(d.Digest)); err != nil {
		return nil, err
	}
	if evidence.FromBytes(b) != d.Digest {
		return nil, refuse.New(ociartifact.CodeBlobDigest, "bytes the registry served for %s hash to %s", d.Digest, evidence.FromBytes(b))
	}
	return b, nil
}

func classifyRef(err error, ref string) error {
	return refuse.Wrap(CodeReference, err, "reference %q", ref)
}
