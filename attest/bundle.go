package attest

import (
	"bytes"
	"encoding/base64"

	"github.com/opencontainers/go-digest"

	"github.com/qinglong/ql3/evidence"
	"github.com/qinglong/ql3/refuse"
)

// CodeBundleInvalid: a stored bundle is not a canonical Sigstore bundle v0.3 of ql3's shape: a
// public-key hint, a DSSE envelope of an in-toto payload and 1 to maxSignatures signatures.
const CodeBundleInvalid refuse.Code = "ATTEST_BUNDLE_INVALID"

const (
	// maxBundle bounds a bundle: a statement is under 2 KiB, a signature under 100 bytes.
	maxBundle = 1 << 20
	// maxSignatures bounds the signatures one envelope may carry.
	maxSignatures = 16
)

// Bundle is the Sigstore bundle v0.3 (protobuf-specs dev.sigstore.bundle.v1.Bundle, in its JSON
// mapping) as ql3 writes it: key-based, no transparency-log entry, no timestamp. The shape is
// closed, so a bundle with anything else is refused rather than half-read.
type Bundle struct {
	MediaType            string               `json:"mediaType"`
	VerificationMaterial VerificationMaterial `json:"verificationMaterial"`
	DSSEEnvelope         Envelope             `json:"dsseEnvelope"`
}

// VerificationMaterial names the signing key by hint only; the verifier brings the key.
type VerificationMaterial struct {
	PublicKey PublicKeyIdentifier `json:"publicKey"`
}

// PublicKeyIdentifier is the bundle's publicKey member.
type PublicKeyIdentifier struct {
	Hint string `json:"hint"`
}

// Envelope is a DSSE envelope; Payload and each Sig are standard base64 with padding.
type Envelope struct {
	Payload     string      `json:"payload"`
	PayloadType string      `json:"payloadType"`
	Signatures  []Signature `json:"signatures"`
}

// Signature is one DSSE signature. ql3 writes no keyid: DSSE verifiers (go-securesystemslib's,
// which cosign and sigstore-go use) skip a signature whose keyid is not their own notion of the
// key's id (an SSH SHA256 fingerprint), so a keyid could only make a good signature unverifiable.
// The key hint is in the verification material instead.
type Signature struct {
	Sig   string `json:"sig"`
	KeyID string `json:"keyid,omitempty"`
}

// parsedBundle is a bundle with its base64 decoded.
type parsedBundle struct {
	hint    string
	payload []byte
	sigs    [][]byte
}

// parseBundle checks b is a canonical ql3 bundle and decodes its payload and signatures.
func parseBundle(b []byte) (*parsedBundle, error) {
	if len(b) > maxBundle {
		return nil, refuse.New(CodeBundleInvalid, "bundle of %d bytes exceeds %d", len(b), maxBundle)
	}
	var bu Bundle
	if err := evidence.DecodeStrict(b, &bu); err != nil {
		return nil, refuse.Wrap(CodeBundleInvalid, err, "bundle does not decode")
	}
	if c, err := evidence.Canonicalize(b); err != nil || !bytes.Equal(c, b) {
		return nil, refuse.New(CodeBundleInvalid, "bundle is not in rfc 8785 canonical form")
	}
	switch {
	case bu.MediaType != evidence.MediaTypeSigstoreBundle:
		return nil, refuse.New(CodeBundleInvalid, "bundle media type is %s, want %s", refuse.Ident(bu.MediaType), evidence.MediaTypeSigstoreBundle)
	case !isHint(bu.VerificationMaterial.PublicKey.Hint):
		return nil, refuse.New(CodeBundleInvalid, "bundle key hint is not the hex sha-256 of a key")
	case bu.DSSEEnvelope.PayloadType != evidence.PayloadTypeInToto:
		return nil, refuse.New(CodeBundleInvalid, "bundle payload type is %s, want %s", refuse.Ident(bu.DSSEEnvelope.PayloadType), evidence.PayloadTypeInToto)
	case len(bu.DSSEEnvelope.Signatures) == 0 || len(bu.DSSEEnvelope.Signatures) > maxSignatures:
		return nil, refuse.New(CodeBundleInvalid, "bundle has %d signatures, want 1 to %d", len(bu.DSSEEnvelope.Signatures), maxSignatures)
	}
	payload, err := base64.StdEncoding.Strict().DecodeString(bu.DSSEEnvelope.Payload)
	if err != nil {
		return nil, refuse.New(CodeBundleInvalid, "bundle payload is not standard base64")
	}
	p := &parsedBundle{hint: bu.VerificationMaterial.PublicKey.Hint, payload: payload}
	for i, s := range bu.DSSEEnvelope.Signatures {
		sig, err := base64.StdEncoding.Strict().DecodeString(s.Sig)
		if err != nil || len(sig) == 0 {
			return nil, refuse.New(CodeBundleInvalid, "bundle signature %d is not non-empty standard base64", i)
		}
		if s.KeyID != "" && !isHint(s.KeyID) {
			return nil, refuse.New(CodeBundleInvalid, "bundle signature %d key id is not the hex sha-256 of a key", i)
		}
		p.sigs = append(p.sigs, sig)
	}
	return p, nil
}

// isHint reports whether s is 64 lower-case hex digits, the form newPublicKey writes.
func isHint(s string) bool {
	if len(s) != 64 {
		return false
	}
	for i := 0; i < len(s); i++ {
		if c := s[i]; (c < '0' || c > '9') && (c < 'a' || c > 'f') {
			return false
		}
	}
	return true
}

// newBundle signs statement (the canonical statement record bytes) with k and returns the
// canonical bundle bytes.
func newBundle(k *SigningKey, statement []byte) ([]byte, error) {
	sig, err := k.signPAE(evidence.PayloadTypeInToto, statement)
	if err != nil {
		return nil, refuse.Wrap(CodeSign, err, "sign the statement")
	}
	bu := Bundle{
		MediaType:            evidence.MediaTypeSigstoreBundle,
		VerificationMaterial: VerificationMaterial{PublicKey: PublicKeyIdentifier{Hint: k.pub.Hint}},
		DSSEEnvelope: Envelope{
			Payload:     base64.StdEncoding.EncodeToString(statement),
			PayloadType: evidence.PayloadTypeInToto,
			Signatures:  []Signature{{Sig: base64.StdEncoding.EncodeToString(sig)}},
		},
	}
	return evidence.MarshalRecord(bu)
}

// StatementOf checks bundle's form (canonical Sigstore bundle v0.3, in-toto DSSE payload) and
// returns the payload: the statement record the bundle signs, which a pull stores beside it. It
// verifies no signature: that is Verify's, with the auditor's keys.
func StatementOf(bundle []byte) ([]byte, error) {
	p, err := parseBundle(bundle)
	if err != nil {
		return nil, err
	}
	if err := evidence.DecodeRecord(evidence.MediaTypeStatement, p.payload, new(evidence.Statement)); err != nil {
		return nil, refuse.Wrap(CodeStatementInvalid, err, "the bundle's payload is not a statement record")
	}
	return p.payload, nil
}

// About reports whether the statement record stmt (a bundle's payload, StatementOf) names
// exactly subject: one subject, its name and its sha256 both the subject's. A pull stores an
// attestation under a subject only when its statement is about that subject, and Verify counts
// a signed statement about another record as filed under the wrong subject, not as a false
// statement of its signer.
func About(stmt []byte, subject digest.Digest) bool {
	var st evidence.Statement
	if err := evidence.DecodeRecord(evidence.MediaTypeStatement, stmt, &st); err != nil {
		return false
	}
	return len(st.Subject) == 1 && st.Subject[0].Name == string(subject) && st.Subject[0].Digest.SHA256 == subject.Encoded()
}
