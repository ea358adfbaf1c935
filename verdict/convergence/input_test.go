package convergence_test

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/qinglong/ql3/evidence/lock"
	"github.com/qinglong/ql3/refuse"
	"github.com/qinglong/ql3/verdict/convergence"
	"github.com/qinglong/ql3/verdict/convergence/internal/convtest"
)

// TestInput covers what the caller hands Verify besides the stdout: each bad input is refused
// before the stdout is read.
func TestInput(t *testing.T) {
	vectors := []struct {
		name   string                      // what is wrong with the input
		mutate func(in *convergence.Input) // the change to a good input
		code   refuse.Code                 // expected code
		names  string                      // a string the refusal must contain
	}{
		{"no field manager", func(in *convergence.Input) { in.FieldManager = "" }, convergence.CodeInputInvalid, "field manager"},
		{"no objects", func(in *convergence.Input) { in.Objects = nil }, convergence.CodeInputInvalid, "no objects"},
		{"index out of order", func(in *convergence.Input) { in.Objects[2].Index = 3 }, convergence.CodeInputInvalid, "object 2 carries index 3"},
		{"no fields", func(in *convergence.Input) { in.Objects[1].Fields = nil }, convergence.CodeInputInvalid, "no decoded fields"},
		{"name disagrees with the document", func(in *convergence.Input) { in.Objects[0].Name = "x" }, convergence.CodeInputInvalid, "identity fields disagree"},
		{"namespace disagrees with the document", func(in *convergence.Input) { in.Objects[5].Namespace = "" }, convergence.CodeInputInvalid, "identity fields disagree"},
		{"kind disagrees with the document", func(in *convergence.Input) { in.Objects[6].Kind = "Secret" }, convergence.CodeInputInvalid, "identity fields disagree"},
		{"apiVersion disagrees with the document", func(in *convergence.Input) { in.Objects[4].APIVersion = "v2" }, convergence.CodeInputInvalid, "identity fields disagree"},
		{"a null field", func(in *convergence.Input) {
			in.Objects[5].Fields["data"].(map[string]any)["QL_PORT"] = nil
		}, convergence.CodeManifestNull, "field data.QL_PORT is null"},
		{"a null list element", func(in *convergence.Input) {
			in.Objects[5].Fields["metadata"].(map[string]any)["finalizers"] = []any{nil}
		}, convergence.CodeManifestNull, "metadata.finalizers[0]"},
		{"a float64 instead of json.Number", func(in *convergence.Input) {
			in.Objects[0].Fields["spec"].(map[string]any)["replicas"] = float64(0)
		}, convergence.CodeInputInvalid, "float64"},
		{"a json.Number that is not a number", func(in *convergence.Input) {
			in.Objects[0].Fields["spec"].(map[string]any)["replicas"] = json.Number("0x0")
		}, convergence.CodeInputInvalid, "not a json number"},
		{"nesting too deep", func(in *convergence.Input) {
			var v any = "x"
			for range 70 {
				v = []any{v}
			}
			in.Objects[5].Fields["data"].(map[string]any)["deep"] = v
		}, convergence.CodeInputInvalid, "nests deeper"},
		{"authority index out of range", func(in *convergence.Input) { in.Authorities[0].ObjectIndex = 7 }, convergence.CodeInputInvalid, "object index 7"},
		{"authority index negative", func(in *convergence.Input) { in.Authorities[0].ObjectIndex = -1 }, convergence.CodeInputInvalid, "object index -1"},
		{"authority named twice", func(in *convergence.Input) { in.Authorities[1].ObjectIndex = 0 }, convergence.CodeInputInvalid, "or twice"},
		{"authority of another object", func(in *convergence.Input) { in.Authorities[1].Name = "qinglong-api" }, convergence.CodeInputInvalid, "does not name manifest object 1"},
		{"authority without pod spec path", func(in *convergence.Input) { in.Authorities[0].PodSpecPath = nil }, convergence.CodeInputInvalid, "empty pod spec path"},
		{"authority with an empty path element", func(in *convergence.Input) { in.Authorities[0].PodSpecPath = []string{"spec", ""} }, convergence.CodeInputInvalid, "path element"},
		{"authority without containers", func(in *convergence.Input) { in.Authorities[0].Containers = nil }, convergence.CodeInputInvalid, "no containers"},
		{"authority container of an unknown list", func(in *convergence.Input) { in.Authorities[0].Containers[0].Field = "sidecars" }, convergence.CodeInputInvalid, "container entry"},
		{"authority container without image", func(in *convergence.Input) { in.Authorities[0].Containers[0].Image = "" }, convergence.CodeInputInvalid, "container entry"},
		{"authority container twice", func(in *convergence.Input) {
			in.Authorities[0].Containers = append(in.Authorities[0].Containers, in.Authorities[0].Containers[0])
		}, convergence.CodeInputInvalid, "container entry"},
		{"authority without annotations", func(in *convergence.Input) { in.Authorities[0].Annotations = nil }, convergence.CodeInputInvalid, "no release annotations"},
		{"authority with an empty annotation key", func(in *convergence.Input) { in.Authorities[0].Annotations[""] = "x" }, convergence.CodeInputInvalid, "empty annotation key"},
		// The lock and the live state disagree while the manifest and the live state agree: the
		// authority checks compare with the lock, not with the manifest.
		{"lock image differs", func(in *convergence.Input) {
			in.Authorities[3].Containers[0].Image = "ghcr.io/qinglong/web@sha256:" + strings.Repeat("0", 64)
		}, convergence.CodeImageMismatch, "containers[name=web].image is not the lock's image"},
		{"lock annotation differs", func(in *convergence.Input) {
			in.Authorities[2].Annotations["qinglong.io/catalog-commit"] = strings.Repeat("0", 40)
		}, convergence.CodeAnnotationMismatch, "qinglong.io/catalog-commit"},
		{"lock names a container the live object lacks", func(in *convergence.Input) {
			in.Authorities[0].Containers = append(in.Authorities[0].Containers, lock.Container{Field: "containers", Name: "sidecar", Image: "x"})
		}, convergence.CodeImageMismatch, "holds 1 containers, the lock 2"},
	}
	for _, v := range vectors {
		t.Run(v.name, func(t *testing.T) {
			c := load(t, "live-list.json", "manifest.yaml")
			in := c.input()
			v.mutate(&in)
			_, err := convergence.Verify(in)
			if got := refuse.CodeOf(err); got != v.code {
				t.Fatalf("code %q, want %q (%v)", got, v.code, err)
			}
			if !strings.Contains(err.Error(), v.names) {
				t.Fatalf("refusal does not contain %q: %v", v.names, err)
			}
		})
	}
}

// TestCheckManifest: the ceremony can refuse an unprovable manifest before any mutation.
func TestCheckManifest(t *testing.T) {
	objs := convtest.MustObjects(readFile(t, "manifest.yaml"))
	if err := convergence.CheckManifest(objs); err != nil {
		t.Fatal(err)
	}
	// The null of `kubectl create --dry-run -o yaml`.
	objs = convtest.MustObjects([]byte("apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: x\n  creationTimestamp: null\n"))
	if got := refuse.CodeOf(convergence.CheckManifest(objs)); got != convergence.CodeManifestNull {
		t.Fatalf("code %q", got)
	}
}

// TestMessagesQuoteIdentifiers: names from the manifest or the live read that are not plain
// identifiers are quoted and truncated, so a message never carries raw control characters.
func TestMessagesQuoteIdentifiers(t *testing.T) {
	c := load(t, "live-list.json", "manifest.yaml")
	d := decode(t, c.out)
	set(d, "evil\n\x1b[31m"+strings.Repeat("x", 300), item(5, "metadata", "managedFields", 0, "manager")...)
	c.out = encode(t, d)
	_, err := convergence.Verify(c.input())
	if refuse.CodeOf(err) != convergence.CodeFieldNotOwned {
		t.Fatal(err)
	}
	msg := err.Error()
	if strings.ContainsAny(msg, "\n\x1b") || strings.Contains(msg, strings.Repeat("x", 100)) || !strings.Contains(msg, `"evil\n\x1b[31mxxx`) {
		t.Fatalf("unsafe message: %q", msg)
	}
}

// A live-audit report that names judging rules this ql3 does not know is refused, never judged
// by other rules.
func TestJudgeLiveRulesUnknown(t *testing.T) {
	if _, err := convergence.JudgeLiveRules("ql3-live-judge@9", nil, nil, 0, nil, 0); refuse.CodeOf(err) != convergence.CodeJudgeUnknown {
		t.Fatalf("unknown rules: %v", err)
	}
}
