// Package e2e_test holds the end-to-end tests that cross the ceremony, the attestation, the
// registry and the auditor: each runs against the real cluster of internal/testbed/testcluster and the
// real registry of internal/testbed/ocitest, never a stand-in.
package e2e_test

import (
	"bytes"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"encoding/base64"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/opencontainers/go-digest"

	"github.com/qinglong/ql3/attest"
	"github.com/qinglong/ql3/audit"
	"github.com/qinglong/ql3/ceremony"
	"github.com/qinglong/ql3/evidence"
	"github.com/qinglong/ql3/internal/testbed/ceremonytest"
	"github.com/qinglong/ql3/internal/testbed/ocitest"
	"github.com/qinglong/ql3/internal/testbed/testcluster"
	"github.com/qinglong/ql3/ociartifact"
	"github.com/qinglong/ql3/ociartifact/transfer"
	"github.com/qinglong/ql3/refuse"
	"github.com/qinglong/ql3/store"
)

var cluster *testcluster.Cluster

// TestMain starts the real cluster; without the Kubernetes tools the package is skipped, and
// under CI=true it fails (testcluster.Main).
func TestMain(m *testing.M) { os.Exit(testcluster.Main(m, &cluster)) }

// registry starts the real registry. Without QL3_TOOL_REGISTRY the test is skipped, and under
// CI=true, where the tool must have been built, the start builds it or fails.
func registry(t *testing.T) *ocitest.Registry {
	t.Helper()
	if os.Getenv("QL3_TOOL_REGISTRY") == "" && os.Getenv("CI") != "true" {
		t.Skip("QL3_TOOL_REGISTRY is not set (QL3_TOOL_REGISTRY=$(scripts/build-tool.sh registry))")
	}
	r := ocitest.StartRegistry(t)
	t.Cleanup(r.Stop)
	return r
}

// signingKey writes a fresh ECDSA P-256 PKCS#8 key as a private stable input and returns it
// loaded, with the byte strings of it that must never leave the key file: the PEM, each line of
// its base64 body, the DER, and the private scalar raw, in hex and in base64.
func signingKey(t *testing.T) (*attest.SigningKey, [][]byte) {
	t.Helper()
	k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	der, err := x509.MarshalPKCS8PrivateKey(k)
	if err != nil {
		t.Fatal(err)
	}
	pemBytes := pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: der})
	path := filepath.Join(ceremonytest.PrivateDir(t), "signing-key.pem")
	ceremonytest.WritePrivate(t, path, pemBytes)
	sk, err := attest.LoadSigningKey(path)
	if err != nil {
		t.Fatal(err)
	}
	scalar, err := k.Bytes()
	if err != nil {
		t.Fatal(err)
	}
	secrets := [][]byte{pemBytes, der, scalar, []byte(fmt.Sprintf("%x", scalar)), []byte(base64.StdEncoding.EncodeToString(scalar))}
	for _, line := range strings.Split(string(pemBytes), "\n") {
		if line != "" && !strings.HasPrefix(line, "-----") {
			secrets = append(secrets, []byte(line))
		}
	}
	return sk, secrets
}

// TestCeremonyAttestPushPullAudit is the round trip of docs/oci.md on the real test bed: a
// preflight and an apply of release 3.4.1 on the real cluster, the receipt audited and attested,
// pushed with its attestation to the real registry (TLS with a CA made for the test, basic auth
// from a Docker config file), pulled into a fresh store on another path, where audit --key
// passes. Every output, error message, both stores and everything the registry stored are then
// scanned for the registry password, the signing key and the cluster's credentials.
func TestCeremonyAttestPushPullAudit(t *testing.T) {
	reg := registry(t)
	testcluster.Need(t)
	ctx := context.Background()
	var out bytes.Buffer // everything the commands would print: progress, results, reports, errors
	show := func(v any) {
		b, err := json.Marshal(v)
		if err != nil {
			t.Fatal(err)
		}
		out.Write(append(b, '\n'))
	}
	fail := func(what string, err error) {
		t.Helper()
		fmt.Fprintln(&out, err)
		t.Fatalf("%s: %v", what, err)
	}

	// The ceremony.
	rel := ceremonytest.NewRelease(t, cluster, ceremonytest.ReleaseOptions{Namespace: "ql3-e2e-roundtrip", NamespaceMode: ceremonytest.CreateNamespace})
	pre, err := ceremony.Preflight(ctx, ceremony.Options{CommandFile: rel.WriteCommand("preflight.json", evidence.CommandPreflight, ""), Progress: &out})
	if err != nil {
		fail("preflight", err)
	}
	show(pre)
	rc, err := ceremony.Apply(ctx, ceremony.Options{CommandFile: rel.WriteCommand("apply.json", evidence.CommandApply, string(pre.Preflight)), Progress: &out})
	if err != nil {
		fail("apply", err)
	}
	show(rc)
	receipt := rc.Receipt
	if receipt == "" || rc.Recovered {
		t.Fatalf("apply result %+v", rc)
	}

	// Audit, then attest, as ql3 attest does.
	key, keySecrets := signingKey(t)
	src, err := store.Open(rel.Store)
	if err != nil {
		t.Fatal(err)
	}
	defer src.Close()
	rep, err := audit.Audit(src, receipt)
	if err != nil || !rep.OK {
		t.Fatalf("audit of the receipt: %v %v", err, rep.Err())
	}
	a, err := attest.Attest(src, receipt, key, attest.Options{QL3Version: "e2e"})
	if err != nil {
		fail("attest", err)
	}
	show(a)

	// Push, with the attestations the store indexes attached as ql3 store push attaches them.
	t.Setenv("DOCKER_CONFIG", reg.DockerConfig(t, reg.User, reg.Password))
	opts := transfer.Options{CAFile: reg.CAFile}
	es, err := src.ListAttestations(receipt)
	if err != nil || len(es) != 1 {
		t.Fatalf("attestations of the receipt: %+v %v", es, err)
	}
	att := []ociartifact.Attachment{{Subject: receipt, Blob: a.Bundle}}
	ref := reg.Host + "/ql3/e2e:" + strings.TrimPrefix(string(receipt), "sha256:")[:12]
	manifest, err := transfer.Push(ctx, src, receipt, ref, att, opts)
	if err != nil {
		fail("push", err)
	}
	show(manifest)

	// Wrong credentials are refused with OCI_AUTH, and the message is scanned like the rest.
	t.Setenv("DOCKER_CONFIG", reg.DockerConfig(t, reg.User, "wrong-"+strings.Repeat("x", 8)))
	_, err = transfer.Push(ctx, src, receipt, ref, att, opts)
	if refuse.CodeOf(err) != transfer.CodeAuth {
		t.Fatalf("push with wrong credentials: %v, want %s", err, transfer.CodeAuth)
	}
	fmt.Fprintln(&out, err)
	t.Setenv("DOCKER_CONFIG", reg.DockerConfig(t, reg.User, reg.Password))

	// Pull into a fresh store on another path, by digest.
	pulledRoot := filepath.Join(ceremonytest.PrivateDir(t), "pulled")
	if filepath.Dir(pulledRoot) == filepath.Dir(rel.Store) {
		t.Fatal("the pulled store must be on another path")
	}
	dst, err := store.Init(pulledRoot)
	if err != nil {
		t.Fatal(err)
	}
	defer dst.Close()
	root, got, err := transfer.Pull(ctx, reg.Host+"/ql3/e2e@"+string(manifest.Digest), dst, opts)
	if err != nil {
		fail("pull", err)
	}
	show(root)
	if got.Digest != manifest.Digest || root.Descriptor.Digest != receipt || root.Kind != "receipt" {
		t.Fatalf("pulled manifest %s root %+v", got.Digest, root)
	}

	// audit --key passes on the pulled store, and only with the signer's key.
	ar, err := audit.AuditWith(dst, receipt, audit.Options{Keys: []*attest.PublicKey{key.Public()}})
	if err != nil || !ar.OK || ar.Attestations == nil || ar.Attestations.Verified != 1 {
		t.Fatalf("audit --key of the pulled store: %v %v", err, ar.Err())
	}
	show(ar)
	other, _ := signingKey(t)
	ar, err = audit.AuditWith(dst, receipt, audit.Options{Keys: []*attest.PublicKey{other.Public()}})
	if err != nil || ar.OK || ar.Code != attest.CodeSignature {
		t.Fatalf("audit --key with another key: %v ok=%v code=%s, want %s", err, ar.OK, ar.Code, attest.CodeSignature)
	}
	show(ar)
	vr, err := dst.Verify()
	if err != nil || !vr.OK() || len(vr.Receipts) != 1 || len(vr.Unreferenced) != 0 || vr.Attestations != 1 {
		t.Fatalf("pulled store verify: %v %+v", err, vr)
	}
	// The pulled objects are byte for byte the source's.
	c, err := ociartifact.Collect(src, receipt, nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, d := range c.Closure {
		if b, err := dst.GetDescriptor(d); err != nil || !bytes.Equal(b, c.Blobs[d.Digest]) {
			t.Fatalf("object %s differs in the pulled store: %v", d.Digest, err)
		}
	}

	// The credentials scan.
	secrets := map[string][][]byte{
		"the registry password": reg.Secrets(),
		"the signing key":       keySecrets,
		"a cluster credential":  cluster.Secrets(),
	}
	scan := func(where string, data []byte) {
		for what, ss := range secrets {
			for _, s := range ss {
				if len(s) > 0 && bytes.Contains(data, s) {
					t.Errorf("%s appears in %s", what, where)
				}
			}
		}
	}
	scan("the output, results, reports and error messages", out.Bytes())
	files := 0
	for where, dir := range map[string]string{"the source store": rel.Store, "the pulled store": pulledRoot, "the registry's storage (the pushed artifact)": reg.Storage} {
		err := filepath.Walk(dir, func(p string, fi os.FileInfo, err error) error {
			if err != nil || !fi.Mode().IsRegular() {
				return err
			}
			b, err := os.ReadFile(p)
			if err != nil {
				return err
			}
			files++
			scan(where+" ("+p+")", b)
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	// The artifact was really there to scan: its manifest and every layer are registry blobs.
	for _, d := range append([]digest.Digest{manifest.Digest}, closureDigests(c)...) {
		if _, err := os.Stat(reg.BlobPath(d.Encoded())); err != nil {
			t.Fatalf("the registry holds no blob %s: %v", d, err)
		}
	}
	if files < 2*len(c.Closure) {
		t.Fatalf("scanned %d files, the closure alone has %d objects", files, len(c.Closure))
	}
}

func closureDigests(c *ociartifact.Collected) []digest.Digest {
	out := make([]digest.Digest, 0, len(c.Closure))
	for _, d := range c.Closure {
		out = append(out, d.Digest)
	}
	return out
}
