package transfer

import (
	"context"
	"encoding/json"

	"github.com/opencontainers/go-digest"
	ocispec "github.com/opencontainers/image-spec/specs-go/v1"
	"oras.land/oras-go/v2/registry/remote"

	"github.com/qinglong/ql3/attest"
	"github.com/qinglong/ql3/evidence"
	"github.com/qinglong/ql3/ociartifact"
	"github.com/qinglong/ql3/refuse"
	"github.com/qinglong/ql3/store"
)

// attestation is one referrer of the evidence manifest, proven and ready to store.
type attestation struct {
	subject        digest.Digest
	bundle, stmt   []byte
	bundleD, stmtD evidence.Descriptor
}

// maxReferrers bounds how many referrers a pull reads.
const maxReferrers = 64

// fetchAttestations reads the referrers of the evidence manifest man whose artifact type is a
// Sigstore bundle (the referrers API, or the sha256-<hex> tag where the registry lacks it), and
// proves each: a manifest of the shape push writes, attached to man, naming an object of the
// closure, its one layer a well-formed bundle whose payload is a statement record about exactly
// that object. Signatures are
// not verified here: ql3 audit --key does that with the auditor's keys.
func fetchAttestations(ctx context.Context, repo *remote.Repository, man ocispec.Descriptor, closure map[digest.Digest]bool) ([]attestation, error) {
	var refs []ocispec.Descriptor
	err := repo.Referrers(ctx, man, ociartifact.MediaTypeBundle, func(ds []ocispec.Descriptor) error {
		refs = append(refs, ds...)
		if len(refs) > maxReferrers {
			return refuse.New(ociartifact.CodeAttachment, "the artifact has more than %d attestation referrers", maxReferrers)
		}
		return nil
	})
	if err != nil {
		if refuse.CodeOf(err) != "" {
			return nil, err
		}
		return nil, classify(err, "list referrers of %s", man.Digest)
	}
	out := make([]attestation, 0, len(refs))
	for _, r := range refs {
		rc, err := repo.Fetch(ctx, r)
		if err != nil {
			return nil, classify(err, "fetch referrer %s", r.Digest)
		}
		mb, err := readVerified(rc, r, ociartifact.MaxManifestBytes)
		if err != nil {
			return nil, err
		}
		var m ocispec.Manifest
		if err := json.Unmarshal(mb, &m); err != nil {
			return nil, refuse.New(ociartifact.CodeAttachment, "referrer %s is not a manifest", r.Digest)
		}
		subject := digest.Digest(m.Annotations[ociartifact.AnnotationSubject])
		switch {
		case m.Subject == nil || m.Subject.Digest != man.Digest:
			return nil, refuse.New(ociartifact.CodeAttachment, "referrer %s is not attached to the evidence manifest", r.Digest)
		case m.ArtifactType != ociartifact.MediaTypeBundle || len(m.Layers) != 1 || m.Layers[0].MediaType != ociartifact.MediaTypeBundle:
			return nil, refuse.New(ociartifact.CodeAttachment, "referrer %s is not one sigstore bundle", r.Digest)
		case !closure[subject]:
			return nil, refuse.New(ociartifact.CodeAttachment, "referrer %s attests %s, which is not in the closure", r.Digest, refuse.Ident(string(subject)))
		}
		l := m.Layers[0]
		rc, err = repo.Fetch(ctx, l)
		if err != nil {
			return nil, classify(err, "fetch bundle %s", l.Digest)
		}
		b, err := readVerified(rc, l, store.MaxObjectSize)
		if err != nil {
			return nil, err
		}
		stmt, err := attest.StatementOf(b)
		if err != nil {
			return nil, err
		}
		if !attest.About(stmt, subject) {
			// A genuine bundle of another record, re-attached under this subject: stored, it
			// would stand (no-replace) as its signer's statement about a record it never named.
			return nil, refuse.New(ociartifact.CodeAttachment, "referrer %s is attached to %s, but its statement is about another record", r.Digest, subject)
		}
		out = append(out, attestation{subject: subject, bundle: b, stmt: stmt,
			bundleD: evidence.Descriptor{MediaType: ociartifact.MediaTypeBundle, Digest: l.Digest, Size: l.Size},
			stmtD:   evidence.Descriptor{MediaType: evidence.MediaTypeStatement, Digest: evidence.FromBytes(stmt), Size: int64(len(stmt))}})
	}
	return out, nil
}

// importAttestations stores each proven attestation: the bundle, its statement record, and the
// attestation index entry (store.PutAttested), after the closure and its index entries.
func importAttestations(dst *store.Store, as []attestation) error {
	for _, a := range as {
		sd, bd, err := dst.PutAttested(a.subject, a.stmt, a.bundle)
		if err != nil {
			return err
		}
		if sd != a.stmtD || bd != a.bundleD {
			return refuse.New(store.CodeObjectCorrupt, "store named attestation %s, %s as %s, %s", a.stmtD.Digest, a.bundleD.Digest, sd.Digest, bd.Digest)
		}
	}
	return nil
}
