package materialize_test

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"sigs.k8s.io/yaml"

	"github.com/qinglong/ql3/evidence/lock"
	"github.com/qinglong/ql3/internal/materialize"
)

func read(t testing.TB, name string) []byte {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("..", "..", "testdata", "release-3.4.1", name))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// TestRoundTripVerify hands the materializer's output to the independent verifier, which must
// accept it and establish exactly what the materializer says it wrote.
func TestRoundTripVerify(t *testing.T) {
	r, err := materialize.Materialize(read(t, "catalog.json"), read(t, "unlocked.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	for _, files := range []struct {
		name             string
		manifest, report []byte
	}{
		{"fresh", r.Manifest, r.Report},
		{"committed", read(t, materialize.ManifestName), read(t, materialize.ReportName)},
	} {
		res, err := lock.Verify(files.manifest, files.report)
		if err != nil {
			t.Fatalf("%s: verify refused: %v", files.name, err)
		}
		l := r.Lock
		if res.ReleaseVersion != "3.4.1" || res.CatalogDigest != l.Catalog.Digest || res.ReleaseSet != l.Catalog.ReleaseSet ||
			res.ReportDigest != l.ReportDigest || res.ManifestDigest != l.Manifest.Digest || res.ManifestBytes != l.Manifest.Bytes ||
			res.CatalogCommit != l.Catalog.Commit || res.CatalogRef != l.Catalog.Ref || res.CatalogWorkflow != l.Catalog.Workflow ||
			!slices.Equal(res.Roles, materialize.Roles) || len(res.Objects) != 6 || len(res.Authorities) != 4 {
			t.Fatalf("%s: verifier established %+v", files.name, res)
		}
		for i, a := range res.Authorities {
			want := l.Images[i]
			if a.Role != want.Role || a.Kind != "Deployment" || a.Namespace != "qinglong" || a.Name != "qinglong-"+want.Role ||
				res.Images[i].Reference != want.Reference || len(a.Containers) != 1 || a.Containers[0].Image != want.Reference ||
				a.Annotations[materialize.AnnotationReleaseSet] != string(l.Catalog.ReleaseSet) {
				t.Errorf("%s: authority %d %+v", files.name, i, a)
			}
		}
	}
}

// TestRoundTripVerifyKinds puts the other pod-spec layouts, several containers per workload and
// values the YAML writer folds through the verifier as well.
func TestRoundTripVerifyKinds(t *testing.T) {
	podSpec := func(role string) map[string]any {
		img := "ghcr.io/qinglong/qinglong-" + role
		return map[string]any{
			"containers":     []any{map[string]any{"name": "a", "image": img + ":1"}, map[string]any{"name": "b", "image": img}},
			"initContainers": []any{map[string]any{"name": "i", "image": img}},
		}
	}
	obj := func(api, kind, role string, spec map[string]any) map[string]any {
		return map[string]any{"apiVersion": api, "kind": kind, "spec": spec, "metadata": map[string]any{
			"name": role, "namespace": "qinglong", "annotations": map[string]any{"qinglong.io/role": role}}}
	}
	tmpl := func(role string) map[string]any {
		return map[string]any{"template": map[string]any{"spec": podSpec(role)}}
	}
	docs := []map[string]any{
		{"apiVersion": "v1", "kind": "ConfigMap", "metadata": map[string]any{"name": "c", "namespace": "qinglong"},
			"data": map[string]any{"long": strings.Repeat("folded words: & * ! # ", 12), "block": "line &1\nline *2\n"}},
		obj("v1", "Pod", "api", podSpec("api")),
		obj("batch/v1", "Job", "scheduler", tmpl("scheduler")),
		obj("apps/v1", "DaemonSet", "runner", tmpl("runner")),
		obj("batch/v1", "CronJob", "web", map[string]any{"schedule": "@daily", "jobTemplate": map[string]any{"spec": tmpl("web")}}),
	}
	var m []byte
	for i, d := range docs {
		y, err := yaml.Marshal(d)
		if err != nil {
			t.Fatal(err)
		}
		if i > 0 {
			m = append(m, "---\n"...)
		}
		m = append(m, y...)
	}
	r, err := materialize.Materialize(read(t, "catalog.json"), m)
	if err != nil {
		t.Fatalf("materialize: %v\n%s", err, m)
	}
	res, err := lock.Verify(r.Manifest, r.Report)
	if err != nil {
		t.Fatalf("verify refused: %v\n%s", err, r.Manifest)
	}
	kinds := []string{"Pod", "Job", "DaemonSet", "CronJob"}
	if len(res.Authorities) != 4 || len(res.Objects) != 5 {
		t.Fatalf("%d authorities, %d objects", len(res.Authorities), len(res.Objects))
	}
	for i, a := range res.Authorities {
		if a.Kind != kinds[i] || a.ObjectIndex != i+1 || len(a.Containers) != 3 || a.Containers[2].Field != "initContainers" {
			t.Errorf("authority %d: %+v", i, a)
		}
		for _, c := range a.Containers {
			if c.Image != r.Lock.Images[i].Reference {
				t.Errorf("authority %d container %s image %s", i, c.Name, c.Image)
			}
		}
	}
}

// FuzzVerifyMaterialized is the contract between the two sides: whatever the materializer writes,
// the independent verifier accepts. It varies a ConfigMap entry (key and value) of the release.
func FuzzVerifyMaterialized(f *testing.F) {
	for _, kv := range [][2]string{{"K", "v"}, {"K", "="}, {"K", "12:30"}, {"K", "0o17"}, {"K", "a: b # c"},
		{"K", strings.Repeat("w &x *y ", 30)}, {"K", "line\n  &x\n"}, {"1", "2"}, {"<<", "x"}, {"K", "3.4.1"}} {
		f.Add(kv[0], kv[1])
	}
	if m, _ := filepath.Glob(filepath.Join("testdata", "fuzz", "FuzzVerifyMaterialized", "*")); len(m) == 0 {
		f.Fatal("committed seed corpus testdata/fuzz/FuzzVerifyMaterialized is missing")
	}
	catalog := read(f, "catalog.json")
	unlocked := string(read(f, "unlocked.yaml"))
	f.Fuzz(func(t *testing.T, k, v string) {
		entry, err := yaml.Marshal(map[string]string{k: v})
		if err != nil {
			return
		}
		doc := "  " + strings.ReplaceAll(strings.TrimSuffix(string(entry), "\n"), "\n", "\n  ") + "\n"
		m := strings.Replace(unlocked, "  QL_LOG_LEVEL: info\n", doc, 1)
		r, err := materialize.Materialize(catalog, []byte(m))
		if err != nil {
			return // refusing is always allowed; writing what the verifier refuses is not
		}
		if _, err := lock.Verify(r.Manifest, r.Report); err != nil {
			t.Fatalf("verifier refuses the materialized entry %q: %q: %v", k, v, err)
		}
	})
}
