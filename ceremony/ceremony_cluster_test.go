//go:build ql3wip

package ceremony

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"sigs.k8s.io/yaml"

	"github.com/qinglong/ql3/evidence"
	"github.com/qinglong/ql3/internal/kubeconfig"
	"github.com/qinglong/ql3/internal/refuse"
	"github.com/qinglong/ql3/internal/testcluster"
	"github.com/qinglong/ql3/store"
)

var cluster *testcluster.Cluster

const childEnv = "QL3_CEREMONY_TEST_CHILD"

func TestMain(m *testing.M) {
	// The recovery test re-executes this binary as the ql3 child that is killed right after apply.
	if cf := os.Getenv(childEnv); cf != "" {
		afterStep = func(step string) {
			if step == evidence.StepApply {
				_ = syscall.Kill(os.Getpid(), syscall.SIGKILL)
			}
		}
		_, err := Apply(context.Background(), Options{CommandFile: cf})
		if err != nil {
			os.Exit(3)
		}
		os.Exit(0)
	}
	testcluster.Main(m, &cluster)
}

// bed is one private working area: inputs, command files and a store.
type bed struct {
	t     *testing.T
	dir   string
	store string
	cmd   map[string]any
	out   bytes.Buffer // every progress line, for the secret scan
}

func writePrivate(t *testing.T, path string, b []byte) {
	t.Helper()
	if err := os.WriteFile(path, b, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(path, 0o600); err != nil {
		t.Fatal(err)
	}
}

func newBed(t *testing.T) *bed {
	t.Helper()
	dir, err := filepath.EvalSymlinks(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	copyIn := func(src, name string) string {
		b, err := os.ReadFile(src)
		if err != nil {
			t.Fatal(err)
		}
		p := filepath.Join(dir, name)
		writePrivate(t, p, b)
		return p
	}
	man := copyIn("../testdata/release-3.4.1/locked.yaml", "locked.yaml")
	rep := copyIn("../testdata/release-3.4.1/lock-report.json", "lock-report.json")
	kc := copyIn(cluster.KubeconfigPath, "kubeconfig")
	st := filepath.Join(dir, "store")
	if err := store.Init(st); err != nil {
		t.Fatal(err)
	}
	b := &bed{t: t, dir: dir, store: st}
	b.cmd = map[string]any{
		"schema":             evidence.SchemaCommand,
		"command":            evidence.CommandPreflight,
		"store":              st,
		"manifest":           map[string]any{"path": man, "digest": fileDigest(t, man)},
		"lockReport":         map[string]any{"path": rep, "digest": fileDigest(t, rep)},
		"kubeconfig":         map[string]any{"path": kc, "digest": fileDigest(t, kc), "context": cluster.Context},
		"kubectl":            map[string]any{"path": cluster.KubectlPath, "digest": string(cluster.KubectlDigest)},
		"expectedClusterUid": cluster.KubeSystemUID,
		"fieldManager":       evidence.FieldManager,
	}
	return b
}

func fileDigest(t *testing.T, p string) string {
	b, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	return string(evidence.FromBytes(b))
}

// write writes the command file name with the current command.
func (b *bed) write(name string) string {
	raw, err := json.Marshal(b.cmd)
	if err != nil {
		b.t.Fatal(err)
	}
	p := filepath.Join(b.dir, name)
	_ = os.Remove(p)
	writePrivate(b.t, p, raw)
	return p
}

func (b *bed) preflight() (*Result, error) {
	return Preflight(context.Background(), Options{CommandFile: b.write("preflight.json"), Progress: &b.out})
}

func (b *bed) applyFile(pre string) string {
	c := map[string]any{}
	for k, v := range b.cmd {
		c[k] = v
	}
	c["command"] = evidence.CommandApply
	c["preflight"] = pre
	raw, _ := json.Marshal(c)
	p := filepath.Join(b.dir, "apply.json")
	_ = os.Remove(p)
	writePrivate(b.t, p, raw)
	return p
}

func (b *bed) apply(file string) (*Result, error) {
	return Apply(context.Background(), Options{CommandFile: file, Progress: &b.out})
}

func (b *bed) count(kind string) int {
	es, _ := os.ReadDir(filepath.Join(b.store, "index", kind))
	return len(es)
}

// scan fails when any credential byte string of the cluster appears in the store or the output.
func (b *bed) scan() {
	b.t.Helper()
	secrets := cluster.Secrets()
	check := func(where string, data []byte) {
		for _, s := range secrets {
			if len(s) > 0 && bytes.Contains(data, s) {
				b.t.Fatalf("a credential appears in %s", where)
			}
		}
	}
	check("progress output", b.out.Bytes())
	_ = filepath.Walk(b.store, func(p string, fi os.FileInfo, err error) error {
		if err == nil && fi.Mode().IsRegular() {
			data, rerr := os.ReadFile(p)
			if rerr == nil {
				check(p, data)
			}
		}
		return nil
	})
}

func wantCode(t *testing.T, err error, code refuse.Code) {
	t.Helper()
	if got := refuse.CodeOf(err); got != code {
		t.Fatalf("code %q, want %q (%v)", got, code, err)
	}
}

func kubectlT(t *testing.T, stdin []byte, args ...string) []byte {
	t.Helper()
	out, err := cluster.Kubectl(context.Background(), stdin, args...)
	if err != nil {
		t.Fatalf("kubectl %v: %v", args, err)
	}
	return out
}

// TestCeremonyRealCluster runs in a fixed order: the missing-namespace refusal needs a cluster
// without the qinglong namespace (namespaces cannot be deleted without a controller manager).
func TestCeremonyRealCluster(t *testing.T) {
	t.Run("MissingNamespace", func(t *testing.T) {
		b := newBed(t)
		_, err := b.preflight()
		wantCode(t, err, CodeDryRunNamespace)
		if b.count(evidence.IndexPreflights) != 0 {
			t.Fatal("a refused preflight was published")
		}
		b.scan()
	})
	if err := cluster.CreateNamespace(context.Background(), "qinglong"); err != nil {
		t.Fatal(err)
	}
	t.Run("HappyPathAndOfflineRerun", func(t *testing.T) {
		b := newBed(t)
		pre, err := b.preflight()
		if err != nil {
			t.Fatal(err)
		}
		af := b.applyFile(string(pre.Preflight))
		rc, err := b.apply(af)
		if err != nil {
			t.Fatal(err)
		}
		if rc.Recovered || rc.Offline || rc.Receipt == "" {
			t.Fatalf("result %+v", rc)
		}
		var r evidence.Receipt
		st, err := store.Open(b.store)
		if err != nil {
			t.Fatal(err)
		}
		raw, err := st.Get(rc.Receipt)
		if err != nil {
			t.Fatal(err)
		}
		if err := evidence.DecodeRecord(evidence.MediaTypeReceipt, raw, &r); err != nil {
			t.Fatal(err)
		}
		if len(r.Objects) != 6 || len(r.Execs) != 5 || r.CrossResourceAtomicity || !r.KubernetesMutation {
			t.Fatalf("receipt: %d objects, %d execs", len(r.Objects), len(r.Execs))
		}
		for _, o := range r.Objects {
			if o.UID == "" || o.ResourceVersion == "" {
				t.Fatalf("object %s/%s without uid or resourceVersion", o.Kind, o.Name)
			}
		}
		if !strings.Contains(string(kubectlT(t, nil, "get", "-n", "qinglong", "configmaps,deployments,serviceaccounts,services,statefulsets", "-o", "json", "--show-managed-fields")), evidence.FieldManager) {
			t.Fatal("no live object is managed by our field manager")
		}
		if rep, err := st.Verify(); err != nil {
			t.Fatalf("store verify: %v %+v", err, rep)
		}
		runs := 0
		runHook = func(string) { runs++ }
		defer func() { runHook = func(string) {} }()
		again, err := b.apply(af)
		if err != nil {
			t.Fatal(err)
		}
		if again.Receipt != rc.Receipt || !again.Offline || runs != 0 {
			t.Fatalf("rerun: receipt %s (want %s), offline %v, %d kubectl runs", again.Receipt, rc.Receipt, again.Offline, runs)
		}
		b.scan()
	})
	t.Run("Refusals", func(t *testing.T) {
		vectors := []struct {
			name string
			edit func(b *bed) // breaks the bed before the preflight
			code refuse.Code
		}{
			// the cluster is not the reviewed one
			{name: "uid mismatch", edit: func(b *bed) { b.cmd["expectedClusterUid"] = "00000000-0000-0000-0000-000000000000" }, code: CodeClusterUID},
			// kubectl pinned by another digest
			{name: "kubectl digest", edit: func(b *bed) {
				b.cmd["kubectl"].(map[string]any)["digest"] = string(evidence.FromBytes([]byte("other")))
			}, code: CodeDigestMismatch},
			// manifest pinned by another digest
			{name: "manifest digest", edit: func(b *bed) {
				b.cmd["manifest"].(map[string]any)["digest"] = string(evidence.FromBytes([]byte("other")))
			}, code: CodeDigestMismatch},
			// a kubeconfig whose user runs an exec plugin
			{name: "kubeconfig exec", edit: func(b *bed) { b.rewriteKubeconfig(execUser) }, code: kubeconfig.CodeExecForbidden},
			// a kubeconfig whose user reads a token file behind our back
			{name: "kubeconfig tokenFile", edit: func(b *bed) { b.rewriteKubeconfig(tokenFileUser) }, code: kubeconfig.CodeFileReference},
			// a context the kubeconfig does not have
			{name: "kubeconfig context", edit: func(b *bed) { b.cmd["kubeconfig"].(map[string]any)["context"] = "absent" }, code: kubeconfig.CodeContextMissing},
		}
		for _, v := range vectors {
			t.Run(v.name, func(t *testing.T) {
				b := newBed(t)
				v.edit(b)
				_, err := b.preflight()
				wantCode(t, err, v.code)
				if b.count(evidence.IndexPreflights) != 0 {
					t.Fatal("a refused preflight was published")
				}
				b.scan()
			})
		}
	})
	t.Run("InputChangedAfterDryRun", func(t *testing.T) {
		b := newBed(t)
		man := b.cmd["manifest"].(map[string]any)["path"].(string)
		afterStep = func(step string) {
			if step == evidence.StepDryRun {
				f, _ := os.OpenFile(man, os.O_WRONLY|os.O_APPEND, 0)
				_, _ = f.Write([]byte("\n"))
				_ = f.Close()
			}
		}
		defer func() { afterStep = func(string) {} }()
		_, err := b.preflight()
		if refuse.CodeOf(err) == "" {
			t.Fatalf("changed input not refused: %v", err)
		}
		if b.count(evidence.IndexPreflights) != 0 {
			t.Fatal("a refused preflight was published")
		}
	})
	t.Run("ApplyPreflightOtherTargetAndAbsent", func(t *testing.T) {
		b := newBed(t)
		pre, err := b.preflight()
		if err != nil {
			t.Fatal(err)
		}
		absent := string(evidence.FromBytes([]byte("absent")))
		_, err = b.apply(b.applyFile(absent))
		wantCode(t, err, CodePreflightNotFound)
		// Same store, another target: the preflight binds a different expectedClusterUid.
		b.cmd["expectedClusterUid"] = cluster.KubeSystemUID + "-x"
		_, err = b.apply(b.applyFile(string(pre.Preflight)))
		wantCode(t, err, CodePreflightTarget)
		if b.count(evidence.IndexReceipts) != 0 || b.count(evidence.IndexIntents) != 0 {
			t.Fatal("a refused apply published evidence")
		}
	})
	t.Run("RecoveryAfterKill", func(t *testing.T) {
		b := newBed(t)
		pre, err := b.preflight()
		if err != nil {
			t.Fatal(err)
		}
		af := b.applyFile(string(pre.Preflight))
		self, _ := os.Executable()
		child := exec.Command(self, "-test.run=^$")
		child.Env = append(os.Environ(), childEnv+"="+af)
		err = child.Run()
		if ee, ok := err.(*exec.ExitError); !ok || ee.ProcessState.Sys().(syscall.WaitStatus).Signal() != syscall.SIGKILL {
			t.Fatalf("child was not killed after apply: %v", err)
		}
		if b.count(evidence.IndexIntents) != 1 || b.count(evidence.IndexReceipts) != 0 {
			t.Fatal("the killed child did not leave exactly an intent")
		}
		rc, err := b.apply(af)
		if err != nil {
			t.Fatal(err)
		}
		if !rc.Recovered || rc.Intent == "" {
			t.Fatalf("rerun did not recover: %+v", rc)
		}
		st, _ := store.Open(b.store)
		if _, err := st.Verify(); err != nil {
			t.Fatal(err)
		}
		b.scan()
	})
	t.Run("ConflictWithAnotherManager", func(t *testing.T) {
		b := newBed(t)
		name := firstConfigMap(t)
		kubectlT(t, nil, "patch", "configmap", name, "-n", "qinglong", "--field-manager=other", "--type=merge",
			"-p", `{"data":{"ql3-conflict":"x"}}`)
		// Owning a field the manifest sets with another value makes the dry-run conflict.
		kubectlT(t, nil, "patch", "configmap", name, "-n", "qinglong", "--field-manager=other", "--type=json",
			"-p", `[{"op":"replace","path":"/metadata/annotations/qinglong.io~1release-version","value":"0.0.0"}]`)
		_, err := b.preflight()
		wantCode(t, err, CodeDryRunConflict)
		if b.count(evidence.IndexPreflights) != 0 {
			t.Fatal("a refused preflight was published")
		}
	})
}

func firstConfigMap(t *testing.T) string {
	raw, err := os.ReadFile("../testdata/release-3.4.1/locked.yaml")
	if err != nil {
		t.Fatal(err)
	}
	for _, doc := range strings.Split(string(raw), "\n---") {
		var o struct {
			Kind     string `json:"kind"`
			Metadata struct {
				Name string `json:"name"`
			} `json:"metadata"`
		}
		if yaml.Unmarshal([]byte(doc), &o) == nil && o.Kind == "ConfigMap" {
			return o.Metadata.Name
		}
	}
	t.Fatal("no configmap in the release")
	return ""
}

// rewriteKubeconfig replaces the auth of every user of the real kubeconfig by user and re-pins the
// file, so that only the user policy can refuse it.
func (b *bed) rewriteKubeconfig(user map[string]any) {
	kc := b.cmd["kubeconfig"].(map[string]any)
	path := kc["path"].(string)
	raw, err := os.ReadFile(path)
	if err != nil {
		b.t.Fatal(err)
	}
	var cfg map[string]any
	if err := yaml.Unmarshal(raw, &cfg); err != nil {
		b.t.Fatal(err)
	}
	for _, u := range cfg["users"].([]any) {
		u.(map[string]any)["user"] = user
	}
	out, err := yaml.Marshal(cfg)
	if err != nil {
		b.t.Fatal(err)
	}
	_ = os.Remove(path)
	writePrivate(b.t, path, out)
	kc["digest"] = fileDigest(b.t, path)
}

var (
	execUser = map[string]any{"exec": map[string]any{"apiVersion": "client.authentication.k8s.io/v1",
		"command": "/bin/true", "interactiveMode": "Never"}}
	tokenFileUser = map[string]any{"tokenFile": "/etc/hostname"}
)
