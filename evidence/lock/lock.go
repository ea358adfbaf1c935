// Package lock is the consumer's independent verifier of a lock report
// (qinglong/kubernetes-deployment-lock@v2) against the exact bytes of its locked manifest
// (docs/rationale.md#9-lock-report-v2, docs/lock-v2.md). The ceremony and the offline auditor call Verify; it trusts
// nothing the producer claims and shares no code with the materializer that writes locks.
package lock

import (
	"github.com/opencontainers/go-digest"

	"github.com/qinglong/ql3/evidence"
	"github.com/qinglong/ql3/evidence/manifest"
	"github.com/qinglong/ql3/refuse"
)

// Byte ceilings of the two inputs. Verify refuses larger input before reading it; callers that
// read files should read at most one byte more than the ceiling.
const (
	MaxManifestBytes = manifest.MaxBytes // 8 MiB
	MaxReportBytes   = 1 << 20           // 1 MiB
)

// The fixed values of a v2 lock report.
const (
	Schema          = "qinglong/kubernetes-deployment-lock@v2"
	Product         = "qinglong"
	CatalogWorkflow = "qinglong/qinglong/.github/workflows/release-catalog.yml"
)

// Release annotation keys, in the order the report lists them.
const (
	AnnotationReleaseVersion = "qinglong.io/release-version"
	AnnotationCatalogDigest  = "qinglong.io/catalog-digest"
	AnnotationCatalogCommit  = "qinglong.io/catalog-commit"
	AnnotationReleaseSet     = "qinglong.io/release-set"
	AnnotationRole           = "qinglong.io/role"
)

var (
	// releaseAnnotations are the five release annotation keys in report order.
	releaseAnnotations = []string{AnnotationReleaseVersion, AnnotationCatalogDigest, AnnotationCatalogCommit, AnnotationReleaseSet, AnnotationRole}
	// requiredRoles is the required role order.
	requiredRoles = []string{"api", "scheduler", "runner", "web"}
)

// Reason codes of the input ceilings.
const (
	CodeReportTooLarge   refuse.Code = "LOCK_REPORT_TOO_LARGE"
	CodeManifestTooLarge refuse.Code = "LOCK_MANIFEST_TOO_LARGE"
)

// Result is what a verified lock establishes.
type Result struct {
	ReleaseVersion                                          string
	CatalogWorkflow, CatalogRef, CatalogCommit              string
	CatalogDigest, ReleaseSet, ReportDigest, ManifestDigest digest.Digest
	ManifestBytes                                           int64
	Roles                                                   []string
	Images                                                  []Image           // one per role, role order
	Objects                                                 []manifest.Object // every resource, document order
	Authorities                                             []Authority       // role order
}

// Image is the lock's image reference for one role.
type Image struct{ Role, Reference string }

// Authority is an image-authority resource: a workload whose pod spec has containers.
type Authority struct {
	ObjectIndex                       int
	Role                              string
	APIVersion, Kind, Namespace, Name string
	PodSpecPath                       []string          // e.g. ["spec","template","spec"]; ["spec"] for Pod
	Annotations                       map[string]string // the five release annotations with this resource's values
	Containers                        []Container       // containers, then initContainers, then ephemeralContainers, each in list order
}

// Container is one entry of a pod spec's container lists.
type Container struct {
	Field string // "containers", "initContainers" or "ephemeralContainers"
	Name  string
	Image string
}

// Verify checks the lock report against the exact manifest bytes and returns what they
// establish, or a *refuse.Error whose code names the first failed check (docs/lock-v2.md).
func Verify(manifestBytes, reportBytes []byte) (*Result, error) {
	if len(reportBytes) > MaxReportBytes {
		return nil, refuse.New(CodeReportTooLarge, "lock report of %d bytes exceeds the limit of %d", len(reportBytes), MaxReportBytes)
	}
	if len(manifestBytes) > MaxManifestBytes {
		return nil, refuse.New(CodeManifestTooLarge, "manifest of %d bytes exceeds the limit of %d", len(manifestBytes), MaxManifestBytes)
	}
	rep, self, err := decodeReport(reportBytes)
	if err != nil {
		return nil, err
	}
	if err := rep.check(self); err != nil {
		return nil, err
	}
	res := &Result{
		ReleaseVersion: rep.Release.Version, CatalogWorkflow: rep.Catalog.Workflow, CatalogRef: rep.Catalog.Ref,
		CatalogCommit: rep.Catalog.Commit, CatalogDigest: rep.Catalog.Digest, ReleaseSet: rep.Catalog.ReleaseSet,
		ReportDigest: rep.ReportDigest, Roles: rep.Roles,
	}
	for _, im := range rep.Images {
		res.Images = append(res.Images, Image(im))
	}
	if err := checkManifestFacts(rep, manifestBytes); err != nil {
		return nil, err
	}
	res.ManifestDigest, res.ManifestBytes = evidence.FromBytes(manifestBytes), int64(len(manifestBytes))
	if res.Objects, err = manifest.Parse(manifestBytes); err != nil {
		return nil, err
	}
	if res.Authorities, err = checkObjects(rep, res.Objects, manifestBytes); err != nil {
		return nil, err
	}
	return res, nil
}
