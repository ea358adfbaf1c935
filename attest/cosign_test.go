package attest_test

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/qinglong/ql3/attest"
	"github.com/qinglong/ql3/evidence"
)

// cosignBin returns the cosign built by `scripts/build-tool.sh cosign`, named by
// QL3_COSIGN_TOOLS (the bin directory of the entry the builder prints). Without it the test is skipped, and fails
// under CI=true, where the tool must have been built.
func cosignBin(t *testing.T) string {
	t.Helper()
	dir := os.Getenv("QL3_COSIGN_TOOLS")
	if dir == "" {
		if os.Getenv("CI") == "true" {
			t.Fatal("QL3_COSIGN_TOOLS is not set; CI must build cosign: QL3_COSIGN_TOOLS=$(scripts/build-tool.sh cosign)/bin")
		}
		t.Skip("QL3_COSIGN_TOOLS is not set (QL3_COSIGN_TOOLS=$(scripts/build-tool.sh cosign)/bin)")
	}
	bin := filepath.Join(dir, "cosign")
	if _, err := os.Stat(bin); err != nil {
		t.Fatalf("QL3_COSIGN_TOOLS: %v", err)
	}
	return bin
}

// runCosign runs the exact command docs/attestations.md gives an auditor, offline.
func runCosign(t *testing.T, bin, bundle, pub, blob string) (string, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, "verify-blob-attestation", "--bundle", bundle, "--key", pub,
		"--insecure-ignore-tlog", "--type", evidence.PredicateTypeAttestation, blob)
	home := t.TempDir()
	cmd.Env = []string{"HOME=" + home, "PATH=/usr/bin:/bin", "TUF_ROOT=" + filepath.Join(home, "tuf")}
	out, err := cmd.CombinedOutput()
	return string(out), err
}

// TestCosignVerifies: cosign v3.1.3 accepts ql3's bundle for the attested record with the signing
// key's public key, and refuses it for another record and for another key.
func TestCosignVerifies(t *testing.T) {
	bin := cosignBin(t)
	for _, kind := range []string{"p256", "ed25519"} {
		t.Run(kind, func(t *testing.T) {
			fx := newFixture(t)
			privPEM, pubPEM := keyPair(t, kind)
			k, err := attest.LoadSigningKey(writeKey(t, privPEM))
			if err != nil {
				t.Fatal(err)
			}
			_, otherPub := keyPair(t, kind)
			subject := fx.receipts[0].Digest
			a, err := attest.Attest(fx.st, subject, k, opts)
			if err != nil {
				t.Fatal(err)
			}
			dir := t.TempDir()
			bundle := filepath.Join(dir, "attestation.sigstore.json")
			raw, err := fx.st.Get(a.Bundle.Digest)
			if err != nil {
				t.Fatal(err)
			}
			write(t, bundle, raw)
			pub := filepath.Join(dir, "pub.pem")
			write(t, pub, pubPEM)
			other := filepath.Join(dir, "other.pem")
			write(t, other, otherPub)
			blob := filepath.Join(fx.root, "blobs", "sha256", subject.Encoded())
			anotherBlob := filepath.Join(fx.root, "blobs", "sha256", fx.preflights[0].Digest.Encoded())

			if out, err := runCosign(t, bin, bundle, pub, blob); err != nil || !strings.Contains(out, "Verified OK") {
				t.Fatalf("cosign refused ql3's bundle: %v\n%s", err, out)
			}
			if out, err := runCosign(t, bin, bundle, pub, anotherBlob); err == nil || !strings.Contains(out, "artifact") {
				t.Fatalf("cosign accepted the bundle for another record\n%s", out)
			}
			if out, err := runCosign(t, bin, bundle, other, blob); err == nil || !strings.Contains(out, "signature") {
				t.Fatalf("cosign accepted the bundle with another key\n%s", out)
			}
		})
	}
}

func write(t *testing.T, p string, b []byte) {
	t.Helper()
	if err := os.WriteFile(p, b, 0o600); err != nil {
		t.Fatal(err)
	}
}
