package rundir

import (
	"os"
	"path/filepath"
	"strconv"
	"testing"
)

// BenchmarkCreateRemove is one run's directory work: check and open the root, sweep it (here
// among 1000 unrelated entries, as in a busy /tmp), make the directory, its lock, two
// subdirectories, the empty cache file and the kubeconfig copy, and remove it all.
func BenchmarkCreateRemove(b *testing.B) {
	root, err := filepath.EvalSymlinks(b.TempDir())
	if err != nil {
		b.Fatal(err)
	}
	for i := range 1000 {
		if err := os.WriteFile(filepath.Join(root, "other-"+strconv.Itoa(i)), nil, 0o600); err != nil {
			b.Fatal(err)
		}
	}
	kc := make([]byte, 8<<10)
	for b.Loop() {
		d, err := Create(root, prefix)
		if err != nil {
			b.Fatal(err)
		}
		for _, s := range []string{"config", "tmp"} {
			if err := d.Mkdir(s); err != nil {
				b.Fatal(err)
			}
		}
		if err := d.WriteFile("cache", nil); err != nil {
			b.Fatal(err)
		}
		if err := d.WriteFile("kubeconfig", kc); err != nil {
			b.Fatal(err)
		}
		if err := d.Remove(); err != nil {
			b.Fatal(err)
		}
	}
}
