package attest_test

import (
	"encoding/base64"
	"encoding/json"
	"testing"

	"github.com/opencontainers/go-digest"

	"github.com/qinglong/ql3/attest"
	"github.com/qinglong/ql3/evidence"
	"github.com/qinglong/ql3/refuse"
)

// TestRoundTrip attests every receipt and preflight of the captured store with each supported key
// type and verifies them; a second key's attestation on the same subject is listed beside it.
func TestRoundTrip(t *testing.T) {
	for _, kind := range []string{"p256", "ed25519"} {
		t.Run(kind, func(t *testing.T) {
			fx := newFixture(t)
			k, pub, _ := signer(t, kind)
			for _, subj := range append(append([]evidence.Descriptor{}, fx.receipts...), fx.preflights...) {
				a, err := attest.Attest(fx.st, subj.Digest, k, opts)
				if err != nil {
					t.Fatalf("attest %s: %v", subj.Digest, err)
				}
				if a.Bundle.MediaType != evidence.MediaTypeSigstoreBundle || a.Statement.MediaType != evidence.MediaTypeStatement {
					t.Fatalf("attestation descriptors %+v", a)
				}
				st := statementOf(t, fx, a)
				if st.Subject[0].Name != string(subj.Digest) || st.PredicateType != evidence.PredicateTypeAttestation {
					t.Fatalf("statement %+v", st)
				}
				want := evidence.AttestedPreflight
				if subj.MediaType == evidence.MediaTypeReceipt {
					want = evidence.AttestedReceipt
					if st.Predicate.Recovered == nil {
						t.Fatal("receipt statement without recovered")
					}
				} else if st.Predicate.Recovered != nil {
					t.Fatal("preflight statement with recovered")
				}
				if st.Predicate.Record != want || st.Predicate.ReleaseVersion != "3.4.1" || st.Predicate.ClusterUID == "" || st.Predicate.Context == "" {
					t.Fatalf("predicate %+v", st.Predicate)
				}
				res, err := attest.Verify(fx.st, subj.Digest, []*attest.PublicKey{pub})
				if err != nil || res.Verified != 1 || !res.Attestations[0].Verified || res.Attestations[0].Key != pub.Digest {
					t.Fatalf("verify %s: %v %+v", subj.Digest, err, res)
				}
				// Without a key: listed, not verified, nothing refused.
				res, err = attest.Verify(fx.st, subj.Digest, nil)
				if err != nil || res.Verified != 0 || len(res.Attestations) != 1 || res.Attestations[0].KeyHint != pub.Hint {
					t.Fatalf("verify without keys: %v %+v", err, res)
				}
			}
			// A second signer on one subject: both listed, each verifies with its key.
			k2, pub2, _ := signer(t, "p256")
			subj := fx.receipts[0].Digest
			if _, err := attest.Attest(fx.st, subj, k2, opts); err != nil {
				t.Fatal(err)
			}
			res, err := attest.Verify(fx.st, subj, []*attest.PublicKey{pub2})
			if err != nil || res.Verified != 1 || len(res.Attestations) != 2 {
				t.Fatalf("two signers, second key: %v %+v", err, res)
			}
			res, err = attest.Verify(fx.st, subj, []*attest.PublicKey{pub, pub2})
			if err != nil || res.Verified != 2 {
				t.Fatalf("two signers, both keys: %v %+v", err, res)
			}
			// The store stays valid for its own verifier.
			if rep, err := fx.st.Verify(); err != nil || !rep.OK() {
				t.Fatalf("store verify: %v %+v", err, rep)
			}
		})
	}
}

func statementOf(t testing.TB, fx *fixture, a *attest.Attestation) evidence.Statement {
	t.Helper()
	b, err := fx.st.GetDescriptor(a.Statement)
	if err != nil {
		t.Fatal(err)
	}
	var st evidence.Statement
	if err := evidence.DecodeRecord(evidence.MediaTypeStatement, b, &st); err != nil {
		t.Fatal(err)
	}
	return st
}

// TestNoAttestation: with a key, a subject without attestation is refused; without, listed empty.
func TestNoAttestation(t *testing.T) {
	fx := newFixture(t)
	_, pub, _ := signer(t, "p256")
	_, err := attest.Verify(fx.st, fx.receipts[0].Digest, []*attest.PublicKey{pub})
	if refuse.CodeOf(err) != attest.CodeNotFound {
		t.Fatalf("got %v, want %s", err, attest.CodeNotFound)
	}
	res, err := attest.Verify(fx.st, fx.receipts[0].Digest, nil)
	if err != nil || len(res.Attestations) != 0 {
		t.Fatalf("%v %+v", err, res)
	}
}

// TestSubjectKind: only receipts, preflight reports and live-audit reports are attested
// (TestLiveAuditAttested in internal/testbed/e2e attests a live-audit report of the real cluster).
func TestSubjectKind(t *testing.T) {
	fx := newFixture(t)
	k, _, _ := signer(t, "p256")
	b, err := fx.st.GetDescriptor(fx.receipts[0])
	if err != nil {
		t.Fatal(err)
	}
	var r evidence.Receipt
	if err := evidence.DecodeRecord(evidence.MediaTypeReceipt, b, &r); err != nil {
		t.Fatal(err)
	}
	for name, d := range map[string]digest.Digest{"command record": r.Command.Digest, "manifest blob": r.Manifest.Digest} {
		if _, err := attest.Attest(fx.st, d, k, opts); refuse.CodeOf(err) != attest.CodeSubjectKind {
			t.Errorf("%s: got %v, want %s", name, err, attest.CodeSubjectKind)
		}
	}
}

// signedBundle builds a canonical bundle over payload with k, as a forger holding k would.
func signedBundle(t testing.TB, k *attest.SigningKey, payload []byte) []byte {
	t.Helper()
	sig := attest.SignPAEForTest(k, evidence.PayloadTypeInToto, payload)
	b, err := evidence.MarshalRecord(attest.Bundle{
		MediaType:            evidence.MediaTypeSigstoreBundle,
		VerificationMaterial: attest.VerificationMaterial{PublicKey: attest.PublicKeyIdentifier{Hint: k.Public().Hint}},
		DSSEEnvelope: attest.Envelope{Payload: base64.StdEncoding.EncodeToString(payload), PayloadType: evidence.PayloadTypeInToto,
			Signatures: []attest.Signature{{Sig: base64.StdEncoding.EncodeToString(sig)}}},
	})
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// TestTamper: each way an attestation can lie is refused with its own code.
func TestTamper(t *testing.T) {
	vectors := []struct {
		name string
		// forge stores a forged attestation on subject and returns nothing; k is the trusted key.
		forge func(t *testing.T, fx *fixture, subject digest.Digest, k *attest.SigningKey)
		code  refuse.Code
	}{
		{"signed by another key", func(t *testing.T, fx *fixture, subject digest.Digest, _ *attest.SigningKey) {
			other, _, _ := signer(t, "p256")
			if _, err := attest.Attest(fx.st, subject, other, opts); err != nil {
				t.Fatal(err)
			}
		}, attest.CodeSignature},
		{"statement names another subject", func(t *testing.T, fx *fixture, subject digest.Digest, k *attest.SigningKey) {
			a, err := attest.Attest(fx.st, fx.receipts[0].Digest, k, opts)
			if err != nil {
				t.Fatal(err)
			}
			// Index the other subject's genuine bundle under this subject.
			if err := fx.st.PutAttestation(subject, a.Bundle.Digest, a.Statement); err != nil {
				t.Fatal(err)
			}
		}, attest.CodeSubjectMismatch},
		{"payload differs from the stored statement by one byte", func(t *testing.T, fx *fixture, subject digest.Digest, k *attest.SigningKey) {
			a, err := attest.Attest(fx.st, subject, k, opts)
			if err != nil {
				t.Fatal(err)
			}
			stored, err := fx.st.GetDescriptor(a.Statement)
			if err != nil {
				t.Fatal(err)
			}
			payload := []byte(string(stored))
			payload[len(payload)-3] ^= 1 // inside the ql3 version string
			bd, err := fx.st.PutBlob(evidence.MediaTypeSigstoreBundle, signedBundle(t, k, payload))
			if err != nil {
				t.Fatal(err)
			}
			if err := fx.st.PutAttestation(subject, bd.Digest, a.Statement); err != nil {
				t.Fatal(err)
			}
			removeAttestation(t, fx, subject, a.Bundle.Digest)
		}, attest.CodePayloadMismatch},
		{"a predicate fact disagrees with the record", func(t *testing.T, fx *fixture, subject digest.Digest, k *attest.SigningKey) {
			p, err := attest.Derive(fx.st, subject)
			if err != nil {
				t.Fatal(err)
			}
			p.ReleaseVersion = "3.4.2"
			p.QL3Version = "v0.0.0-test"
			putSigned(t, fx, subject, k, p)
		}, attest.CodePredicateMismatch},
		{"recovered flipped", func(t *testing.T, fx *fixture, subject digest.Digest, k *attest.SigningKey) {
			p, err := attest.Derive(fx.st, subject)
			if err != nil {
				t.Fatal(err)
			}
			flipped := !*p.Recovered
			p.Recovered = &flipped
			p.QL3Version = "v0.0.0-test"
			putSigned(t, fx, subject, k, p)
		}, attest.CodePredicateMismatch},
		{"statement of another predicate type", func(t *testing.T, fx *fixture, subject digest.Digest, k *attest.SigningKey) {
			st := statementFor(t, fx, subject)
			st.PredicateType = "https://example.invalid/other-predicate/v1"
			putStatement(t, fx, subject, k, st)
		}, attest.CodeStatementInvalid},
		{"statement with two subjects", func(t *testing.T, fx *fixture, subject digest.Digest, k *attest.SigningKey) {
			st := statementFor(t, fx, subject)
			st.Subject = append(st.Subject, evidence.StatementSubject{Name: string(fx.preflights[0].Digest),
				Digest: evidence.SubjectDigest{SHA256: fx.preflights[0].Digest.Encoded()}})
			putStatement(t, fx, subject, k, st)
		}, attest.CodeStatementInvalid},
		{"statement names no ql3 version", func(t *testing.T, fx *fixture, subject digest.Digest, k *attest.SigningKey) {
			st := statementFor(t, fx, subject)
			st.Predicate.QL3Version = ""
			putStatement(t, fx, subject, k, st)
		}, attest.CodeStatementInvalid},
		{"bundle not canonical", func(t *testing.T, fx *fixture, subject digest.Digest, k *attest.SigningKey) {
			a, err := attest.Attest(fx.st, subject, k, opts)
			if err != nil {
				t.Fatal(err)
			}
			raw, _ := fx.st.Get(a.Bundle.Digest)
			bd, err := fx.st.PutBlob(evidence.MediaTypeSigstoreBundle, append([]byte(" "), raw...))
			if err != nil {
				t.Fatal(err)
			}
			if err := fx.st.PutAttestation(subject, bd.Digest, a.Statement); err != nil {
				t.Fatal(err)
			}
			removeAttestation(t, fx, subject, a.Bundle.Digest)
		}, attest.CodeBundleInvalid},
	}
	for _, v := range vectors {
		t.Run(v.name, func(t *testing.T) {
			fx := newFixture(t)
			k, pub, _ := signer(t, "p256")
			subject := fx.receipts[0].Digest
			if v.code != attest.CodeSubjectMismatch {
				subject = fx.receipts[len(fx.receipts)-1].Digest
			}
			if v.name == "statement names another subject" {
				subject = fx.preflights[0].Digest
			}
			v.forge(t, fx, subject, k)
			res, err := attest.Verify(fx.st, subject, []*attest.PublicKey{pub})
			if refuse.CodeOf(err) != v.code {
				t.Fatalf("got %v, want %s (%+v)", err, v.code, res)
			}
			if res == nil || res.Verified != 0 {
				t.Fatalf("result %+v", res)
			}
			if v.code == attest.CodeSubjectMismatch {
				// Filed under the wrong subject: the key said nothing about this record, so the
				// finding names no key, and a genuine attestation beside it verifies.
				if f := res.Attestations[0]; f.Key != "" || f.Verified {
					t.Fatalf("a misfiled attestation is attributed to key %s: %+v", f.Key, f)
				}
				if _, err := attest.Attest(fx.st, subject, k, opts); err != nil {
					t.Fatal(err)
				}
				if res, err := attest.Verify(fx.st, subject, []*attest.PublicKey{pub}); err != nil || res.Verified != 1 {
					t.Fatalf("beside a genuine one: %v %+v", err, res)
				}
				return
			}
			// A genuine attestation beside a false one signed by the same key does not save it.
			if v.code != attest.CodeSignature && v.code != attest.CodeBundleInvalid {
				if _, err := attest.Attest(fx.st, subject, k, opts); err != nil {
					t.Fatal(err)
				}
				if _, err := attest.Verify(fx.st, subject, []*attest.PublicKey{pub}); refuse.CodeOf(err) != v.code {
					t.Fatalf("beside a genuine one: got %v, want %s", err, v.code)
				}
			}
		})
	}
}

// putSigned stores a statement with predicate p about subject and a bundle signed by k.
func putSigned(t *testing.T, fx *fixture, subject digest.Digest, k *attest.SigningKey, p evidence.Predicate) {
	t.Helper()
	putStatement(t, fx, subject, k, evidence.Statement{
		Type: evidence.SchemaStatement, PredicateType: evidence.PredicateTypeAttestation, Predicate: p,
		Subject: []evidence.StatementSubject{{Name: string(subject), Digest: evidence.SubjectDigest{SHA256: subject.Encoded()}}},
	})
}

// statementFor is the genuine statement about subject, with a ql3 version, for a forger to edit.
func statementFor(t *testing.T, fx *fixture, subject digest.Digest) evidence.Statement {
	t.Helper()
	p, err := attest.Derive(fx.st, subject)
	if err != nil {
		t.Fatal(err)
	}
	p.QL3Version = "v0.0.0-test"
	return evidence.Statement{Type: evidence.SchemaStatement, PredicateType: evidence.PredicateTypeAttestation, Predicate: p,
		Subject: []evidence.StatementSubject{{Name: string(subject), Digest: evidence.SubjectDigest{SHA256: subject.Encoded()}}}}
}

// putStatement stores st, signs it with k as a forger holding k would, and files the bundle
// under subject.
func putStatement(t *testing.T, fx *fixture, subject digest.Digest, k *attest.SigningKey, st evidence.Statement) {
	t.Helper()
	sd, sb, err := fx.st.PutRecord(evidence.MediaTypeStatement, st)
	if err != nil {
		t.Fatal(err)
	}
	bd, err := fx.st.PutBlob(evidence.MediaTypeSigstoreBundle, signedBundle(t, k, sb))
	if err != nil {
		t.Fatal(err)
	}
	if err := fx.st.PutAttestation(subject, bd.Digest, sd); err != nil {
		t.Fatal(err)
	}
}

func removeAttestation(t *testing.T, fx *fixture, subject, bundle digest.Digest) {
	t.Helper()
	if err := removeFile(fx.root, "index/attestations/"+subject.Encoded()+"/"+bundle.Encoded()); err != nil {
		t.Fatal(err)
	}
}

var _ = json.Marshal

// TestECDSALowS: ECDSA signatures are produced in low-S form, and the high-S twin of a genuine
// signature (made without the key) is not a second attestation: ATTEST_SIGNATURE_HIGH_S.
func TestECDSALowS(t *testing.T) {
	fx := newFixture(t)
	k, pub, _ := signer(t, "p256")
	subject := fx.receipts[len(fx.receipts)-1].Digest
	// Without normalization half of all signatures are high-S: 64 in a row low is no chance.
	for i := range 64 {
		if sig := attest.SignPAEForTest(k, evidence.PayloadTypeInToto, []byte{byte(i)}); !attest.IsLowSForTest(sig) {
			t.Fatalf("signature %d is high-S", i)
		}
	}
	a, err := attest.Attest(fx.st, subject, k, opts)
	if err != nil {
		t.Fatal(err)
	}
	raw, err := fx.st.Get(a.Bundle.Digest)
	if err != nil {
		t.Fatal(err)
	}
	var bu attest.Bundle
	if err := json.Unmarshal(raw, &bu); err != nil {
		t.Fatal(err)
	}
	sig, err := base64.StdEncoding.DecodeString(bu.DSSEEnvelope.Signatures[0].Sig)
	if err != nil {
		t.Fatal(err)
	}
	bu.DSSEEnvelope.Signatures[0].Sig = base64.StdEncoding.EncodeToString(attest.HighSTwinForTest(sig))
	twin, err := evidence.MarshalRecord(bu)
	if err != nil {
		t.Fatal(err)
	}
	td, err := fx.st.PutBlob(evidence.MediaTypeSigstoreBundle, twin)
	if err != nil {
		t.Fatal(err)
	}
	if err := fx.st.PutAttestation(subject, td.Digest, a.Statement); err != nil {
		t.Fatal(err)
	}
	res, err := attest.Verify(fx.st, subject, []*attest.PublicKey{pub})
	if err != nil || res.Verified != 1 || len(res.Attestations) != 2 {
		t.Fatalf("genuine and twin: %v %+v", err, res)
	}
	for _, f := range res.Attestations {
		if f.Bundle == td.Digest && (f.Verified || f.Code != attest.CodeSignatureHighS) {
			t.Fatalf("the twin: %+v", f)
		}
	}
	removeAttestation(t, fx, subject, a.Bundle.Digest)
	if _, err := attest.Verify(fx.st, subject, []*attest.PublicKey{pub}); refuse.CodeOf(err) != attest.CodeSignatureHighS {
		t.Fatalf("the twin alone: got %v, want %s", err, attest.CodeSignatureHighS)
	}
}
