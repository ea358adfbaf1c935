package kubeout

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/qinglong/ql3/evidence"
	"github.com/qinglong/ql3/refuse"
)

// TestReadVersionsRealKubectl: the stdout of the real `kubectl version -o=json` of kubectl 1.34 to
// 1.37 against real 1.37 and 1.34 API servers (testdata/version, kept verbatim) reads as the
// versions that each pair is, with the skew Kubernetes supports judged as ±1.
func TestReadVersionsRealKubectl(t *testing.T) {
	full := map[string]string{"1.34": "v1.34.3", "1.35": "v1.35.4", "1.36": "v1.36.3", "1.37": "v1.37.2"}
	minor := map[string]int64{"1.34": 34, "1.35": 35, "1.36": 36, "1.37": 37}
	n := 0
	for _, server := range []string{"1.34", "1.37"} {
		for _, client := range []string{"1.34", "1.35", "1.36", "1.37"} {
			b, err := os.ReadFile(filepath.Join("testdata", "version", "kubectl-"+client+"-server-"+server+".json"))
			if err != nil {
				t.Fatal(err)
			}
			v, err := ReadVersions(b)
			if err != nil {
				t.Fatalf("kubectl %s, server %s: %v", client, server, err)
			}
			apart := minor[client] - minor[server]
			if apart < 0 {
				apart = -apart
			}
			want := evidence.Versions{Kubectl: full[client], Server: full[server], MinorsApart: apart, SupportedSkew: apart <= 1}
			if *v != want {
				t.Fatalf("kubectl %s, server %s: %+v, want %+v", client, server, *v, want)
			}
			n++
		}
	}
	// kubectl 1.34 against 1.37 is three minors apart: the case the preflight names.
	b, _ := os.ReadFile("testdata/version/kubectl-1.34-server-1.37.json")
	if v, _ := ReadVersions(b); v.MinorsApart != 3 || v.SupportedSkew {
		t.Fatalf("1.34 against 1.37: %+v", v)
	}
	t.Logf("%d real outputs", n)
}

// TestReadVersionsRefusals: every class of bad input is VERSION_READ_FAILED, among them the real
// stdout of kubectl 1.37 whose API server was down (clientVersion only).
func TestReadVersionsRefusals(t *testing.T) {
	real, err := os.ReadFile("testdata/version/kubectl-1.34-server-1.37.json")
	if err != nil {
		t.Fatal(err)
	}
	down, err := os.ReadFile("testdata/version/kubectl-1.37-server-down.json")
	if err != nil {
		t.Fatal(err)
	}
	// sub replaces the n-th (1-based) occurrence of old.
	sub := func(old, new string, n int) []byte {
		s := string(real)
		i := -1
		for ; n > 0; n-- {
			j := strings.Index(s[i+1:], old)
			if j < 0 {
				t.Fatalf("no %q", old)
			}
			i += 1 + j
		}
		return []byte(s[:i] + new + s[i+len(old):])
	}
	vectors := []struct {
		name   string
		stdout []byte
	}{
		{"empty", nil},
		{"garbage", []byte("Client Version: v1.34.3\nServer Version: v1.37.2\n")},
		{"server down: no serverVersion (real)", down},
		{"serverVersion null", sub(`"serverVersion": {`, `"serverVersion": null, "x": {`, 1)},
		{"no clientVersion", sub(`"clientVersion"`, `"clientVersionX"`, 1)},
		{"serverVersion in another case", sub(`"serverVersion"`, `"ServerVersion"`, 1)},
		{"serverVersion not an object", []byte(`{"clientVersion":{"major":"1","minor":"37","gitVersion":"v1.37.2"},"serverVersion":"v1.37.2"}`)},
		{"a list", []byte(`[{"clientVersion":{}}]`)},
		{"trailing data", append(append([]byte{}, real...), "{}"...)},
		{"two documents", append(append(append([]byte{}, real...), '\n'), real...)},
		{"duplicate serverVersion", sub(`"serverVersion": {`, `"serverVersion": {"major":"1","minor":"34","gitVersion":"v1.34.3"}, "serverVersion": {`, 1)},
		{"duplicate gitVersion", sub(`"gitVersion": "v1.37.2"`, `"gitVersion": "v1.36.0", "gitVersion": "v1.37.2"`, 1)},
		{"minor not a number", sub(`"minor": "37"`, `"minor": "thirty-seven"`, 1)},
		{"minor with a letter", sub(`"minor": "37"`, `"minor": "37x"`, 1)},
		{"minor with a leading plus", sub(`"minor": "37"`, `"minor": "+37"`, 1)},
		{"minor with a leading zero", sub(`"minor": "37"`, `"minor": "037"`, 1)},
		{"minor empty", sub(`"minor": "37"`, `"minor": ""`, 1)},
		{"minor a json number", sub(`"minor": "37"`, `"minor": 37`, 1)},
		{"minor null", sub(`"minor": "37"`, `"minor": null`, 1)},
		{"minor missing", sub(`"minor": "37",`, ``, 1)},
		{"minor disagrees with gitVersion", sub(`"minor": "37"`, `"minor": "36"`, 1)},
		{"major disagrees with gitVersion", sub(`"major": "1",`, `"major": "2",`, 2)},
		{"client major not a number", sub(`"major": "1",`, `"major": "one",`, 1)},
		{"gitVersion without v", sub(`"gitVersion": "v1.37.2"`, `"gitVersion": "1.37.2"`, 1)},
		{"gitVersion without patch", sub(`"gitVersion": "v1.37.2"`, `"gitVersion": "v1.37"`, 1)},
		{"gitVersion with a space", sub(`"gitVersion": "v1.37.2"`, `"gitVersion": "v1.37.2 (eks)"`, 1)},
		{"gitVersion with a newline", sub(`"gitVersion": "v1.37.2"`, `"gitVersion": "v1.37.2\nWARNING"`, 1)},
		{"gitVersion huge", sub(`"gitVersion": "v1.37.2"`, `"gitVersion": "v1.37.2-`+strings.Repeat("a", 100)+`"`, 1)},
		{"gitVersion unknown", sub(`"gitVersion": "v1.37.2"`, `"gitVersion": "v0.0.0-master+$Format:%H$"`, 1)},
		{"majors differ", bytes.ReplaceAll(sub(`"gitVersion": "v1.37.2"`, `"gitVersion": "v2.37.2"`, 1), []byte(`"major": "1",
    "minor": "37"`), []byte(`"major": "2",
    "minor": "37"`))},
		{"huge output", append(append([]byte{}, real[:len(real)-2]...), []byte(`, "pad": "`+strings.Repeat("x", MaxVersionOutput)+`"}`)...)},
		{"invalid utf-8", sub(`"compiler": "gc"`, "\"compiler\": \"g\xffc\"", 1)},
	}
	for _, v := range vectors {
		t.Run(v.name, func(t *testing.T) {
			got, err := ReadVersions(v.stdout)
			t.Log(err)
			if c := refuse.CodeOf(err); c != CodeVersionRead {
				t.Fatalf("code %q (%v), versions %+v; want %s", c, err, got, CodeVersionRead)
			}
		})
	}
}

// TestReadVersionsManagedCluster: a managed cluster's API server reports a gitVersion with a
// suffix and a minor with a "+" (v1.37.2-eks-4f2a1c3, minor "37+", as Kubernetes' build marks
// a version with a suffix): it is read as 1.37, not refused, and printed as it is.
func TestReadVersionsManagedCluster(t *testing.T) {
	real, err := os.ReadFile("testdata/version/kubectl-1.34-server-1.37.json")
	if err != nil {
		t.Fatal(err)
	}
	s := strings.Replace(string(real), `"minor": "37",`, `"minor": "37+",`, 1)
	s = strings.Replace(s, `"gitVersion": "v1.37.2"`, `"gitVersion": "v1.37.2-eks-4f2a1c3"`, 1)
	v, err := ReadVersions([]byte(s))
	if err != nil {
		t.Fatal(err)
	}
	if want := (evidence.Versions{Kubectl: "v1.34.3", Server: "v1.37.2-eks-4f2a1c3", MinorsApart: 3}); *v != want {
		t.Fatalf("%+v, want %+v", *v, want)
	}
}

// FuzzReadVersions: the reader never panics, refuses with its one code only, and what it accepts
// is printable as it is and consistent (minorsApart within bounds, supportedSkew its judgement).
func FuzzReadVersions(f *testing.F) {
	for _, name := range []string{"kubectl-1.34-server-1.37.json", "kubectl-1.37-server-1.37.json", "kubectl-1.37-server-down.json"} {
		b, err := os.ReadFile(filepath.Join("testdata", "version", name))
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		v, err := ReadVersions(b)
		if err != nil {
			if refuse.CodeOf(err) != CodeVersionRead {
				t.Fatalf("code %q: %v", refuse.CodeOf(err), err)
			}
			return
		}
		if !reGitVersion.MatchString(v.Kubectl) || !reGitVersion.MatchString(v.Server) || v.MinorsApart < 0 || v.SupportedSkew != (v.MinorsApart <= evidence.SupportedSkew) {
			t.Fatalf("accepted %q: %+v", b, v)
		}
	})
}
