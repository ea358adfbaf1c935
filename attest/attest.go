// Package attest signs and verifies ql3 attestations (docs/attestations.md): an in-toto Statement
// v1 about one audited record (a receipt, a preflight report or a live-audit report), stored as a
// canonical record, and a Sigstore bundle v0.3 whose DSSE envelope carries those exact statement
// bytes, signed with
// an ECDSA P-256 or Ed25519 key and with no transparency-log entry. The bundle verifies offline
// with cosign verify-blob-attestation --key; Verify is ql3's own verifier.
//
// The package signs and verifies with the standard library only (DSSE's PAE, ECDSA, Ed25519), and
// imports nothing that runs a program or opens a socket: the auditor imports it.
package attest

import (
	"github.com/opencontainers/go-digest"

	"github.com/qinglong/ql3/evidence"
	"github.com/qinglong/ql3/refuse"
	"github.com/qinglong/ql3/store"
)

// CodeSign: the signature could not be made (the random source failed).
const CodeSign refuse.Code = "ATTEST_SIGN"

// Source is the read side of the store the verifier needs; *store.Store is the implementation.
type Source interface {
	Get(d digest.Digest) ([]byte, error)
	GetDescriptor(d evidence.Descriptor) ([]byte, error)
	ListAttestations(subject digest.Digest) ([]store.AttestationEntry, error)
}

// Writer is the store an attestation is written to.
type Writer interface {
	Source
	PutAttested(subject digest.Digest, statement, bundle []byte) (statementD, bundleD evidence.Descriptor, err error)
}

var _ Writer = (*store.Store)(nil)

// Options are the claims of the attesting tool.
type Options struct {
	QL3Version string // the attesting ql3's version; required
}

// Attestation is what Attest stored.
type Attestation struct {
	Subject   digest.Digest       `json:"subject"`
	Statement evidence.Descriptor `json:"statement"`
	Bundle    evidence.Descriptor `json:"bundle"`
	KeyDigest digest.Digest       `json:"keyDigest"` // SHA-256 of the public key's PKIX DER
}

// Attest derives the facts of the record subject, stores the statement about it as a record, signs
// those bytes into a bundle, stores the bundle and indexes it under the subject. The caller must
// have audited subject: Attest states facts, it does not judge them. Attesting again with the same
// key adds another bundle (ECDSA signatures are randomized; Ed25519 ones are not, and then the
// same bundle is found again).
func Attest(w Writer, subject digest.Digest, key *SigningKey, opts Options) (*Attestation, error) {
	sb, bb, err := prepare(w, subject, key, opts)
	if err != nil {
		return nil, err
	}
	// The statement, the bundle and the index entry naming them are written in one call, so that
	// their durable steps share rounds (store.PutAttested): nothing reaches the statement or the
	// bundle before the entry, and the entry is placed only once both are durable.
	sd, bd, err := w.PutAttested(subject, sb, bb)
	if err != nil {
		return nil, err
	}
	return &Attestation{Subject: subject, Statement: sd, Bundle: bd, KeyDigest: key.pub.Digest}, nil
}

// prepare is the CPU side of Attest: the facts, the canonical statement and its bundle.
func prepare(src Source, subject digest.Digest, key *SigningKey, opts Options) (statement, bundle []byte, err error) {
	if opts.QL3Version == "" {
		return nil, nil, refuse.New(CodeStatementInvalid, "no ql3 version to state")
	}
	facts, err := Derive(src, subject)
	if err != nil {
		return nil, nil, err
	}
	facts.QL3Version = opts.QL3Version
	st := evidence.Statement{
		Type:          evidence.SchemaStatement,
		Subject:       []evidence.StatementSubject{{Name: string(subject), Digest: evidence.SubjectDigest{SHA256: subject.Encoded()}}},
		PredicateType: evidence.PredicateTypeAttestation,
		Predicate:     facts,
	}
	if statement, err = evidence.MarshalRecord(st); err != nil {
		return nil, nil, err
	}
	if bundle, err = newBundle(key, statement); err != nil {
		return nil, nil, err
	}
	return statement, bundle, nil
}
