package ociartifact

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"

	"golang.org/x/sys/unix"

	"github.com/opencontainers/go-digest"
	specs "github.com/opencontainers/image-spec/specs-go"
	ocispec "github.com/opencontainers/image-spec/specs-go/v1"

	"github.com/qinglong/ql3/evidence"
	"github.com/qinglong/ql3/internal/input"
	"github.com/qinglong/ql3/refuse"
	"github.com/qinglong/ql3/store"
)

// DefaultTag is the tag Export names the artifact by when the caller gives none:
// "<kind>-<hex of root>" (72 characters, within the distribution spec's 128).
func DefaultTag(r *Root) string { return r.Kind + "-" + r.Descriptor.Digest.Encoded() }

// Export writes the OCI image layout of c (see Collect) into dir, which must not exist: its
// parent must. The blobs, the empty config, the artifact manifest and its referrers are written
// first, oci-layout and index.json last, so a killed export leaves no index.json and no tool
// takes it for a layout. Files are 0400 and directories 0700, like the store: an export is
// evidence, not a workspace. It returns the artifact manifest's descriptor.
func Export(c *Collected, dir, tag string) (ocispec.Descriptor, error) {
	ds, err := ExportAll([]*Collected{c}, dir, []string{tag})
	if err != nil {
		return ocispec.Descriptor{}, err
	}
	return ds[0], nil
}

// ExportAll is Export of several roots' artifacts into one new layout (`ql3 store export
// DIGEST... DIR`), so that one layout can hold every root of a store and `ql3 log verify
// --layout` find every publication of its log in it: each artifact with its referrers and its
// log referrer, index.json listing each evidence manifest (tagged tags[i], or DefaultTag when
// empty) followed by its referrers, in cs's order. A blob two closures share is written once.
// It returns the artifact manifests' descriptors.
func ExportAll(cs []*Collected, dir string, tags []string) ([]ocispec.Descriptor, error) {
	if len(cs) == 0 || len(tags) != len(cs) {
		return nil, refuse.New(CodeLayout, "export of %d artifacts with %d tags", len(cs), len(tags))
	}
	tags = slices.Clone(tags)
	for i, c := range cs {
		if tags[i] == "" {
			tags[i] = DefaultTag(c.Root)
		}
	}
	if !filepath.IsAbs(dir) || filepath.Clean(dir) != dir {
		return nil, refuse.New(CodeLayout, "export path %q is not absolute and clean", dir)
	}
	if err := os.Mkdir(dir, 0o700); err != nil {
		if errors.Is(err, fs.ErrExist) {
			return nil, refuse.New(CodeLayout, "export directory %s exists: an export is written into a new directory", dir)
		}
		return nil, refuse.Wrap(CodeLayout, err, "create export directory")
	}
	ds, err := export(cs, dir, tags)
	if err != nil {
		// dir is ours: we created it a moment ago.
		os.RemoveAll(dir)
		return nil, err
	}
	return ds, nil
}

func export(cs []*Collected, dir string, tags []string) ([]ocispec.Descriptor, error) {
	root, err := os.OpenRoot(dir)
	if err != nil {
		return nil, refuse.Wrap(CodeLayout, err, "open export directory")
	}
	defer root.Close()
	for _, d := range []string{"blobs", "blobs/sha256"} {
		if err := root.Mkdir(d, 0o700); err != nil {
			return nil, refuse.Wrap(CodeLayout, err, "create %s", d)
		}
	}
	// Every blob is named by its digest and this directory is new, so a name already written
	// holds the same bytes: putOnce skips it (closures share objects, bundles may repeat).
	if err := putOnce(root, EmptyConfig.Digest, EmptyConfig.Data); err != nil {
		return nil, err
	}
	idx := ocispec.Index{Versioned: specs.Versioned{SchemaVersion: 2}, MediaType: ocispec.MediaTypeImageIndex,
		Manifests: []ocispec.Descriptor{}}
	descs := make([]ocispec.Descriptor, 0, len(cs))
	for i, c := range cs {
		for _, d := range c.Closure {
			if err := putOnce(root, d.Digest, c.Blobs[d.Digest]); err != nil {
				return nil, err
			}
		}
		if err := putOnce(root, c.Desc.Digest, c.Manifest); err != nil {
			return nil, err
		}
		descs = append(descs, c.Desc)
		if slices.ContainsFunc(idx.Manifests, func(m ocispec.Descriptor) bool { return m.Digest == c.Desc.Digest }) {
			continue // the same root given twice: listed once
		}
		top := c.Desc
		top.Annotations = map[string]string{ocispec.AnnotationRefName: tags[i]}
		idx.Manifests = append(idx.Manifests, top)
		for _, r := range c.Referrers {
			if _, done := c.Blobs[r.Blob.Digest]; done && !slices.ContainsFunc(c.Closure, func(d evidence.Descriptor) bool { return d.Digest == r.Blob.Digest }) {
				if err := putOnce(root, r.Blob.Digest, c.Blobs[r.Blob.Digest]); err != nil {
					return nil, err
				}
			}
			if err := putOnce(root, r.Desc.Digest, r.Manifest); err != nil {
				return nil, err
			}
			idx.Manifests = append(idx.Manifests, r.Desc)
		}
		if lg := c.Log; lg != nil {
			// The log referrer, as a registry holds it (docs/oci.md, "The log referrer").
			for _, b := range []struct {
				d digest.Digest
				b []byte
			}{{lg.Proof.Digest, c.Blobs[lg.Proof.Digest]}, {lg.Entries.Digest, c.Blobs[lg.Entries.Digest]}, {lg.Desc.Digest, lg.Manifest}} {
				if err := putOnce(root, b.d, b.b); err != nil {
					return nil, err
				}
			}
			idx.Manifests = append(idx.Manifests, lg.Desc)
		}
	}
	ib, err := json.Marshal(idx)
	if err != nil {
		return nil, fmt.Errorf("ociartifact: marshal index.json: %w", err)
	}
	lb, err := json.Marshal(ocispec.ImageLayout{Version: ocispec.ImageLayoutVersion})
	if err != nil {
		return nil, fmt.Errorf("ociartifact: marshal oci-layout: %w", err)
	}
	if err := writeNew(root, ocispec.ImageLayoutFile, lb); err != nil {
		return nil, err
	}
	if err := writeNew(root, ocispec.ImageIndexFile, ib); err != nil {
		return nil, err
	}
	if err := syncDirs(root, "blobs/sha256", "blobs", "."); err != nil {
		return nil, err
	}
	return descs, nil
}

// putOnce writes a blob unless an identical one is already there (two bundles may share one).
func putOnce(root *os.Root, d digest.Digest, b []byte) error {
	name := "blobs/sha256/" + d.Encoded()
	if _, err := root.Lstat(name); err == nil {
		return nil
	}
	return writeNew(root, name, b)
}

func writeNew(root *os.Root, name string, b []byte) error {
	f, err := root.OpenFile(name, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o400)
	if err != nil {
		return refuse.Wrap(CodeLayout, err, "create %s", name)
	}
	_, err = f.Write(b)
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return refuse.Wrap(CodeLayout, err, "write %s", name)
	}
	return nil
}

func syncDirs(root *os.Root, names ...string) error {
	for _, n := range names {
		f, err := root.Open(n)
		if err != nil {
			return refuse.Wrap(CodeLayout, err, "open %s for fsync", n)
		}
		err = f.Sync()
		f.Close()
		if err != nil {
			return refuse.Wrap(CodeLayout, err, "fsync %s", n)
		}
	}
	return nil
}

// Layout is an OCI image layout opened read-only: by ql3's Export, or by a third-party tool
// (`oras copy --to-oci-layout`, `oras pull --oci-layout`). It serves the objects of the
// evidence manifests that index.json names, re-hashing each on every read, and an index derived
// from their roots, so `ql3 audit` runs on it in place. It never writes: the directory and its
// blobs/sha256 are held by descriptors opened for reading (O_DIRECTORY|O_NOFOLLOW), every file is
// opened relative to them non-blocking and without following a link, and judged by the fstat of
// the descriptor opened (never stat-then-open by name, which a swap between the two defeats);
// no method creates, renames or changes a file.
type Layout struct {
	dir, blobs int // descriptors of the layout directory and of its blobs/sha256, held open
	name       string
	artifacts  []*layoutArtifact
	objects    map[digest.Digest]bool // layers of the evidence manifests: the only objects served
	index      map[string]map[digest.Digest]evidence.Descriptor
	others     []ocispec.Descriptor // other manifests index.json names (referrers)
}

type layoutArtifact struct {
	desc     ocispec.Descriptor
	artifact *Artifact
	root     *Root
}

var _ Source = (*Layout)(nil)

// maxIndexJSON bounds index.json and oci-layout.
const maxIndexJSON = 16 << 20

// OpenLayout opens the layout at dir read-only. It checks oci-layout, parses index.json, reads
// and re-hashes every image manifest it names, keeps those of artifactType ArtifactType, and
// derives the store index of their roots (a root's bytes re-hashed and classified). It does not
// walk the closures: Verify does, and so does the auditor.
func OpenLayout(dir string) (*Layout, error) {
	fd, err := openDirAt(unix.AT_FDCWD, dir)
	if err != nil {
		return nil, refuse.Wrap(CodeLayout, err, "open layout %s", dir)
	}
	l := &Layout{dir: fd, blobs: -1, name: dir, objects: map[digest.Digest]bool{}, index: map[string]map[digest.Digest]evidence.Descriptor{
		evidence.IndexReceipts: {}, evidence.IndexIntents: {}, evidence.IndexPreflights: {}, evidence.IndexLiveAudits: {}}}
	if err := l.load(); err != nil {
		l.Close()
		return nil, err
	}
	return l, nil
}

// Close releases the layout's directory descriptors.
func (l *Layout) Close() error {
	if l.blobs >= 0 {
		unix.Close(l.blobs)
		l.blobs = -1
	}
	if l.dir >= 0 {
		err := unix.Close(l.dir)
		l.dir = -1
		return err
	}
	return nil
}

// openFlags open a layout file: never blocking (a FIFO or a device opens at once and its fstat
// refuses it), never following a final symlink, never becoming our terminal.
const openFlags = unix.O_RDONLY | unix.O_NOFOLLOW | unix.O_NONBLOCK | unix.O_CLOEXEC | unix.O_NOCTTY

// openDirAt opens the directory name relative to dirfd, refusing a symlink and anything not a
// directory (the fstat of the descriptor decides).
func openDirAt(dirfd int, name string) (int, error) {
	fd, err := retryEINTR(func() (int, error) { return unix.Openat(dirfd, name, openFlags|unix.O_DIRECTORY, 0) })
	if err != nil {
		return -1, err
	}
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil || st.Mode&unix.S_IFMT != unix.S_IFDIR {
		unix.Close(fd)
		if err == nil {
			err = fmt.Errorf("%s is a %s, not a directory", name, input.Kind(st.Mode))
		}
		return -1, err
	}
	return fd, nil
}

func retryEINTR(f func() (int, error)) (int, error) {
	for {
		fd, err := f()
		if !errors.Is(err, unix.EINTR) {
			return fd, err
		}
	}
}

// openFile opens name in dirfd as openFlags say and returns the descriptor with its fstat, which
// must be of a regular file of at most max bytes. what names the file in refusals; notFound is
// the refusal for an absent file.
func openFile(dirfd int, name, what string, max int64, notFound func() error) (int, int64, error) {
	fd, err := retryEINTR(func() (int, error) { return unix.Openat(dirfd, name, openFlags, 0) })
	if err != nil {
		switch {
		case errors.Is(err, unix.ENOENT):
			return -1, 0, notFound()
		case errors.Is(err, unix.ELOOP):
			return -1, 0, refuse.New(CodeLayout, "layout entry %s is a symlink", what)
		}
		return -1, 0, refuse.Wrap(CodeLayout, err, "open %s", what)
	}
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		unix.Close(fd)
		return -1, 0, refuse.Wrap(CodeLayout, err, "stat %s", what)
	}
	if st.Mode&unix.S_IFMT != unix.S_IFREG {
		unix.Close(fd)
		return -1, 0, refuse.New(CodeLayout, "layout entry %s is a %s, not a regular file", what, input.Kind(st.Mode))
	}
	if st.Size > max {
		unix.Close(fd)
		return -1, 0, refuse.New(CodeTooLarge, "layout entry %s of %d bytes exceeds %d", what, st.Size, max)
	}
	return fd, st.Size, nil
}

func (l *Layout) load() error {
	lb, err := l.readFile(ocispec.ImageLayoutFile, maxIndexJSON)
	if err != nil {
		return err
	}
	var il ocispec.ImageLayout
	if err := json.Unmarshal(lb, &il); err != nil || il.Version != ocispec.ImageLayoutVersion {
		return refuse.New(CodeLayout, "oci-layout is not {\"imageLayoutVersion\":%q}", ocispec.ImageLayoutVersion)
	}
	ib, err := l.readFile(ocispec.ImageIndexFile, maxIndexJSON)
	if err != nil {
		return err
	}
	if bfd, err := openDirAt(l.dir, "blobs"); err == nil {
		l.blobs, err = openDirAt(bfd, "sha256")
		unix.Close(bfd)
		if err != nil && !errors.Is(err, unix.ENOENT) {
			return refuse.Wrap(CodeLayout, err, "open blobs/sha256")
		}
	} else if !errors.Is(err, unix.ENOENT) {
		return refuse.Wrap(CodeLayout, err, "open blobs")
	}
	var idx ocispec.Index
	if err := json.Unmarshal(ib, &idx); err != nil || idx.SchemaVersion != 2 {
		return refuse.New(CodeLayout, "index.json is not an OCI image index")
	}
	for _, m := range idx.Manifests {
		if _, err := evidence.ParseDigest(string(m.Digest)); err != nil {
			return refuse.Wrap(CodeLayout, err, "index.json names a manifest")
		}
		if m.MediaType != ocispec.MediaTypeImageManifest {
			l.others = append(l.others, m)
			continue
		}
		if m.Size > MaxManifestBytes {
			return refuse.New(CodeTooLarge, "manifest %s of %d bytes exceeds %d", m.Digest, m.Size, MaxManifestBytes)
		}
		mb, err := l.blob(m.Digest, MaxManifestBytes)
		if err != nil {
			return err
		}
		if int64(len(mb)) != m.Size {
			return refuse.New(CodeLayout, "manifest %s has %d bytes, index.json says %d", m.Digest, len(mb), m.Size)
		}
		var probe struct {
			ArtifactType string `json:"artifactType"`
		}
		if err := json.Unmarshal(mb, &probe); err != nil || probe.ArtifactType != ArtifactType {
			l.others = append(l.others, m)
			continue
		}
		a, err := ParseManifest(mb)
		if err != nil {
			return err
		}
		rb, err := l.blob(a.Root.Digest, store.MaxObjectSize)
		if err != nil {
			return err
		}
		r, err := ParseRoot(a.Root.Digest, rb)
		if err != nil {
			return err
		}
		if r.Descriptor != a.Root {
			return refuse.New(CodeNotClosure, "manifest %s: first layer is not the root descriptor", m.Digest)
		}
		// The earlier receipts this root's closure carries are published with it, as a pull
		// publishes them (EarlierEntries); the layers stand for the closure here, which Verify
		// and the auditor check.
		earlier, err := EarlierEntries(a.Layers, func(d evidence.Descriptor) ([]byte, error) { return l.blob(d.Digest, store.MaxObjectSize) })
		if err != nil {
			return err
		}
		r.Index = append(earlier, r.Index...)
		for _, e := range r.Index {
			if old, ok := l.index[e.Kind][e.Key]; ok && old != e.Descriptor {
				return refuse.New(store.CodeIndexConflict, "two manifests of the layout publish index %s entry %s differently", e.Kind, e.Key)
			}
			l.index[e.Kind][e.Key] = e.Descriptor
		}
		for _, d := range a.Layers {
			l.objects[d.Digest] = true
		}
		l.artifacts = append(l.artifacts, &layoutArtifact{desc: m, artifact: a, root: r})
	}
	if len(l.artifacts) == 0 {
		return refuse.New(CodeLayout, "index.json names no manifest of artifactType %s", ArtifactType)
	}
	return nil
}

// readFile reads a regular file of the layout's top directory, at most max bytes.
func (l *Layout) readFile(name string, max int64) ([]byte, error) {
	fd, size, err := openFile(l.dir, name, name, max, func() error { return refuse.New(CodeLayout, "layout has no %s", name) })
	if err != nil {
		return nil, err
	}
	defer unix.Close(fd)
	b, err := input.ReadFD(fd, size, max)
	if err != nil {
		return nil, refuse.Wrap(CodeLayout, err, "read %s", name)
	}
	if int64(len(b)) > max {
		return nil, refuse.New(CodeTooLarge, "layout entry %s grew past %d bytes", name, max)
	}
	return b, nil
}

// openBlob opens blobs/sha256/<hex of d> (see openFile), at most max bytes.
func (l *Layout) openBlob(d digest.Digest, max int64) (int, int64, error) {
	if l.blobs < 0 {
		return -1, 0, refuse.New(store.CodeObjectNotFound, "layout has no blobs/sha256 directory")
	}
	fd, size, err := openFile(l.blobs, d.Encoded(), "blobs/sha256/"+d.Encoded(), max,
		func() error { return refuse.New(store.CodeObjectNotFound, "layout has no blob %s", d) })
	if err != nil && refuse.CodeOf(err) == CodeLayout {
		return -1, 0, refuse.Wrap(store.CodeObjectNotRegular, err, "blob %s", d)
	}
	return fd, size, err
}

// blob reads blobs/sha256/<hex of d> and re-hashes it.
func (l *Layout) blob(d digest.Digest, max int64) ([]byte, error) {
	fd, size, err := l.openBlob(d, max)
	if err != nil {
		return nil, err
	}
	defer unix.Close(fd)
	b, err := input.ReadFD(fd, size, max)
	if err != nil {
		return nil, refuse.Wrap(store.CodeObjectCorrupt, err, "read blob %s", d)
	}
	if int64(len(b)) > max {
		return nil, refuse.New(CodeTooLarge, "blob %s grew past %d bytes", d, max)
	}
	if evidence.FromBytes(b) != d {
		return nil, refuse.New(store.CodeObjectCorrupt, "layout blob %s does not hash to its name", d)
	}
	return b, nil
}

// checkBlob is blob without keeping the bytes: the same open and fstat checks, the content
// streamed through SHA-256 in 1 MiB chunks, so that Verify's memory does not grow with a blob.
// It returns the blob's size.
func (l *Layout) checkBlob(d digest.Digest, max int64, buf []byte) (int64, error) {
	fd, size, err := l.openBlob(d, max)
	if err != nil {
		return 0, err
	}
	f := os.NewFile(uintptr(fd), d.Encoded())
	defer f.Close()
	h := sha256.New()
	n, err := io.CopyBuffer(h, io.LimitReader(f, size+1), buf)
	switch {
	case err != nil:
		return 0, refuse.Wrap(store.CodeObjectCorrupt, err, "read blob %s", d)
	case n != size:
		return 0, refuse.New(store.CodeObjectCorrupt, "blob %s changed size while read", d)
	case hex.EncodeToString(h.Sum(nil)) != d.Encoded():
		return 0, refuse.New(store.CodeObjectCorrupt, "layout blob %s does not hash to its name", d)
	}
	return size, nil
}

// Get returns the object named d, re-hashed. Only objects of the evidence manifests' layers are
// served: any other blob of the layout (a manifest, a bundle) is not evidence of the store.
func (l *Layout) Get(d digest.Digest) ([]byte, error) {
	if _, err := evidence.ParseDigest(string(d)); err != nil {
		return nil, err
	}
	if !l.objects[d] {
		return nil, refuse.New(store.CodeObjectNotFound, "object %s is not a layer of an evidence manifest of the layout", d)
	}
	return l.blob(d, store.MaxObjectSize)
}

// GetDescriptor is Get plus the descriptor's size and, for record media types, canonical form
// and schema: the checks of store.Store.GetDescriptor, with the same codes.
func (l *Layout) GetDescriptor(d evidence.Descriptor) ([]byte, error) {
	b, _, err := l.GetRecord(d)
	return b, err
}

// GetRecord is GetDescriptor that also returns, for a record media type, the record as its check
// parsed it (nil for a blob), as store.Store.GetRecord does: the auditor decodes every check's
// record from that parse.
func (l *Layout) GetRecord(d evidence.Descriptor) ([]byte, *evidence.Record, error) {
	b, err := l.Get(d.Digest)
	if err != nil {
		return nil, nil, err
	}
	r, err := store.CheckDescriptor(d, b)
	if err != nil {
		return nil, nil, err
	}
	return b, r, nil
}

// GetIndex answers from the index derived from the layout's roots (ParseRoot's entries): a
// manifest naming a root is what publishes it in a layout.
func (l *Layout) GetIndex(kind string, key digest.Digest) (evidence.Descriptor, bool, error) {
	m, ok := l.index[kind]
	if !ok {
		return evidence.Descriptor{}, false, refuse.New(store.CodeIndexKind, "unknown index kind %q", kind)
	}
	if _, err := evidence.ParseDigest(string(key)); err != nil {
		return evidence.Descriptor{}, false, err
	}
	d, ok := m[key]
	return d, ok, nil
}

// Roots lists the roots of the layout's evidence manifests, in index.json order.
func (l *Layout) Roots() []*Root {
	out := make([]*Root, 0, len(l.artifacts))
	for _, a := range l.artifacts {
		out = append(out, a.root)
	}
	return out
}

// Verify checks the layout as `store verify` checks a store, writing nothing: every blob
// re-hashes, every evidence manifest's layers are exactly its root's closure (CheckClosure), and
// it lists the published roots. It keeps going after a finding.
func (l *Layout) Verify() (*store.Report, error) {
	r := &store.Report{Receipts: []store.IndexEntry{}, Preflights: []store.IndexEntry{}, Intents: []store.IndexEntry{}, LiveAudits: []store.IndexEntry{},
		Unfinished: []store.IndexEntry{}, Unreferenced: []digest.Digest{}, Corruption: []store.Finding{}, Hints: []store.Finding{}}
	bad := func(path string, err error) {
		r.Corruption = append(r.Corruption, store.Finding{Code: refuse.CodeOf(err), Path: path, Msg: refuse.Detail(err)})
	}
	if l.blobs < 0 {
		return nil, refuse.New(CodeLayout, "layout has no blobs/sha256 directory")
	}
	lfd, err := retryEINTR(func() (int, error) { return unix.Openat(l.blobs, ".", openFlags|unix.O_DIRECTORY, 0) })
	if err != nil {
		return nil, refuse.Wrap(CodeLayout, err, "open blobs/sha256")
	}
	dir := os.NewFile(uintptr(lfd), "blobs/sha256")
	ents, err := dir.ReadDir(-1)
	dir.Close()
	if err != nil {
		return nil, refuse.Wrap(CodeLayout, err, "list blobs/sha256")
	}
	good := map[digest.Digest]bool{}
	buf := make([]byte, 1<<20)
	for _, e := range ents {
		rel := "blobs/sha256/" + e.Name()
		d, err := evidence.ParseDigest("sha256:" + e.Name())
		if err != nil {
			bad(rel, refuse.New(store.CodeStrayFile, "stray entry in blobs/sha256/"))
			continue
		}
		r.Objects++
		// Streamed and bounded: no blob of a ql3 artifact exceeds an object's bound (a manifest
		// is at most 16 MiB), so a larger one is refused by its fstat, unread.
		size, err := l.checkBlob(d, store.MaxObjectSize, buf)
		if err != nil {
			bad(rel, err)
			continue
		}
		good[d] = true
		r.Bytes += size
	}
	reached := map[digest.Digest]bool{EmptyConfig.Digest: true}
	for _, a := range l.artifacts {
		reached[a.desc.Digest] = true
		_, err := CheckClosure(a.artifact, func(d digest.Digest) ([]byte, bool, error) {
			reached[d] = true
			if !good[d] {
				return nil, false, nil
			}
			b, err := l.blob(d, store.MaxObjectSize)
			return b, err == nil, err
		})
		if err != nil {
			bad("blobs/sha256/"+a.desc.Digest.Encoded(), err)
			continue
		}
		for _, e := range a.root.Index {
			switch e.Kind {
			case evidence.IndexReceipts:
				r.Receipts = append(r.Receipts, e)
			case evidence.IndexIntents:
				r.Intents = append(r.Intents, e)
			case evidence.IndexLiveAudits:
				r.LiveAudits = append(r.LiveAudits, e)
			default:
				r.Preflights = append(r.Preflights, e)
			}
		}
	}
	for _, m := range l.others {
		reached[m.Digest] = true
		if mb, err := l.blob(m.Digest, MaxManifestBytes); err == nil {
			var om ocispec.Manifest
			if json.Unmarshal(mb, &om) == nil {
				for _, ly := range append([]ocispec.Descriptor{om.Config}, om.Layers...) {
					reached[ly.Digest] = true
				}
			}
		}
	}
	for d := range good {
		if !reached[d] {
			r.Unreferenced = append(r.Unreferenced, d)
		}
	}
	slices.Sort(r.Unreferenced)
	for _, d := range r.Unreferenced {
		r.Hints = append(r.Hints, store.Finding{Code: store.CodeUnreferenced, Path: "blobs/sha256/" + d.Encoded(),
			Msg: "blob no manifest of index.json reaches"})
	}
	return r, nil
}
