package livetest

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/qinglong/ql3/audit/internal/audittest"
	"github.com/qinglong/ql3/ceremony"
	"github.com/qinglong/ql3/evidence"
	"github.com/qinglong/ql3/internal/materialize"
	"github.com/qinglong/ql3/store"
)

// bed is one release materialized into its own namespace, with private copies of its inputs and
// command files, applying into a store that several beds may share.
type bed struct {
	t     *testing.T
	dir   string
	store string
	ns    string
	cmd   map[string]any
}

const release = "../../testdata/release-3.4.1/"

// unlocked returns the synthetic 3.4.1 release's unlocked manifest.
func unlocked(t *testing.T) string {
	b, err := os.ReadFile(release + "unlocked.yaml")
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// newBed materializes the unlocked manifest u (written for namespace qinglong) into namespace ns,
// creates ns unless it exists, and opens (or creates) the store at storeRoot.
func newBed(t *testing.T, storeRoot, ns, u string) *bed {
	t.Helper()
	b := &bed{t: t, dir: audittest.PrivateDir(t), store: storeRoot, ns: ns}
	catalog, err := os.ReadFile(release + "catalog.json")
	if err != nil {
		t.Fatal(err)
	}
	rel, err := materialize.Materialize(catalog, []byte(strings.ReplaceAll(u, "namespace: qinglong\n", "namespace: "+ns+"\n")))
	if err != nil {
		t.Fatalf("materialize: %v", err)
	}
	man, rep, kc := filepath.Join(b.dir, "locked.yaml"), filepath.Join(b.dir, "lock-report.json"), filepath.Join(b.dir, "kubeconfig")
	writePrivate(t, man, rel.Manifest)
	writePrivate(t, rep, rel.Report)
	writePrivate(t, kc, cluster.KubeconfigBytes())
	if _, err := store.Init(storeRoot); err != nil {
		t.Fatal(err)
	}
	if _, _, err := cluster.Kubectl(context.Background(), nil, "get", "namespace", ns); err != nil {
		if err := cluster.CreateNamespace(context.Background(), ns); err != nil {
			t.Fatal(err)
		}
	}
	b.cmd = map[string]any{
		"schema":             evidence.SchemaCommand,
		"store":              storeRoot,
		"manifest":           map[string]any{"path": man, "digest": string(evidence.FromBytes(rel.Manifest))},
		"lockReport":         map[string]any{"path": rep, "digest": string(evidence.FromBytes(rel.Report))},
		"kubeconfig":         map[string]any{"path": kc, "digest": string(evidence.FromBytes(cluster.KubeconfigBytes())), "context": cluster.Context},
		"kubectl":            map[string]any{"path": cluster.KubectlPath, "digest": string(cluster.KubectlDigest)},
		"expectedClusterUid": cluster.KubeSystemUID,
		"fieldManager":       evidence.FieldManager,
	}
	return b
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

// writeCommand writes the bed's command as command, consuming preflight if not empty.
func (b *bed) writeCommand(file, command, preflight string) string {
	c := map[string]any{}
	for k, v := range b.cmd {
		c[k] = v
	}
	c["command"] = command
	if preflight != "" {
		c["preflight"] = preflight
	}
	raw, err := json.Marshal(c)
	if err != nil {
		b.t.Fatal(err)
	}
	p := filepath.Join(b.dir, file)
	_ = os.Remove(p)
	writePrivate(b.t, p, raw)
	return p
}

func (b *bed) preflight(file string) *ceremony.Result {
	b.t.Helper()
	res, err := ceremony.Preflight(context.Background(), ceremony.Options{CommandFile: b.writeCommand(file, evidence.CommandPreflight, "")})
	if err != nil {
		b.t.Fatalf("preflight: %v", err)
	}
	return res
}

func (b *bed) apply(file string) *ceremony.Result {
	b.t.Helper()
	res, err := ceremony.Apply(context.Background(), ceremony.Options{CommandFile: file})
	if err != nil {
		b.t.Fatalf("apply: %v", err)
	}
	return res
}

// mustApply runs the preflight and the apply that consumes it.
func (b *bed) mustApply() (pre, rc *ceremony.Result) {
	b.t.Helper()
	pre = b.preflight("preflight.json")
	rc = b.apply(b.writeCommand("apply.json", evidence.CommandApply, string(pre.Preflight)))
	if rc.Recovered || rc.Offline || rc.Receipt == "" {
		b.t.Fatalf("apply result %+v", rc)
	}
	return pre, rc
}

// killAfterApply runs the apply command file in a re-executed test binary (see TestMain) and kills
// it with SIGKILL as soon as it starts its convergence read: the server-side apply has returned
// and been recorded, the receipt is not written (it needs the convergence read and the final
// identity read first). This is a crash right after the mutation, without a test hook in the
// ceremony: the child runs the production code path unchanged.
func (b *bed) killAfterApply(file string) {
	t := b.t
	t.Helper()
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	child := exec.Command(self, "-test.run=^$")
	child.Env = append(os.Environ(), childEnv+"="+file)
	if err := child.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- child.Wait() }()
	deadline := time.After(3 * time.Minute)
	for {
		select {
		case err := <-done:
			t.Fatalf("the apply child ended (%v) before it was seen starting its convergence read", err)
		case <-deadline:
			_ = child.Process.Kill()
			t.Fatal("the apply child did not reach its convergence read in time")
		default:
		}
		if convergenceRead(child.Process.Pid) {
			if err := child.Process.Signal(syscall.SIGKILL); err != nil {
				t.Fatal(err)
			}
			err := <-done
			if ee, ok := err.(*exec.ExitError); !ok || ee.ProcessState.Sys().(syscall.WaitStatus).Signal() != syscall.SIGKILL {
				t.Fatalf("the apply child was not killed: %v", err)
			}
			return
		}
		time.Sleep(200 * time.Microsecond)
	}
}

// convergenceRead reports whether a child of pid is kubectl running the convergence read.
func convergenceRead(pid int) bool {
	ents, _ := os.ReadDir("/proc")
	for _, e := range ents {
		p, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", p))
		if err != nil {
			continue
		}
		// pid (comm) state ppid ...: comm may hold spaces and parentheses.
		i := bytes.LastIndexByte(stat, ')')
		f := strings.Fields(string(stat[i+1:]))
		if len(f) < 2 || f[1] != strconv.Itoa(pid) {
			continue
		}
		cl, _ := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", p))
		if bytes.Contains(cl, []byte("\x00--show-managed-fields=true")) {
			return true
		}
	}
	return false
}

// count returns the number of index entries of kind.
func (b *bed) count(kind string) int {
	es, _ := os.ReadDir(filepath.Join(b.store, "index", kind))
	return len(es)
}

// liveObjects returns how many objects of the bed's release exist in its namespace.
func (b *bed) liveObjects() int {
	out, se, err := cluster.Kubectl(context.Background(), nil, "get", "-n", b.ns, "deployments,services,configmaps", "-o=name")
	if err != nil {
		b.t.Fatalf("kubectl get: %v %s", err, se)
	}
	n := 0
	for _, l := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		if l != "" && l != "configmap/kube-root-ca.crt" {
			n++
		}
	}
	return n
}
