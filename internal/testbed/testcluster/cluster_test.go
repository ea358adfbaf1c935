package testcluster

import (
	"context"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

var shared *Cluster

func TestMain(m *testing.M) { os.Exit(Main(m, &shared)) }

func kc(t *testing.T, stdin string, args ...string) (string, string, error) {
	t.Helper()
	so, se, err := shared.Kubectl(context.Background(), []byte(stdin), args...)
	return string(so), string(se), err
}

func TestKubeSystemUIDStable(t *testing.T) {
	Need(t)
	for range 2 {
		out, se, err := kc(t, "", "get", "namespace", "kube-system", "-o=jsonpath={.metadata.uid}")
		if err != nil || out != shared.KubeSystemUID || out == "" {
			t.Fatalf("uid %q want %q: %v %s", out, shared.KubeSystemUID, err, se)
		}
	}
}

func TestServerSideApplyBehaviour(t *testing.T) {
	Need(t)
	home, _ := os.UserHomeDir()
	before := snapshot(home)
	defer func() {
		if after := snapshot(home); after != before {
			t.Errorf("kubectl runs changed the real HOME:\n%s\n---\n%s", before, after)
		}
	}()
	ns := "ssa-test"
	if err := shared.CreateNamespace(context.Background(), ns); err != nil {
		t.Fatal(err)
	}
	cm := "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: c1, namespace: " + ns + "}\ndata: {key: v}\n"
	ssa := []string{"apply", "--server-side", "--field-manager=qinglong3-catalog-lock", "-f=-"}
	// dry-run stores nothing
	if _, se, err := kc(t, cm, append(ssa, "--dry-run=server", "--validate=strict")...); err != nil {
		t.Fatalf("dry-run: %v %s", err, se)
	}
	if _, _, err := kc(t, "", "get", "-n", ns, "configmap", "c1"); err == nil {
		t.Fatal("dry-run stored the object")
	}
	// unknown field fails strict validation
	bad := strings.Replace(cm, "\ndata:", "\nbogus: 1\ndata:", 1)
	if _, se, err := kc(t, bad, append(ssa, "--dry-run=server", "--validate=strict")...); err == nil || !strings.Contains(se, "bogus") {
		t.Fatalf("unknown field accepted: %v %s", err, se)
	}
	// missing namespace fails the dry-run
	missing := strings.Replace(cm, "namespace: "+ns, "namespace: nope-missing", 1)
	if _, se, err := kc(t, missing, append(ssa, "--dry-run=server", "--validate=strict")...); err == nil || !strings.Contains(se, "not found") {
		t.Fatalf("missing namespace accepted: %v %s", err, se)
	}
	// real apply records manager with operation Apply
	if _, se, err := kc(t, cm, ssa...); err != nil {
		t.Fatalf("apply: %v %s", err, se)
	}
	out, _, err := kc(t, "", "get", "-n", ns, "configmap", "c1", "--show-managed-fields", "-o=jsonpath={range .metadata.managedFields[*]}{.manager}/{.operation};{end}")
	if err != nil || !strings.Contains(out, "qinglong3-catalog-lock/Apply;") {
		t.Fatalf("managedFields %q: %v", out, err)
	}
	// a field owned by another manager conflicts
	if _, se, err := kc(t, "", "create", "configmap", "c2", "-n", ns, "--from-literal=key=other"); err != nil {
		t.Fatalf("create: %v %s", err, se)
	}
	cm2 := strings.Replace(cm, "name: c1", "name: c2", 1)
	_, se, err := kc(t, cm2, ssa...)
	if err == nil || !strings.Contains(se, "conflict with \"kubectl-create\"") || !strings.Contains(se, ".data.key") {
		t.Fatalf("no conflict: %v %s", err, se)
	}
	// replicas 0 Deployment is stored
	dep := "apiVersion: apps/v1\nkind: Deployment\nmetadata: {name: d, namespace: " + ns + "}\nspec:\n  replicas: 0\n  selector: {matchLabels: {app: d}}\n  template:\n    metadata: {labels: {app: d}}\n    spec: {containers: [{name: c, image: example.invalid/x:1}]}\n"
	if _, se, err := kc(t, dep, ssa...); err != nil {
		t.Fatalf("deployment: %v %s", err, se)
	}
	if out, se, err := kc(t, "", "get", "-n", ns, "deployment", "d", "-o=jsonpath={.spec.replicas}"); err != nil || out != "0" {
		t.Fatalf("deployment replicas %q, want 0: %v %s", out, err, se)
	}
}

func TestSeparateClustersDifferAndStopCleans(t *testing.T) {
	Need(t)
	home, _ := os.UserHomeDir()
	before := snapshot(home)
	tools, err := FindTools()
	if err != nil {
		t.Fatal(err)
	}
	c, err := Start(context.Background(), tools, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if c.KubeSystemUID == shared.KubeSystemUID {
		t.Fatal("two clusters share a kube-system UID")
	}
	pids := c.PIDs
	if err := c.Stop(); err != nil {
		t.Fatal(err)
	}
	for _, p := range pids {
		if _, err := os.Stat(filepath.Join("/proc", itoa(p))); err == nil {
			t.Fatalf("pid %d still alive", p)
		}
	}
	if _, err := os.Stat(c.Dir); !os.IsNotExist(err) {
		t.Fatalf("dir left: %v", err)
	}
	if after := snapshot(home); after != before {
		t.Fatalf("real HOME changed:\n%s\n---\n%s", before, after)
	}
}

// snapshot lists HOME's top-level names (a new dot-directory shows) and every file under the
// places kubectl would write or read: its config dir, discovery and HTTP caches, and kuberc.
func snapshot(home string) string {
	var b strings.Builder
	if ents, err := os.ReadDir(home); err == nil {
		for _, e := range ents {
			b.WriteString(e.Name() + "\n")
		}
	}
	for _, p := range []string{".kube", ".cache/kubectl", ".config/kubectl", ".kube/cache"} {
		_ = filepath.Walk(filepath.Join(home, p), func(path string, fi os.FileInfo, err error) error {
			if err == nil {
				b.WriteString(path + " " + fi.ModTime().String() + "\n")
			}
			return nil
		})
	}
	return b.String()
}

func itoa(i int) string { return strconv.Itoa(i) }

// TestFreePortsDistinct: the ports of one cluster are distinct (a CI run once gave etcd's peer
// port to the API server too, which then could not bind).
func TestFreePortsDistinct(t *testing.T) {
	for range 50 {
		ports, err := freePorts(3)
		if err != nil {
			t.Fatal(err)
		}
		if ports[0] == ports[1] || ports[1] == ports[2] || ports[0] == ports[2] {
			t.Fatalf("ports %v not distinct", ports)
		}
	}
}
