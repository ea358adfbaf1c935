package evidence

import "github.com/opencontainers/go-digest"

// Attestations (docs/attestations.md). The statement is an in-toto Statement v1 stored as a
// record in canonical JCS form: those exact bytes are the DSSE payload a Sigstore bundle signs, so
// the stored statement and what a third-party verifier (cosign) reads are one byte string.
const (
	// SchemaStatement is carried by the statement's "_type" member, not by a "schema" member:
	// the in-toto format fixes the member name.
	SchemaStatement = "https://in-toto.io/Statement/v1"

	MediaTypeStatement = "application/vnd.qinglong.ql3.attestation-statement.v1+json"

	// PredicateTypeAttestation is the predicate ql3 owns. A change to the predicate's shape or to
	// the meaning of a field is a new version of this URI.
	PredicateTypeAttestation = "https://qinglong.io/ql3/attestation/v1"

	// MediaTypeSigstoreBundle is a raw blob: a Sigstore bundle v0.3 in JSON whose DSSE envelope
	// carries the statement. Its media type is the bundle's own mediaType member.
	MediaTypeSigstoreBundle = "application/vnd.dev.sigstore.bundle.v0.3+json"

	// PayloadTypeInToto is the DSSE payload type of an in-toto statement.
	PayloadTypeInToto = "application/vnd.in-toto+json"
)

// Statement is an in-toto Statement v1 whose predicate is ql3's attestation predicate.
type Statement struct {
	Type          string             `json:"_type"`
	Subject       []StatementSubject `json:"subject"`
	PredicateType string             `json:"predicateType"`
	Predicate     Predicate          `json:"predicate"`
}

// StatementSubject names the attested record: Name is its digest string ("sha256:<hex>") and
// Digest.SHA256 the same hex, the form in-toto and cosign match an artifact against.
type StatementSubject struct {
	Name   string        `json:"name"`
	Digest SubjectDigest `json:"digest"`
}

// SubjectDigest is the in-toto DigestSet, closed to the one algorithm ql3 uses.
type SubjectDigest struct {
	SHA256 string `json:"sha256"`
}

// Record kinds an attestation can be about.
const (
	AttestedReceipt   = "receipt"
	AttestedPreflight = "preflight"
)

// Predicate holds the facts an auditor filters on. Every fact but QL3Version is derived from the
// attested record and the records it names, never taken from the caller, and a verifier derives
// them again and compares. Recovered is present for a receipt only; LiveAudit is reserved for the
// verdict of a live-audit report and absent for a receipt or a preflight.
type Predicate struct {
	Record           string        `json:"record"`    // AttestedReceipt or AttestedPreflight
	MediaType        string        `json:"mediaType"` // the attested record's media type
	Command          digest.Digest `json:"command"`   // digest of the command record the record binds
	Target           digest.Digest `json:"target"`    // the target digest
	ReleaseVersion   string        `json:"releaseVersion"`
	ReleaseSet       digest.Digest `json:"releaseSet"`
	CatalogDigest    digest.Digest `json:"catalogDigest"`
	CatalogCommit    string        `json:"catalogCommit"`
	ClusterUID       string        `json:"clusterUid"`
	Context          string        `json:"context"` // the kubeconfig context the command names
	ManifestDigest   digest.Digest `json:"manifestDigest"`
	LockReportDigest digest.Digest `json:"lockReportDigest"`
	Recovered        *bool         `json:"recovered,omitempty"`
	LiveAudit        string        `json:"liveAudit,omitempty"`
	QL3Version       string        `json:"ql3Version"` // the attesting ql3; a claim, not compared
}
