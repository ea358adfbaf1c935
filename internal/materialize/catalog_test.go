package materialize

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/qinglong/ql3/evidence"
	"github.com/qinglong/ql3/refuse"
)

var release = filepath.Join("..", "..", "testdata", "release-3.4.1")

func readRelease(t testing.TB, name string) []byte {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(release, name))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// editCatalog decodes the release catalog, applies f and encodes it again.
func editCatalog(t testing.TB, f func(m map[string]any)) []byte {
	t.Helper()
	var m map[string]any
	if err := json.Unmarshal(readRelease(t, "catalog.json"), &m); err != nil {
		t.Fatal(err)
	}
	f(m)
	b, err := json.Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func rel(m map[string]any) map[string]any { return m["release"].(map[string]any) }
func img(m map[string]any, i int) map[string]any {
	return m["images"].([]any)[i].(map[string]any)
}

const hex64 = "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"

func TestParseCatalog(t *testing.T) {
	b := readRelease(t, "catalog.json")
	c, err := ParseCatalog(b)
	if err != nil {
		t.Fatal(err)
	}
	canon, err := evidence.Canonicalize(b)
	if err != nil {
		t.Fatal(err)
	}
	if c.Digest != evidence.FromBytes(canon) || c.Version != "3.4.1" || c.Ref != "refs/tags/v3.4.1" ||
		c.Commit != "8886e82b95ffc10469aec62a81fca330bd54066f" || len(c.Images) != 4 || c.Images[3].Role != "web" ||
		c.Images[0].Repository() != "ghcr.io/qinglong/qinglong-api" {
		t.Fatalf("unexpected catalog %+v", c)
	}
	// The digest is over the canonical form: whitespace and member order do not change it.
	c2, err := ParseCatalog(canon)
	if err != nil || c2.Digest != c.Digest {
		t.Fatalf("canonical form: %v %v", err, c2)
	}
}

func TestParseCatalogRefusals(t *testing.T) {
	vectors := []struct {
		name string               // what is wrong
		raw  string               // the catalog bytes, when edit is nil
		edit func(map[string]any) // applied to the valid catalog
		code refuse.Code          // the expected reason code
	}{
		{"empty", "", nil, CodeCatalogSize},
		{"over 1 MiB", `{"schema":"` + strings.Repeat("x", MaxCatalogBytes) + `"}`, nil, CodeCatalogSize},
		{"not json", "schema: x", nil, CodeCatalogJSON},
		{"trailing data", `{}{}`, nil, CodeCatalogJSON},
		{"duplicate key", `{"schema":"a","schema":"b"}`, nil, CodeCatalogJSON},
		{"invalid utf-8", "{\"schema\":\"\xff\"}", nil, CodeCatalogJSON},
		{"array", `[]`, nil, CodeCatalogShape},
		{"missing member", "", func(m map[string]any) { delete(m, "commit") }, CodeCatalogShape},
		{"unknown member", "", func(m map[string]any) { m["extra"] = "x" }, CodeCatalogShape},
		{"case-folded member", "", func(m map[string]any) { m["Commit"] = m["commit"]; delete(m, "commit") }, CodeCatalogShape},
		{"null member", "", func(m map[string]any) { m["ref"] = nil }, CodeCatalogShape},
		{"release not object", "", func(m map[string]any) { m["release"] = "3.4.1" }, CodeCatalogShape},
		{"release unknown member", "", func(m map[string]any) { rel(m)["channel"] = "stable" }, CodeCatalogShape},
		{"release missing version", "", func(m map[string]any) { delete(rel(m), "version") }, CodeCatalogShape},
		{"version a number", "", func(m map[string]any) { rel(m)["version"] = 3.4 }, CodeCatalogShape},
		{"schema a number", "", func(m map[string]any) { m["schema"] = 1 }, CodeCatalogShape},
		{"images not array", "", func(m map[string]any) { m["images"] = map[string]any{} }, CodeCatalogShape},
		{"image extra member", "", func(m map[string]any) { img(m, 1)["tag"] = "3.4.1" }, CodeCatalogShape},
		{"image not object", "", func(m map[string]any) { m["images"].([]any)[2] = "x" }, CodeCatalogShape},
		{"image role number", "", func(m map[string]any) { img(m, 0)["role"] = 1 }, CodeCatalogShape},
		{"schema", "", func(m map[string]any) { m["schema"] = "qinglong/release-catalog@v2" }, CodeCatalogSchema},
		{"product", "", func(m map[string]any) { rel(m)["product"] = "Qinglong" }, CodeCatalogRelease},
		{"pre-release", "", func(m map[string]any) { rel(m)["version"] = "3.4.1-rc.1" }, CodeCatalogRelease},
		{"build metadata", "", func(m map[string]any) { rel(m)["version"] = "3.4.1+build.7" }, CodeCatalogRelease},
		{"major 4", "", func(m map[string]any) { rel(m)["version"] = "4.0.0" }, CodeCatalogRelease},
		{"leading zero", "", func(m map[string]any) { rel(m)["version"] = "3.04.1" }, CodeCatalogRelease},
		{"v prefix", "", func(m map[string]any) { rel(m)["version"] = "v3.4.1" }, CodeCatalogRelease},
		{"trailing newline", "", func(m map[string]any) { rel(m)["version"] = "3.4.1\n" }, CodeCatalogRelease},
		{"two parts", "", func(m map[string]any) { rel(m)["version"] = "3.4" }, CodeCatalogRelease},
		{"workflow", "", func(m map[string]any) { m["workflow"] = "qinglong/qinglong/.github/workflows/release.yml" }, CodeCatalogWorkflow},
		{"workflow with ref", "", func(m map[string]any) { m["workflow"] = Workflow + "@refs/tags/v3.4.1" }, CodeCatalogWorkflow},
		{"ref of other version", "", func(m map[string]any) { m["ref"] = "refs/tags/v3.4.2" }, CodeCatalogRef},
		{"ref a branch", "", func(m map[string]any) { m["ref"] = "refs/heads/main" }, CodeCatalogRef},
		{"ref without v", "", func(m map[string]any) { m["ref"] = "refs/tags/3.4.1" }, CodeCatalogRef},
		{"commit upper case", "", func(m map[string]any) { m["commit"] = strings.ToUpper(m["commit"].(string)) }, CodeCatalogCommit},
		{"commit short", "", func(m map[string]any) { m["commit"] = hex64[:39] }, CodeCatalogCommit},
		{"commit sha256", "", func(m map[string]any) { m["commit"] = hex64 }, CodeCatalogCommit},
		{"three images", "", func(m map[string]any) { m["images"] = m["images"].([]any)[:3] }, CodeCatalogRoles},
		{"five images", "", func(m map[string]any) { m["images"] = append(m["images"].([]any), img(m, 0)) }, CodeCatalogRoles},
		{"no images", "", func(m map[string]any) { m["images"] = []any{} }, CodeCatalogRoles},
		{"role order", "", func(m map[string]any) { img(m, 1)["role"], img(m, 2)["role"] = "runner", "scheduler" }, CodeCatalogRoles},
		{"unknown role", "", func(m map[string]any) { img(m, 3)["role"] = "worker" }, CodeCatalogRoles},
		{"tag and digest", "", func(m map[string]any) { img(m, 0)["reference"] = "ghcr.io/qinglong/qinglong-api:3.4.1@sha256:" + hex64 }, CodeCatalogReference},
		{"no digest", "", func(m map[string]any) { img(m, 0)["reference"] = "ghcr.io/qinglong/qinglong-api:3.4.1" }, CodeCatalogReference},
		{"other registry", "", func(m map[string]any) { img(m, 0)["reference"] = "docker.io/qinglong/qinglong-api@sha256:" + hex64 }, CodeCatalogReference},
		{"other organisation", "", func(m map[string]any) { img(m, 0)["reference"] = "ghcr.io/other/qinglong-api@sha256:" + hex64 }, CodeCatalogReference},
		{"nested repository", "", func(m map[string]any) { img(m, 0)["reference"] = "ghcr.io/qinglong/a/b@sha256:" + hex64 }, CodeCatalogReference},
		{"upper-case name", "", func(m map[string]any) { img(m, 0)["reference"] = "ghcr.io/qinglong/Api@sha256:" + hex64 }, CodeCatalogReference},
		{"upper-case hex", "", func(m map[string]any) {
			img(m, 0)["reference"] = "ghcr.io/qinglong/api@sha256:" + strings.ToUpper(hex64)
		}, CodeCatalogReference},
		{"sha512", "", func(m map[string]any) { img(m, 0)["reference"] = "ghcr.io/qinglong/api@sha512:" + hex64 + hex64 }, CodeCatalogReference},
		{"short digest", "", func(m map[string]any) { img(m, 0)["reference"] = "ghcr.io/qinglong/api@sha256:" + hex64[:63] }, CodeCatalogReference},
		{"duplicate reference", "", func(m map[string]any) { img(m, 3)["reference"] = img(m, 0)["reference"] }, CodeCatalogReferenceDup},
	}
	for _, v := range vectors {
		t.Run(v.name, func(t *testing.T) {
			b := []byte(v.raw)
			if v.edit != nil {
				b = editCatalog(t, v.edit)
			}
			_, err := ParseCatalog(b)
			if got := refuse.CodeOf(err); got != v.code {
				t.Fatalf("got %s (%v), want %s", got, err, v.code)
			}
		})
	}
}

func digestJSON(t *testing.T, v any) string {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	c, err := evidence.Canonicalize(b)
	if err != nil {
		t.Fatal(err)
	}
	return string(evidence.FromBytes(c))
}
