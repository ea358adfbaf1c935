package materialize

import (
	"bytes"
	"strings"
	"testing"

	"sigs.k8s.io/yaml"
)

// TestEquivalentSpellings materializes spellings of the same unlocked manifest that kubectl reads
// as the same objects; each must give exactly the committed locked output.
func TestEquivalentSpellings(t *testing.T) {
	base := string(readRelease(t, "unlocked.yaml"))
	want := readRelease(t, ManifestName)
	vectors := []struct {
		name     string // how the spelling differs
		manifest string
	}{
		{"as committed", base},
		{"crlf line ends", strings.ReplaceAll(base, "\n", "\r\n")},
		{"leading separator and empty documents", "---\n# nothing\n---\n" + strings.ReplaceAll(base, "---\n", "---\n---\n") + "---\n"},
		{"separator comments", strings.ReplaceAll(base, "---\n", "--- # next\n")},
		{"flow style", strings.Replace(base, "      app.kubernetes.io/name: qinglong\n      app.kubernetes.io/component: api\n  template:", "      {app.kubernetes.io/name: qinglong, app.kubernetes.io/component: api}\n  template:", 1)},
		{"no tag on the image", strings.Replace(base, "qinglong-api:3.4.1", "qinglong-api", 1)},
		{"other tag", strings.Replace(base, "qinglong-web:3.4.1", "qinglong-web:latest", 1)},
	}
	catalog := readRelease(t, "catalog.json")
	for _, v := range vectors {
		t.Run(v.name, func(t *testing.T) {
			r, err := Materialize(catalog, []byte(v.manifest))
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(r.Manifest, want) {
				t.Fatalf("locked manifest differs from the committed one:\n%s", r.Manifest)
			}
		})
	}
}

// TestAllWorkloadKinds locks one workload of each pod-spec layout and checks that every container
// list is pinned and the annotations are stamped.
func TestAllWorkloadKinds(t *testing.T) {
	ctr := func(name, image string) string {
		return "  - name: " + name + "\n    image: " + image + "\n"
	}
	spec := func(indent, role string) string {
		s := "containers:\n" + ctr(role, "ghcr.io/qinglong/qinglong-"+role+":1") + ctr(role+"-sidecar", "ghcr.io/qinglong/qinglong-"+role) +
			"initContainers:\n" + ctr("init", "ghcr.io/qinglong/qinglong-"+role+":x") +
			"ephemeralContainers:\n" + ctr("debug", "ghcr.io/qinglong/qinglong-"+role)
		return indent + strings.ReplaceAll(strings.TrimSuffix(s, "\n"), "\n", "\n"+indent) + "\n"
	}
	meta := func(kind, api, role string) string {
		return "apiVersion: " + api + "\nkind: " + kind + "\nmetadata:\n  name: " + role + "\n  namespace: ns\n  annotations:\n    qinglong.io/role: " + role + "\n    other: kept\n"
	}
	manifest := meta("Pod", "v1", "api") + "spec:\n" + spec("  ", "api") +
		"---\n" + meta("CronJob", "batch/v1", "scheduler") + "spec:\n  schedule: '* * * * *'\n  jobTemplate:\n    spec:\n      template:\n        spec:\n" + spec("          ", "scheduler") +
		"---\n" + meta("PodTemplate", "v1", "runner") + "template:\n  spec:\n" + spec("    ", "runner") +
		"---\n" + meta("StatefulSet", "apps/v1", "web") + "spec:\n  template:\n    spec:\n" + spec("      ", "web")
	r, err := Materialize(readRelease(t, "catalog.json"), []byte(manifest))
	if err != nil {
		t.Fatal(err)
	}
	c, _ := ParseCatalog(readRelease(t, "catalog.json"))
	docs := strings.Split(string(r.Manifest), "---\n")
	if len(docs) != 4 || r.Lock.Manifest.ImageAuthorities != 4 || r.Lock.Manifest.Resources != 4 {
		t.Fatalf("%d documents, summary %+v", len(docs), r.Lock.Manifest)
	}
	for i, doc := range docs {
		var o map[string]any
		if err := yaml.Unmarshal([]byte(doc), &o); err != nil {
			t.Fatal(err)
		}
		if n := strings.Count(doc, "image: "+c.Images[i].Reference+"\n"); n != 4 || strings.Count(doc, "image:") != 4 {
			t.Errorf("document %d: %d of 4 images pinned to %s:\n%s", i, n, c.Images[i].Reference, doc)
		}
		ann := o["metadata"].(map[string]any)["annotations"].(map[string]any)
		want := map[string]any{AnnotationReleaseVersion: "3.4.1", AnnotationCatalogDigest: string(c.Digest), AnnotationCatalogCommit: c.Commit,
			AnnotationReleaseSet: string(r.Lock.Catalog.ReleaseSet), AnnotationRole: Roles[i], "other": "kept"}
		if len(ann) != len(want) {
			t.Errorf("document %d annotations %v", i, ann)
		}
		for k, v := range want {
			if ann[k] != v {
				t.Errorf("document %d annotation %s = %v, want %v", i, k, ann[k], v)
			}
		}
	}
}

// TestStringsRoundTrip materializes string values the YAML writer folds, quotes or writes as
// block scalars, and checks they read back unchanged (Materialize's own read-back would refuse
// otherwise, so success is the assertion; the value is checked as well).
func TestStringsRoundTrip(t *testing.T) {
	long := strings.Repeat("word ", 40)
	values := []string{
		long, long + ": colon # hash &amp *star !bang", "- " + long, "* " + long, "line1\nline2\n", "  indented\nlines",
		"\ttab", "yes", "0777", "1e3", "~", "null", "'quoted'", `"dq"`, strings.Repeat("x", 500), "trailing \n\n",
		"a\n  &b\n*c\n", "ghcr.io/qinglongx/other", "ghcr.io/qinglong-fork", "docs.example/ghcr.io", "ghcr.io/qinglong_2", "12:30", "0o17", "2024-01-01", "3.4.1", "1.2.3.4e5", "10.96.0.1", strings.Repeat("long-token-", 30) + " &x " + strings.Repeat("y", 90) + " *z",
	}
	for _, v := range values {
		r, err := materializeValue(t, v)
		if err != nil {
			t.Errorf("%q: %v", v, err)
			continue
		}
		var o map[string]any
		if err := yaml.Unmarshal(r.Manifest[:bytes.Index(r.Manifest, []byte("---\n"))], &o); err != nil {
			t.Fatal(err)
		}
		if got := o["data"].(map[string]any)["V"]; got != v {
			t.Errorf("%q read back as %q", v, got)
		}
	}
}

// materializeValue materializes the release with v as a ConfigMap value.
func materializeValue(t testing.TB, v string) (*Result, error) {
	q, err := yaml.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	doc := "  V: " + strings.ReplaceAll(strings.TrimSuffix(string(q), "\n"), "\n", "\n  ") + "\n"
	m := strings.Replace(string(readRelease(t, "unlocked.yaml")), "  QL_LOG_LEVEL: info\n", doc, 1)
	return Materialize(readRelease(t, "catalog.json"), []byte(m))
}
