package materialize

import (
	"bytes"
	"encoding/json"
	"fmt"
	"slices"

	"github.com/opencontainers/go-digest"

	"github.com/qinglong/ql3/evidence"
	"github.com/qinglong/ql3/refuse"
)

// The two files of a materialized release.
const (
	ManifestName = "locked.yaml"
	ReportName   = "lock-report.json"
)

// ReportSchema is the schema of the lock report this package writes.
const ReportSchema = "qinglong/kubernetes-deployment-lock@v2"

// CodeOutputCheck is raised when the materializer's own output fails its read-back check: the
// locked manifest does not parse back to exactly the objects written, or exceeds the ceiling.
const CodeOutputCheck refuse.Code = "MATERIALIZE_OUTPUT_CHECK"

// Report is the lock report v2, its members in the order of docs/lock-v2.md.
type Report struct {
	Schema       string         `json:"schema"`
	Release      ReportRelease  `json:"release"`
	Catalog      ReportCatalog  `json:"catalog"`
	Roles        []string       `json:"roles"`
	Images       []Image        `json:"images"`
	Manifest     ReportManifest `json:"manifest"`
	Annotations  []string       `json:"annotations"`
	ReportDigest digest.Digest  `json:"reportDigest,omitempty"` // empty while the digest is computed
}

// ReportRelease is the report's release member.
type ReportRelease struct {
	Product string `json:"product"`
	Version string `json:"version"`
}

// ReportCatalog is the report's catalog member: the catalog's identity and digests.
type ReportCatalog struct {
	Workflow   string        `json:"workflow"`
	Ref        string        `json:"ref"`
	Commit     string        `json:"commit"`
	Digest     digest.Digest `json:"digest"`
	ReleaseSet digest.Digest `json:"releaseSet"`
}

// ReportManifest is the report's manifest member, over the exact bytes of locked.yaml.
type ReportManifest struct {
	Digest           digest.Digest `json:"digest"`
	Bytes            int64         `json:"bytes"`
	Resources        int           `json:"resources"`
	ImageAuthorities int           `json:"imageAuthorities"`
}

// Result is a materialized release: the exact bytes of both files and what they pin.
type Result struct {
	Manifest []byte // locked.yaml
	Report   []byte // lock-report.json: pretty-printed JSON, two-space indent, final newline
	Lock     Report
}

// Materialize locks the unlocked manifest with the catalog. The same inputs give the same bytes.
func Materialize(catalog, unlocked []byte) (*Result, error) {
	c, err := ParseCatalog(catalog)
	if err != nil {
		return nil, err
	}
	objs, err := parseManifest(unlocked)
	if err != nil {
		return nil, err
	}
	releaseSet, err := ReleaseSet(Roles, c.Images)
	if err != nil {
		return nil, err
	}
	n, err := lockObjects(objs, c, string(releaseSet))
	if err != nil {
		return nil, err
	}
	for _, o := range objs {
		if err := checkStrings(o); err != nil {
			return nil, err
		}
	}
	manifest, err := render(objs)
	if err != nil {
		return nil, err
	}
	if err := readBack(manifest, objs); err != nil {
		return nil, err
	}
	r := Report{
		Schema:      ReportSchema,
		Release:     ReportRelease{Product: Product, Version: c.Version},
		Catalog:     ReportCatalog{Workflow: c.Workflow, Ref: c.Ref, Commit: c.Commit, Digest: c.Digest, ReleaseSet: releaseSet},
		Roles:       slices.Clone(Roles),
		Images:      c.Images,
		Manifest:    ReportManifest{Digest: evidence.FromBytes(manifest), Bytes: int64(len(manifest)), Resources: len(objs), ImageAuthorities: n},
		Annotations: slices.Clone(Annotations),
	}
	unsigned, err := jcs(r)
	if err != nil {
		return nil, err
	}
	r.ReportDigest = evidence.FromBytes(unsigned)
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	enc.SetIndent("", "  ")
	if err := enc.Encode(r); err != nil {
		return nil, fmt.Errorf("materialize: encode report: %w", err)
	}
	return &Result{Manifest: manifest, Report: buf.Bytes(), Lock: r}, nil
}

// ReleaseSet is sha256 of JCS({"roles": roles, "images": images}).
func ReleaseSet(roles []string, images []Image) (digest.Digest, error) {
	b, err := jcs(struct {
		Roles  []string `json:"roles"`
		Images []Image  `json:"images"`
	}{roles, images})
	if err != nil {
		return "", err
	}
	return evidence.FromBytes(b), nil
}

func jcs(v any) ([]byte, error) {
	b, err := json.Marshal(v)
	if err != nil {
		return nil, fmt.Errorf("materialize: encode: %w", err)
	}
	return evidence.Canonicalize(b)
}

// readBack parses the rendered manifest again and insists on the same objects, value for value
// and number spelling for number spelling, so the file reads back exactly as it was written.
func readBack(manifest []byte, want []*object) error {
	if len(manifest) > MaxManifestBytes {
		return refuse.New(CodeOutputCheck, "locked manifest of %d bytes exceeds %d", len(manifest), MaxManifestBytes)
	}
	got, err := parseManifest(manifest)
	if err != nil {
		return refuse.Wrap(CodeOutputCheck, err, "locked manifest does not parse back")
	}
	if len(got) != len(want) {
		return refuse.New(CodeOutputCheck, "locked manifest reads back as %d objects, want %d", len(got), len(want))
	}
	for i := range got {
		a, err1 := json.Marshal(got[i].fields)
		b, err2 := json.Marshal(want[i].fields)
		if err1 != nil || err2 != nil || !bytes.Equal(a, b) {
			return refuse.New(CodeOutputCheck, "locked manifest object %d reads back differently", i).
				WithHint("write numbers as yaml 1.1 reads and writes them, e.g. integers without a fraction")
		}
	}
	return nil
}
