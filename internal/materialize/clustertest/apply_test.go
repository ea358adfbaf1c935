// Package clustertest applies the committed locked manifest of the synthetic release to a real
// kube-apiserver. It is a package of its own because testcluster.Main skips every test of a
// package when the Kubernetes tools are missing, and the materializer's unit tests must always run.
package clustertest

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"sigs.k8s.io/yaml"

	"github.com/qinglong/ql3/internal/testbed/testcluster"
)

var cluster *testcluster.Cluster

func TestMain(m *testing.M) { os.Exit(testcluster.Main(m, &cluster)) }

func decodeJSON(t *testing.T, b []byte) any {
	t.Helper()
	d := json.NewDecoder(bytes.NewReader(b))
	d.UseNumber()
	var v any
	if err := d.Decode(&v); err != nil {
		t.Fatal(err)
	}
	return v
}

// TestLockedManifestAppliesAndReadsBack applies locked.yaml as the ceremony does (server-side,
// field manager qinglong3-catalog-lock, strict validation) and checks that every field written
// reads back with the same value: the server may add defaults, but must not rewrite anything.
func TestLockedManifestAppliesAndReadsBack(t *testing.T) {
	testcluster.Need(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	manifest, err := os.ReadFile(filepath.Join("..", "..", "..", "testdata", "release-3.4.1", "locked.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	if err := cluster.CreateNamespace(ctx, "qinglong"); err != nil {
		t.Fatal(err)
	}
	apply := []string{"apply", "--server-side", "--field-manager=qinglong3-catalog-lock", "--validate=strict", "-f=-"}
	if _, se, err := cluster.Kubectl(ctx, manifest, append(apply[:len(apply):len(apply)], "--dry-run=server")...); err != nil {
		t.Fatalf("dry-run: %v\n%s", err, se)
	}
	if _, se, err := cluster.Kubectl(ctx, manifest, apply...); err != nil {
		t.Fatalf("apply: %v\n%s", err, se)
	}
	out, se, err := cluster.Kubectl(ctx, manifest, "get", "-f=-", "-o=json", "--show-managed-fields=true")
	if err != nil {
		t.Fatalf("get: %v\n%s", err, se)
	}
	live, _ := decodeJSON(t, out).(map[string]any)["items"].([]any)
	docs := strings.Split(string(manifest), "---\n")
	if len(docs) != 6 || len(live) != 6 {
		t.Fatalf("%d documents, %d live objects; want 6 and 6", len(docs), len(live))
	}
	for i, doc := range docs {
		j, err := yaml.YAMLToJSON([]byte(doc))
		if err != nil {
			t.Fatal(err)
		}
		want := decodeJSON(t, j).(map[string]any)
		got := live[i].(map[string]any)
		name := fmt.Sprintf("%v %v", want["kind"], want["metadata"].(map[string]any)["name"])
		if err := subset(got, want, "$"); err != nil {
			t.Errorf("%s: %v", name, err)
		}
		managed := false
		for _, e := range got["metadata"].(map[string]any)["managedFields"].([]any) {
			mf := e.(map[string]any)
			managed = managed || mf["manager"] == "qinglong3-catalog-lock" && mf["operation"] == "Apply"
		}
		if !managed {
			t.Errorf("%s: not managed by qinglong3-catalog-lock with operation Apply", name)
		}
	}
	// A second apply of the same bytes is a no-op for the server: same resourceVersions.
	if _, se, err := cluster.Kubectl(ctx, manifest, apply...); err != nil {
		t.Fatalf("second apply: %v\n%s", err, se)
	}
	again, _, err := cluster.Kubectl(ctx, manifest, "get", "-f=-", "-o=jsonpath={range .items[*]}{.metadata.resourceVersion} {end}")
	if err != nil {
		t.Fatal(err)
	}
	var before []string
	for _, o := range live {
		before = append(before, o.(map[string]any)["metadata"].(map[string]any)["resourceVersion"].(string))
	}
	if got := strings.Fields(string(again)); strings.Join(got, " ") != strings.Join(before, " ") {
		t.Errorf("second apply changed resourceVersions %v -> %v", before, got)
	}
}

// subset requires every member of want to be in got with the same value; lists must match
// element for element.
func subset(got, want any, path string) error {
	switch w := want.(type) {
	case map[string]any:
		g, ok := got.(map[string]any)
		if !ok {
			return fmt.Errorf("%s: live value is %T, want an object", path, got)
		}
		for k, v := range w {
			gv, ok := g[k]
			if !ok {
				return fmt.Errorf("%s.%s: missing from the live object", path, k)
			}
			if err := subset(gv, v, path+"."+k); err != nil {
				return err
			}
		}
	case []any:
		g, ok := got.([]any)
		if !ok || len(g) != len(w) {
			return fmt.Errorf("%s: live list differs in length or type", path)
		}
		for i := range w {
			if err := subset(g[i], w[i], fmt.Sprintf("%s[%d]", path, i)); err != nil {
				return err
			}
		}
	default:
		if got != want {
			return fmt.Errorf("%s: live value %v, want %v", path, got, want)
		}
	}
	return nil
}

// TestReadBackCatchesRewrites proves the read-back comparison is not vacuous: a quantity the
// server normalizes (cpu "0.1" is stored as "100m") is reported.
func TestReadBackCatchesRewrites(t *testing.T) {
	testcluster.Need(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := cluster.CreateNamespace(ctx, "rewrite"); err != nil {
		t.Fatal(err)
	}
	doc := "apiVersion: v1\nkind: LimitRange\nmetadata:\n  name: l\n  namespace: rewrite\nspec:\n  limits:\n  - type: Container\n    default:\n      cpu: \"0.1\"\n"
	if _, se, err := cluster.Kubectl(ctx, []byte(doc), "apply", "--server-side", "--field-manager=qinglong3-catalog-lock", "--validate=strict", "-f=-"); err != nil {
		t.Fatalf("apply: %v\n%s", err, se)
	}
	out, se, err := cluster.Kubectl(ctx, []byte(doc), "get", "-f=-", "-o=json")
	if err != nil {
		t.Fatalf("get: %v\n%s", err, se)
	}
	j, err := yaml.YAMLToJSON([]byte(doc))
	if err != nil {
		t.Fatal(err)
	}
	live := decodeJSON(t, out).(map[string]any)["items"].([]any)[0]
	err = subset(live, decodeJSON(t, j), "$")
	if err == nil || !strings.Contains(err.Error(), "$.spec.limits[0].default.cpu: live value 100m") {
		t.Fatalf("rewrite not caught: %v", err)
	}
}
