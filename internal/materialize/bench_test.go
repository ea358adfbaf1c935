package materialize

import (
	"fmt"
	"strings"
	"testing"
)

func BenchmarkMaterializeRelease(b *testing.B) {
	catalog, unlocked := readRelease(b, "catalog.json"), readRelease(b, "unlocked.yaml")
	b.SetBytes(int64(len(unlocked)))
	b.ReportAllocs()
	for b.Loop() {
		if _, err := Materialize(catalog, unlocked); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkMaterialize1000 locks the release plus 994 ConfigMaps: 1,000 resources, about 230 KB.
func BenchmarkMaterialize1000(b *testing.B) {
	catalog := readRelease(b, "catalog.json")
	var sb strings.Builder
	sb.Write(readRelease(b, "unlocked.yaml"))
	for i := range 994 {
		fmt.Fprintf(&sb, "---\napiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: extra-%d\n  namespace: qinglong\ndata:\n  KEY: \"value %d\"\n  OTHER: |\n    line one\n    line two\n", i, i)
	}
	unlocked := []byte(sb.String())
	r, err := Materialize(catalog, unlocked)
	if err != nil {
		b.Fatal(err)
	}
	if r.Lock.Manifest.Resources != 1000 {
		b.Fatalf("%d resources", r.Lock.Manifest.Resources)
	}
	b.SetBytes(int64(len(unlocked)))
	b.ReportAllocs()
	for b.Loop() {
		if _, err := Materialize(catalog, unlocked); err != nil {
			b.Fatal(err)
		}
	}
}
