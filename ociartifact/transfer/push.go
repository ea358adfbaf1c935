package transfer

import (
	"bytes"
	"context"

	"github.com/opencontainers/go-digest"
	ocispec "github.com/opencontainers/image-spec/specs-go/v1"
	"golang.org/x/sync/errgroup"
	"oras.land/oras-go/v2/registry/remote"

	"github.com/qinglong/ql3/evidence"
	"github.com/qinglong/ql3/ociartifact"
)

// Push uploads the closure of root, read and re-hashed from src, as one artifact to the
// repository ref names (host[:port]/repository, optionally :tag), then attaches each attachment
// as a referrer manifest whose subject is the artifact. A registry without the referrers API
// gets the referrers tag schema (tag sha256-<hex of the artifact manifest>), which oras-go
// maintains. It returns the artifact manifest's descriptor; pushing the same root again yields
// the same digest.
func Push(parent context.Context, src ociartifact.Source, root digest.Digest, ref string, attachments []ociartifact.Attachment, o Options) (ocispec.Descriptor, error) {
	ctx, cancel := o.bounded(parent)
	defer cancel()
	desc, err := push(ctx, src, root, ref, attachments, o)
	return desc, finish(ctx, parent, err)
}

func push(ctx context.Context, src ociartifact.Source, root digest.Digest, ref string, attachments []ociartifact.Attachment, o Options) (ocispec.Descriptor, error) {
	c, err := ociartifact.Collect(src, root, attachments)
	if err != nil {
		return ocispec.Descriptor{}, err
	}
	return pushCollected(ctx, c, ref, o)
}

// PushCollected is Push of an artifact already collected (ociartifact.Collect), with its log
// referrer when one is attached (Collected.AttachLog): pushed after the attestations.
func PushCollected(parent context.Context, c *ociartifact.Collected, ref string, o Options) (ocispec.Descriptor, error) {
	ctx, cancel := o.bounded(parent)
	defer cancel()
	desc, err := pushCollected(ctx, c, ref, o)
	return desc, finish(ctx, parent, err)
}

func pushCollected(ctx context.Context, c *ociartifact.Collected, ref string, o Options) (ocispec.Descriptor, error) {
	repo, r, err := repository(ref, o)
	if err != nil {
		return ocispec.Descriptor{}, err
	}
	if r.Reference != "" {
		if err := r.ValidateReferenceAsTag(); err != nil {
			return ocispec.Descriptor{}, classifyRef(err, ref)
		}
	}
	blobs := []ocispec.Descriptor{ociartifact.EmptyConfig}
	for _, d := range c.Closure {
		blobs = append(blobs, oci(d))
	}
	for _, rf := range c.Referrers {
		blobs = append(blobs, oci(rf.Blob))
	}
	if c.Log != nil {
		blobs = append(blobs, oci(c.Log.Proof), oci(c.Log.Entries))
	}
	content := func(d ocispec.Descriptor) []byte {
		if d.Digest == ociartifact.EmptyConfig.Digest {
			return ociartifact.EmptyConfig.Data
		}
		return c.Blobs[d.Digest]
	}
	if err := pushBlobs(ctx, repo, blobs, content, o.concurrency()); err != nil {
		return ocispec.Descriptor{}, err
	}
	if r.Reference != "" {
		err = repo.PushReference(ctx, c.Desc, bytes.NewReader(c.Manifest), r.Reference)
	} else {
		err = repo.Push(ctx, c.Desc, bytes.NewReader(c.Manifest))
	}
	if err != nil {
		return ocispec.Descriptor{}, classify(err, "push manifest %s", c.Desc.Digest)
	}
	for _, rf := range c.Referrers {
		if err := repo.Push(ctx, rf.Desc, bytes.NewReader(rf.Manifest)); err != nil {
			return ocispec.Descriptor{}, classify(err, "push referrer %s of %s", rf.Desc.Digest, c.Desc.Digest)
		}
	}
	if c.Log != nil {
		if err := repo.Push(ctx, c.Log.Desc, bytes.NewReader(c.Log.Manifest)); err != nil {
			return ocispec.Descriptor{}, classify(err, "push log referrer %s of %s", c.Log.Desc.Digest, c.Desc.Digest)
		}
	}
	return c.Desc, nil
}

func oci(d evidence.Descriptor) ocispec.Descriptor {
	return ocispec.Descriptor{MediaType: d.MediaType, Digest: d.Digest, Size: d.Size}
}

// pushBlobs uploads every blob the registry does not have yet, n at a time.
func pushBlobs(ctx context.Context, repo *remote.Repository, blobs []ocispec.Descriptor, content func(ocispec.Descriptor) []byte, n int) error {
	g, ctx := errgroup.WithContext(ctx)
	g.SetLimit(n)
	seen := map[digest.Digest]bool{}
	for _, d := range blobs {
		if seen[d.Digest] {
			continue
		}
		seen[d.Digest] = true
		g.Go(func() error {
			ok, err := repo.Exists(ctx, d)
			if err != nil {
				return classify(err, "check blob %s", d.Digest)
			}
			if ok {
				return nil
			}
			if err := repo.Push(ctx, d, bytes.NewReader(content(d))); err != nil {
				return classify(err, "push blob %s", d.Digest)
			}
			return nil
		})
	}
	return g.Wait()
}
