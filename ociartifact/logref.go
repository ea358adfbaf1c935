package ociartifact

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"maps"
	"slices"
	"strings"

	"github.com/opencontainers/go-digest"
	specs "github.com/opencontainers/image-spec/specs-go"
	ocispec "github.com/opencontainers/image-spec/specs-go/v1"
	"golang.org/x/mod/sumdb/note"

	"github.com/qinglong/ql3/deploylog"
	"github.com/qinglong/ql3/evidence"
	"github.com/qinglong/ql3/refuse"
	"github.com/qinglong/ql3/store"
)

// The deployment log travels with a root's artifact as one more referrer (docs/oci.md, "The
// log referrer"): a manifest of artifactType ArtifactTypeLog whose two layers are the root's
// tlog-proof (with the signed, cosigned checkpoint it leads to) and every leaf of the log up to
// that checkpoint, so that a copy holds the log itself and `ql3 log verify --since` on it can
// name what the copy lacks.
const (
	ArtifactTypeLog     = "application/vnd.qinglong.ql3.log.v1"
	MediaTypeTlogProof  = "application/vnd.qinglong.ql3.tlog-proof.v1"
	MediaTypeLogEntries = "application/vnd.qinglong.ql3.log.entries.v1"
)

// Reason codes of the log referrer.
const (
	// CodeLogReferrer: a log referrer is not of the closed shape docs/oci.md gives (subject,
	// artifact type, layers, annotation), or two of them disagree about the log.
	CodeLogReferrer refuse.Code = "OCI_LOG_REFERRER"
	// CodeLogMissing: the log was asked for (--log-key, --policy) and the artifact carries no
	// log referrer: the root's inclusion cannot be checked.
	CodeLogMissing refuse.Code = "OCI_LOG_MISSING"
)

// MaxLogLeaves bounds the leaves one log referrer carries: an entry bundle of a million leaves of
// about 200 bytes is 200 MiB, over an object's bound of 64 MiB anyway; the bound is checked first
// so that a bundle of empty entries cannot claim more.
const MaxLogLeaves = 1 << 20

// MarshalEntries encodes leaves as a C2SP tlog-tiles entry bundle: each entry a big-endian
// 16-bit length followed by that many bytes, nothing else.
func MarshalEntries(leaves [][]byte) []byte {
	n := 0
	for _, l := range leaves {
		n += 2 + len(l)
	}
	out := make([]byte, 0, n)
	for _, l := range leaves {
		out = binary.BigEndian.AppendUint16(out, uint16(len(l)))
		out = append(out, l...)
	}
	return out
}

// ParseEntries decodes an entry bundle of canonical ql3 leaves (LOG_LEAF_CORRUPT: a length that
// runs past the end, an entry that is not a leaf Marshal would write, more than MaxLogLeaves).
// It returns each leaf's bytes and parsed form.
func ParseEntries(b []byte) ([][]byte, []deploylog.Leaf, error) {
	var raws [][]byte
	var leaves []deploylog.Leaf
	for len(b) > 0 {
		if len(raws) == MaxLogLeaves {
			return nil, nil, refuse.New(deploylog.CodeLeafCorrupt, "the log's entry bundle holds more than %d leaves", MaxLogLeaves)
		}
		if len(b) < 2 {
			return nil, nil, refuse.New(deploylog.CodeLeafCorrupt, "entry %d of the log's entry bundle has a truncated length", len(raws))
		}
		n := int(binary.BigEndian.Uint16(b))
		if len(b)-2 < n {
			return nil, nil, refuse.New(deploylog.CodeLeafCorrupt, "entry %d of the log's entry bundle runs past its end", len(raws))
		}
		raw := b[2 : 2+n]
		l, err := deploylog.ParseLeaf(raw)
		if err != nil {
			return nil, nil, refuse.Wrap(deploylog.CodeLeafCorrupt, err, "entry %d of the log's entry bundle", len(raws))
		}
		raws, leaves = append(raws, raw), append(leaves, l)
		b = b[2+n:]
	}
	return raws, leaves, nil
}

// LogReferrerManifest is the manifest that attaches a root's tlog-proof and the log's leaves up
// to its checkpoint to the artifact manifest subject.
func LogReferrerManifest(subject ocispec.Descriptor, root digest.Digest, proof, entries evidence.Descriptor) ([]byte, ocispec.Descriptor, error) {
	m := ocispec.Manifest{
		Versioned:    specs.Versioned{SchemaVersion: 2},
		MediaType:    ocispec.MediaTypeImageManifest,
		ArtifactType: ArtifactTypeLog,
		Config:       emptyConfig(),
		Layers:       []ocispec.Descriptor{layer(proof), layer(entries)},
		Subject:      &ocispec.Descriptor{MediaType: subject.MediaType, Digest: subject.Digest, Size: subject.Size},
		Annotations:  map[string]string{AnnotationSubject: string(root)},
	}
	return marshalManifest(m)
}

// logReferrerWire is the closed shape of a log referrer manifest.
type logReferrerWire struct {
	SchemaVersion int               `json:"schemaVersion"`
	MediaType     string            `json:"mediaType"`
	ArtifactType  string            `json:"artifactType"`
	Config        descriptorWire    `json:"config"`
	Layers        []descriptorWire  `json:"layers"`
	Subject       *descriptorWire   `json:"subject"`
	Annotations   map[string]string `json:"annotations"`
}

// ParseLogReferrer checks mb is a log referrer of the closed shape LogReferrerManifest writes,
// attached to the manifest named subject and about root, and returns its proof's and entry
// bundle's descriptors (OCI_LOG_REFERRER otherwise).
func ParseLogReferrer(mb []byte, subject, root digest.Digest) (proof, entries evidence.Descriptor, err error) {
	bad := func(f string, a ...any) (evidence.Descriptor, evidence.Descriptor, error) {
		return evidence.Descriptor{}, evidence.Descriptor{}, refuse.New(CodeLogReferrer, "log referrer "+f, a...)
	}
	if len(mb) > MaxManifestBytes {
		return bad("of %d bytes exceeds %d", len(mb), MaxManifestBytes)
	}
	dec := json.NewDecoder(bytes.NewReader(mb))
	dec.DisallowUnknownFields()
	var m logReferrerWire
	if err := dec.Decode(&m); err != nil || dec.More() {
		return bad("is not of the log referrer's shape")
	}
	switch {
	case m.SchemaVersion != 2 || m.MediaType != ocispec.MediaTypeImageManifest || m.ArtifactType != ArtifactTypeLog:
		return bad("is not an image manifest of artifactType %s", ArtifactTypeLog)
	case m.Config.MediaType != EmptyConfig.MediaType || m.Config.Digest != string(EmptyConfig.Digest) || m.Config.Size != EmptyConfig.Size || m.Config.Annotations != nil:
		return bad("config is not the empty descriptor")
	case m.Subject == nil || m.Subject.Digest != string(subject):
		return bad("is not attached to the evidence manifest %s", subject)
	case !slices.Equal(slices.Sorted(maps.Keys(m.Annotations)), []string{AnnotationSubject}) || m.Annotations[AnnotationSubject] != string(root):
		return bad("is not annotated with exactly %s = the root %s", AnnotationSubject, root)
	case len(m.Layers) != 2 || m.Layers[0].MediaType != MediaTypeTlogProof || m.Layers[1].MediaType != MediaTypeLogEntries:
		return bad("layers are not one %s and one %s", MediaTypeTlogProof, MediaTypeLogEntries)
	}
	var ds [2]evidence.Descriptor
	for i, l := range m.Layers {
		d, err := evidence.ParseDigest(l.Digest)
		if err != nil {
			return bad("layer %d: %v", i, err)
		}
		if l.Size < 0 || l.Size > store.MaxObjectSize {
			return bad("layer %d of %d bytes is outside 0..%d", i, l.Size, store.MaxObjectSize)
		}
		if len(l.Annotations) != 1 || l.Annotations[ocispec.AnnotationTitle] != d.Encoded() {
			return bad("layer %d must carry exactly the title annotation %q", i, d.Encoded())
		}
		ds[i] = evidence.Descriptor{MediaType: l.MediaType, Digest: d, Size: l.Size}
	}
	if ds[0].Size > deploylog.MaxProofSize {
		return bad("proof of %d bytes exceeds %d", ds[0].Size, deploylog.MaxProofSize)
	}
	return ds[0], ds[1], nil
}

// CarriedLog is a log a referrer carries, proven: the root's proof against a trusted checkpoint,
// and the leaves 0..Size-1 whose tree is that checkpoint's.
type CarriedLog struct {
	Proof      deploylog.Proof
	Checkpoint deploylog.Checkpoint
	Raws       [][]byte
	Leaves     []deploylog.Leaf
	Tree       *deploylog.Tree
}

// CheckCarriedLog proves a carried log: the proof's checkpoint is trusted by v
// (LOG_CHECKPOINT_SIGNATURE, LOG_ORIGIN, POLICY_*), its leaf publishes root (LOG_PROOF_RECORD)
// and is included (LOG_INCLUSION); the entry bundle parses (LOG_LEAF_CORRUPT), holds exactly
// the checkpoint's size in leaves (fewer: LOG_ROLLBACK, a truncated log; more:
// LOG_CHECKPOINT_MISMATCH), whose tree root is the checkpoint's (LOG_CHECKPOINT_MISMATCH), and
// whose leaf at the proof's index is the proof's leaf (LOG_PROOF_RECORD).
func CheckCarriedLog(proof, entries []byte, root digest.Digest, v deploylog.CheckpointVerifier) (*CarriedLog, error) {
	p, err := deploylog.ParseProof(proof)
	if err != nil {
		return nil, err
	}
	leaf, cp, err := p.Verify(v, root)
	if err != nil {
		return nil, err
	}
	if leaf.Record != root || leaf.Kind == deploylog.KindTombstone {
		return nil, refuse.New(deploylog.CodeProofRecord, "the log referrer's proof is of a %s leaf of %s, not the publication of root %s", leaf.Kind, leaf.Record, root)
	}
	raws, leaves, err := ParseEntries(entries)
	if err != nil {
		return nil, err
	}
	switch n := int64(len(raws)); {
	case n < cp.Size:
		return nil, refuse.New(deploylog.CodeRollback, "the log referrer carries %d leaves, its checkpoint covers %d: a truncated log", n, cp.Size)
	case n > cp.Size:
		return nil, refuse.New(store.CodeLogCheckpointStale, "the log referrer carries %d leaves, its checkpoint covers %d", n, cp.Size)
	}
	tree := &deploylog.Tree{}
	for _, r := range raws {
		if err := tree.Append(r); err != nil {
			return nil, err
		}
	}
	if cp.Size > 0 {
		h, err := tree.Root(cp.Size)
		if err != nil {
			return nil, err
		}
		if h != cp.Hash {
			return nil, refuse.New(store.CodeLogCheckpointStale, "the log referrer's %d leaves are not the tree of its checkpoint", cp.Size)
		}
	}
	if p.Index < 0 || p.Index >= int64(len(raws)) || !bytes.Equal(raws[p.Index], p.Extra) {
		return nil, refuse.New(deploylog.CodeProofRecord, "the log referrer's leaf %d is not its proof's leaf", p.Index)
	}
	return &CarriedLog{Proof: p, Checkpoint: cp, Raws: raws, Leaves: leaves, Tree: tree}, nil
}

// Find returns the index of the leaf that publishes an entry (kind, key, record, and bundle for
// an attestation), or -1.
func (c *CarriedLog) Find(want deploylog.Leaf) int64 {
	for i, l := range c.Leaves {
		if l == want {
			return int64(i)
		}
	}
	return -1
}

// Extends checks that the carried log extends since (a checkpoint the caller holds, trusted by
// v when v is not nil): the same origin (LOG_ORIGIN), not smaller (LOG_ROLLBACK), and the same
// root at its size (LOG_FORK).
func (c *CarriedLog) Extends(since []byte, v deploylog.CheckpointVerifier) error {
	var sc deploylog.Checkpoint
	var err error
	if v != nil {
		sc, err = v.VerifyCheckpoint(since)
	} else {
		sc, _, err = deploylog.ParseSignedCheckpoint(since)
	}
	if err != nil {
		return err
	}
	if sc.Origin != c.Checkpoint.Origin {
		return refuse.New(deploylog.CodeOrigin, "the --since checkpoint is of origin %s, the carried log's is %s", refuse.Ident(sc.Origin), refuse.Ident(c.Checkpoint.Origin))
	}
	if sc.Size > c.Checkpoint.Size {
		return refuse.New(deploylog.CodeRollback, "the carried log's checkpoint has %d leaves, the --since checkpoint %d: a rolled-back or stale log", c.Checkpoint.Size, sc.Size)
	}
	if sc.Size == 0 {
		return nil
	}
	h, err := c.Tree.Root(sc.Size)
	if err != nil {
		return err
	}
	if h != sc.Hash {
		return refuse.New(deploylog.CodeFork, "the carried log's first %d leaves are not the tree of the --since checkpoint: a fork", sc.Size)
	}
	return nil
}

// LogNote is the checkpoint of a carried proof as a store keeps it: the note's text and the log
// key's signature lines (those named after the origin); witness cosignatures are kept beside it
// in their own files.
func LogNote(c deploylog.Checkpoint, msg []byte) ([]byte, error) {
	_, n, err := deploylog.ParseSignedCheckpoint(msg)
	if err != nil {
		return nil, err
	}
	var b strings.Builder
	b.WriteString(n.Text + "\n")
	kept := 0
	for _, s := range append(append([]note.Signature(nil), n.Sigs...), n.UnverifiedSigs...) {
		if s.Name == c.Origin {
			b.WriteString("— " + s.Name + " " + s.Base64 + "\n")
			kept++
		}
	}
	if kept == 0 {
		return nil, refuse.New(deploylog.CodeCheckpointSig, "the carried checkpoint has no signature line of its origin %s", refuse.Ident(c.Origin))
	}
	return []byte(b.String()), nil
}

// LogReferrer is the log referrer of a collected artifact: its manifest and its two layers.
type LogReferrer struct {
	Manifest       []byte
	Desc           ocispec.Descriptor
	Proof, Entries evidence.Descriptor
	// Index is the root's leaf, Checkpoint the checkpoint its proof leads to.
	Index      int64
	Checkpoint deploylog.Checkpoint
}

// AttachLog adds the log referrer to c: proof is the root's tlog-proof (as `ql3 log proof` writes
// it) and leaves the log's leaves 0..N-1, N the size of the proof's checkpoint. It checks the
// proof leads to that tree and is about c's root (without trusting any key: that is the
// puller's), so that push never sends a log that a pull would refuse for its shape.
func (c *Collected) AttachLog(proof []byte, leaves [][]byte) error {
	entries := MarshalEntries(leaves)
	if len(entries) > store.MaxObjectSize {
		return refuse.New(CodeTooLarge, "the log's entry bundle of %d leaves is %d bytes, over %d", len(leaves), len(entries), store.MaxObjectSize)
	}
	cl, err := CheckCarriedLog(proof, entries, c.Root.Descriptor.Digest, unsignedVerifier{})
	if err != nil {
		return err
	}
	pd := evidence.Descriptor{MediaType: MediaTypeTlogProof, Digest: evidence.FromBytes(proof), Size: int64(len(proof))}
	ed := evidence.Descriptor{MediaType: MediaTypeLogEntries, Digest: evidence.FromBytes(entries), Size: int64(len(entries))}
	mb, md, err := LogReferrerManifest(c.Desc, c.Root.Descriptor.Digest, pd, ed)
	if err != nil {
		return err
	}
	c.Blobs[pd.Digest], c.Blobs[ed.Digest] = proof, entries
	c.Log = &LogReferrer{Manifest: mb, Desc: md, Proof: pd, Entries: ed, Index: cl.Proof.Index, Checkpoint: cl.Checkpoint}
	return nil
}

// AttachStoreLog attaches st's log to c (AttachLog): the root's proof against the largest stored
// checkpoint that covers it (cosignatures included) and the leaves up to it. A store without a
// log, a root no leaf publishes, or a leaf no checkpoint covers yet attach nothing: none is then
// the refusal that says which (LOG_NOT_INITIALIZED, LOG_RECORD_NOT_LOGGED, LOG_UNSIGNED), and err
// is nil. Any other failure is err.
func (c *Collected) AttachStoreLog(st *store.Store) (none, err error) {
	p, err := st.LogProof(c.Root.Descriptor.Digest, nil)
	switch refuse.CodeOf(err) {
	case "":
	case store.CodeLogNotInitialized, store.CodeLogUnsigned, store.CodeLogNotLogged:
		return err, nil
	default:
		return nil, err
	}
	cp, _, err := deploylog.ParseSignedCheckpoint(p.Checkpoint)
	if err != nil {
		return nil, err
	}
	leaves, err := st.LogLeaves(cp.Size)
	if err != nil {
		return nil, err
	}
	return nil, c.AttachLog(p.Marshal(), leaves)
}

// unsignedVerifier parses a checkpoint without trusting it: the pusher's self-check of shape.
type unsignedVerifier struct{}

func (unsignedVerifier) VerifyCheckpoint(msg []byte) (deploylog.Checkpoint, error) {
	c, _, err := deploylog.ParseSignedCheckpoint(msg)
	return c, err
}

// LogProof implements audit.LogProver for a layout: the proof of record from the log referrer
// of the evidence manifest whose root record is (ql3's export writes it; see docs/oci.md), proven
// as a pull proves it (CheckCarriedLog with v): the largest checkpoint among the referrers that
// verify. Without a log referrer for the record it is OCI_LOG_MISSING; with referrers that all
// fail, the first refusal.
func (l *Layout) LogProof(record digest.Digest, v deploylog.CheckpointVerifier) (deploylog.Proof, error) {
	var best *CarriedLog
	var firstErr error
	for _, a := range l.artifacts {
		if a.root.Descriptor.Digest != record {
			continue
		}
		for _, m := range l.others {
			if m.MediaType != ocispec.MediaTypeImageManifest || m.Size > MaxManifestBytes {
				continue
			}
			mb, err := l.blob(m.Digest, MaxManifestBytes)
			if err != nil {
				return deploylog.Proof{}, err
			}
			var probe struct {
				ArtifactType string `json:"artifactType"`
				Subject      *struct {
					Digest digest.Digest `json:"digest"`
				} `json:"subject"`
			}
			if json.Unmarshal(mb, &probe) != nil || probe.ArtifactType != ArtifactTypeLog || probe.Subject == nil || probe.Subject.Digest != a.desc.Digest {
				continue
			}
			c, err := l.carriedLog(mb, a.desc.Digest, record, v)
			if err != nil {
				if firstErr == nil {
					firstErr = err
				}
				continue
			}
			if best == nil || c.Checkpoint.Size > best.Checkpoint.Size {
				best = c
			}
		}
	}
	if best != nil {
		return best.Proof, nil
	}
	if firstErr != nil {
		return deploylog.Proof{}, firstErr
	}
	return deploylog.Proof{}, refuse.New(CodeLogMissing, "the layout holds no log referrer of %s", record)
}

func (l *Layout) carriedLog(mb []byte, subject, root digest.Digest, v deploylog.CheckpointVerifier) (*CarriedLog, error) {
	pd, ed, err := ParseLogReferrer(mb, subject, root)
	if err != nil {
		return nil, err
	}
	proof, err := l.blob(pd.Digest, pd.Size)
	if err != nil {
		return nil, err
	}
	entries, err := l.blob(ed.Digest, ed.Size)
	if err != nil {
		return nil, err
	}
	return CheckCarriedLog(proof, entries, root, v)
}

// LogSourceName names where the audit's log inclusion came from, in its report.
func (l *Layout) LogSourceName() string { return "layout's log referrer" }
