package e2e_test

import (
	"bytes"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"encoding/json"
	"encoding/pem"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/qinglong/ql3/attest"
	"github.com/qinglong/ql3/audit"
	"github.com/qinglong/ql3/ceremony"
	"github.com/qinglong/ql3/evidence"
	"github.com/qinglong/ql3/internal/testbed/ceremonytest"
	"github.com/qinglong/ql3/internal/testbed/testcluster"
	"github.com/qinglong/ql3/store"
)

// TestLiveAuditAttested (finding 15): a live-audit report of the real cluster is audited and
// attested as ql3 attest does; audit --key verifies it; a consistent rewrite of the report (a
// record of another digest, published under live-audits, which the offline audit alone cannot
// tell from the original) carries no attestation (ATTEST_NOT_FOUND), and the original's bundle
// re-filed under it is not verified and names no key (ATTEST_SUBJECT_MISMATCH); cosign verifies
// the bundle for the report's bytes when QL3_COSIGN_TOOLS is set.
func TestLiveAuditAttested(t *testing.T) {
	testcluster.Need(t)
	ctx := context.Background()
	var out bytes.Buffer
	rel := ceremonytest.NewRelease(t, cluster, ceremonytest.ReleaseOptions{Namespace: "ql3-e2e-live-attest", NamespaceMode: ceremonytest.CreateNamespace})
	pre, err := ceremony.Preflight(ctx, ceremony.Options{CommandFile: rel.WriteCommand("preflight.json", evidence.CommandPreflight, ""), Progress: &out})
	if err != nil {
		t.Fatalf("preflight: %v\n%s", err, out.String())
	}
	af := rel.WriteCommand("apply.json", evidence.CommandApply, string(pre.Preflight))
	if _, err := ceremony.Apply(ctx, ceremony.Options{CommandFile: af, Progress: &out}); err != nil {
		t.Fatalf("apply: %v\n%s", err, out.String())
	}
	live, err := ceremony.LiveAudit(ctx, ceremony.Options{CommandFile: af, Progress: &out})
	if err != nil || live.Report == "" {
		t.Fatalf("live audit: %v %+v\n%s", err, live, out.String())
	}
	st, err := store.Open(rel.Store)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()

	k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	der, _ := x509.MarshalPKCS8PrivateKey(k)
	keyFile := filepath.Join(ceremonytest.PrivateDir(t), "signing-key.pem")
	ceremonytest.WritePrivate(t, keyFile, pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: der}))
	key, err := attest.LoadSigningKey(keyFile)
	if err != nil {
		t.Fatal(err)
	}
	pubDER, _ := x509.MarshalPKIXPublicKey(&k.PublicKey)
	pubPEM := pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: pubDER})
	keys := []*attest.PublicKey{key.Public()}

	// ql3 attest: the audit first, then the attestation.
	if rep, err := audit.Audit(st, live.Report); err != nil || !rep.OK || rep.Kind != audit.KindLiveAudit {
		t.Fatalf("audit of the live-audit report: %v %v", err, rep.Err())
	}
	a, err := attest.Attest(st, live.Report, key, attest.Options{QL3Version: "e2e"})
	if err != nil {
		t.Fatalf("attest the live-audit report: %v", err)
	}
	p, err := attest.Derive(st, live.Report)
	if err != nil || p.Record != attest.AttestedLiveAudit || p.LiveAudit != attest.LiveAuditConverged {
		t.Fatalf("facts of the live-audit report: %v %+v", err, p)
	}
	ar, err := audit.AuditWith(st, live.Report, audit.Options{Keys: keys})
	if err != nil || !ar.OK || ar.Attestations == nil || ar.Attestations.Verified != 1 {
		t.Fatalf("audit --key of the live-audit report: %v %v", err, ar.Err())
	}

	// A consistent rewrite: the same report with a finishedAt one second later, stored and
	// published. It stays within the audit's bound on a record's own times (AUDIT_RECORD_TIME), so
	// only the signature can tell the rewrite from the report that was signed.
	orig, err := st.Get(live.Report)
	if err != nil {
		t.Fatal(err)
	}
	var la evidence.LiveAudit
	if err := json.Unmarshal(orig, &la); err != nil {
		t.Fatal(err)
	}
	finished, err := time.Parse(time.RFC3339Nano, la.FinishedAt)
	if err != nil {
		t.Fatalf("finishedAt of the live-audit report: %v", err)
	}
	la.FinishedAt = finished.Add(time.Second).UTC().Format(time.RFC3339Nano)
	rw, _, err := st.PutRecord(evidence.MediaTypeLiveAudit, la)
	if err != nil {
		t.Fatal(err)
	}
	if err := st.PutIndex(evidence.IndexLiveAudits, rw.Digest, rw); err != nil {
		t.Fatal(err)
	}
	ar, err = audit.AuditWith(st, rw.Digest, audit.Options{Keys: keys})
	if err != nil || ar.OK || ar.Code != attest.CodeNotFound {
		t.Fatalf("audit --key of the rewritten report: %v ok=%v code=%s, want %s", err, ar.OK, ar.Code, attest.CodeNotFound)
	}
	if err := st.PutAttestation(rw.Digest, a.Bundle.Digest, a.Statement); err != nil {
		t.Fatal(err)
	}
	ar, err = audit.AuditWith(st, rw.Digest, audit.Options{Keys: keys})
	if err != nil || ar.OK || ar.Code != attest.CodeSubjectMismatch || ar.Attestations == nil ||
		len(ar.Attestations.Attestations) != 1 || ar.Attestations.Attestations[0].Key != "" {
		t.Fatalf("audit --key of the rewritten report with the original's bundle re-filed: %v ok=%v code=%s %+v", err, ar.OK, ar.Code, ar.Attestations)
	}

	// cosign, offline, as docs/attestations.md gives it.
	dir := os.Getenv("QL3_COSIGN_TOOLS")
	if dir == "" {
		if os.Getenv("CI") == "true" {
			t.Fatal("QL3_COSIGN_TOOLS is not set; CI must build cosign")
		}
		t.Skip("QL3_COSIGN_TOOLS is not set: cosign's verification of the live-audit bundle not run")
	}
	work := t.TempDir()
	bundle, err := st.Get(a.Bundle.Digest)
	if err != nil {
		t.Fatal(err)
	}
	for name, b := range map[string][]byte{"attestation.sigstore.json": bundle, "pub.pem": pubPEM, "report.json": orig} {
		if err := os.WriteFile(filepath.Join(work, name), b, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	cosign := func(blob string) (string, error) {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		defer cancel()
		cmd := exec.CommandContext(ctx, filepath.Join(dir, "cosign"), "verify-blob-attestation", "--bundle", filepath.Join(work, "attestation.sigstore.json"),
			"--key", filepath.Join(work, "pub.pem"), "--insecure-ignore-tlog", "--type", evidence.PredicateTypeAttestation, blob)
		cmd.Env = []string{"HOME=" + work, "PATH=/usr/bin:/bin", "TUF_ROOT=" + filepath.Join(work, "tuf")}
		b, err := cmd.CombinedOutput()
		return string(b), err
	}
	if out, err := cosign(filepath.Join(work, "report.json")); err != nil || !strings.Contains(out, "Verified OK") {
		t.Fatalf("cosign refused the live-audit bundle: %v\n%s", err, out)
	}
	rwb, err := st.Get(rw.Digest)
	if err != nil {
		t.Fatal(err)
	}
	os.WriteFile(filepath.Join(work, "rewritten.json"), rwb, 0o600)
	if out, err := cosign(filepath.Join(work, "rewritten.json")); err == nil {
		t.Fatalf("cosign accepted the bundle for the rewritten report\n%s", out)
	}
}
