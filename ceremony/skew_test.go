package ceremony_test

import (
	"testing"

	"github.com/qinglong/ql3/ceremony"
	"github.com/qinglong/ql3/evidence"
)

// TestSkewWarning: the line that names a kubectl beyond the supported skew, and none within it
// (TestPreflightNamesKubectlSkew prints it from a real preflight in make matrix).
func TestSkewWarning(t *testing.T) {
	for _, v := range []struct {
		versions *evidence.Versions
		want     string
	}{
		{nil, ""},
		{&evidence.Versions{Kubectl: "v1.37.2", Server: "v1.37.2", MinorsApart: 0, SupportedSkew: true}, ""},
		{&evidence.Versions{Kubectl: "v1.36.3", Server: "v1.37.2", MinorsApart: 1, SupportedSkew: true}, ""},
		{&evidence.Versions{Kubectl: "v1.34.3", Server: "v1.37.2", MinorsApart: 3, SupportedSkew: false},
			"ql3: warning: kubectl v1.34.3 is 3 minor versions from the API server v1.37.2: the supported skew is ±1 (docs/kubectl.md#version-skew)"},
		{&evidence.Versions{Kubectl: "v1.37.2", Server: "v1.35.0-gke.1200", MinorsApart: 2, SupportedSkew: false},
			"ql3: warning: kubectl v1.37.2 is 2 minor versions from the API server v1.35.0-gke.1200: the supported skew is ±1 (docs/kubectl.md#version-skew)"},
	} {
		if got := ceremony.SkewWarning(v.versions); got != v.want {
			t.Errorf("SkewWarning(%+v) = %q, want %q", v.versions, got, v.want)
		}
	}
}
