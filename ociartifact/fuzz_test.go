package ociartifact_test

import (
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/opencontainers/go-digest"
	ocispec "github.com/opencontainers/image-spec/specs-go/v1"

	"github.com/qinglong/ql3/ociartifact"
	"github.com/qinglong/ql3/refuse"
)

var updateSeeds = flag.Bool("update-seeds", false, "rewrite testdata/fuzz/FuzzParseManifest from store-1000")

const seedDir = "testdata/fuzz/FuzzParseManifest"

// TestFuzzSeeds keeps the committed seeds present (a fuzzer whose seed folder moved fuzzes from
// nothing) and, with -update-seeds, writes them: the manifest of the 1,000-resource receipt and
// edits of it that each hit one refusal.
func TestFuzzSeeds(t *testing.T) {
	if *updateSeeds {
		_, _, c := collect(t)
		os.RemoveAll(seedDir)
		os.MkdirAll(seedDir, 0o755)
		seeds := map[string][]byte{"valid": c.Manifest, "referrer": c.Referrers[0].Manifest}
		seeds["layer-removed"] = rewrite(t, c, func(m *ocispec.Manifest) { m.Layers = m.Layers[:len(m.Layers)-1] })
		seeds["layers-swapped"] = rewrite(t, c, func(m *ocispec.Manifest) { m.Layers[1], m.Layers[2] = m.Layers[2], m.Layers[1] })
		seeds["root-annotation"] = rewrite(t, c, func(m *ocispec.Manifest) { m.Annotations[ociartifact.AnnotationRoot] = "sha256:00" })
		seeds["media-type"] = rewrite(t, c, func(m *ocispec.Manifest) { m.Layers[0].MediaType = "application/octet-stream" })
		for name, b := range seeds {
			if err := os.WriteFile(filepath.Join(seedDir, name), fmt.Appendf(nil, "go test fuzz v1\n[]byte(%q)\n", b), 0o644); err != nil {
				t.Fatal(err)
			}
		}
	}
	ents, err := os.ReadDir(seedDir)
	if err != nil || len(ents) < 6 {
		t.Fatalf("fuzz seeds missing under %s: %v (%d)", seedDir, err, len(ents))
	}
}

// FuzzParseManifest feeds arbitrary manifests to ParseManifest and, when one parses, to
// CheckClosure over the objects of the 1,000-resource receipt. Neither may panic; every refusal
// carries a code; a manifest that passes must be exactly the one Manifest builds for its root.
func FuzzParseManifest(f *testing.F) {
	_, _, c := collect(f)
	f.Fuzz(func(t *testing.T, b []byte) {
		a, err := ociartifact.ParseManifest(b)
		if err != nil {
			if refuse.CodeOf(err) == "" {
				t.Fatalf("refusal without a code: %v", err)
			}
			return
		}
		root, err := ociartifact.CheckClosure(a, func(d digest.Digest) ([]byte, bool, error) { x, ok := c.Blobs[d]; return x, ok, nil })
		if err != nil {
			if refuse.CodeOf(err) == "" {
				t.Fatalf("refusal without a code: %v", err)
			}
			return
		}
		want, _, err := ociartifact.Manifest(root, a.Layers)
		if err != nil {
			t.Fatal(err)
		}
		var got, exp any
		json.Unmarshal(b, &got)
		json.Unmarshal(want, &exp)
		gb, _ := json.Marshal(got)
		eb, _ := json.Marshal(exp)
		if !slices.Equal(gb, eb) {
			t.Fatalf("accepted a manifest that is not the root's:\n%s\n%s", b, want)
		}
	})
}
