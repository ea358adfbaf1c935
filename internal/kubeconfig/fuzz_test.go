package kubeconfig

import (
	"path/filepath"
	"testing"

	"github.com/opencontainers/go-digest"

	"github.com/qinglong/ql3/refuse"
)

func FuzzKubeconfigCheck(f *testing.F) {
	s := newSecrets(f)
	f.Add(render(f, base(s)), "main")
	for _, v := range refusals() {
		f.Add(buildRaw(f, s, v), v.context)
	}
	// The committed corpus must exist: an empty directory would make the fuzz run seedless.
	if m, _ := filepath.Glob(filepath.Join("testdata", "fuzz", "FuzzKubeconfigCheck", "*")); len(m) == 0 {
		f.Fatal("committed seed corpus testdata/fuzz/FuzzKubeconfigCheck is missing")
	}
	f.Fuzz(func(t *testing.T, raw []byte, context string) {
		sum, err := Check(raw, context)
		if err != nil {
			if refuse.CodeOf(err) == "" {
				t.Fatalf("error without reason code: %v", err)
			}
			return
		}
		if sum.Digest != digest.FromBytes(raw) || sum.Context != context || sum.AuthKind == "" {
			t.Fatalf("inconsistent summary %+v", sum)
		}
	})
}
