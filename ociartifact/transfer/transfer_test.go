package transfer_test

import (
	"bytes"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"encoding/json"
	"encoding/pem"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/opencontainers/go-digest"
	ocispec "github.com/opencontainers/image-spec/specs-go/v1"
	"golang.org/x/sys/unix"

	"github.com/qinglong/ql3/attest"
	"github.com/qinglong/ql3/audit"
	"github.com/qinglong/ql3/evidence"
	"github.com/qinglong/ql3/internal/input"
	"github.com/qinglong/ql3/internal/testbed/ocitest"
	"github.com/qinglong/ql3/ociartifact"
	"github.com/qinglong/ql3/ociartifact/transfer"
	"github.com/qinglong/ql3/refuse"
	"github.com/qinglong/ql3/store"
)

var (
	regOnce sync.Once
	reg     *ocitest.Registry
)

func TestMain(m *testing.M) {
	code := m.Run()
	if reg != nil {
		reg.Stop()
	}
	os.Exit(code)
}

// registry starts the shared registry once and points DOCKER_CONFIG at its credentials.
func registry(t testing.TB) *ocitest.Registry {
	t.Helper()
	regOnce.Do(func() { reg = ocitest.StartRegistry(t) })
	if reg == nil {
		t.Fatal("no registry")
	}
	t.Setenv("DOCKER_CONFIG", reg.DockerConfig(t, reg.User, reg.Password))
	return reg
}

func opts(r *ocitest.Registry) transfer.Options { return transfer.Options{CAFile: r.CAFile} }

// errs collects every error a test saw, for the credentials scan.
var (
	errsMu sync.Mutex
	errs   []string
)

func code(err error) refuse.Code {
	if err != nil {
		errsMu.Lock()
		errs = append(errs, err.Error())
		errsMu.Unlock()
	}
	return refuse.CodeOf(err)
}

// signer signs the source's attestation; its public key verifies pulled stores.
var signer = func() *attest.SigningKey {
	k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		panic(err)
	}
	der, err := x509.MarshalPKCS8PrivateKey(k)
	if err != nil {
		panic(err)
	}
	sk, err := attest.ParseSigningKey(pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: der}))
	if err != nil {
		panic(err)
	}
	return sk
}()

// source is the 1,000-resource receipt's store with a real attestation of the receipt (signed
// with signer), attached as push attaches the ones a store indexes.
func source(t testing.TB) (*store.Store, evidence.Descriptor, []ociartifact.Attachment) {
	t.Helper()
	s, rc := ocitest.Receipt1000(t)
	a, err := attest.Attest(s, rc.Digest, signer, attest.Options{QL3Version: "test"})
	if err != nil {
		t.Fatal(err)
	}
	return s, rc, []ociartifact.Attachment{{Subject: rc.Digest, Blob: a.Bundle}}
}

func freshStore(t testing.TB) *store.Store {
	t.Helper()
	s, err := store.Init(filepath.Join(t.TempDir(), "pulled"))
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// files lists the store's files under blobs/ and index/.
func files(t testing.TB, s *store.Store) []string {
	t.Helper()
	var out []string
	for _, sub := range []string{"blobs", "index"} {
		filepath.WalkDir(filepath.Join(s.Root(), sub), func(p string, e fs.DirEntry, err error) error {
			if err == nil && !e.IsDir() {
				rel, _ := filepath.Rel(s.Root(), p)
				out = append(out, rel)
			}
			return err
		})
	}
	slices.Sort(out)
	return out
}

func TestRoundTrip(t *testing.T) {
	r := registry(t)
	src, rc, att := source(t)
	ctx := context.Background()
	ref := r.Host + "/ql3/evidence:roundtrip"
	desc, err := transfer.Push(ctx, src, rc.Digest, ref, att, opts(r))
	if err != nil {
		t.Fatalf("push: %v", err)
	}
	again, err := transfer.Push(ctx, src, rc.Digest, r.Host+"/ql3/evidence", att, opts(r))
	if err != nil || again.Digest != desc.Digest {
		t.Fatalf("second push: %v %s %s", err, again.Digest, desc.Digest)
	}
	for _, pullRef := range []string{ref, r.Host + "/ql3/evidence@" + string(desc.Digest)} {
		dst := freshStore(t)
		root, got, err := transfer.Pull(ctx, pullRef, dst, opts(r))
		if err != nil {
			t.Fatalf("pull %s: %v", pullRef, err)
		}
		if got.Digest != desc.Digest || root.Descriptor != rc {
			t.Fatalf("pulled %s root %+v", got.Digest, root.Descriptor)
		}
		rep, err := dst.Verify()
		if err != nil || !rep.OK() || len(rep.Receipts) != 1 || len(rep.Unreferenced) != 0 || len(rep.Unfinished) != 0 {
			t.Fatalf("pulled store: %v %+v", err, rep)
		}
		// Byte-identical closure, and nothing else in the store.
		c, err := ociartifact.Collect(src, rc.Digest, nil)
		if err != nil {
			t.Fatal(err)
		}
		for _, d := range c.Closure {
			b, err := dst.GetDescriptor(d)
			if err != nil || !bytes.Equal(b, c.Blobs[d.Digest]) {
				t.Fatalf("object %s differs: %v", d.Digest, err)
			}
		}
		if rep.Objects != len(c.Closure)+2 || rep.Attestations != 1 { // the bundle and its statement
			t.Fatalf("pulled store holds %d objects and %d attestations, the closure %d", rep.Objects, rep.Attestations, len(c.Closure))
		}
		// The attestation came along: the pulled store verifies it with the signer's public key.
		ar, err := audit.AuditWith(dst, rc.Digest, audit.Options{Keys: []*attest.PublicKey{signer.Public()}})
		if err != nil || !ar.OK || ar.Attestations == nil || ar.Attestations.Verified != 1 {
			t.Fatalf("audit --key of the pulled store: %v %+v", err, ar.Err())
		}
		checkNoSecret(t, r, "pulled store", dumpDir(t, dst.Root()))
	}
	// The attestation is a referrer of the artifact, through the tag schema: distribution has no
	// referrers API.
	repo, _, err := transfer.Repository(ref, opts(r))
	if err != nil {
		t.Fatal(err)
	}
	var refs []ocispec.Descriptor
	if err := repo.Referrers(ctx, desc, "", func(rs []ocispec.Descriptor) error { refs = append(refs, rs...); return nil }); err != nil {
		t.Fatalf("referrers: %v", err)
	}
	if len(refs) != 1 || refs[0].ArtifactType != ociartifact.MediaTypeBundle {
		t.Fatalf("referrers %+v", refs)
	}
	if _, err := repo.Resolve(ctx, "sha256-"+desc.Digest.Encoded()); err != nil {
		t.Fatalf("no referrers tag sha256-<hex>: %v", err)
	}
}

// pushManifest pushes hand-made manifest bytes (and the extra blobs) to ref's repository.
func pushManifest(t testing.TB, r *ocitest.Registry, ref string, mb []byte, blobs map[digest.Digest][]byte) {
	t.Helper()
	repo, parsed, err := transfer.Repository(ref, opts(r))
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	for d, b := range blobs {
		if err := repo.Push(ctx, ocispec.Descriptor{MediaType: evidence.MediaTypeOctets, Digest: d, Size: int64(len(b))}, bytes.NewReader(b)); err != nil {
			t.Fatal(err)
		}
	}
	md := ocispec.Descriptor{MediaType: ocispec.MediaTypeImageManifest, Digest: evidence.FromBytes(mb), Size: int64(len(mb))}
	if err := repo.PushReference(ctx, md, bytes.NewReader(mb), parsed.Reference); err != nil {
		t.Fatalf("push manifest: %v", err)
	}
}

func edit(t testing.TB, mb []byte, f func(m *ocispec.Manifest)) []byte {
	t.Helper()
	var m ocispec.Manifest
	if err := json.Unmarshal(mb, &m); err != nil {
		t.Fatal(err)
	}
	f(&m)
	b, err := json.Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func TestPullRefusesNonClosure(t *testing.T) {
	r := registry(t)
	src, rc, _ := source(t)
	ctx := context.Background()
	c, err := ociartifact.Collect(src, rc.Digest, nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := transfer.Push(ctx, src, rc.Digest, r.Host+"/ql3/tamper:base", nil, opts(r)); err != nil {
		t.Fatal(err)
	}
	extra := []byte("an object from outside the closure")
	extraD := ocispec.Descriptor{MediaType: evidence.MediaTypeOctets, Digest: evidence.FromBytes(extra), Size: int64(len(extra)),
		Annotations: map[string]string{ocispec.AnnotationTitle: evidence.FromBytes(extra).Encoded()}}
	last := len(c.Closure) - 1
	for _, v := range []struct {
		name  string
		edit  func(m *ocispec.Manifest)
		blobs map[digest.Digest][]byte
		code  refuse.Code
	}{
		{"layer removed", func(m *ocispec.Manifest) { m.Layers = m.Layers[:last] }, nil, ociartifact.CodeNotClosure},
		{"layer added from outside the closure", func(m *ocispec.Manifest) { m.Layers = append(m.Layers, extraD) },
			map[digest.Digest][]byte{extraD.Digest: extra}, ociartifact.CodeNotClosure},
		{"annotation differs from the root", func(m *ocispec.Manifest) { m.Annotations[ociartifact.AnnotationRelease] = "0.0.0" }, nil, ociartifact.CodeManifest},
	} {
		t.Run(v.name, func(t *testing.T) {
			ref := r.Host + "/ql3/tamper:" + strings.ReplaceAll(v.name, " ", "-")
			pushManifest(t, r, ref, edit(t, c.Manifest, v.edit), v.blobs)
			dst := freshStore(t)
			_, _, err := transfer.Pull(ctx, ref, dst, opts(r))
			if got := code(err); got != v.code {
				t.Fatalf("code %q, want %q (%v)", got, v.code, err)
			}
			if fs := files(t, dst); len(fs) != 0 {
				t.Fatalf("a refused pull wrote %v", fs)
			}
		})
	}
	t.Run("layer bytes changed on the registry", func(t *testing.T) {
		victim := c.Closure[last].Digest
		p := r.BlobPath(victim.Encoded())
		orig, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		bad := bytes.Clone(orig)
		bad[len(bad)/2] ^= 1
		if err := os.WriteFile(p, bad, 0o644); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { os.WriteFile(p, orig, 0o644) })
		dst := freshStore(t)
		_, _, err = transfer.Pull(ctx, r.Host+"/ql3/tamper:base", dst, opts(r))
		if got := code(err); got != ociartifact.CodeBlobDigest {
			t.Fatalf("code %q, want %q (%v)", got, ociartifact.CodeBlobDigest, err)
		}
		if fs := files(t, dst); len(fs) != 0 {
			t.Fatalf("a refused pull wrote %v", fs)
		}
	})
	t.Run("object present with other content", func(t *testing.T) {
		dst := freshStore(t)
		victim := c.Closure[last].Digest
		if err := os.WriteFile(filepath.Join(dst.Root(), "blobs/sha256", victim.Encoded()), []byte("other content"), 0o400); err != nil {
			t.Fatal(err)
		}
		_, _, err := transfer.Pull(ctx, r.Host+"/ql3/tamper:base", dst, opts(r))
		if got := code(err); got != store.CodeObjectCorrupt {
			t.Fatalf("code %q, want %q (%v)", got, store.CodeObjectCorrupt, err)
		}
		// The closure's objects are written as one batch: the refusal discards every staged one,
		// so the store holds only what it held, and no staging file.
		if fs := files(t, dst); !slices.Equal(fs, []string{"blobs/sha256/" + victim.Encoded()}) {
			t.Fatalf("a refused pull wrote %v", fs)
		}
		if es, err := os.ReadDir(filepath.Join(dst.Root(), "tmp")); err != nil || len(es) != 0 {
			t.Fatalf("staging files left: %v %v", es, err)
		}
		for _, kind := range []string{evidence.IndexReceipts, evidence.IndexIntents, evidence.IndexPreflights} {
			if es, err := dst.ListIndex(kind); err != nil || len(es) != 0 {
				t.Fatalf("index %s published %v (%v)", kind, es, err)
			}
		}
	})
	t.Run("not an evidence manifest", func(t *testing.T) {
		ref := r.Host + "/ql3/tamper:referrer-only"
		cc, err := ociartifact.Collect(src, rc.Digest, nil)
		if err != nil {
			t.Fatal(err)
		}
		pushManifest(t, r, ref, edit(t, cc.Manifest, func(m *ocispec.Manifest) { m.ArtifactType = "application/vnd.example" }), nil)
		if _, _, err := transfer.Pull(ctx, ref, freshStore(t), opts(r)); code(err) != ociartifact.CodeManifest {
			t.Fatalf("pull: %v", err)
		}
	})
	t.Run("no such tag", func(t *testing.T) {
		if _, _, err := transfer.Pull(ctx, r.Host+"/ql3/tamper:absent", freshStore(t), opts(r)); code(err) != transfer.CodeNotFound {
			t.Fatalf("pull: %v", err)
		}
	})
}

func TestRegistryRefusals(t *testing.T) {
	r := registry(t)
	src, rc, _ := source(t)
	ctx := context.Background()
	ref := r.Host + "/ql3/refusals:base"
	if _, err := transfer.Push(ctx, src, rc.Digest, ref, nil, opts(r)); err != nil {
		t.Fatal(err)
	}
	t.Run("wrong password", func(t *testing.T) {
		t.Setenv("DOCKER_CONFIG", r.DockerConfig(t, r.User, "not-"+r.Password[:8]))
		if _, err := transfer.Push(ctx, src, rc.Digest, r.Host+"/ql3/refusals:x", nil, opts(r)); code(err) != transfer.CodeAuth {
			t.Fatalf("push: %v", err)
		}
		if _, _, err := transfer.Pull(ctx, ref, freshStore(t), opts(r)); code(err) != transfer.CodeAuth {
			t.Fatalf("pull: %v", err)
		}
	})
	t.Run("no credentials", func(t *testing.T) {
		t.Setenv("DOCKER_CONFIG", t.TempDir())
		if _, _, err := transfer.Pull(ctx, ref, freshStore(t), opts(r)); code(err) != transfer.CodeAuth {
			t.Fatalf("pull: %v", err)
		}
	})
	t.Run("unreadable docker config", func(t *testing.T) {
		dir := t.TempDir()
		os.WriteFile(filepath.Join(dir, "config.json"), []byte("{"), 0o600)
		t.Setenv("DOCKER_CONFIG", dir)
		if _, _, err := transfer.Pull(ctx, ref, freshStore(t), opts(r)); code(err) != transfer.CodeCredentials {
			t.Fatalf("pull: %v", err)
		}
	})
	t.Run("untrusted certificate", func(t *testing.T) {
		if _, _, err := transfer.Pull(ctx, ref, freshStore(t), transfer.Options{}); code(err) != transfer.CodeTLS {
			t.Fatalf("pull: %v", err)
		}
		if _, err := transfer.Push(ctx, src, rc.Digest, ref, nil, transfer.Options{}); code(err) != transfer.CodeTLS {
			t.Fatalf("push: %v", err)
		}
	})
	t.Run("CA bundle holds no certificate", func(t *testing.T) {
		o := transfer.Options{CAFile: filepath.Join(t.TempDir(), "empty.pem")}
		os.WriteFile(o.CAFile, []byte("no PEM here\n"), 0o600)
		if _, _, err := transfer.Pull(ctx, ref, freshStore(t), o); code(err) != transfer.CodeTLS {
			t.Fatalf("pull: %v", err)
		}
	})
	for _, host := range []string{"registry.example:5000", "localhost:5000", "10.0.0.1:5000", "[2001:db8::1]:5000"} {
		t.Run("plain HTTP to "+host, func(t *testing.T) {
			o := transfer.Options{PlainHTTP: true}
			if _, _, err := transfer.Pull(ctx, host+"/ql3/x:y", freshStore(t), o); code(err) != transfer.CodePlainHTTP {
				t.Fatalf("pull: %v", err)
			}
			if _, err := transfer.Push(ctx, src, rc.Digest, host+"/ql3/x:y", nil, o); code(err) != transfer.CodePlainHTTP {
				t.Fatalf("push: %v", err)
			}
		})
	}
	t.Run("plain HTTP to the TLS registry", func(t *testing.T) {
		if _, _, err := transfer.Pull(ctx, ref, freshStore(t), transfer.Options{PlainHTTP: true}); code(err) != transfer.CodeRegistry {
			t.Fatalf("pull: %v", err)
		}
	})
	for _, bad := range []string{"no-repository", r.Host + "/UPPER/case:x", r.Host + "/ql3/x@sha256:00"} {
		t.Run("reference "+bad, func(t *testing.T) {
			if _, _, err := transfer.Pull(ctx, bad, freshStore(t), opts(r)); code(err) != transfer.CodeReference {
				t.Fatalf("pull: %v", err)
			}
		})
	}
	t.Run("pull needs a tag or digest", func(t *testing.T) {
		if _, _, err := transfer.Pull(ctx, r.Host+"/ql3/refusals", freshStore(t), opts(r)); code(err) != transfer.CodeReference {
			t.Fatalf("pull: %v", err)
		}
	})
}

// TestZCredentialsScan runs last (name order): the registry password appears in no error any
// test saw, no pushed blob, no file of the registry's storage.
func TestZCredentialsScan(t *testing.T) {
	r := registry(t)
	// Refusals of its own, so that the scan holds when run alone: a wrong password and a right
	// one sent where it is refused.
	t.Setenv("DOCKER_CONFIG", r.DockerConfig(t, r.User, r.Password+"x"))
	_, _, err := transfer.Pull(context.Background(), r.Host+"/ql3/scan:x", freshStore(t), opts(r))
	if code(err) != transfer.CodeAuth {
		t.Fatalf("pull with a wrong password: %v", err)
	}
	t.Setenv("DOCKER_CONFIG", r.DockerConfig(t, r.User, r.Password))
	_, _, err = transfer.Pull(context.Background(), r.Host+"/ql3/scan:x", freshStore(t), transfer.Options{})
	if code(err) != transfer.CodeTLS {
		t.Fatalf("pull over an untrusted certificate: %v", err)
	}
	errsMu.Lock()
	all := strings.Join(errs, "\n")
	errsMu.Unlock()
	if all == "" {
		t.Fatal("no error was collected: the scan would prove nothing")
	}
	checkNoSecret(t, r, "errors", []byte(all))
	checkNoSecret(t, r, "registry storage", dumpDir(t, r.Storage))
}

func checkNoSecret(t testing.TB, r *ocitest.Registry, where string, b []byte) {
	t.Helper()
	if bytes.Contains(b, []byte(r.Password)) {
		t.Fatalf("the registry password appears in %s", where)
	}
}

func dumpDir(t testing.TB, dir string) []byte {
	t.Helper()
	var buf bytes.Buffer
	err := filepath.WalkDir(dir, func(p string, e fs.DirEntry, err error) error {
		if err != nil || e.IsDir() {
			return err
		}
		b, err := os.ReadFile(p)
		if err != nil && !errors.Is(err, fs.ErrNotExist) {
			return err
		}
		buf.Write(b)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

// TestPullRefusesForeignAttachment: the signer's genuine bundle for the preflight report, attached
// to the artifact annotated as an attestation of the receipt (anyone who can push to the
// repository can do this), is refused with OCI_ATTACHMENT and nothing is written; push refuses
// to make such an artifact in the first place.
func TestPullRefusesForeignAttachment(t *testing.T) {
	r := registry(t)
	src, rc, _ := source(t)
	ctx := context.Background()
	rep, err := src.Verify()
	if err != nil || len(rep.Preflights) != 1 {
		t.Fatalf("%v %+v", err, rep)
	}
	pf := rep.Preflights[0].Descriptor.Digest
	a, err := attest.Attest(src, pf, signer, attest.Options{QL3Version: "test"})
	if err != nil {
		t.Fatal(err)
	}
	foreign := []ociartifact.Attachment{{Subject: rc.Digest, Blob: a.Bundle}}
	if _, err := transfer.Push(ctx, src, rc.Digest, r.Host+"/ql3/foreign:push", foreign, opts(r)); code(err) != ociartifact.CodeAttachment {
		t.Fatalf("push of a foreign attachment: %v", err)
	}
	ref := r.Host + "/ql3/foreign:base"
	desc, err := transfer.Push(ctx, src, rc.Digest, ref, nil, opts(r))
	if err != nil {
		t.Fatal(err)
	}
	bundle, err := src.Get(a.Bundle.Digest)
	if err != nil {
		t.Fatal(err)
	}
	mb, md, err := ociartifact.ReferrerManifest(desc, rc.Digest, a.Bundle)
	if err != nil {
		t.Fatal(err)
	}
	repo, _, err := transfer.Repository(ref, opts(r))
	if err != nil {
		t.Fatal(err)
	}
	if err := repo.Push(ctx, ocispec.Descriptor{MediaType: a.Bundle.MediaType, Digest: a.Bundle.Digest, Size: a.Bundle.Size}, bytes.NewReader(bundle)); err != nil {
		t.Fatal(err)
	}
	if err := repo.Push(ctx, md, bytes.NewReader(mb)); err != nil {
		t.Fatal(err)
	}
	dst := freshStore(t)
	if _, _, err := transfer.Pull(ctx, ref, dst, opts(r)); code(err) != ociartifact.CodeAttachment {
		t.Fatalf("pull: got %v, want %s", err, ociartifact.CodeAttachment)
	}
	if fs := files(t, dst); len(fs) != 0 {
		t.Fatalf("a refused pull wrote %v", fs)
	}
}

// TestUnboundedInputsRefused: --ca-file and the Docker configuration go through the bounded
// reader: a FIFO (which would block an open) and an oversized sparse file are refused at once,
// before any connection, with the input codes.
func TestUnboundedInputsRefused(t *testing.T) {
	r := registry(t)
	ctx := context.Background()
	ref := r.Host + "/ql3/inputs:x"
	dir := t.TempDir()
	fifo := filepath.Join(dir, "fifo")
	if err := unix.Mkfifo(fifo, 0o600); err != nil {
		t.Fatal(err)
	}
	sparse := filepath.Join(dir, "sparse")
	f, err := os.Create(sparse)
	if err != nil {
		t.Fatal(err)
	}
	if err := f.Truncate(2 << 30); err != nil {
		t.Fatal(err)
	}
	f.Close()
	for _, v := range []struct {
		name, path string
		code       refuse.Code
	}{
		{"fifo", fifo, input.CodeNotRegular},
		{"2 GiB sparse file", sparse, input.CodeTooLarge},
		{"character device", "/dev/zero", input.CodeNotRegular},
		{"absent", filepath.Join(dir, "absent.pem"), input.CodeNotFound},
	} {
		t.Run("ca-file "+v.name, func(t *testing.T) {
			done := make(chan error, 1)
			go func() {
				_, _, err := transfer.Pull(ctx, ref, freshStore(t), transfer.Options{CAFile: v.path})
				done <- err
			}()
			select {
			case err := <-done:
				if code(err) != v.code {
					t.Fatalf("got %v, want %s", err, v.code)
				}
			case <-time.After(10 * time.Second):
				t.Fatal("the pull blocked on --ca-file")
			}
		})
		if v.name == "absent" {
			continue
		}
		t.Run("docker config "+v.name, func(t *testing.T) {
			cfg := t.TempDir()
			if err := os.Symlink(v.path, filepath.Join(cfg, "config.json")); err != nil {
				t.Fatal(err)
			}
			t.Setenv("DOCKER_CONFIG", cfg)
			_, _, err := transfer.Pull(ctx, ref, freshStore(t), opts(r))
			if code(err) != transfer.CodeCredentials || !strings.Contains(err.Error(), "symlink") {
				t.Fatalf("a symlinked config.json: got %v, want %s", err, transfer.CodeCredentials)
			}
			// The file itself, not a link: a FIFO or a device made in place.
			if v.name != "fifo" {
				return
			}
			os.Remove(filepath.Join(cfg, "config.json"))
			if err := unix.Mkfifo(filepath.Join(cfg, "config.json"), 0o600); err != nil {
				t.Fatal(err)
			}
			done := make(chan error, 1)
			go func() {
				_, _, err := transfer.Pull(ctx, ref, freshStore(t), opts(r))
				done <- err
			}()
			select {
			case err := <-done:
				if code(err) != transfer.CodeCredentials || !errors.Is(err, err) || !strings.Contains(err.Error(), "fifo") {
					t.Fatalf("got %v, want %s", err, transfer.CodeCredentials)
				}
			case <-time.After(10 * time.Second):
				t.Fatal("the pull blocked on config.json")
			}
		})
	}
	t.Run("docker config oversized", func(t *testing.T) {
		cfg := t.TempDir()
		if err := os.Rename(sparse, filepath.Join(cfg, "config.json")); err != nil {
			t.Fatal(err)
		}
		t.Setenv("DOCKER_CONFIG", cfg)
		_, _, err := transfer.Pull(ctx, ref, freshStore(t), opts(r))
		if code(err) != transfer.CodeCredentials || !strings.Contains(err.Error(), "ceiling") {
			t.Fatalf("got %v, want %s", err, transfer.CodeCredentials)
		}
	})
}

// TestCredentialHelper: a helper's output never reaches a message (the helper here prints the
// registry password and fails), and its failure, a missing helper and an answer of another shape
// are OCI_CREDENTIALS; a working helper's credentials are used.
func TestCredentialHelper(t *testing.T) {
	r := registry(t)
	src, rc, _ := source(t)
	ctx := context.Background()
	ref := r.Host + "/ql3/helper:x"
	if _, err := transfer.Push(ctx, src, rc.Digest, ref, nil, opts(r)); err != nil {
		t.Fatal(err)
	}
	bin := t.TempDir()
	t.Setenv("PATH", bin+string(os.PathListSeparator)+os.Getenv("PATH"))
	helper := func(name, script string) {
		if err := os.WriteFile(filepath.Join(bin, "docker-credential-"+name), []byte("#!/bin/sh\n"+script), 0o700); err != nil {
			t.Fatal(err)
		}
	}
	helper("good", fmt.Sprintf("read s; printf '{\"ServerURL\":\"%%s\",\"Username\":\"%s\",\"Secret\":\"%s\"}' \"$s\"\n", r.User, r.Password))
	helper("leaky", fmt.Sprintf("echo 'cannot talk to the keychain, last secret was %s'; echo '%s' >&2; exit 3\n", r.Password, r.Password))
	helper("garbled", fmt.Sprintf("echo 'not json %s'\n", r.Password))
	helper("empty", "echo 'credentials not found in native keychain'; exit 1\n")
	for _, v := range []struct {
		name, cfg string
		code      refuse.Code
	}{
		{"working helper", `{"credHelpers":{"` + r.Host + `":"good"}}`, ""},
		{"credsStore", `{"credsStore":"good"}`, ""},
		{"failing helper printing the password", `{"credHelpers":{"` + r.Host + `":"leaky"}}`, transfer.CodeCredentials},
		{"helper answering another shape", `{"credsStore":"garbled"}`, transfer.CodeCredentials},
		{"missing helper", `{"credsStore":"absent-helper"}`, transfer.CodeCredentials},
		{"helper holding nothing", `{"credsStore":"empty"}`, transfer.CodeAuth},
		{"helper name a path", `{"credsStore":"../../bin/sh"}`, transfer.CodeCredentials},
	} {
		t.Run(v.name, func(t *testing.T) {
			cfg := t.TempDir()
			if err := os.WriteFile(filepath.Join(cfg, "config.json"), []byte(v.cfg), 0o600); err != nil {
				t.Fatal(err)
			}
			t.Setenv("DOCKER_CONFIG", cfg)
			_, _, err := transfer.Pull(ctx, ref, freshStore(t), opts(r))
			if got := code(err); got != v.code {
				t.Fatalf("got %v, want %q", err, v.code)
			}
			if err != nil {
				checkNoSecret(t, r, "the refusal", []byte(err.Error()))
			}
		})
	}
}
