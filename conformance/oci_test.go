package conformance

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"testing"

	"github.com/google/go-containerregistry/pkg/authn"
	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/google/go-containerregistry/pkg/v1/validate"
	"github.com/opencontainers/go-digest"

	"github.com/qinglong/ql3/attest"
	"github.com/qinglong/ql3/internal/testbed/ocitest"
	"github.com/qinglong/ql3/ociartifact"
	"github.com/qinglong/ql3/ociartifact/transfer"
	"github.com/qinglong/ql3/store"
)

// attachedSource is the 1,000-resource store with one attestation of its receipt and its preflight
// report each, collected with their bundles attached as `store export` and `store push` attach the
// bundles a store indexes.
func attachedSource(t *testing.T) (*store.Store, digest.Digest, []ociartifact.Attachment) {
	t.Helper()
	s, subs := subjects(t)
	key := testKeys(t)[0].ql3
	rc := subs[0].d
	a, err := attest.Attest(s, rc, key, attest.Options{QL3Version: "conformance"})
	if err != nil {
		t.Fatal(err)
	}
	return s, rc, []ociartifact.Attachment{{Subject: rc, Blob: a.Bundle}}
}

// checkImage validates one artifact manifest as go-containerregistry reads it, and checks that its
// digest is the one ql3 reported and that every layer's bytes hash to its descriptor.
func checkImage(t *testing.T, where string, img v1.Image, want digest.Digest) {
	t.Helper()
	if err := validate.Image(img); err != nil {
		t.Errorf("oci_test.go: %s: validate.Image: %v", where, err)
	}
	d, err := img.Digest()
	if err != nil || d.String() != string(want) {
		t.Errorf("oci_test.go: %s: manifest digest %v (%v), ql3 said %s", where, d, err, want)
	}
	m, err := img.Manifest()
	if err != nil {
		t.Fatalf("oci_test.go: %s: manifest: %v", where, err)
	}
	if m.SchemaVersion != 2 || m.MediaType != "application/vnd.oci.image.manifest.v1+json" {
		t.Errorf("oci_test.go: %s: schemaVersion %d mediaType %q", where, m.SchemaVersion, m.MediaType)
	}
}

// TestGGCRReadsExportedLayout: the OCI image layout `store export` writes (ociartifact.Collect and
// Export, with the receipt's attestation attached) is read by go-containerregistry's
// pkg/v1/layout, and the index, the artifact manifest and its referrer pass pkg/v1/validate.
func TestGGCRReadsExportedLayout(t *testing.T) {
	s, rc, att := attachedSource(t)
	c, err := ociartifact.Collect(s, rc, att)
	if err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(t.TempDir(), "export")
	desc, err := ociartifact.Export(c, dir, "")
	if err != nil {
		t.Fatal(err)
	}
	p, err := layout.FromPath(dir)
	if err != nil {
		t.Fatalf("oci_test.go: layout.FromPath: %v", err)
	}
	idx, err := p.ImageIndex()
	if err != nil {
		t.Fatalf("oci_test.go: layout index: %v", err)
	}
	if err := validate.Index(idx); err != nil {
		t.Errorf("oci_test.go: exported layout: validate.Index: %v", err)
	}
	im, err := idx.IndexManifest()
	if err != nil {
		t.Fatal(err)
	}
	found := false
	for _, m := range im.Manifests {
		img, err := idx.Image(m.Digest)
		if err != nil {
			t.Fatalf("oci_test.go: layout image %s: %v", m.Digest, err)
		}
		checkImage(t, "exported "+m.Digest.String(), img, digest.Digest(m.Digest.String()))
		if m.Digest.String() == string(desc.Digest) {
			found = true
			if m.Annotations["org.opencontainers.image.ref.name"] != ociartifact.DefaultTag(c.Root) {
				t.Errorf("oci_test.go: exported artifact tagged %q", m.Annotations["org.opencontainers.image.ref.name"])
			}
		}
	}
	if !found {
		t.Errorf("oci_test.go: the layout's index does not list the artifact %s", desc.Digest)
	}
}

// TestGGCRReadsPushedArtifact: what `store push` sends to the real distribution registry
// (transfer.Push, the receipt's attestation attached) is fetched by go-containerregistry's
// pkg/v1/remote and passes pkg/v1/validate, and its referrer (the bundle, found through the
// referrers tag schema) does too.
func TestGGCRReadsPushedArtifact(t *testing.T) {
	if os.Getenv("QL3_TOOL_REGISTRY") == "" && os.Getenv("CI") != "true" {
		t.Skip("QL3_TOOL_REGISTRY is not set: the distribution registry is not built (make test sets it)")
	}
	r := ocitest.StartRegistry(t)
	defer r.Stop()
	t.Setenv("DOCKER_CONFIG", r.DockerConfig(t, r.User, r.Password))
	s, rc, att := attachedSource(t)
	ref := r.Host + "/ql3/conformance:pushed"
	desc, err := transfer.Push(context.Background(), s, rc, ref, att, transfer.Options{CAFile: r.CAFile})
	if err != nil {
		t.Fatalf("push: %v", err)
	}
	pem, err := os.ReadFile(r.CAFile)
	if err != nil {
		t.Fatal(err)
	}
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(pem)
	tr := http.DefaultTransport.(*http.Transport).Clone()
	tr.TLSClientConfig = &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}
	opts := []remote.Option{remote.WithTransport(tr), remote.WithAuth(&authn.Basic{Username: r.User, Password: r.Password})}

	dref, err := name.NewDigest(r.Host + "/ql3/conformance@" + string(desc.Digest))
	if err != nil {
		t.Fatal(err)
	}
	img, err := remote.Image(dref, opts...)
	if err != nil {
		t.Fatalf("oci_test.go: remote.Image: %v", err)
	}
	checkImage(t, "pushed", img, desc.Digest)
	tref, err := name.NewTag(ref)
	if err != nil {
		t.Fatal(err)
	}
	got, err := remote.Get(tref, opts...)
	if err != nil || got.Digest.String() != string(desc.Digest) {
		t.Errorf("oci_test.go: tag %s resolves to %v (%v), ql3 pushed %s", ref, got, err, desc.Digest)
	}
	// The layers go-containerregistry fetches are the store's objects, byte for byte.
	c, err := ociartifact.Collect(s, rc, nil)
	if err != nil {
		t.Fatal(err)
	}
	layers, err := img.Layers()
	if err != nil {
		t.Fatal(err)
	}
	for _, l := range layers {
		h, _ := l.Digest()
		rd, err := l.Compressed()
		if err != nil {
			t.Fatal(err)
		}
		b, err := io.ReadAll(rd)
		rd.Close()
		if err != nil || string(b) != string(c.Blobs[digest.Digest(h.String())]) {
			t.Errorf("oci_test.go: layer %s differs from the store's object (%v)", h, err)
		}
	}
	refs, err := remote.Referrers(dref, opts...)
	if err != nil {
		t.Fatalf("oci_test.go: remote.Referrers: %v", err)
	}
	rm, err := refs.IndexManifest()
	if err != nil {
		t.Fatal(err)
	}
	if len(rm.Manifests) != 1 || rm.Manifests[0].ArtifactType != ociartifact.MediaTypeBundle {
		t.Fatalf("oci_test.go: referrers %+v, want one %s", rm.Manifests, ociartifact.MediaTypeBundle)
	}
	rimg, err := remote.Image(dref.Context().Digest(rm.Manifests[0].Digest.String()), opts...)
	if err != nil {
		t.Fatalf("oci_test.go: referrer: %v", err)
	}
	checkImage(t, "pushed referrer", rimg, digest.Digest(rm.Manifests[0].Digest.String()))
}
