// Package livetest proves the convergence verifier against the real kube-apiserver and kubectl of
// internal/testbed/testcluster: a server-side apply converges, and each way of changing live state
// afterwards through the real API yields its exact reason code. With -update it rewrites the
// captured outputs in ../testdata that the offline tests replay.
package livetest

import (
	"bytes"
	"context"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/qinglong/ql3/evidence"
	"github.com/qinglong/ql3/evidence/lock"
	"github.com/qinglong/ql3/internal/testbed/testcluster"
	"github.com/qinglong/ql3/refuse"
	"github.com/qinglong/ql3/verdict/convergence"
	"github.com/qinglong/ql3/verdict/convergence/internal/convtest"
)

var (
	cluster *testcluster.Cluster
	update  = flag.Bool("update", false, "rewrite the captured outputs in ../testdata from the real cluster")
)

func TestMain(m *testing.M) { os.Exit(testcluster.Main(m, &cluster)) }

const fm = evidence.FieldManager

var ssa = []string{"apply", "--server-side", "--field-manager=" + fm, "--validate=strict", "-f=-"}

// kubectl runs real kubectl as the cluster admin; {ns} in args and stdin becomes ns.
func kubectl(t *testing.T, ns, stdin string, args ...string) (string, string, error) {
	t.Helper()
	for i := range args {
		args[i] = strings.ReplaceAll(args[i], "{ns}", ns)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	so, se, err := cluster.Kubectl(ctx, []byte(strings.ReplaceAll(stdin, "{ns}", ns)), args...)
	return string(so), string(se), err
}

func must(t *testing.T, ns, stdin string, args ...string) string {
	t.Helper()
	so, se, err := kubectl(t, ns, stdin, args...)
	if err != nil {
		t.Fatalf("kubectl %s: %v\n%s", strings.Join(args, " "), err, se)
	}
	return so
}

func fixture(t *testing.T) []byte {
	t.Helper()
	b, err := os.ReadFile("../testdata/manifest.yaml")
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// deploy creates namespace ns and server-side applies manifest (namespace qinglong rewritten to
// ns) with our field manager, as the ceremony does.
func deploy(t *testing.T, ns string, manifest []byte) []byte {
	t.Helper()
	if ns != "default" {
		if err := cluster.CreateNamespace(context.Background(), ns); err != nil {
			t.Fatal(err)
		}
	}
	m := bytes.ReplaceAll(manifest, []byte("namespace: qinglong"), []byte("namespace: "+ns))
	must(t, ns, string(m), ssa...)
	return m
}

// read is the ceremony's convergence read; an object that is gone makes kubectl exit 1 while it
// still prints the objects it found, which is what the ceremony would store.
func read(t *testing.T, manifest []byte, allowExit bool) []byte {
	t.Helper()
	so, se, err := kubectl(t, "", string(manifest), "get", "-f=-", "-o=json", "--show-managed-fields=true")
	if err != nil && !allowExit {
		t.Fatalf("convergence read: %v\n%s", err, se)
	}
	return []byte(so)
}

func verify(manifest, stdout []byte) (*convergence.Output, error) {
	objs := convtest.MustObjects(manifest)
	return convergence.Verify(convergence.Input{Objects: objs, Authorities: convtest.Authorities(objs), FieldManager: fm, Stdout: stdout})
}

func capture(t *testing.T, name string, b []byte) {
	t.Helper()
	if !*update {
		return
	}
	if err := os.WriteFile(filepath.Join("..", "testdata", name), b, 0o644); err != nil {
		t.Fatal(err)
	}
}

// fixtureNS is where TestConverges applies the fixture; the synthetic release owns "qinglong".
const fixtureNS = "ql3-conv"

func TestConverges(t *testing.T) {
	testcluster.Need(t)
	m := deploy(t, fixtureNS, fixture(t))
	out := read(t, m, false)
	res, err := verify(m, out)
	if err != nil {
		t.Fatalf("fresh apply does not converge: %v", err)
	}
	objs := convtest.MustObjects(m)
	if len(res.Objects) != len(objs) {
		t.Fatalf("%d live objects for %d manifest objects", len(res.Objects), len(objs))
	}
	for i, lo := range res.Objects {
		o := objs[i]
		if lo.Kind != o.Kind || lo.Name != o.Name || lo.Namespace != fixtureNS || lo.APIVersion != o.APIVersion || lo.UID == "" || lo.ResourceVersion == "" {
			t.Errorf("object %d: %+v", i, lo)
		}
	}
	// The fixture's ServiceAccount sets no field, so our manager has no entry on it: the case
	// Verify must accept.
	if bytes.Count(out, []byte(`"manager": "`+fm+`"`)) != len(objs)-1 {
		t.Errorf("expected one entry of %s per object except the ServiceAccount", fm)
	}
	capture(t, "live-list.json", out)

	// kubectl get of one named object prints the object itself, not a List.
	single := must(t, fixtureNS, "", "get", "configmap", "qinglong-config", "-n", fixtureNS, "-o=json", "--show-managed-fields=true")
	cmYAML, err := os.ReadFile("../testdata/configmap.yaml")
	if err != nil {
		t.Fatal(err)
	}
	cmYAML = bytes.ReplaceAll(cmYAML, []byte("namespace: qinglong"), []byte("namespace: "+fixtureNS))
	if _, err := verify(cmYAML, []byte(single)); err != nil {
		t.Fatalf("single object read does not converge: %v", err)
	}
	if !strings.HasPrefix(strings.TrimSpace(single), "{") || strings.Contains(single, `"kind": "List"`) {
		t.Fatalf("expected a bare object from kubectl get of one named object")
	}
	capture(t, "live-single.json", []byte(single))
}

// TestSyntheticRelease runs the synthetic 3.4.1 release through the real lock verifier, the real
// server-side apply and Verify, as the ceremony does, then changes an image as a second manager.
func TestSyntheticRelease(t *testing.T) {
	testcluster.Need(t)
	dir := filepath.Join("..", "..", "..", "testdata", "release-3.4.1")
	m, err := os.ReadFile(filepath.Join(dir, "locked.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	report, err := os.ReadFile(filepath.Join(dir, "lock-report.json"))
	if err != nil {
		t.Fatal(err)
	}
	res, err := lock.Verify(m, report)
	if err != nil {
		t.Fatalf("lock verifier: %v", err)
	}
	if err := convergence.CheckManifest(res.Objects); err != nil {
		t.Fatal(err)
	}
	in := convergence.Input{Objects: res.Objects, Authorities: res.Authorities, FieldManager: fm}
	if err := cluster.CreateNamespace(context.Background(), "qinglong"); err != nil {
		t.Fatal(err)
	}
	must(t, "", string(m), ssa...)
	in.Stdout = read(t, m, false)
	out, err := convergence.Verify(in)
	if err != nil {
		t.Fatalf("synthetic release does not converge: %v", err)
	}
	if len(out.Objects) != len(res.Objects) || len(res.Authorities) != 4 {
		t.Fatalf("%d live objects, %d authorities", len(out.Objects), len(res.Authorities))
	}
	a := res.Authorities[0]
	must(t, "", "", "set", "image", "deployment/"+a.Name, "-n", a.Namespace, a.Containers[0].Name+"="+otherImage)
	in.Stdout = read(t, m, false)
	if _, err := convergence.Verify(in); refuse.CodeOf(err) != convergence.CodeImageMismatch {
		t.Fatalf("changed image: %v", err)
	}
}

// TestServerRendering pins what the real server does to values as written, and Verify's verdict:
// it drops empty collections (converges), omits "" / false / 0 of optional fields (refused: the
// field is absent), stores 1.0 as 1 (converges: numbers compare by decimal value) and normalizes
// quantities (refused: the value differs).
func TestServerRendering(t *testing.T) {
	testcluster.Need(t)
	if err := cluster.CreateNamespace(context.Background(), "conv-render"); err != nil {
		t.Fatal(err)
	}
	deployment := func(name, replicas, container string) string {
		return "apiVersion: apps/v1\nkind: Deployment\nmetadata:\n  name: " + name + "\n  namespace: conv-render\n" +
			"spec:\n  replicas: " + replicas + "\n  selector: {matchLabels: {app: " + name + "}}\n  template:\n" +
			"    metadata: {labels: {app: " + name + "}}\n    spec:\n      containers:\n      - name: c\n        image: example.invalid/c:1\n" + container
	}
	vectors := []struct {
		name     string      // what the manifest writes
		manifest string      // the manifest
		code     refuse.Code // Verify's verdict on the live read
		names    string      // a string the refusal must contain
	}{
		{"empty collections", deployment("empty", "0", "        args: []\n        env: []\n        resources: {}\n        volumeMounts: []\n") +
			"---\napiVersion: v1\nkind: ConfigMap\nmetadata: {name: empty, namespace: conv-render, annotations: {}}\ndata: {}\n", "", ""},
		{"numbers with a fraction", deployment("numbers", "1.0", "        terminationMessagePath: /dev/termination-log\n"), "", ""},
		{"an empty string the server omits", deployment("zero-string", "0", "        workingDir: \"\"\n"), convergence.CodeFieldMissing, "containers[name=c].workingDir"},
		{"a false the server omits", deployment("zero-bool", "0", "        stdin: false\n"), convergence.CodeFieldMissing, "containers[name=c].stdin"},
		{"a quantity the server normalizes", deployment("quantity", "0", "        resources: {limits: {cpu: 0.5}}\n"), convergence.CodeFieldDiffers, "resources.limits.cpu: the live value is a json string, the manifest's a number"},
		{"a quantity in another unit", deployment("unit", "0", "        resources: {limits: {memory: 1.5Gi}}\n"), convergence.CodeFieldDiffers, "resources.limits.memory: the live value differs"},
	}
	for _, v := range vectors {
		t.Run(v.name, func(t *testing.T) {
			must(t, "", v.manifest, ssa...)
			objs := convtest.MustObjects([]byte(v.manifest))
			_, err := convergence.Verify(convergence.Input{Objects: objs, FieldManager: fm, Stdout: read(t, []byte(v.manifest), false)})
			if got := refuse.CodeOf(err); got != v.code {
				t.Fatalf("code %q, want %q (%v)", got, v.code, err)
			}
			if err != nil && !strings.Contains(err.Error(), v.names) {
				t.Fatalf("refusal does not name %q: %v", v.names, err)
			}
		})
	}
}

// TestNamespaceFromContext: a manifest object without a namespace lands in the context's
// namespace, which Verify accepts and reports.
func TestNamespaceFromContext(t *testing.T) {
	testcluster.Need(t)
	m := []byte("apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: conv-no-namespace\ndata: {k: v}\n")
	must(t, "", string(m), ssa...)
	res, err := verify(m, read(t, m, false))
	if err != nil {
		t.Fatal(err)
	}
	if res.Objects[0].Namespace != "default" {
		t.Fatalf("namespace %q, want default", res.Objects[0].Namespace)
	}
}

type step struct {
	stdin string
	args  []string
}

func run(args ...string) step { return step{args: args} }

func applyAs(manager, stdin string) step {
	return step{stdin: stdin, args: []string{"apply", "--server-side", "--force-conflicts", "--field-manager=" + manager, "-f=-"}}
}

const otherImage = "ghcr.io/qinglong/web@sha256:0000000000000000000000000000000000000000000000000000000000000000"

func TestLiveChanges(t *testing.T) {
	testcluster.Need(t)
	cmPort := func(v string) string {
		return "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: qinglong-config, namespace: {ns}}\ndata: {QL_PORT: \"" + v + "\"}\n"
	}
	svc := "apiVersion: v1\nkind: Service\nmetadata:\n  name: qinglong-web\n  namespace: {ns}\n  labels: {app.kubernetes.io/name: qinglong}\n" +
		"spec:\n  selector: {app.kubernetes.io/component: web}\n  ports: [{name: http, port: 80, targetPort: 5700}]\n"
	webImage := convtest.Authorities(convtest.MustObjects(fixture(t)))[3].Containers[0].Image
	vectors := []struct {
		name    string      // how live state is changed after our apply
		steps   []step      // kubectl runs that change it, in order
		code    refuse.Code // expected reason code; "" means Verify must pass
		names   string      // a string the refusal message must contain (the owning manager)
		gone    bool        // an object is gone, so the read exits non-zero
		capture string      // file in ../testdata to capture the read into with -update
	}{
		{"another manager force-applies a field with another value", []step{applyAs("other", cmPort("5701"))},
			convergence.CodeFieldDiffers, "data.QL_PORT", false, ""},
		{"another manager force-applies a field, then our value again", []step{applyAs("other", cmPort("5701")), applyAs("other", cmPort("5700"))},
			convergence.CodeFieldNotOwned, "other (Apply)", false, "live-field-not-owned.json"},
		{"another manager applies the same value: shared ownership", []step{applyAs("other", cmPort("5700"))}, "", "", false, ""},
		{"kubectl annotate overwrites a release annotation", []step{run("annotate", "deployment", "qinglong-api", "-n", "{ns}", "--overwrite", "qinglong.io/release-version=3.4.2")},
			convergence.CodeAnnotationMismatch, `metadata.annotations["qinglong.io/release-version"]`, false, ""},
		{"kubectl annotate overwrites a release annotation and restores it", []step{
			run("annotate", "deployment", "qinglong-api", "-n", "{ns}", "--overwrite", "qinglong.io/release-version=3.4.2"),
			run("annotate", "deployment", "qinglong-api", "-n", "{ns}", "--overwrite", "qinglong.io/release-version=3.4.1")},
			convergence.CodeAnnotationNotOwned, "kubectl-annotate (Update)", false, ""},
		{"kubectl set image", []step{run("set", "image", "deployment/qinglong-web", "-n", "{ns}", "web="+otherImage)},
			convergence.CodeImageMismatch, "spec.template.spec.containers[name=web].image", false, "live-image-mismatch.json"},
		{"kubectl set image and back", []step{run("set", "image", "deployment/qinglong-web", "-n", "{ns}", "web="+otherImage),
			run("set", "image", "deployment/qinglong-web", "-n", "{ns}", "web="+webImage)},
			convergence.CodeImageNotOwned, "kubectl-set (Update)", false, "live-image-not-owned.json"},
		{"kubectl set image of an init container", []step{run("set", "image", "deployment/qinglong-runner", "-n", "{ns}", "migrate="+otherImage)},
			convergence.CodeImageMismatch, "initContainers[name=migrate].image", false, ""},
		{"kubectl patch adds a container", []step{run("patch", "deployment", "qinglong-api", "-n", "{ns}", "-p",
			`{"spec":{"template":{"spec":{"containers":[{"name":"sidecar","image":"example.invalid/x:1"}]}}}}`)},
			convergence.CodeImageMismatch, "containers", false, ""},
		{"kubectl patch changes a service port", []step{run("patch", "service", "qinglong-web", "-n", "{ns}", "-p", `{"spec":{"ports":[{"port":80,"targetPort":5701}]}}`)},
			convergence.CodeFieldDiffers, "spec.ports[name=http].targetPort", false, ""},
		{"kubectl patch changes a service port and back", []step{
			run("patch", "service", "qinglong-web", "-n", "{ns}", "-p", `{"spec":{"ports":[{"port":80,"targetPort":5701}]}}`),
			run("patch", "service", "qinglong-web", "-n", "{ns}", "-p", `{"spec":{"ports":[{"port":80,"targetPort":5700}]}}`)},
			convergence.CodeFieldNotOwned, "kubectl-patch (Update)", false, ""},
		{"kubectl patch adds an env var", []step{run("patch", "deployment", "qinglong-api", "-n", "{ns}", "-p",
			`{"spec":{"template":{"spec":{"containers":[{"name":"api","env":[{"name":"EXTRA","value":"1"}]}]}}}}`)},
			convergence.CodeFieldDiffers, "containers[name=api].env", false, ""},
		{"kubectl patch adds a label the manifest does not set", []step{run("label", "deployment", "qinglong-api", "-n", "{ns}", "extra=1")}, "", "", false, ""},
		{"kubectl label writes our own value again", []step{run("label", "deployment", "qinglong-api", "-n", "{ns}", "--overwrite", "app.kubernetes.io/name=qinglong")}, "", "", false, ""},
		{"kubectl scale through the scale subresource", []step{run("scale", "deployment", "qinglong-api", "-n", "{ns}", "--replicas=1")},
			convergence.CodeFieldDiffers, "spec.replicas", false, ""},
		{"kubectl scale and back", []step{run("scale", "deployment", "qinglong-api", "-n", "{ns}", "--replicas=1"),
			run("scale", "deployment", "qinglong-api", "-n", "{ns}", "--replicas=0")},
			convergence.CodeFieldNotOwned, "owned by no manager", false, ""}, // the server drops the scale entry once replicas is back
		{"a deleted object held by its finalizer", []step{run("delete", "configmap", "qinglong-config", "-n", "{ns}", "--wait=false")},
			convergence.CodeObjectTerminating, "ConfigMap", false, "live-terminating.json"},
		{"a deleted object", []step{run("delete", "configmap", "qinglong-config", "-n", "{ns}", "--wait=false"),
			run("patch", "configmap", "qinglong-config", "-n", "{ns}", "--type=json", "-p", `[{"op":"remove","path":"/metadata/finalizers"}]`)},
			convergence.CodeObjectCount, "", true, "live-count.json"},
		{"an object recreated by kubectl create", []step{run("delete", "service", "qinglong-web", "-n", "{ns}"), {stdin: svc, args: []string{"create", "-f=-"}}},
			convergence.CodeFieldNotOwned, "kubectl-create (Update)", false, ""},
	}
	for i, v := range vectors {
		t.Run(v.name, func(t *testing.T) {
			ns := fmt.Sprintf("conv-%02d", i)
			m := deploy(t, ns, fixture(t))
			if _, err := verify(m, read(t, m, false)); err != nil {
				t.Fatalf("before the change: %v", err)
			}
			for _, s := range v.steps {
				must(t, ns, s.stdin, append([]string(nil), s.args...)...)
			}
			out := read(t, m, v.gone)
			_, err := verify(m, out)
			if got := refuse.CodeOf(err); got != v.code {
				t.Fatalf("code %q, want %q (%v)", got, v.code, err)
			}
			if err != nil && !strings.Contains(err.Error(), v.names) {
				t.Fatalf("refusal does not name %q: %v", v.names, err)
			}
			if v.capture != "" {
				capture(t, v.capture, out)
			}
		})
	}
}
