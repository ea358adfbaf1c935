package lock

import (
	"bytes"
	"encoding/json"
	"maps"
	"regexp"
	"slices"
	"strconv"

	"github.com/opencontainers/go-digest"

	"github.com/qinglong/ql3/evidence"
	"github.com/qinglong/ql3/refuse"
)

// report is the closed shape of a v2 lock report; evidence.DecodeStrict refuses unknown, missing
// and null members and validates every digest.Digest.
type report struct {
	Schema       string        `json:"schema"`
	Release      release       `json:"release"`
	Catalog      catalog       `json:"catalog"`
	Roles        []string      `json:"roles"`
	Images       []image       `json:"images"`
	Manifest     manifestFacts `json:"manifest"`
	Annotations  []string      `json:"annotations"`
	ReportDigest digest.Digest `json:"reportDigest"`
}

type release struct {
	Product string `json:"product"`
	Version string `json:"version"`
}

type catalog struct {
	Workflow   string        `json:"workflow"`
	Ref        string        `json:"ref"`
	Commit     string        `json:"commit"`
	Digest     digest.Digest `json:"digest"`
	ReleaseSet digest.Digest `json:"releaseSet"`
}

type image struct {
	Role      string `json:"role"`
	Reference string `json:"reference"`
}

type manifestFacts struct {
	Digest           digest.Digest `json:"digest"`
	Bytes            int64         `json:"bytes"`
	Resources        int64         `json:"resources"`
	ImageAuthorities int64         `json:"imageAuthorities"`
}

// Reason codes of the report's syntax and shape.
const (
	CodeReportJSON         refuse.Code = "LOCK_REPORT_JSON"
	CodeReportDuplicateKey refuse.Code = "LOCK_REPORT_DUPLICATE_KEY"
	CodeReportNull         refuse.Code = "LOCK_REPORT_NULL"
	CodeReportUnknownField refuse.Code = "LOCK_REPORT_UNKNOWN_FIELD"
	CodeReportMissingField refuse.Code = "LOCK_REPORT_MISSING_FIELD"
	CodeReportShape        refuse.Code = "LOCK_REPORT_SHAPE"
	CodeDigestInvalid      refuse.Code = "LOCK_DIGEST_INVALID"
)

// decodeReport parses b under the strict evidence rules into the closed shape and returns it
// with the report's recomputed self-digest.
func decodeReport(b []byte) (*report, digest.Digest, error) {
	canon, err := evidence.Canonicalize(b)
	if err != nil {
		if refuse.CodeOf(err) == evidence.CodeDuplicateKey {
			return nil, "", refuse.Wrap(CodeReportDuplicateKey, err, "lock report")
		}
		return nil, "", refuse.Wrap(CodeReportJSON, err, "lock report is not strict json")
	}
	// DecodeStrict refuses null too, but under its general shape code; null gets its own.
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.UseNumber()
	var generic any
	if err := dec.Decode(&generic); err != nil {
		return nil, "", refuse.Wrap(CodeReportJSON, err, "lock report")
	}
	if p, found := findNull(generic, "$"); found {
		return nil, "", refuse.New(CodeReportNull, "lock report has null at %s", p)
	}
	// Decode the bytes as written: canonicalization rounds numbers to doubles, which would hide
	// an integer beyond ±2^53.
	rep := &report{}
	if err := evidence.DecodeStrict(b, rep); err != nil {
		code := CodeReportShape
		switch refuse.CodeOf(err) {
		case evidence.CodeRecordUnknownField:
			code = CodeReportUnknownField
		case evidence.CodeRecordMissingField:
			code = CodeReportMissingField
		case evidence.CodeDigestInvalid:
			code = CodeDigestInvalid
		}
		return nil, "", refuse.Wrap(code, err, "lock report")
	}
	self, err := withoutMember(canon, "reportDigest", string(rep.ReportDigest))
	if err != nil {
		return nil, "", err
	}
	return rep, evidence.FromBytes(self), nil
}

// withoutMember returns the canonical (JCS) object canon without its top-level string member
// name. JCS orders members and writes no whitespace, so removing the member and one comma beside
// it is the JCS form of the object without it. The value is a validated digest, which JCS writes
// without escapes, and the closed shape has no other member of that name, so the member's text
// occurs exactly once.
func withoutMember(canon []byte, name, value string) ([]byte, error) {
	member := []byte(`"` + name + `":"` + value + `"`)
	i := bytes.Index(canon, member)
	if i < 0 || bytes.Count(canon, member) != 1 {
		return nil, refuse.New(CodeReportJSON, "lock report: %s does not occur exactly once in its canonical form", name)
	}
	j := i + len(member)
	switch {
	case i > 0 && canon[i-1] == ',':
		i--
	case j < len(canon) && canon[j] == ',':
		j++
	}
	return append(bytes.Clone(canon[:i]), canon[j:]...), nil
}

func findNull(v any, p string) (string, bool) {
	switch x := v.(type) {
	case nil:
		return p, true
	case map[string]any:
		for _, k := range slices.Sorted(maps.Keys(x)) {
			if q, ok := findNull(x[k], p+"."+k); ok {
				return q, true
			}
		}
	case []any:
		for i, e := range x {
			if q, ok := findNull(e, p+"["+strconv.Itoa(i)+"]"); ok {
				return q, true
			}
		}
	}
	return "", false
}

// jcsDigest is the sha256 of the RFC 8785 form of v's JSON encoding.
func jcsDigest(v any) (digest.Digest, error) {
	b, err := json.Marshal(v)
	if err != nil {
		return "", refuse.Wrap(CodeReportJSON, err, "lock report does not re-encode")
	}
	c, err := evidence.Canonicalize(b)
	if err != nil {
		return "", refuse.Wrap(CodeReportJSON, err, "lock report does not canonicalize")
	}
	return evidence.FromBytes(c), nil
}

// Reason codes of the report's content.
const (
	CodeSelfDigest         refuse.Code = "LOCK_SELF_DIGEST_MISMATCH"
	CodeSchema             refuse.Code = "LOCK_SCHEMA"
	CodeReleaseProduct     refuse.Code = "LOCK_RELEASE_PRODUCT"
	CodeReleaseVersion     refuse.Code = "LOCK_RELEASE_VERSION"
	CodeCatalogWorkflow    refuse.Code = "LOCK_CATALOG_WORKFLOW"
	CodeCatalogRef         refuse.Code = "LOCK_CATALOG_REF"
	CodeCatalogCommit      refuse.Code = "LOCK_CATALOG_COMMIT"
	CodeRoles              refuse.Code = "LOCK_ROLES"
	CodeReleaseSetClosure  refuse.Code = "LOCK_RELEASE_SET_CLOSURE"
	CodeImageReference     refuse.Code = "LOCK_IMAGE_REFERENCE"
	CodeImageDuplicate     refuse.Code = "LOCK_IMAGE_DUPLICATE"
	CodeReleaseSetMismatch refuse.Code = "LOCK_RELEASE_SET_MISMATCH"
	CodeAnnotationKeys     refuse.Code = "LOCK_ANNOTATION_KEYS"
	CodeAuthorityCount     refuse.Code = "LOCK_AUTHORITY_COUNT_MISMATCH"
)

var (
	versionRe   = regexp.MustCompile(`^3\.(?:0|[1-9][0-9]*)\.(?:0|[1-9][0-9]*)$`)
	commitRe    = regexp.MustCompile(`^[0-9a-f]{40}$`)
	referenceRe = regexp.MustCompile(`^ghcr\.io/qinglong/[a-z0-9]+(?:[._-][a-z0-9]+)*@sha256:[0-9a-f]{64}$`)
)

// check applies every rule that needs the report alone; self is its recomputed self-digest.
func (r *report) check(self digest.Digest) error {
	if self != r.ReportDigest {
		return refuse.New(CodeSelfDigest, "lock report names itself %s but its content hashes to %s", r.ReportDigest, self).
			WithHint("reportDigest is the sha256 of the rfc 8785 form of the report without its reportDigest member")
	}
	if r.Schema != Schema {
		return refuse.New(CodeSchema, "lock report schema is not %s", Schema)
	}
	if r.Release.Product != Product {
		return refuse.New(CodeReleaseProduct, "release product is not %s", Product)
	}
	if !versionRe.MatchString(r.Release.Version) {
		return refuse.New(CodeReleaseVersion, "release version is not 3.<minor>.<patch> without pre-release or build metadata")
	}
	if r.Catalog.Workflow != CatalogWorkflow {
		return refuse.New(CodeCatalogWorkflow, "catalog workflow is not %s", CatalogWorkflow)
	}
	if want := "refs/tags/v" + r.Release.Version; r.Catalog.Ref != want {
		return refuse.New(CodeCatalogRef, "catalog ref is not the release tag %s", want)
	}
	if !commitRe.MatchString(r.Catalog.Commit) {
		return refuse.New(CodeCatalogCommit, "catalog commit is not 40 lower-case hex digits")
	}
	if !slices.Equal(r.Roles, requiredRoles) {
		return refuse.New(CodeRoles, "roles are not exactly %q in that order", requiredRoles)
	}
	if len(r.Images) != len(r.Roles) {
		return refuse.New(CodeReleaseSetClosure, "%d images for %d roles: every role needs exactly one image", len(r.Images), len(r.Roles))
	}
	seen := map[string]int{}
	for i, im := range r.Images {
		if im.Role != r.Roles[i] {
			return refuse.New(CodeReleaseSetClosure, "images[%d] is not for role %s (one image per role, in role order)", i, r.Roles[i])
		}
		if !referenceRe.MatchString(im.Reference) {
			return refuse.New(CodeImageReference, "images[%d] (role %s) is not ghcr.io/qinglong/<name>@sha256:<64 hex>", i, im.Role)
		}
		if j, dup := seen[im.Reference]; dup {
			return refuse.New(CodeImageDuplicate, "images[%d] and images[%d] name the same reference", j, i)
		}
		seen[im.Reference] = i
	}
	set, err := jcsDigest(map[string]any{"roles": r.Roles, "images": r.Images})
	if err != nil {
		return err
	}
	if set != r.Catalog.ReleaseSet {
		return refuse.New(CodeReleaseSetMismatch, "catalog releaseSet is %s but roles and images hash to %s", r.Catalog.ReleaseSet, set)
	}
	if !slices.Equal(r.Annotations, releaseAnnotations) {
		return refuse.New(CodeAnnotationKeys, "annotations are not exactly the five release annotation keys in order")
	}
	if r.Manifest.ImageAuthorities != int64(len(r.Roles)) {
		return refuse.New(CodeAuthorityCount, "report claims %d image authorities where there is one per role (%d)", r.Manifest.ImageAuthorities, len(r.Roles))
	}
	return nil
}

// Reason codes of the manifest's byte facts.
const (
	CodeManifestBytes  refuse.Code = "LOCK_MANIFEST_BYTES_MISMATCH"
	CodeManifestDigest refuse.Code = "LOCK_MANIFEST_DIGEST_MISMATCH"
)

func checkManifestFacts(r *report, b []byte) error {
	if r.Manifest.Bytes != int64(len(b)) {
		return refuse.New(CodeManifestBytes, "lock report binds a manifest of %d bytes, the manifest has %d", r.Manifest.Bytes, len(b))
	}
	if d := evidence.FromBytes(b); d != r.Manifest.Digest {
		return refuse.New(CodeManifestDigest, "lock report binds manifest %s, the manifest is %s", r.Manifest.Digest, d)
	}
	return nil
}
