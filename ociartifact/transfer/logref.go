package transfer

import (
	"context"

	"github.com/opencontainers/go-digest"
	ocispec "github.com/opencontainers/image-spec/specs-go/v1"
	"golang.org/x/mod/sumdb/note"
	"oras.land/oras-go/v2/registry/remote"

	"github.com/qinglong/ql3/deploylog"
	"github.com/qinglong/ql3/deploylog/policy"
	"github.com/qinglong/ql3/evidence"
	"github.com/qinglong/ql3/ociartifact"
	"github.com/qinglong/ql3/refuse"
	"github.com/qinglong/ql3/store"
)

// LogOptions make a pull check the root's inclusion in its deployment log and install the log
// (docs/oci.md, "The log referrer"). The zero value pulls without reading the log referrer.
type LogOptions struct {
	// Verifier trusts the carried checkpoint: the log key (deploylog.KeyVerifier) or a witness
	// policy (policy.Verifier). Nil: the log is not checked and not installed.
	Verifier deploylog.CheckpointVerifier
	// Policy, with a policy verifier, names the witnesses whose cosignatures the pull keeps.
	Policy *policy.Policy
	// Since is a checkpoint the puller holds (the auditor's last): the carried log must extend
	// it (LOG_ROLLBACK, LOG_FORK).
	Since []byte
}

// maxLogReferrers bounds how many log referrers a pull reads (a push after each signature adds
// one).
const maxLogReferrers = 64

// fetchLog reads every log referrer of the evidence manifest man, proves each
// (ociartifact.CheckCarriedLog with o.Verifier), and returns the one of the largest checkpoint.
// None is OCI_LOG_MISSING; any one that fails is refused with its code, as an attestation
// referrer that fails is: a foreign attachment is refused, never skipped. Two that disagree on
// a leaf both hold are LOG_FORK.
func fetchLog(ctx context.Context, repo *remote.Repository, man ocispec.Descriptor, root digest.Digest, o LogOptions) (*ociartifact.CarriedLog, error) {
	var refs []ocispec.Descriptor
	err := repo.Referrers(ctx, man, ociartifact.ArtifactTypeLog, func(ds []ocispec.Descriptor) error {
		refs = append(refs, ds...)
		if len(refs) > maxLogReferrers {
			return refuse.New(ociartifact.CodeLogReferrer, "the artifact has more than %d log referrers", maxLogReferrers)
		}
		return nil
	})
	if err != nil {
		if refuse.CodeOf(err) != "" {
			return nil, err
		}
		return nil, classify(err, "list log referrers of %s", man.Digest)
	}
	if len(refs) == 0 {
		return nil, refuse.New(ociartifact.CodeLogMissing, "the artifact %s of root %s carries no log referrer: its inclusion in the log cannot be checked", man.Digest, root).
			WithHint("push it from a store whose log has a signed checkpoint covering it (ql3 log sign, then ql3 store push)")
	}
	var best *ociartifact.CarriedLog
	for _, r := range refs {
		rc, err := repo.Fetch(ctx, r)
		if err != nil {
			return nil, classify(err, "fetch log referrer %s", r.Digest)
		}
		mb, err := readVerified(rc, r, ociartifact.MaxManifestBytes)
		if err != nil {
			return nil, err
		}
		pd, ed, err := ociartifact.ParseLogReferrer(mb, man.Digest, root)
		if err != nil {
			return nil, err
		}
		var blobs [2][]byte
		for i, d := range []evidence.Descriptor{pd, ed} {
			od := ocispec.Descriptor{MediaType: d.MediaType, Digest: d.Digest, Size: d.Size}
			rc, err := repo.Fetch(ctx, od)
			if err != nil {
				return nil, classify(err, "fetch log referrer layer %s", d.Digest)
			}
			if blobs[i], err = readVerified(rc, od, store.MaxObjectSize); err != nil {
				return nil, err
			}
		}
		c, err := ociartifact.CheckCarriedLog(blobs[0], blobs[1], root, o.Verifier)
		if err != nil {
			return nil, refuse.Wrap(refuse.CodeOf(err), err, "log referrer %s", r.Digest)
		}
		if best != nil {
			small, large := best, c
			if small.Checkpoint.Size > large.Checkpoint.Size {
				small, large = large, small
			}
			if h, err := large.Tree.Root(small.Checkpoint.Size); err != nil || h != small.Checkpoint.Hash {
				return nil, refuse.New(deploylog.CodeFork, "two log referrers of %s disagree on the log's first %d leaves: a fork", root, small.Checkpoint.Size)
			}
			c = large
		}
		best = c
	}
	if o.Since != nil {
		if err := best.Extends(o.Since, o.Verifier); err != nil {
			return nil, err
		}
	}
	return best, nil
}

// logImport maps what a pull publishes to the carried log's leaves: every index entry of the
// root (and of the earlier receipts its closure carries) and every attestation must have its
// leaf in the log up to the checkpoint (LOG_RECORD_NOT_LOGGED: published outside the signed
// log, or after its checkpoint), and the destination's log must accept the carried one
// (store.CheckLogImport), all before anything is written. It returns the import and the leaves
// whose entries the pull writes, in publication order.
func logImport(dst *store.Store, c *ociartifact.CarriedLog, root *ociartifact.Root, atts []attestation) (*store.LogImport, []int64, error) {
	var want []deploylog.Leaf
	for _, e := range root.Index {
		k, ok := deploylog.KindOfIndex(e.Kind)
		if !ok {
			return nil, nil, refuse.New(store.CodeIndexKind, "unknown index kind %q", e.Kind)
		}
		want = append(want, deploylog.Leaf{Kind: k, Key: e.Key, Record: e.Descriptor.Digest})
	}
	for _, a := range atts {
		want = append(want, deploylog.Leaf{Kind: deploylog.KindAttestation, Key: a.subject, Bundle: a.bundleD.Digest, Record: a.stmtD.Digest})
	}
	complete := make([]int64, 0, len(want))
	for _, w := range want {
		i := c.Find(w)
		if i < 0 {
			return nil, nil, refuse.New(store.CodeLogNotLogged, "no leaf of the pulled log up to its checkpoint of size %d publishes the %s entry %s (record %s)", c.Checkpoint.Size, w.Kind, w.Key, w.Record).
				WithHint("sign a checkpoint covering it in the source store (ql3 log sign) and push again")
		}
		complete = append(complete, i)
	}
	cp, err := ociartifact.LogNote(c.Checkpoint, c.Proof.Checkpoint)
	if err != nil {
		return nil, nil, err
	}
	li := &store.LogImport{Origin: c.Checkpoint.Origin, Raws: c.Raws, Leaves: c.Leaves, Tree: c.Tree, Checkpoint: cp}
	if err := dst.CheckLogImport(li); err != nil {
		return nil, nil, err
	}
	return li, complete, nil
}

// installLog writes the carried log and the pulled entries (store.ImportLog), then the
// cosignatures of the policy's witnesses that the carried checkpoint holds.
func installLog(dst *store.Store, li *store.LogImport, complete []int64, c *ociartifact.CarriedLog, o LogOptions) error {
	if err := dst.ImportLog(li, complete); err != nil {
		return err
	}
	if o.Policy == nil {
		return nil
	}
	_, n, err := deploylog.ParseSignedCheckpoint(c.Proof.Checkpoint)
	if err != nil {
		return err
	}
	for _, w := range o.Policy.Witnesses {
		var lines []byte
		for _, s := range append(append([]note.Signature(nil), n.Sigs...), n.UnverifiedSigs...) {
			if s.Name == w.Verifier.Name() && s.Hash == w.Verifier.KeyHash() {
				lines = append(lines, "— "+s.Name+" "+s.Base64+"\n"...)
			}
		}
		if lines == nil {
			continue
		}
		if _, err := dst.PutCosignatures(c.Checkpoint.Size, w.Verifier, lines); err != nil {
			return err
		}
	}
	return nil
}
