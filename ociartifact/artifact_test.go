package ociartifact_test

import (
	"bytes"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/sha256"
	"crypto/x509"
	"encoding/hex"
	"encoding/json"
	"encoding/pem"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/opencontainers/go-digest"
	ocispec "github.com/opencontainers/image-spec/specs-go/v1"

	"github.com/qinglong/ql3/attest"
	"github.com/qinglong/ql3/audit"
	"github.com/qinglong/ql3/evidence"
	"github.com/qinglong/ql3/internal/testbed/ocitest"
	"github.com/qinglong/ql3/ociartifact"
	"github.com/qinglong/ql3/refuse"
	"github.com/qinglong/ql3/store"
)

// bundle attests root in s (a real attestation: Collect reads the bundle's statement) and returns
// its attachment to root.
func bundle(t testing.TB, s *store.Store, root digest.Digest) ociartifact.Attachment {
	t.Helper()
	k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	der, err := x509.MarshalPKCS8PrivateKey(k)
	if err != nil {
		t.Fatal(err)
	}
	sk, err := attest.ParseSigningKey(pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: der}))
	if err != nil {
		t.Fatal(err)
	}
	a, err := attest.Attest(s, root, sk, attest.Options{QL3Version: "test"})
	if err != nil {
		t.Fatal(err)
	}
	return ociartifact.Attachment{Subject: root, Blob: a.Bundle}
}

func collect(t testing.TB) (*store.Store, evidence.Descriptor, *ociartifact.Collected) {
	t.Helper()
	s, rc := ocitest.Receipt1000(t)
	c, err := ociartifact.Collect(s, rc.Digest, []ociartifact.Attachment{bundle(t, s, rc.Digest)})
	if err != nil {
		t.Fatal(err)
	}
	return s, rc, c
}

// snapshot is every entry under dir: mode, size, mtime and content hash.
func snapshot(t testing.TB, dir string) map[string]string {
	t.Helper()
	out := map[string]string{}
	err := filepath.WalkDir(dir, func(p string, e fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		st, err := os.Lstat(p)
		if err != nil {
			return err
		}
		v := st.Mode().String() + " " + st.ModTime().String()
		if st.Mode().IsRegular() {
			b, err := os.ReadFile(p)
			if err != nil {
				return err
			}
			sum := sha256.Sum256(b)
			v += " " + hex.EncodeToString(sum[:])
		}
		out[p] = v
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func TestCollectManifest(t *testing.T) {
	s, rc, c := collect(t)
	a, err := ociartifact.ParseManifest(c.Manifest)
	if err != nil {
		t.Fatalf("parse own manifest: %v", err)
	}
	if a.Root != rc || a.Kind != ociartifact.KindReceipt || len(a.Layers) != len(c.Closure) {
		t.Fatalf("artifact %+v", a)
	}
	var m ocispec.Manifest
	if err := json.Unmarshal(c.Manifest, &m); err != nil {
		t.Fatal(err)
	}
	if m.ArtifactType != ociartifact.ArtifactType || m.Annotations[ociartifact.AnnotationRelease] == "" ||
		m.Annotations[ociartifact.AnnotationClusterUID] == "" || m.Annotations[ocispec.AnnotationCreated] == "" {
		t.Fatalf("annotations %v", m.Annotations)
	}
	for _, l := range m.Layers {
		if l.Annotations[ocispec.AnnotationTitle] != l.Digest.Encoded() {
			t.Fatalf("layer %s title %q", l.Digest, l.Annotations[ocispec.AnnotationTitle])
		}
	}
	// The closure is the store's: every object reached from the receipt, nothing else.
	rep, err := s.Verify()
	if err != nil {
		t.Fatal(err)
	}
	if got, want := len(c.Closure), rep.Objects-2; got != want { // -2: the bundle and statement we added
		t.Fatalf("closure has %d objects, the store %d", got, want)
	}
	// Deterministic: the same root gives the same manifest digest.
	c2, err := ociartifact.Collect(s, rc.Digest, nil)
	if err != nil || c2.Desc.Digest != c.Desc.Digest {
		t.Fatalf("second collect: %v %s %s", err, c2.Desc.Digest, c.Desc.Digest)
	}
	if len(c.Referrers) != 1 {
		t.Fatalf("referrers %d", len(c.Referrers))
	}
	var rm ocispec.Manifest
	if err := json.Unmarshal(c.Referrers[0].Manifest, &rm); err != nil || rm.Subject == nil || rm.Subject.Digest != c.Desc.Digest ||
		rm.ArtifactType != ociartifact.MediaTypeBundle || rm.Annotations[ociartifact.AnnotationSubject] != string(rc.Digest) {
		t.Fatalf("referrer manifest %s: %v", c.Referrers[0].Manifest, err)
	}
}

func TestCollectRefusals(t *testing.T) {
	s, rc := ocitest.Receipt1000(t)
	c, err := ociartifact.Collect(s, rc.Digest, nil)
	if err != nil {
		t.Fatal(err)
	}
	outside, err := s.PutBlob(evidence.MediaTypeOctets, []byte("not in the closure"))
	if err != nil {
		t.Fatal(err)
	}
	exec := c.Closure[len(c.Closure)-1]
	for _, v := range []struct {
		name   string
		root   digest.Digest
		attach []ociartifact.Attachment
		code   refuse.Code
	}{
		{"root is a blob", outside.Digest, nil, ociartifact.CodeRootKind},
		{"root is not a receipt or preflight", c.Closure[1].Digest, nil, ociartifact.CodeRootKind},
		{"root missing", evidence.FromBytes([]byte("absent")), nil, store.CodeObjectNotFound},
		{"attachment subject outside the closure", rc.Digest, []ociartifact.Attachment{{Subject: outside.Digest, Blob: outside}}, ociartifact.CodeAttachment},
		{"attachment blob missing", rc.Digest, []ociartifact.Attachment{{Subject: exec.Digest,
			Blob: evidence.Descriptor{MediaType: ociartifact.MediaTypeBundle, Digest: evidence.FromBytes([]byte("x")), Size: 1}}}, store.CodeObjectNotFound},
		{"attachment blob without media type", rc.Digest, []ociartifact.Attachment{{Subject: rc.Digest,
			Blob: evidence.Descriptor{Digest: outside.Digest, Size: outside.Size}}}, ociartifact.CodeAttachment},
	} {
		t.Run(v.name, func(t *testing.T) {
			_, err := ociartifact.Collect(s, v.root, v.attach)
			if got := refuse.CodeOf(err); got != v.code {
				t.Fatalf("code %q, want %q (%v)", got, v.code, err)
			}
		})
	}
}

// rewrite edits the manifest of c and returns the new bytes.
func rewrite(t testing.TB, c *ociartifact.Collected, edit func(m *ocispec.Manifest)) []byte {
	t.Helper()
	var m ocispec.Manifest
	if err := json.Unmarshal(c.Manifest, &m); err != nil {
		t.Fatal(err)
	}
	edit(&m)
	b, err := json.Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func TestCheckClosure(t *testing.T) {
	_, _, c := collect(t)
	extra := []byte("an object from outside the closure")
	extraD := ocispec.Descriptor{MediaType: evidence.MediaTypeOctets, Digest: evidence.FromBytes(extra), Size: int64(len(extra)),
		Annotations: map[string]string{ocispec.AnnotationTitle: evidence.FromBytes(extra).Encoded()}}
	blobs := map[digest.Digest][]byte{extraD.Digest: extra}
	for d, b := range c.Blobs {
		blobs[d] = b
	}
	last := len(c.Closure) - 1
	for _, v := range []struct {
		name string
		edit func(m *ocispec.Manifest)
		code refuse.Code
	}{
		{"intact", func(m *ocispec.Manifest) {}, ""},
		{"layer removed", func(m *ocispec.Manifest) { m.Layers = m.Layers[:last] }, ociartifact.CodeNotClosure},
		{"layer added from outside", func(m *ocispec.Manifest) { m.Layers = append(m.Layers, extraD) }, ociartifact.CodeNotClosure},
		{"layers reordered", func(m *ocispec.Manifest) { m.Layers[1], m.Layers[2] = m.Layers[2], m.Layers[1] }, ociartifact.CodeNotClosure},
		{"layer media type changed", func(m *ocispec.Manifest) { m.Layers[last].MediaType = "text/plain" }, ociartifact.CodeNotClosure},
		{"layer size changed", func(m *ocispec.Manifest) { m.Layers[last].Size++ }, ociartifact.CodeNotClosure},
		{"layer repeated", func(m *ocispec.Manifest) { m.Layers = append(m.Layers, m.Layers[last]) }, ociartifact.CodeNotClosure},
		{"root not first", func(m *ocispec.Manifest) { m.Layers[0], m.Layers[1] = m.Layers[1], m.Layers[0] }, ociartifact.CodeManifest},
		{"release annotation changed", func(m *ocispec.Manifest) { m.Annotations[ociartifact.AnnotationRelease] = "9.9.9" }, ociartifact.CodeManifest},
		{"cluster annotation changed", func(m *ocispec.Manifest) { m.Annotations[ociartifact.AnnotationClusterUID] = "x" }, ociartifact.CodeManifest},
		{"extra annotation", func(m *ocispec.Manifest) { m.Annotations["x"] = "y" }, ociartifact.CodeManifest},
		{"other artifact type", func(m *ocispec.Manifest) { m.ArtifactType = "application/vnd.example" }, ociartifact.CodeManifest},
		{"config not empty", func(m *ocispec.Manifest) { m.Config = extraD }, ociartifact.CodeManifest},
		{"subject present", func(m *ocispec.Manifest) { m.Subject = &extraD }, ociartifact.CodeManifest},
		{"title not the digest", func(m *ocispec.Manifest) { m.Layers[1].Annotations = map[string]string{ocispec.AnnotationTitle: "x"} }, ociartifact.CodeManifest},
		{"no layer", func(m *ocispec.Manifest) { m.Layers = nil }, ociartifact.CodeNotClosure},
	} {
		t.Run(v.name, func(t *testing.T) {
			b := rewrite(t, c, v.edit)
			a, err := ociartifact.ParseManifest(b)
			if err == nil {
				_, err = ociartifact.CheckClosure(a, func(d digest.Digest) ([]byte, bool, error) { x, ok := blobs[d]; return x, ok, nil })
			}
			if got := refuse.CodeOf(err); got != v.code {
				t.Fatalf("code %q, want %q (%v)", got, v.code, err)
			}
		})
	}
}

func TestExportLayout(t *testing.T) {
	_, rc, c := collect(t)
	dir := filepath.Join(t.TempDir(), "layout")
	desc, err := ociartifact.Export(c, dir, "")
	if err != nil {
		t.Fatal(err)
	}
	if desc.Digest != c.Desc.Digest {
		t.Fatalf("export returned %s, want %s", desc.Digest, c.Desc.Digest)
	}
	for _, name := range []string{"oci-layout", "index.json", "blobs/sha256/" + c.Desc.Digest.Encoded()} {
		if _, err := os.Stat(filepath.Join(dir, name)); err != nil {
			t.Fatalf("layout lacks %s: %v", name, err)
		}
	}
	if _, err := os.Stat(filepath.Join(dir, "ingest")); err == nil {
		t.Fatal("export left an ingest directory")
	}
	before := snapshot(t, dir)
	l, err := ociartifact.OpenLayout(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	rep, err := l.Verify()
	if err != nil || !rep.OK() || len(rep.Receipts) != 1 || rep.Receipts[0].Descriptor != rc || len(rep.Unreferenced) != 0 {
		t.Fatalf("verify: %v %+v", err, rep)
	}
	ar, err := audit.Audit(l, rc.Digest)
	if err != nil || !ar.OK {
		t.Fatalf("audit of the layout: %v %+v", err, ar)
	}
	// The auditor reads a layout's records through GetRecord, as the store's: the same bytes as
	// GetDescriptor, the record parsed as its media type, nil for a blob, the store's codes.
	b, r, err := l.GetRecord(rc)
	if want, werr := l.GetDescriptor(rc); err != nil || werr != nil || !bytes.Equal(b, want) || r == nil || r.MediaType() != rc.MediaType {
		t.Fatalf("GetRecord of the receipt: %v %v %v", err, werr, r)
	}
	if _, r, err := l.GetRecord(evidence.Descriptor{MediaType: evidence.MediaTypeOctets, Digest: rc.Digest, Size: rc.Size}); err != nil || r != nil {
		t.Fatalf("GetRecord of the receipt's bytes as a blob: %v %v", r, err)
	}
	if _, _, err := l.GetRecord(evidence.Descriptor{MediaType: rc.MediaType, Digest: rc.Digest, Size: rc.Size + 1}); refuse.CodeOf(err) != store.CodeObjectSize {
		t.Fatalf("GetRecord with the wrong size: %v", err)
	}
	if _, _, err := l.GetRecord(evidence.Descriptor{MediaType: evidence.MediaTypePreflight, Digest: rc.Digest, Size: rc.Size}); refuse.CodeOf(err) != evidence.CodeRecordSchemaMismatch {
		t.Fatalf("GetRecord as another record type: %v", err)
	}
	if _, err := l.Get(c.Referrers[0].Blob.Digest); refuse.CodeOf(err) != store.CodeObjectNotFound {
		t.Fatalf("bundle served as evidence: %v", err)
	}
	if _, _, err := l.GetIndex("attestations", rc.Digest); refuse.CodeOf(err) != store.CodeIndexKind {
		t.Fatalf("unknown index kind: %v", err)
	}
	if after := snapshot(t, dir); !mapsEqual(before, after) {
		t.Fatal("opening, verifying and auditing the layout changed it")
	}
	if _, err := ociartifact.Export(c, dir, ""); refuse.CodeOf(err) != ociartifact.CodeLayout {
		t.Fatalf("export into an existing directory: %v", err)
	}
	if _, err := ociartifact.Export(c, "relative/layout", ""); refuse.CodeOf(err) != ociartifact.CodeLayout {
		t.Fatalf("export to a relative path: %v", err)
	}
}

func mapsEqual(a, b map[string]string) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if b[k] != v {
			return false
		}
	}
	return true
}

func TestLayoutTampered(t *testing.T) {
	_, rc, c := collect(t)
	exported := func(t *testing.T) string {
		dir := filepath.Join(t.TempDir(), "layout")
		if _, err := ociartifact.Export(c, dir, ""); err != nil {
			t.Fatal(err)
		}
		return dir
	}
	flip := func(t *testing.T, p string) {
		b, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		b[len(b)/2] ^= 1
		os.Chmod(p, 0o600)
		if err := os.WriteFile(p, b, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	t.Run("object bytes changed", func(t *testing.T) {
		dir := exported(t)
		victim := c.Closure[len(c.Closure)-1].Digest
		flip(t, filepath.Join(dir, "blobs/sha256", victim.Encoded()))
		l, err := ociartifact.OpenLayout(dir)
		if err != nil {
			t.Fatal(err)
		}
		defer l.Close()
		if _, err := l.Get(victim); refuse.CodeOf(err) != store.CodeObjectCorrupt {
			t.Fatalf("get: %v", err)
		}
		rep, err := l.Verify()
		if err != nil || rep.OK() || !slices.ContainsFunc(rep.Corruption, func(f store.Finding) bool { return f.Code == store.CodeObjectCorrupt }) {
			t.Fatalf("verify: %v %+v", err, rep)
		}
		if ar, _ := audit.Audit(l, rc.Digest); ar.OK {
			t.Fatal("audit passed a tampered layout")
		}
	})
	t.Run("root bytes changed", func(t *testing.T) {
		dir := exported(t)
		flip(t, filepath.Join(dir, "blobs/sha256", rc.Digest.Encoded()))
		if _, err := ociartifact.OpenLayout(dir); refuse.CodeOf(err) != store.CodeObjectCorrupt {
			t.Fatalf("open: %v", err)
		}
	})
	t.Run("object removed", func(t *testing.T) {
		dir := exported(t)
		os.Remove(filepath.Join(dir, "blobs/sha256", c.Closure[1].Digest.Encoded()))
		l, err := ociartifact.OpenLayout(dir)
		if err != nil {
			t.Fatal(err)
		}
		defer l.Close()
		rep, err := l.Verify()
		if err != nil || rep.OK() || rep.Corruption[0].Code != ociartifact.CodeNotClosure {
			t.Fatalf("verify: %v %+v", err, rep)
		}
	})
	for _, v := range []struct {
		name string
		file string
		data string
	}{
		{"no index.json", "index.json", ""},
		{"no oci-layout", "oci-layout", ""},
		{"other layout version", "oci-layout", `{"imageLayoutVersion":"2.0.0"}`},
		{"index.json not json", "index.json", `[`},
		{"no evidence manifest", "index.json", `{"schemaVersion":2,"manifests":[]}`},
	} {
		t.Run(v.name, func(t *testing.T) {
			dir := exported(t)
			p := filepath.Join(dir, v.file)
			os.Remove(p)
			if v.data != "" {
				os.WriteFile(p, []byte(v.data), 0o400)
			}
			if _, err := ociartifact.OpenLayout(dir); refuse.CodeOf(err) != ociartifact.CodeLayout {
				t.Fatalf("open: %v", err)
			}
		})
	}
}
