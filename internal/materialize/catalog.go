// Package materialize is the producer side of lock report v2 (docs/rationale.md#9-lock-report-v2): it turns a release
// catalog and an unlocked manifest into a locked manifest and its lock report, for synthetic
// releases, tests and the demo. docs/materialize.md is the normative description.
//
// It shares no code with the verifier (evidence/lock, evidence/manifest) on purpose: a bug both
// sides shared would hide itself, so every rule here is written again from the documents.
package materialize

import (
	"bytes"
	"encoding/json"
	"regexp"
	"slices"
	"strconv"
	"strings"

	"github.com/opencontainers/go-digest"

	"github.com/qinglong/ql3/evidence"
	"github.com/qinglong/ql3/refuse"
)

// The fixed identity of a release catalog (docs/materialize.md).
const (
	CatalogSchema = "qinglong/release-catalog@v1"
	Product       = "qinglong"
	Workflow      = "qinglong/qinglong/.github/workflows/release-catalog.yml"

	// MaxCatalogBytes bounds the catalog file; real catalogs are well under a kilobyte.
	MaxCatalogBytes = 1 << 20
)

// Roles is the required role order of every qinglong 3.x release.
var Roles = []string{"api", "scheduler", "runner", "web"}

var (
	versionRE   = regexp.MustCompile(`^3\.(0|[1-9][0-9]*)\.(0|[1-9][0-9]*)$`)
	commitRE    = regexp.MustCompile(`^[0-9a-f]{40}$`)
	referenceRE = regexp.MustCompile(`^ghcr\.io/qinglong/[a-z0-9]+(?:[._-][a-z0-9]+)*@sha256:[0-9a-f]{64}$`)
)

// Image is one role's pinned image, in the member order of the lock report.
type Image struct {
	Role      string `json:"role"`
	Reference string `json:"reference"`
}

// Repository is the reference without its digest.
func (i Image) Repository() string { r, _, _ := strings.Cut(i.Reference, "@"); return r }

// Catalog is a validated release catalog.
type Catalog struct {
	Version  string
	Workflow string
	Ref      string
	Commit   string
	Images   []Image       // one per role, in role order
	Digest   digest.Digest // sha256 of JCS(the catalog file)
}

// Reason codes of the catalog check.
const (
	CodeCatalogSize         refuse.Code = "MATERIALIZE_CATALOG_SIZE"
	CodeCatalogJSON         refuse.Code = "MATERIALIZE_CATALOG_JSON"
	CodeCatalogShape        refuse.Code = "MATERIALIZE_CATALOG_SHAPE"
	CodeCatalogSchema       refuse.Code = "MATERIALIZE_CATALOG_SCHEMA"
	CodeCatalogRelease      refuse.Code = "MATERIALIZE_CATALOG_RELEASE"
	CodeCatalogWorkflow     refuse.Code = "MATERIALIZE_CATALOG_WORKFLOW"
	CodeCatalogRef          refuse.Code = "MATERIALIZE_CATALOG_REF"
	CodeCatalogCommit       refuse.Code = "MATERIALIZE_CATALOG_COMMIT"
	CodeCatalogRoles        refuse.Code = "MATERIALIZE_CATALOG_ROLES"
	CodeCatalogReference    refuse.Code = "MATERIALIZE_CATALOG_REFERENCE"
	CodeCatalogReferenceDup refuse.Code = "MATERIALIZE_CATALOG_REFERENCE_DUPLICATE"
)

const catalogHint = "see docs/materialize.md for the release catalog format"

// ParseCatalog validates a release catalog file: strict JSON (docs/jcs.md), closed at every level,
// with every value in its one accepted spelling.
func ParseCatalog(b []byte) (*Catalog, error) {
	if len(b) == 0 || len(b) > MaxCatalogBytes {
		return nil, refuse.New(CodeCatalogSize, "catalog of %d bytes is empty or exceeds %d", len(b), MaxCatalogBytes)
	}
	canon, err := evidence.Canonicalize(b)
	if err != nil {
		return nil, refuse.Wrap(CodeCatalogJSON, err, "catalog is not strict json").WithHint(catalogHint)
	}
	// The canonical bytes are decoded, not b: they hold the same value and no escapes that
	// encoding/json might read differently from the strict parser.
	dec := json.NewDecoder(bytes.NewReader(canon))
	dec.UseNumber()
	var root any
	if err := dec.Decode(&root); err != nil {
		return nil, refuse.Wrap(CodeCatalogJSON, err, "catalog does not decode")
	}
	top, err := closed(root, "$", "schema", "release", "workflow", "ref", "commit", "images")
	if err != nil {
		return nil, err
	}
	c := &Catalog{Digest: evidence.FromBytes(canon)}
	var schema, product string
	rel, err := closed(top["release"], "$.release", "product", "version")
	if err != nil {
		return nil, err
	}
	imgs, ok := top["images"].([]any)
	if !ok {
		return nil, shapeErr("$.images", "an array")
	}
	for _, s := range []struct {
		dst  *string
		v    any
		path string
	}{
		{&schema, top["schema"], "$.schema"}, {&product, rel["product"], "$.release.product"},
		{&c.Version, rel["version"], "$.release.version"}, {&c.Workflow, top["workflow"], "$.workflow"},
		{&c.Ref, top["ref"], "$.ref"}, {&c.Commit, top["commit"], "$.commit"},
	} {
		if *s.dst, ok = s.v.(string); !ok {
			return nil, shapeErr(s.path, "a string")
		}
	}
	switch {
	case schema != CatalogSchema:
		return nil, refuse.New(CodeCatalogSchema, "catalog schema is not %s", CatalogSchema).WithHint(catalogHint)
	case product != Product:
		return nil, refuse.New(CodeCatalogRelease, "release product is not %s", Product)
	case !versionRE.MatchString(c.Version):
		return nil, refuse.New(CodeCatalogRelease, "release version of %d bytes is not 3.<minor>.<patch>", len(c.Version)).
			WithHint("pre-release and build metadata are refused; a 3.x release is 3.<minor>.<patch>")
	case c.Workflow != Workflow:
		return nil, refuse.New(CodeCatalogWorkflow, "catalog workflow is not %s", Workflow)
	case c.Ref != "refs/tags/v"+c.Version:
		return nil, refuse.New(CodeCatalogRef, "catalog ref is not refs/tags/v%s", c.Version).
			WithHint("the catalog must come from the immutable release tag")
	case !commitRE.MatchString(c.Commit):
		return nil, refuse.New(CodeCatalogCommit, "catalog commit is not 40 lower-case hex digits")
	}
	if c.Images, err = catalogImages(imgs); err != nil {
		return nil, err
	}
	return c, nil
}

func catalogImages(imgs []any) ([]Image, error) {
	if len(imgs) != len(Roles) {
		return nil, refuse.New(CodeCatalogRoles, "catalog has %d images, want one per role %v", len(imgs), Roles)
	}
	out := make([]Image, len(imgs))
	seen := map[string]int{}
	for i, v := range imgs {
		path := "$.images[" + strconv.Itoa(i) + "]"
		m, err := closed(v, path, "role", "reference")
		if err != nil {
			return nil, err
		}
		role, ok1 := m["role"].(string)
		ref, ok2 := m["reference"].(string)
		if !ok1 || !ok2 {
			return nil, shapeErr(path, "an object of two strings")
		}
		if role != Roles[i] {
			return nil, refuse.New(CodeCatalogRoles, "%s.role is not %q: the images must be one per role in the order %v", path, Roles[i], Roles)
		}
		if !referenceRE.MatchString(ref) {
			return nil, refuse.New(CodeCatalogReference, "%s.reference is not ghcr.io/qinglong/<name>@sha256:<64 hex>", path)
		}
		if j, dup := seen[ref]; dup {
			return nil, refuse.New(CodeCatalogReferenceDup, "roles %s and %s have the same image reference", Roles[j], role)
		}
		seen[ref] = i
		out[i] = Image{Role: role, Reference: ref}
	}
	return out, nil
}

// closed returns v as an object after checking that its members are exactly keys, none null.
func closed(v any, path string, keys ...string) (map[string]any, error) {
	m, ok := v.(map[string]any)
	if !ok {
		return nil, shapeErr(path, "an object")
	}
	for _, k := range keys {
		x, ok := m[k]
		if !ok {
			return nil, refuse.New(CodeCatalogShape, "%s has no member %q", path, k).WithHint(catalogHint)
		}
		if x == nil {
			return nil, refuse.New(CodeCatalogShape, "%s.%s is null", path, k)
		}
	}
	if len(m) != len(keys) {
		for k := range m {
			if !slices.Contains(keys, k) {
				return nil, refuse.New(CodeCatalogShape, "%s has an unknown member (%d members, want %d)", path, len(m), len(keys)).WithHint(catalogHint)
			}
		}
	}
	return m, nil
}

func shapeErr(path, want string) error {
	return refuse.New(CodeCatalogShape, "%s is not %s", path, want).WithHint(catalogHint)
}
