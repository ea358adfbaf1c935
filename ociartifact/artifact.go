// Package ociartifact is the portable form of ql3 evidence (docs/oci.md): the closure of one root
// record (a receipt, a preflight report or a live-audit report) as ONE OCI artifact manifest, one layer per object.
// It holds the pure part — the manifest format, the closure check a consumer runs before it
// trusts an artifact, the export of an OCI image layout and read-only access to one — and opens
// no network connection, so the offline auditor may link it. Registry push and pull live in
// ociartifact/transfer.
package ociartifact

import (
	"bytes"
	"encoding/json"
	"fmt"
	"maps"
	"slices"

	"github.com/opencontainers/go-digest"
	specs "github.com/opencontainers/image-spec/specs-go"
	ocispec "github.com/opencontainers/image-spec/specs-go/v1"

	"github.com/qinglong/ql3/attest"
	"github.com/qinglong/ql3/evidence"
	"github.com/qinglong/ql3/refuse"
	"github.com/qinglong/ql3/store"
)

// Reason codes raised by this package (the transfer package adds the registry's).
const (
	// CodeManifest: the manifest is not a ql3 evidence manifest of the closed shape docs/oci.md
	// gives, or its annotations disagree with its root record.
	CodeManifest refuse.Code = "OCI_MANIFEST"
	// CodeNotClosure: the manifest's layers are not exactly the closure of its root: a layer is
	// missing, one is outside the closure, or the order, media type or size differs.
	CodeNotClosure refuse.Code = "OCI_NOT_CLOSURE"
	// CodeBlobDigest: bytes served or stored for a layer do not hash to the layer's digest.
	CodeBlobDigest refuse.Code = "OCI_BLOB_DIGEST"
	// CodeTooLarge: a manifest, an object or the whole artifact exceeds its bound.
	CodeTooLarge refuse.Code = "OCI_TOO_LARGE"
	// CodeRootKind: the root names an object that is neither a receipt, a preflight report nor a
	// live-audit report.
	CodeRootKind refuse.Code = "OCI_ROOT_KIND"
	// CodeAttachment: an attachment's subject is not an object of the root's closure, or its blob
	// is not a sigstore-style bundle blob (size, media type).
	CodeAttachment refuse.Code = "OCI_ATTACHMENT"
	// CodeLayout: an OCI image layout is missing, malformed, not a new directory (export) or
	// holds no ql3 evidence manifest (open).
	CodeLayout refuse.Code = "OCI_LAYOUT"
)

// Media types and annotation keys of the artifact (docs/oci.md).
const (
	ArtifactType = "application/vnd.qinglong.ql3.evidence.v1"
	// MediaTypeBundle is the media type of an attestation bundle attached as a referrer.
	MediaTypeBundle = "application/vnd.dev.sigstore.bundle.v0.3+json"

	AnnotationRoot       = "vnd.qinglong.ql3.root"
	AnnotationKind       = "vnd.qinglong.ql3.kind"
	AnnotationRelease    = "vnd.qinglong.ql3.release"
	AnnotationClusterUID = "vnd.qinglong.ql3.cluster-uid"
	// AnnotationSubject on a referrer names the object of the closure its bundle attests.
	AnnotationSubject = "vnd.qinglong.ql3.subject"

	KindReceipt   = "receipt"
	KindPreflight = "preflight"
	// KindLiveAudit: a live-audit report is a publication of its own (index/live-audits, a leaf
	// of the log), so it is a root that travels: its closure carries the receipt it audited.
	KindLiveAudit = "live-audit"
)

// Bounds: a manifest of 64k layers is about 16 MiB of JSON; an object is bounded like the store's.
// MaxLayers bounds the objects of one closure: the 1,000-resource release's receipt has 26, and
// each upgrade adds its predecessor's closure, so 10,000 is hundreds of chained upgrades, while a
// 60,000-layer manifest fits in 16 MiB and would cost a fetch per layer.
const (
	MaxManifestBytes = 16 << 20
	MaxArtifactBytes = 1 << 30
	MaxLayers        = 10000
)

// EmptyConfig is the config of every ql3 artifact: the OCI empty descriptor ("{}").
var EmptyConfig = ocispec.DescriptorEmptyJSON

// emptyConfig drops the inline data of ocispec's empty descriptor: the manifest names it by
// digest only, and the blob itself is pushed or exported beside the layers.
func emptyConfig() ocispec.Descriptor {
	return ocispec.Descriptor{MediaType: EmptyConfig.MediaType, Digest: EmptyConfig.Digest, Size: EmptyConfig.Size}
}

// Root is what a root record binds: its descriptor, kind, the manifest annotations derived from
// it and the store index entries that publish it.
type Root struct {
	Descriptor evidence.Descriptor
	Kind       string
	Release    string
	ClusterUID string
	Created    string
	// Index are the entries a store needs so that `ql3 audit` finds the root published: a
	// receipt under its apply command (receipts, intents) and its preflight; a preflight and a
	// live-audit report under their own digests. Order: preflights, intents, receipts (the receipt last). CheckClosure puts
	// before them the entries of the earlier receipts the closure carries (EarlierEntries).
	Index []store.IndexEntry
}

// ParseRoot classifies root record b (named by d, whose bytes the caller has re-hashed) and
// derives what the artifact annotates and the entries the store index needs.
func ParseRoot(d digest.Digest, b []byte) (*Root, error) {
	var probe struct {
		Schema string `json:"schema"`
	}
	if err := json.Unmarshal(b, &probe); err != nil {
		return nil, refuse.New(CodeRootKind, "root %s is not a json object", d)
	}
	switch probe.Schema {
	case evidence.SchemaReceipt:
		var rc evidence.Receipt
		if err := evidence.DecodeRecord(evidence.MediaTypeReceipt, b, &rc); err != nil {
			return nil, err
		}
		desc := evidence.Descriptor{MediaType: evidence.MediaTypeReceipt, Digest: d, Size: int64(len(b))}
		return &Root{Descriptor: desc, Kind: KindReceipt, Release: rc.Lock.ReleaseVersion, ClusterUID: rc.ClusterUID,
			Created: rc.FinishedAt, Index: []store.IndexEntry{
				{Kind: evidence.IndexPreflights, Key: rc.Preflight.Digest, Descriptor: rc.Preflight},
				{Kind: evidence.IndexIntents, Key: rc.Command.Digest, Descriptor: rc.Intent},
				{Kind: evidence.IndexReceipts, Key: rc.Command.Digest, Descriptor: desc},
			}}, nil
	case evidence.SchemaPreflight:
		var pf evidence.Preflight
		if err := evidence.DecodeRecord(evidence.MediaTypePreflight, b, &pf); err != nil {
			return nil, err
		}
		desc := evidence.Descriptor{MediaType: evidence.MediaTypePreflight, Digest: d, Size: int64(len(b))}
		return &Root{Descriptor: desc, Kind: KindPreflight, Release: pf.Lock.ReleaseVersion, ClusterUID: pf.ClusterUID,
			Created: pf.FinishedAt, Index: []store.IndexEntry{{Kind: evidence.IndexPreflights, Key: d, Descriptor: desc}}}, nil
	case evidence.SchemaLiveAudit:
		var la evidence.LiveAudit
		if err := evidence.DecodeRecord(evidence.MediaTypeLiveAudit, b, &la); err != nil {
			return nil, err
		}
		desc := evidence.Descriptor{MediaType: evidence.MediaTypeLiveAudit, Digest: d, Size: int64(len(b))}
		return &Root{Descriptor: desc, Kind: KindLiveAudit, Release: la.Lock.ReleaseVersion, ClusterUID: la.ClusterUID,
			Created: la.FinishedAt, Index: []store.IndexEntry{{Kind: evidence.IndexLiveAudits, Key: d, Descriptor: desc}}}, nil
	}
	return nil, refuse.New(CodeRootKind, "root %s is neither a receipt, a preflight report nor a live-audit report", d)
}

// Artifact is a parsed evidence manifest.
type Artifact struct {
	Root        evidence.Descriptor // layers[0]
	Kind        string
	Annotations map[string]string
	Layers      []evidence.Descriptor
}

// Manifest is the artifact manifest of root's closure: bytes and descriptor.
func Manifest(root *Root, closure []evidence.Descriptor) ([]byte, ocispec.Descriptor, error) {
	if len(closure) == 0 || closure[0] != root.Descriptor {
		return nil, ocispec.Descriptor{}, refuse.New(CodeNotClosure, "closure does not start at its root")
	}
	if len(closure) > MaxLayers {
		return nil, ocispec.Descriptor{}, refuse.New(CodeTooLarge, "closure of %d objects is over the bound of %d layers", len(closure), MaxLayers)
	}
	m := ocispec.Manifest{
		Versioned:    specs.Versioned{SchemaVersion: 2},
		MediaType:    ocispec.MediaTypeImageManifest,
		ArtifactType: ArtifactType,
		Config:       emptyConfig(),
		Layers:       make([]ocispec.Descriptor, 0, len(closure)),
		Annotations: map[string]string{
			ocispec.AnnotationCreated: root.Created,
			AnnotationRoot:            string(root.Descriptor.Digest),
			AnnotationKind:            root.Kind,
			AnnotationRelease:         root.Release,
			AnnotationClusterUID:      root.ClusterUID,
		},
	}
	for _, d := range closure {
		m.Layers = append(m.Layers, layer(d))
	}
	return marshalManifest(m)
}

func layer(d evidence.Descriptor) ocispec.Descriptor {
	return ocispec.Descriptor{MediaType: d.MediaType, Digest: d.Digest, Size: d.Size,
		Annotations: map[string]string{ocispec.AnnotationTitle: d.Digest.Encoded()}}
}

func marshalManifest(m ocispec.Manifest) ([]byte, ocispec.Descriptor, error) {
	b, err := json.Marshal(m)
	if err != nil {
		return nil, ocispec.Descriptor{}, fmt.Errorf("ociartifact: marshal manifest: %w", err)
	}
	return b, ocispec.Descriptor{MediaType: m.MediaType, ArtifactType: m.ArtifactType, Digest: evidence.FromBytes(b),
		Size: int64(len(b)), Annotations: nil}, nil
}

// ReferrerManifest is the manifest that attaches bundle (a blob) to the artifact manifest
// subject, annotated with the closure object it attests.
func ReferrerManifest(subject ocispec.Descriptor, object digest.Digest, bundle evidence.Descriptor) ([]byte, ocispec.Descriptor, error) {
	m := ocispec.Manifest{
		Versioned:    specs.Versioned{SchemaVersion: 2},
		MediaType:    ocispec.MediaTypeImageManifest,
		ArtifactType: bundle.MediaType,
		Config:       emptyConfig(),
		Layers:       []ocispec.Descriptor{layer(bundle)},
		Subject:      &ocispec.Descriptor{MediaType: subject.MediaType, Digest: subject.Digest, Size: subject.Size},
		Annotations:  map[string]string{AnnotationSubject: string(object)},
	}
	return marshalManifest(m)
}

// manifestWire is the closed shape of an evidence manifest: any other member is refused.
type manifestWire struct {
	SchemaVersion int               `json:"schemaVersion"`
	MediaType     string            `json:"mediaType"`
	ArtifactType  string            `json:"artifactType"`
	Config        descriptorWire    `json:"config"`
	Layers        []descriptorWire  `json:"layers"`
	Annotations   map[string]string `json:"annotations"`
}

type descriptorWire struct {
	MediaType   string            `json:"mediaType"`
	Digest      string            `json:"digest"`
	Size        int64             `json:"size"`
	Annotations map[string]string `json:"annotations,omitempty"`
}

var manifestAnnotations = []string{ocispec.AnnotationCreated, AnnotationClusterUID, AnnotationKind, AnnotationRelease, AnnotationRoot}

// ParseManifest checks b is an evidence manifest of the closed shape docs/oci.md gives and
// returns it. It checks the shape only: CheckClosure binds the layers to the root's closure.
func ParseManifest(b []byte) (*Artifact, error) {
	if len(b) > MaxManifestBytes {
		return nil, refuse.New(CodeTooLarge, "manifest of %d bytes exceeds %d", len(b), MaxManifestBytes)
	}
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	var m manifestWire
	if err := dec.Decode(&m); err != nil {
		return nil, refuse.Wrap(CodeManifest, err, "manifest is not of the evidence manifest shape")
	}
	if dec.More() {
		return nil, refuse.New(CodeManifest, "manifest has data after its json object")
	}
	switch {
	case m.SchemaVersion != 2:
		return nil, refuse.New(CodeManifest, "manifest schemaVersion %d, want 2", m.SchemaVersion)
	case m.MediaType != ocispec.MediaTypeImageManifest:
		return nil, refuse.New(CodeManifest, "manifest media type %q, want %q", m.MediaType, ocispec.MediaTypeImageManifest)
	case m.ArtifactType != ArtifactType:
		return nil, refuse.New(CodeManifest, "manifest artifactType %q, want %q", m.ArtifactType, ArtifactType)
	case m.Config.MediaType != EmptyConfig.MediaType || m.Config.Digest != string(EmptyConfig.Digest) ||
		m.Config.Size != EmptyConfig.Size || m.Config.Annotations != nil:
		return nil, refuse.New(CodeManifest, "manifest config is not the empty descriptor")
	case len(m.Layers) == 0:
		return nil, refuse.New(CodeNotClosure, "manifest has no layer")
	case len(m.Layers) > MaxLayers:
		return nil, refuse.New(CodeTooLarge, "manifest has %d layers, over the bound of %d", len(m.Layers), MaxLayers)
	}
	if got := slices.Sorted(maps.Keys(m.Annotations)); !slices.Equal(got, manifestAnnotations) {
		return nil, refuse.New(CodeManifest, "manifest annotations are %q, want exactly %q", got, manifestAnnotations)
	}
	a := &Artifact{Kind: m.Annotations[AnnotationKind], Annotations: m.Annotations, Layers: make([]evidence.Descriptor, 0, len(m.Layers))}
	seen := map[digest.Digest]bool{}
	var total int64
	for i, l := range m.Layers {
		d, err := evidence.ParseDigest(l.Digest)
		if err != nil {
			return nil, refuse.Wrap(CodeManifest, err, "layer %d", i)
		}
		if l.MediaType == "" || l.Size < 0 {
			return nil, refuse.New(CodeManifest, "layer %d has an empty media type or a negative size", i)
		}
		if l.Size > store.MaxObjectSize {
			return nil, refuse.New(CodeTooLarge, "layer %d of %d bytes exceeds %d", i, l.Size, store.MaxObjectSize)
		}
		if total += l.Size; total > MaxArtifactBytes {
			return nil, refuse.New(CodeTooLarge, "layers exceed %d bytes", MaxArtifactBytes)
		}
		if len(l.Annotations) != 1 || l.Annotations[ocispec.AnnotationTitle] != d.Encoded() {
			return nil, refuse.New(CodeManifest, "layer %d must carry exactly the title annotation %q", i, d.Encoded())
		}
		if seen[d] {
			return nil, refuse.New(CodeNotClosure, "layer %d repeats object %s", i, d)
		}
		seen[d] = true
		a.Layers = append(a.Layers, evidence.Descriptor{MediaType: l.MediaType, Digest: d, Size: l.Size})
	}
	a.Root = a.Layers[0]
	if m.Annotations[AnnotationRoot] != string(a.Root.Digest) {
		return nil, refuse.New(CodeManifest, "manifest names root %q, its first layer is %s", m.Annotations[AnnotationRoot], a.Root.Digest)
	}
	return a, nil
}

// CheckClosure binds a parsed manifest to its content: blob returns the bytes of a layer's
// object (already re-hashed by the caller against the layer digest), or an error. The layers
// must be exactly the closure of the root, in Closure's order with the same media types and
// sizes, every record of the closure must be canonical and of its schema, and the manifest's
// annotations must be what the root record says. It returns the root.
func CheckClosure(a *Artifact, blob func(digest.Digest) ([]byte, bool, error)) (*Root, error) {
	layers := make(map[digest.Digest]evidence.Descriptor, len(a.Layers))
	for _, l := range a.Layers {
		layers[l.Digest] = l
	}
	get := func(d evidence.Descriptor) ([]byte, error) {
		if _, ok := layers[d.Digest]; !ok {
			return nil, refuse.New(CodeNotClosure, "the closure names %s (%s), which is not a layer of the manifest", d.Digest, d.MediaType)
		}
		b, ok, err := blob(d.Digest)
		if err != nil {
			return nil, err
		}
		if !ok {
			return nil, refuse.New(CodeNotClosure, "layer %s has no content", d.Digest)
		}
		if int64(len(b)) != d.Size {
			return nil, refuse.New(CodeNotClosure, "object %s has %d bytes, a descriptor says %d", d.Digest, len(b), d.Size)
		}
		if _, isRecord := evidence.RecordSchema(d.MediaType); isRecord {
			var probe map[string]any
			if err := evidence.DecodeRecord(d.MediaType, b, &probe); err != nil {
				return nil, err
			}
		}
		return b, nil
	}
	rootBytes, ok, err := blob(a.Root.Digest)
	if err != nil {
		return nil, err
	}
	if !ok {
		return nil, refuse.New(CodeNotClosure, "root %s has no content", a.Root.Digest)
	}
	root, err := ParseRoot(a.Root.Digest, rootBytes)
	if err != nil {
		return nil, err
	}
	if root.Descriptor != a.Root {
		return nil, refuse.New(CodeNotClosure, "first layer %s (%s) is not the root descriptor %s", a.Root.Digest, a.Root.MediaType, root.Descriptor.MediaType)
	}
	closure, err := evidence.Closure(root.Descriptor, get)
	if err != nil {
		return nil, err
	}
	if len(closure) != len(a.Layers) {
		for _, l := range a.Layers {
			if !slices.ContainsFunc(closure, func(d evidence.Descriptor) bool { return d.Digest == l.Digest }) {
				return nil, refuse.New(CodeNotClosure, "layer %s (%s) is outside the closure of root %s", l.Digest, l.MediaType, root.Descriptor.Digest)
			}
		}
	}
	for i, d := range closure {
		if a.Layers[i] != d {
			return nil, refuse.New(CodeNotClosure, "layer %d is %s (%s, %d bytes), the closure's object %d is %s (%s, %d bytes)",
				i, a.Layers[i].Digest, a.Layers[i].MediaType, a.Layers[i].Size, i, d.Digest, d.MediaType, d.Size)
		}
	}
	want := map[string]string{ocispec.AnnotationCreated: root.Created, AnnotationRoot: string(root.Descriptor.Digest),
		AnnotationKind: root.Kind, AnnotationRelease: root.Release, AnnotationClusterUID: root.ClusterUID}
	for _, k := range manifestAnnotations {
		if a.Annotations[k] != want[k] {
			return nil, refuse.New(CodeManifest, "annotation %s is %q, the root record says %q", k, a.Annotations[k], want[k])
		}
	}
	earlier, err := EarlierEntries(closure, get)
	if err != nil {
		return nil, err
	}
	root.Index = append(earlier, root.Index...)
	return root, nil
}

// EarlierEntries are the index entries of the receipts a closure carries besides its root (an
// upgrade's preflight plans against the previous receipt, which its plan names, so the closure of
// the 3.4.2 receipt holds the 3.4.1 receipt and its whole closure): each receipt's preflight,
// intent and receipt entries, as the store that published it wrote them. Without them the audit
// of the root, where the closure lands, could not find the previous receipt published
// (AUDIT_PLAN_PREVIOUS). Oldest first: the closure reaches the newest earlier receipt first.
func EarlierEntries(closure []evidence.Descriptor, get func(evidence.Descriptor) ([]byte, error)) ([]store.IndexEntry, error) {
	var groups [][]store.IndexEntry
	for _, d := range closure[1:] {
		if d.MediaType != evidence.MediaTypeReceipt {
			continue
		}
		b, err := get(d)
		if err != nil {
			return nil, err
		}
		r, err := ParseRoot(d.Digest, b)
		if err != nil {
			return nil, err
		}
		groups = append(groups, r.Index)
	}
	var out []store.IndexEntry
	for i := len(groups) - 1; i >= 0; i-- {
		out = append(out, groups[i]...)
	}
	return out, nil
}

// Source is the read side of an evidence store that push and export read from: every method
// re-hashes what it returns. *store.Store and *Layout implement it (and audit.Source).
type Source interface {
	Get(d digest.Digest) ([]byte, error)
	GetDescriptor(d evidence.Descriptor) ([]byte, error)
	GetIndex(kind string, key digest.Digest) (evidence.Descriptor, bool, error)
}

var _ Source = (*store.Store)(nil)

// Attachment is one blob of src to attach to the artifact as a referrer: Subject is the object
// of the closure it attests (the root, for the attestations the ceremony writes), Blob the
// bundle's descriptor (media type MediaTypeBundle for sigstore bundles).
type Attachment struct {
	Subject digest.Digest
	Blob    evidence.Descriptor
}

// StoreAttachments are the attestation bundles st holds for root, as the referrers push and
// export attach to its artifact.
func StoreAttachments(st *store.Store, root digest.Digest) ([]Attachment, error) {
	es, err := st.ListAttestations(root)
	if err != nil {
		return nil, err
	}
	out := make([]Attachment, 0, len(es))
	for _, e := range es {
		b, err := st.Get(e.Bundle)
		if err != nil {
			return nil, err
		}
		out = append(out, Attachment{Subject: root, Blob: evidence.Descriptor{MediaType: MediaTypeBundle, Digest: e.Bundle, Size: int64(len(b))}})
	}
	return out, nil
}

// Collected is an artifact read out of a source: what push and export send.
type Collected struct {
	Root     *Root
	Closure  []evidence.Descriptor
	Blobs    map[digest.Digest][]byte // every closure object and attachment blob
	Manifest []byte
	Desc     ocispec.Descriptor
	// Referrers are the attachment manifests, each with its descriptor, in Attachments' order.
	Referrers []Referrer
	// Log is the log referrer (AttachLog), nil when none is attached.
	Log *LogReferrer
}

// Referrer is one attachment manifest.
type Referrer struct {
	Manifest []byte
	Desc     ocispec.Descriptor
	Blob     evidence.Descriptor
}

// Collect reads root's closure and attachments from src, re-hashing every object, and builds
// the artifact manifest and the referrer manifests.
func Collect(src Source, root digest.Digest, attachments []Attachment) (*Collected, error) {
	rb, err := src.Get(root)
	if err != nil {
		return nil, err
	}
	r, err := ParseRoot(root, rb)
	if err != nil {
		return nil, err
	}
	c := &Collected{Root: r, Blobs: map[digest.Digest][]byte{}}
	var total int64
	c.Closure, err = evidence.Closure(r.Descriptor, func(d evidence.Descriptor) ([]byte, error) {
		b, err := src.GetDescriptor(d)
		if err != nil {
			return nil, err
		}
		if _, seen := c.Blobs[d.Digest]; !seen {
			if total += int64(len(b)); total > MaxArtifactBytes {
				return nil, refuse.New(CodeTooLarge, "closure exceeds %d bytes", MaxArtifactBytes)
			}
		}
		c.Blobs[d.Digest] = b
		return b, nil
	})
	if err != nil {
		return nil, err
	}
	if c.Manifest, c.Desc, err = Manifest(r, c.Closure); err != nil {
		return nil, err
	}
	inClosure := make(map[digest.Digest]bool, len(c.Closure))
	for _, d := range c.Closure {
		inClosure[d.Digest] = true
	}
	for _, at := range attachments {
		if !inClosure[at.Subject] {
			return nil, refuse.New(CodeAttachment, "attachment subject %s is not an object of the closure of %s", at.Subject, root)
		}
		if at.Blob.MediaType == "" || at.Blob.Size > store.MaxObjectSize {
			return nil, refuse.New(CodeAttachment, "attachment blob %s has no media type or exceeds %d bytes", at.Blob.Digest, store.MaxObjectSize)
		}
		b, err := src.GetDescriptor(at.Blob)
		if err != nil {
			return nil, err
		}
		if at.Blob.MediaType == MediaTypeBundle {
			stmt, err := attest.StatementOf(b)
			if err != nil {
				return nil, err
			}
			if !attest.About(stmt, at.Subject) {
				return nil, refuse.New(CodeAttachment, "attestation bundle %s is attached to %s, but its statement is about another record", at.Blob.Digest, at.Subject)
			}
		}
		c.Blobs[at.Blob.Digest] = b
		mb, md, err := ReferrerManifest(c.Desc, at.Subject, at.Blob)
		if err != nil {
			return nil, err
		}
		c.Referrers = append(c.Referrers, Referrer{Manifest: mb, Desc: md, Blob: at.Blob})
	}
	return c, nil
}
