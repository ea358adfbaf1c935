package kubeout

import (
	"os"
	"strings"
	"testing"

	"github.com/qinglong/ql3/refuse"
)

func TestNamespaceUID(t *testing.T) {
	real, err := os.ReadFile("testdata/kube-system.json")
	if err != nil {
		t.Fatal(err)
	}
	uid, err := NamespaceUID(real)
	if err != nil || !reUID.MatchString(uid) || !strings.Contains(string(real), uid) {
		t.Fatalf("real output: uid %q, %v", uid, err)
	}
	sub := func(old, new string) []byte { return []byte(strings.Replace(string(real), old, new, 1)) }
	vectors := []struct {
		name   string
		stdout []byte // what kubectl printed
	}{
		{"empty", nil},
		{"not json", []byte("Error from server")},
		{"trailing data", append(append([]byte{}, real...), "{}"...)},
		{"duplicate uid key", sub(`"uid": `, `"uid": "00000000-0000-0000-0000-000000000000", "uid": `)},
		{"another namespace", sub(`"name": "kube-system"`, `"name": "default"`)},
		{"another kind", sub(`"kind": "Namespace"`, `"kind": "ConfigMap"`)},
		{"another api version", sub(`"apiVersion": "v1"`, `"apiVersion": "v2"`)},
		{"no uid", sub(`"uid": `, `"uidx": `)},
		{"uid not a uuid", sub(`"uid": "`, `"uid": "x`)},
		{"a list", []byte(`{"apiVersion":"v1","kind":"List","items":[]}`)},
		{"too large", append(append([]byte{}, real...), make([]byte, MaxIdentityOutput)...)},
	}
	for _, v := range vectors {
		t.Run(v.name, func(t *testing.T) {
			_, err := NamespaceUID(v.stdout)
			if got := refuse.CodeOf(err); got != CodeIdentityOutput {
				t.Fatalf("code %q, want %s (%v)", got, CodeIdentityOutput, err)
			}
		})
	}
}

func TestApplied(t *testing.T) {
	objs := []Resource{
		{APIVersion: "v1", Kind: "ConfigMap", Namespace: "q", Name: "cfg"},
		{APIVersion: "apps/v1", Kind: "Deployment", Namespace: "q", Name: "api"},
	}
	// The lines a real kubectl v1.34.3 printed for these kinds (see internal/testbed/testcluster tests).
	apply := "configmap/cfg serverside-applied\ndeployment.apps/api serverside-applied\n"
	dry := "configmap/cfg serverside-applied (server dry run)\ndeployment.apps/api serverside-applied (server dry run)\n"
	if err := Applied([]byte(apply), objs, false); err != nil {
		t.Fatal(err)
	}
	if err := Applied([]byte(dry), objs, true); err != nil {
		t.Fatal(err)
	}
	vectors := []struct {
		name   string
		stdout string
		dryRun bool
	}{
		{"dry-run lines for a real apply", dry, false},
		{"real apply lines for a dry-run", apply, true},
		{"missing object", "configmap/cfg serverside-applied\n", false},
		{"extra line", apply + "service/x serverside-applied\n", false},
		{"wrong order", "deployment.apps/api serverside-applied\nconfigmap/cfg serverside-applied\n", false},
		{"unchanged verb", "configmap/cfg unchanged\ndeployment.apps/api serverside-applied\n", false},
		{"empty", "", false},
	}
	for _, v := range vectors {
		t.Run(v.name, func(t *testing.T) {
			if got := refuse.CodeOf(Applied([]byte(v.stdout), objs, v.dryRun)); got != CodeApplyOutput {
				t.Fatalf("code %q, want %s", got, CodeApplyOutput)
			}
		})
	}
}
