package convergence_test

import (
	"fmt"

	"sigs.k8s.io/yaml"
	"testing"

	"github.com/qinglong/ql3/evidence/manifest"
	"github.com/qinglong/ql3/verdict/convergence"
	"github.com/qinglong/ql3/verdict/convergence/internal/convtest"
)

// scaled builds an n-object manifest and its List output from the captured converged read by
// repeating its seven objects under new names: real server output, only renamed.
func scaled(b *testing.B, n int) capture {
	b.Helper()
	c := load(b, "live-list.json", "manifest.yaml")
	items := at(decode(b, c.out), "items").([]any)
	var objs []manifest.Object
	var out []any
	for i := 0; len(objs) < n; i++ {
		j := i % len(c.objs)
		suffix := fmt.Sprintf("-%d", i/len(c.objs))
		o := c.objs[j]
		doc, err := yaml.JSONToYAML(encode(b, renamed(b, o.Fields, suffix)))
		if err != nil {
			b.Fatal(err)
		}
		fresh := convtest.MustObjects(doc)[0]
		fresh.Index = len(objs)
		objs = append(objs, fresh)
		out = append(out, renamed(b, items[j].(map[string]any), suffix))
	}
	list := map[string]any{"apiVersion": "v1", "kind": "List", "items": out, "metadata": map[string]any{"resourceVersion": ""}}
	return capture{objs: objs, auths: convtest.Authorities(objs), out: encode(b, list)}
}

// renamed deep-copies an object and appends suffix to its metadata.name.
func renamed(b *testing.B, obj map[string]any, suffix string) map[string]any {
	cp := decode(b, encode(b, obj))
	meta := cp["metadata"].(map[string]any)
	meta["name"] = meta["name"].(string) + suffix
	return cp
}

// BenchmarkVerify1000 measures Verify on a 1,000-object List (about 6 MB, realistic Deployments,
// Services, ConfigMaps and ServiceAccounts with their managedFields).
func BenchmarkVerify1000(b *testing.B) {
	c := scaled(b, 1000)
	in := c.input()
	if _, err := convergence.Verify(in); err != nil {
		b.Fatal(err)
	}
	b.SetBytes(int64(len(c.out)))
	b.ReportAllocs()
	for b.Loop() {
		if _, err := convergence.Verify(in); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkVerifyRelease measures Verify on the captured seven-object release read.
func BenchmarkVerifyRelease(b *testing.B) {
	in := load(b, "live-list.json", "manifest.yaml").input()
	b.SetBytes(int64(len(in.Stdout)))
	b.ReportAllocs()
	for b.Loop() {
		if _, err := convergence.Verify(in); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkHandbacks1000 measures the repair's walk of a 1,000-object List: every field of every
// object, past the first difference (here none, so every leaf's ownership is looked up).
func BenchmarkHandbacks1000(b *testing.B) {
	c := scaled(b, 1000)
	in := c.input()
	b.SetBytes(int64(len(c.out)))
	b.ReportAllocs()
	for b.Loop() {
		if _, err := convergence.Handbacks(in); err != nil {
			b.Fatal(err)
		}
	}
}
