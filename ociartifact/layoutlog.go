package ociartifact

import (
	"cmp"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"slices"
	"strings"

	"github.com/opencontainers/go-digest"
	ocispec "github.com/opencontainers/image-spec/specs-go/v1"

	"github.com/qinglong/ql3/attest"
	"github.com/qinglong/ql3/deploylog"
	"github.com/qinglong/ql3/deploylog/policy"
	"github.com/qinglong/ql3/evidence"
	"github.com/qinglong/ql3/refuse"
	"github.com/qinglong/ql3/store"
)

// VerifyLog is `ql3 log verify --layout`: it checks the deployment log the layout's log
// referrers carry against the layout's own publications, as store.VerifyLog checks a store's
// log, with the same findings and codes, and writes nothing (docs/log.md, "A copy of the log").
// A layout holds no tiles and no checkpoint files: the log is the leaves of its log referrers'
// entry bundles (the largest; every other must agree with it, LOG_FORK), its checkpoints are the
// referrers' proofs' checkpoints, and its publications are what a pull of its evidence manifests
// would publish: each root's index entries (the earlier receipts its closure carries included)
// and each attestation referrer's entry. Every leaf up to the log's size must have its
// publication in the layout (LOG_ENTRY_MISSING, LOG_RECORD_MISSING), unless a later tombstone
// drops it; every publication of the layout must have its leaf (LOG_ENTRY_NO_LEAF). A layout
// whose index.json names no log referrer has no log to verify: OCI_LOG_MISSING.
func (l *Layout) VerifyLog(o store.LogVerifyOptions) (*store.LogReport, error) {
	r := &store.LogReport{SignaturesChecked: o.Verifier != nil, Checkpoints: []store.LogCheckpoint{},
		Errors: []store.LogFinding{}, Hints: []store.LogFinding{}}
	// The log referrers: each proven in shape as a pull proves it (without trusting its
	// signature yet: that is judged below, as a store's checkpoints are).
	type carried struct {
		log     *CarriedLog
		proof   string // the proof blob's path: where the checkpoint is
		entries string // the entry bundle's path: where the leaves are
	}
	var logs []carried
	referrers := 0
	for _, m := range l.others {
		mb, ok := l.manifestOfType(m, ArtifactTypeLog)
		if !ok {
			continue
		}
		referrers++
		rel := blobPath(m.Digest)
		if mb == nil {
			_, err := l.blob(m.Digest, MaxManifestBytes)
			r.AddErr(-1, rel, err)
			continue
		}
		a := l.artifactOf(mb)
		if a == nil {
			r.AddError(CodeLogReferrer, -1, rel, "log referrer %s is not attached to an evidence manifest of the layout", m.Digest)
			continue
		}
		pd, ed, err := ParseLogReferrer(mb, a.desc.Digest, a.root.Descriptor.Digest)
		if err != nil {
			r.AddErr(-1, rel, err)
			continue
		}
		proof, err := l.blob(pd.Digest, pd.Size)
		if err != nil {
			r.AddErr(-1, blobPath(pd.Digest), err)
			continue
		}
		entries, err := l.blob(ed.Digest, ed.Size)
		if err != nil {
			r.AddErr(-1, blobPath(ed.Digest), err)
			continue
		}
		c, err := CheckCarriedLog(proof, entries, a.root.Descriptor.Digest, unsignedVerifier{})
		if err != nil {
			r.AddErr(-1, rel, err) // rel names the referrer
			continue
		}
		logs = append(logs, carried{log: c, proof: blobPath(pd.Digest), entries: blobPath(ed.Digest)})
	}
	if referrers == 0 {
		return nil, refuse.New(CodeLogMissing, "the layout's index.json names no log referrer: it carries no log to verify").
			WithHint("export it from a store whose log has a signed checkpoint covering the root (ql3 log sign, then ql3 store export)")
	}
	if len(logs) == 0 {
		return r, nil
	}
	// The log is the largest carried one; every other must be a prefix of it.
	slices.SortStableFunc(logs, func(a, b carried) int { return cmp.Compare(a.log.Checkpoint.Size, b.log.Checkpoint.Size) })
	best := logs[len(logs)-1]
	tree, leaves := best.log.Tree, best.log.Leaves
	r.Origin, r.Size = best.log.Checkpoint.Origin, best.log.Checkpoint.Size
	h, err := tree.Root(r.Size)
	if err != nil {
		return nil, err
	}
	r.Root = base64.StdEncoding.EncodeToString(h[:])
	quorumMisses := 0
	seen := map[int64]bool{}
	for _, c := range logs {
		cp := c.log.Checkpoint
		if cp.Origin != r.Origin {
			r.AddError(deploylog.CodeOrigin, -1, c.proof, "checkpoint of origin %q, the layout's log is of origin %q", cp.Origin, r.Origin)
			continue
		}
		if h, err := tree.Root(cp.Size); err != nil || h != cp.Hash {
			r.AddError(deploylog.CodeFork, -1, c.proof, "the checkpoint of size %d does not match the first %d leaves of the layout's largest log: two log referrers forked", cp.Size, cp.Size)
			continue
		}
		trusted := false
		if o.Verifier != nil {
			_, err := o.Verifier.VerifyCheckpoint(c.log.Proof.Checkpoint)
			switch {
			case refuse.CodeOf(err) == policy.CodeQuorum:
				quorumMisses++
				r.AddHint(policy.CodeQuorum, -1, c.proof, "signed by the log, not cosigned by the policy's quorum: %v", err)
			case err != nil:
				r.AddErr(-1, c.proof, err)
				continue
			default:
				trusted = true
			}
		}
		if trusted {
			r.SignedSize = max(r.SignedSize, cp.Size)
		}
		if seen[cp.Size] {
			continue
		}
		seen[cp.Size] = true
		r.Checkpoints = append(r.Checkpoints, store.LogCheckpoint{Size: cp.Size, Root: base64.StdEncoding.EncodeToString(cp.Hash[:]), Path: c.proof, Trusted: trusted})
	}
	if quorumMisses > 0 && r.SignedSize == 0 {
		r.AddError(policy.CodeQuorum, -1, best.proof, "none of the layout's %d checkpoints is cosigned by the policy's quorum", quorumMisses)
	}
	if o.Since != nil {
		r.CheckSince(tree, o)
	}
	if o.Verifier == nil {
		r.AddHint(store.CodeLogSignatureSkip, -1, best.proof, "no log key given: checkpoints were checked against the leaves, not their signatures")
	}
	r.UnsignedTail = r.Size - r.SignedSize
	l.verifyEntries(leaves, best.entries, r)
	if r.UnsignedTail > 0 {
		r.AddHint(store.CodeLogUnsignedTail, r.SignedSize, best.entries, "leaves %d to %d are after the last trusted checkpoint: not covered by any signature",
			r.SignedSize, r.Size-1)
	}
	return r, nil
}

func blobPath(d digest.Digest) string { return "blobs/sha256/" + d.Encoded() }

// manifestOfType reads the image manifest m of index.json when its artifactType is want. ok is
// false for another type; a manifest that cannot be read returns (nil, true), so the caller
// reports it: a referrer index.json names but the layout lacks is a finding, not an absence.
func (l *Layout) manifestOfType(m ocispec.Descriptor, want string) ([]byte, bool) {
	if m.MediaType != ocispec.MediaTypeImageManifest {
		return nil, false
	}
	if m.ArtifactType != "" && m.ArtifactType != want {
		return nil, false
	}
	mb, err := l.blob(m.Digest, MaxManifestBytes)
	if err != nil {
		// ql3's export names each referrer's artifactType in index.json; one without it is
		// judged by its bytes, which are not there.
		return nil, m.ArtifactType == want
	}
	var probe struct {
		ArtifactType string `json:"artifactType"`
	}
	if json.Unmarshal(mb, &probe) != nil || probe.ArtifactType != want {
		return nil, false
	}
	return mb, true
}

// artifactOf is the evidence manifest of the layout that referrer manifest mb is attached to.
func (l *Layout) artifactOf(mb []byte) *layoutArtifact {
	var probe struct {
		Subject *struct {
			Digest digest.Digest `json:"digest"`
		} `json:"subject"`
	}
	if json.Unmarshal(mb, &probe) != nil || probe.Subject == nil {
		return nil
	}
	for _, a := range l.artifacts {
		if a.desc.Digest == probe.Subject.Digest {
			return a
		}
	}
	return nil
}

// layoutEntry is one publication of the layout: an index entry a pull of it would write.
type layoutEntry struct {
	kind        deploylog.Kind
	key, bundle digest.Digest
}

// verifyEntries matches the log's leaves with the layout's publications, as store.VerifyLog
// matches them with a store's index entries.
func (l *Layout) verifyEntries(leaves []deploylog.Leaf, leavesRel string, r *store.LogReport) {
	entries := map[layoutEntry]digest.Digest{}
	paths := map[layoutEntry]string{}
	for _, a := range l.artifacts {
		for _, e := range a.root.Index {
			k, ok := deploylog.KindOfIndex(e.Kind)
			if !ok {
				continue
			}
			key := layoutEntry{kind: k, key: e.Key}
			entries[key], paths[key] = e.Descriptor.Digest, blobPath(a.desc.Digest)
		}
	}
	// Attestations: each bundle referrer of an evidence manifest publishes its statement under
	// the attested object, as a pull stores it.
	for _, m := range l.others {
		mb, ok := l.manifestOfType(m, MediaTypeBundle)
		if !ok || mb == nil {
			continue
		}
		a := l.artifactOf(mb)
		var rm ocispec.Manifest
		if a == nil || json.Unmarshal(mb, &rm) != nil || len(rm.Layers) != 1 || rm.Layers[0].MediaType != MediaTypeBundle {
			continue
		}
		subject := digest.Digest(rm.Annotations[AnnotationSubject])
		b, err := l.blob(rm.Layers[0].Digest, store.MaxObjectSize)
		if err != nil {
			r.AddErr(-1, blobPath(rm.Layers[0].Digest), err)
			continue
		}
		stmt, err := attest.StatementOf(b)
		if err == nil && !attest.About(stmt, subject) {
			err = refuse.New(CodeAttachment, "attestation bundle %s is attached to %s, but its statement is about another record", rm.Layers[0].Digest, refuse.Ident(string(subject)))
		}
		if err != nil {
			r.AddErr(-1, blobPath(rm.Layers[0].Digest), err)
			continue
		}
		key := layoutEntry{kind: deploylog.KindAttestation, key: subject, bundle: rm.Layers[0].Digest}
		entries[key], paths[key] = evidence.FromBytes(stmt), blobPath(m.Digest)
	}

	type life struct {
		leaf   int64
		record digest.Digest
		live   bool
	}
	lives := map[layoutEntry]*life{}
	n := int64(len(leaves))
	dropped, dup := make([]bool, n), make([]bool, n)
	at := func(i int64) string { return fmt.Sprintf("%s (leaf %d)", leavesRel, i) }
	for i, leaf := range leaves {
		idx := int64(i)
		k := layoutEntry{kind: leaf.Published(), key: leaf.Key, bundle: leaf.Bundle}
		lf := lives[k]
		if leaf.Kind == deploylog.KindTombstone {
			if lf == nil || !lf.live || lf.record != leaf.Record {
				r.AddError(store.CodeLogTombstoneOrphan, idx, at(idx), "tombstone leaf %d drops the %s entry %s naming %s, which no earlier leaf publishes (or another tombstone dropped already)",
					idx, leaf.Dropped, leaf.Key, leaf.Record)
				continue
			}
			lf.live, dropped[lf.leaf] = false, true
			continue
		}
		if lf != nil && lf.live {
			r.AddError(store.CodeLogLeafDuplicate, idx, at(idx), "leaves %d and %d record the same %s entry %s", lf.leaf, idx, leaf.Kind, leaf.Key)
			dup[i] = true
			continue
		}
		lives[k] = &life{leaf: idx, record: leaf.Record, live: true}
	}
	for i, leaf := range leaves {
		idx := int64(i)
		if leaf.Kind == deploylog.KindTombstone || dup[i] || dropped[i] {
			continue
		}
		k := layoutEntry{kind: leaf.Kind, key: leaf.Key, bundle: leaf.Bundle}
		rec, ok := entries[k]
		switch {
		case !ok:
			r.AddError(store.CodeLogEntryMissing, idx, at(idx), "the %s entry %s that leaf %d records is not in the layout", leaf.Kind, leaf.Key, idx)
		case rec != leaf.Record:
			r.AddError(store.CodeLogEntryMismatch, idx, paths[k], "the %s entry %s names %s, leaf %d records %s", leaf.Kind, leaf.Key, rec, idx, leaf.Record)
		}
		// The record: an object of an evidence manifest's layers, re-hashed; an attestation's
		// statement is inside its bundle, proven above when the entry is there.
		if leaf.Kind == deploylog.KindAttestation {
			if !ok || rec != leaf.Record {
				r.AddError(store.CodeLogRecordMissing, idx, blobPath(leaf.Bundle), "the record %s that leaf %d publishes is missing: no attestation bundle %s of %s in the layout states it", leaf.Record, idx, leaf.Bundle, leaf.Key)
			}
			continue
		}
		if _, err := l.Get(leaf.Record); err != nil {
			r.AddError(store.CodeLogRecordMissing, idx, blobPath(leaf.Record), "the record %s that leaf %d publishes is missing or corrupt: %v", leaf.Record, idx, err)
		}
	}
	var outside []layoutEntry
	for k, rec := range entries {
		lf := lives[k]
		if lf == nil || (!lf.live && rec != lf.record) {
			outside = append(outside, k)
		}
	}
	slices.SortFunc(outside, func(a, b layoutEntry) int {
		return strings.Compare(paths[a]+string(a.kind)+string(a.key)+string(a.bundle), paths[b]+string(b.kind)+string(b.key)+string(b.bundle))
	})
	for _, k := range outside {
		r.AddError(store.CodeLogEntryNoLeaf, -1, paths[k], "the %s entry %s has no leaf: published outside the log", k.kind, k.key)
	}
}
