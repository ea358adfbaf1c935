package testcluster

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/opencontainers/go-digest"
)

// fakeTools writes a tools directory of version v whose kubectl is the bytes kubectl, with a
// manifest recording recorded as its digest ("" records the true one).
func fakeTools(t *testing.T, v, kubectl string, recorded digest.Digest) string {
	t.Helper()
	dir := t.TempDir()
	if err := os.Mkdir(filepath.Join(dir, "bin"), 0o755); err != nil {
		t.Fatal(err)
	}
	for name, body := range map[string]string{"kubectl": kubectl, "kube-apiserver": "apiserver " + v, "etcd": "etcd " + v} {
		if err := os.WriteFile(filepath.Join(dir, "bin", name), []byte(body), 0o555); err != nil {
			t.Fatal(err)
		}
	}
	if recorded == "" {
		recorded = digest.FromString(kubectl)
	}
	m := fmt.Sprintf(`{"kubernetesVersion":%q,"etcdVersion":"v3.6.4","binaries":{"kubectl":%q}}`, v, recorded)
	if err := os.WriteFile(filepath.Join(dir, "manifest.json"), []byte(m), 0o644); err != nil {
		t.Fatal(err)
	}
	return dir
}

// TestFindToolsKubectlFromAnotherDir: $QL3_KUBECTL_TOOLS takes kubectl (and only kubectl) from
// another tools directory, verified against that directory's manifest.
func TestFindToolsKubectlFromAnotherDir(t *testing.T) {
	server := fakeTools(t, "v1.35.4", "kubectl 1.35", "")
	vectors := []struct {
		name    string
		other   func(t *testing.T) string // the $QL3_KUBECTL_TOOLS directory; nil leaves it unset
		kubectl string                    // the kubectl bytes FindTools must pick
		version string                    // the KubectlVersion it must report
		wantErr bool                      // FindTools must fail with ErrNoTools
	}{
		{"unset: the server's own", nil, "kubectl 1.35", "v1.35.4", false},
		{"one minor older", func(t *testing.T) string { return fakeTools(t, "v1.34.3", "kubectl 1.34", "") }, "kubectl 1.34", "v1.34.3", false},
		{"digest differs from its own manifest", func(t *testing.T) string {
			return fakeTools(t, "v1.36.3", "kubectl 1.36", digest.FromString("kubectl 1.35"))
		}, "", "", true},
		{"no manifest", func(t *testing.T) string { return t.TempDir() }, "", "", true},
		{"manifest not JSON", func(t *testing.T) string {
			d := fakeTools(t, "v1.36.3", "kubectl 1.36", "")
			if err := os.WriteFile(filepath.Join(d, "manifest.json"), []byte("{"), 0o644); err != nil {
				t.Fatal(err)
			}
			return d
		}, "", "", true},
		{"no kubectl", func(t *testing.T) string {
			d := fakeTools(t, "v1.36.3", "kubectl 1.36", "")
			if err := os.Remove(filepath.Join(d, "bin", "kubectl")); err != nil {
				t.Fatal(err)
			}
			return d
		}, "", "", true},
	}
	for _, v := range vectors {
		t.Run(v.name, func(t *testing.T) {
			t.Setenv("QL3_K8S_TOOLS", server)
			t.Setenv(KubectlToolsEnv, "")
			other := ""
			if v.other != nil {
				other = v.other(t)
				t.Setenv(KubectlToolsEnv, other)
			}
			tools, err := FindTools()
			if v.wantErr {
				if !errors.Is(err, ErrNoTools) {
					t.Fatalf("err %v, want ErrNoTools", err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			raw, err := os.ReadFile(tools.Kubectl)
			if err != nil || string(raw) != v.kubectl || tools.KubectlDigest != digest.FromString(v.kubectl) || tools.KubectlVersion != v.version {
				t.Fatalf("kubectl %s (%q, %v) digest %s version %s", tools.Kubectl, raw, err, tools.KubectlDigest, tools.KubectlVersion)
			}
			if tools.KubeAPIServer != filepath.Join(server, "bin", "kube-apiserver") || tools.Etcd != filepath.Join(server, "bin", "etcd") || tools.KubernetesVersion != "v1.35.4" {
				t.Fatalf("server side not from $QL3_K8S_TOOLS: %+v", tools)
			}
		})
	}
}

// TestToolVersions: the running cell is what it claims, the API server of $QL3_K8S_TOOLS and the
// kubectl of $QL3_KUBECTL_TOOLS (or the same directory), as both report themselves.
func TestToolVersions(t *testing.T) {
	Need(t)
	tools, err := FindTools()
	if err != nil {
		t.Fatal(err)
	}
	if shared.KubectlPath != tools.Kubectl || shared.KubectlDigest != tools.KubectlDigest {
		t.Fatalf("the cluster runs kubectl %s, FindTools says %s", shared.KubectlPath, tools.Kubectl)
	}
	so, se, err := shared.Kubectl(context.Background(), nil, "version", "-o=json")
	if err != nil {
		t.Fatalf("%v %s", err, se)
	}
	var v struct {
		Client struct{ GitVersion string } `json:"clientVersion"`
		Server struct{ GitVersion string } `json:"serverVersion"`
	}
	if err := json.Unmarshal(so, &v); err != nil {
		t.Fatal(err)
	}
	if v.Client.GitVersion != tools.KubectlVersion || v.Server.GitVersion != tools.KubernetesVersion {
		t.Fatalf("kubectl %s against server %s, want %s against %s", v.Client.GitVersion, v.Server.GitVersion, tools.KubectlVersion, tools.KubernetesVersion)
	}
	t.Logf("kubectl %s, kube-apiserver %s, etcd %s", v.Client.GitVersion, v.Server.GitVersion, tools.EtcdVersion)
}

// TestKubectlForms logs, verbatim, each kubectl output whose text ql3 parses (verdict/kubeout,
// ceremony/dryrun.go), so that `make matrix` keeps every version's form in its logs
// (docs/kubectl.md lists them); the ceremony's own tests check that ql3 reads each one. Here
// only the anchors the parsers key on are asserted.
func TestKubectlForms(t *testing.T) {
	Need(t)
	ns := "forms-test"
	if err := shared.CreateNamespace(context.Background(), ns); err != nil {
		t.Fatal(err)
	}
	cm := "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: c1, namespace: " + ns + "}\ndata: {key: v}\n"
	ssa := []string{"apply", "--server-side", "--field-manager=qinglong3-catalog-lock", "--validate=strict", "-f=-"}
	// The ceremony's dry-run argv (docs/kubectl.md).
	dry := []string{"apply", "--server-side", "--field-manager=qinglong3-catalog-lock", "--dry-run=server", "--validate=strict", "-f=-"}
	if _, se, err := kc(t, "", "create", "configmap", "taken", "-n", ns, "--from-literal=key=other"); err != nil {
		t.Fatalf("create: %v %s", err, se)
	}
	vectors := []struct {
		name, stdin string
		args        []string
		fails       bool   // kubectl must exit non-zero
		anchor      string // what ql3's parser keys on, in stdout (success) or stderr (failure)
	}{
		{"dry-run lines", cm, dry, false, "configmap/c1 serverside-applied (server dry run)"},
		{"apply lines", cm, ssa, false, "configmap/c1 serverside-applied"},
		{"conflict", strings.Replace(cm, "name: c1", "name: taken", 1), dry, true, `Apply failed with 1 conflict: conflict with "kubectl-create"`},
		{"unknown field", strings.Replace(cm, "\ndata:", "\nbogus: 1\ndata:", 1), dry, true, "failed to create typed patch object (" + ns + "/c1; /v1, Kind=ConfigMap): .bogus: field not declared in schema"},
		{"invalid value", strings.Replace(cm, "{key: v}", "{\"bad key\": v}", 1), dry, true, "is invalid"},
		{"missing namespace", strings.Replace(cm, "namespace: "+ns, "namespace: forms-missing", 1), dry, true, `namespaces "forms-missing" not found`},
	}
	for _, v := range vectors {
		so, se, err := kc(t, v.stdin, v.args...)
		got := so
		if v.fails {
			got = se
		}
		t.Logf("%s: exit error %v\nstdout: %q\nstderr: %q", v.name, err, so, se)
		if (err != nil) != v.fails || !strings.Contains(got, v.anchor) {
			t.Errorf("%s: want fails=%v and %q in the output", v.name, v.fails, v.anchor)
		}
	}
}
