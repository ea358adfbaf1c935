package attest

import (
	"bytes"
	"encoding/json"
	"fmt"

	"github.com/opencontainers/go-digest"

	"github.com/qinglong/ql3/evidence"
	"github.com/qinglong/ql3/refuse"
	"github.com/qinglong/ql3/store"
)

// Reason codes of verification. A bundle that no given key signed is only not verified; a bundle
// a given key signed must be true in every respect, or the verification is refused.
const (
	// CodeNotFound: keys were given and the subject carries no attestation.
	CodeNotFound refuse.Code = "ATTEST_NOT_FOUND"
	// CodeSignature: no signature of the bundle verifies against any given key.
	CodeSignature refuse.Code = "ATTEST_SIGNATURE"
	// CodeSignatureHighS: an ECDSA signature verifies only in its high-S (or non-strict DER)
	// form: the malleated twin of a signature, which anyone can make without the key.
	CodeSignatureHighS refuse.Code = "ATTEST_SIGNATURE_HIGH_S"
	// CodePayloadMismatch: the signed DSSE payload is not byte for byte the stored statement the
	// index names for the bundle.
	CodePayloadMismatch refuse.Code = "ATTEST_PAYLOAD_MISMATCH"
	// CodeStatementInvalid: the statement is not an in-toto Statement v1 with exactly one subject
	// and ql3's predicate type, or the index names an object that is not a statement record.
	CodeStatementInvalid refuse.Code = "ATTEST_STATEMENT_INVALID"
	// CodeSubjectMismatch: the signed statement's subject is not the audited record: the
	// attestation is filed under the wrong subject. It counts as not verified, never as a false
	// statement of its key.
	CodeSubjectMismatch refuse.Code = "ATTEST_SUBJECT_MISMATCH"
	// CodePredicateMismatch: a fact of the predicate differs from what the audited record shows.
	CodePredicateMismatch refuse.Code = "ATTEST_PREDICATE_MISMATCH"
)

// Finding is the verdict on one attestation of the subject.
type Finding struct {
	Bundle    digest.Digest `json:"bundle"`
	Statement digest.Digest `json:"statement"`
	KeyHint   string        `json:"keyHint,omitempty"` // the bundle's unauthenticated key hint
	Verified  bool          `json:"verified"`
	Key       digest.Digest `json:"key,omitempty"`  // the given key that verified the signature
	Code      refuse.Code   `json:"code,omitempty"` // why not verified; empty when no key was given
	Message   string        `json:"message,omitempty"`
}

// Result lists every attestation of Subject.
type Result struct {
	Subject      digest.Digest `json:"subject"`
	Attestations []Finding     `json:"attestations"`
	Verified     int           `json:"verified"` // how many verified
}

// Verify checks the attestations of subject against keys. With no key it lists them, none
// verified, and refuses nothing. With keys it refuses unless at least one attestation verifies,
// and refuses whenever a bundle signed by a given key is false: its payload is not the stored
// statement, the statement is malformed, or a fact differs from what the record shows now. A
// signed statement about another record is filed under the wrong subject: not verified, and
// never reported as its key's statement about this one. The refusal carries the first failing attestation's code (by bundle digest),
// or CodeNotFound when there is none; the Result is returned either way.
func Verify(src Source, subject digest.Digest, keys []*PublicKey) (*Result, error) {
	if _, err := evidence.ParseDigest(string(subject)); err != nil {
		return nil, err
	}
	entries, err := src.ListAttestations(subject)
	if err != nil {
		return nil, err
	}
	res := &Result{Subject: subject, Attestations: []Finding{}}
	var facts *evidence.Predicate
	var firstFalse, firstUnverified *refuse.Error
	for _, e := range entries {
		f := Finding{Bundle: e.Bundle, Statement: e.Statement.Digest}
		raw, err := src.Get(e.Bundle)
		if err != nil {
			return res, err
		}
		b, err := parseBundle(raw)
		if err != nil {
			r, _ := refuse.As(err)
			f.Code, f.Message = r.Code, r.Message()
			res.Attestations = append(res.Attestations, f)
			if firstUnverified == nil {
				firstUnverified = bundleErr(e.Bundle, r)
			}
			continue
		}
		f.KeyHint = b.hint
		if len(keys) == 0 {
			res.Attestations = append(res.Attestations, f)
			continue
		}
		key, highS := verifyingKey(b, keys)
		if key == nil {
			f.Code, f.Message = CodeSignature, fmt.Sprintf("no signature verifies against the %d given keys", len(keys))
			if highS {
				f.Code, f.Message = CodeSignatureHighS, "a signature verifies only in its high-S form, the malleated twin anyone can make of a genuine signature: ECDSA signatures are accepted in low-S form only"
			}
			res.Attestations = append(res.Attestations, f)
			if firstUnverified == nil {
				firstUnverified = refuse.New(f.Code, "attestation bundle %s: %s", e.Bundle, f.Message)
			}
			continue
		}
		if aboutAnother(b.payload, subject) {
			// The key signed a statement about another record; the index files it under this
			// one. That is not something the key said about this record (finding: a genuine
			// bundle re-attached to a newer receipt), so it is only not verified here.
			f.Code, f.Message = CodeSubjectMismatch, "the signed statement is about another record: the attestation is filed under the wrong subject, not a statement its key made about this one"
			res.Attestations = append(res.Attestations, f)
			if firstUnverified == nil {
				firstUnverified = refuse.New(CodeSubjectMismatch, "attestation bundle %s: %s", e.Bundle, f.Message)
			}
			continue
		}
		f.Key = key.Digest
		if facts == nil {
			p, err := Derive(src, subject)
			if err != nil {
				return res, err
			}
			facts = &p
		}
		if err := checkSigned(src, subject, e, b.payload, *facts); err != nil {
			r, _ := refuse.As(err)
			f.Code, f.Message = r.Code, r.Message()
			res.Attestations = append(res.Attestations, f)
			if firstFalse == nil {
				firstFalse = bundleErr(e.Bundle, r)
			}
			continue
		}
		f.Verified = true
		res.Verified++
		res.Attestations = append(res.Attestations, f)
	}
	switch {
	case len(keys) == 0:
		return res, nil
	case firstFalse != nil:
		return res, firstFalse
	case res.Verified > 0:
		return res, nil
	case firstUnverified != nil:
		return res, firstUnverified.WithHint("verify with the public key of the key that signed the attestation")
	}
	return res, refuse.New(CodeNotFound, "subject %s carries no attestation", subject).
		WithHint("attest the audited record first")
}

func bundleErr(bundle digest.Digest, r *refuse.Error) *refuse.Error {
	return refuse.Wrap(r.Code, r, "attestation bundle %s", bundle)
}

// verifyingKey returns the first given key that verifies one of the bundle's signatures, and
// whether a signature verified only in high-S form.
func verifyingKey(b *parsedBundle, keys []*PublicKey) (_ *PublicKey, highS bool) {
	for _, k := range keys {
		for _, sig := range b.sigs {
			ok, high := k.verifyPAE(evidence.PayloadTypeInToto, b.payload, sig)
			if ok {
				return k, false
			}
			highS = highS || high
		}
	}
	return nil, highS
}

// checkSigned checks a signed payload against the stored statement, the subject and the facts.
func checkSigned(src Source, subject digest.Digest, e store.AttestationEntry, payload []byte, facts evidence.Predicate) error {
	if e.Statement.MediaType != evidence.MediaTypeStatement {
		return refuse.New(CodeStatementInvalid, "the index names a %s, not a statement record", refuse.Ident(e.Statement.MediaType))
	}
	stored, err := src.GetDescriptor(e.Statement)
	if err != nil {
		return refuse.Wrap(CodeStatementInvalid, err, "stored statement %s", e.Statement.Digest)
	}
	if !bytes.Equal(payload, stored) {
		return refuse.New(CodePayloadMismatch, "the signed payload (%d bytes, %s) is not the stored statement %s",
			len(payload), evidence.FromBytes(payload), e.Statement.Digest)
	}
	var st evidence.Statement
	if err := evidence.DecodeRecord(evidence.MediaTypeStatement, stored, &st); err != nil {
		return refuse.Wrap(CodeStatementInvalid, err, "statement %s", e.Statement.Digest)
	}
	if st.PredicateType != evidence.PredicateTypeAttestation {
		return refuse.New(CodeStatementInvalid, "statement predicate type is %s, want %s", refuse.Ident(st.PredicateType), evidence.PredicateTypeAttestation)
	}
	if len(st.Subject) != 1 {
		return refuse.New(CodeStatementInvalid, "statement has %d subjects, want 1", len(st.Subject))
	}
	if s := st.Subject[0]; s.Name != string(subject) || s.Digest.SHA256 != subject.Encoded() {
		return refuse.New(CodeSubjectMismatch, "statement is about %s (sha256 %s), not %s",
			refuse.Ident(s.Name), refuse.Ident(s.Digest.SHA256), subject)
	}
	if st.Predicate.QL3Version == "" {
		return refuse.New(CodeStatementInvalid, "statement names no ql3 version")
	}
	if d := diffFacts(facts, st.Predicate); d != "" {
		return refuse.New(CodePredicateMismatch, "predicate fact %s", d)
	}
	return nil
}

// aboutAnother reports whether the signed payload reads as a statement whose subjects do not
// include subject. A payload that does not read as a statement at all is left to checkSigned,
// which refuses it with its own code.
func aboutAnother(payload []byte, subject digest.Digest) bool {
	var st evidence.Statement
	if json.Unmarshal(payload, &st) != nil || len(st.Subject) == 0 {
		return false
	}
	for _, s := range st.Subject {
		if s.Name == string(subject) || s.Digest.SHA256 == subject.Encoded() {
			return false
		}
	}
	return true
}
