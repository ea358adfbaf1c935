package kubectl

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/opencontainers/go-digest"

	"github.com/qinglong/ql3/evidence"
	"github.com/qinglong/ql3/internal/stablefile"
	"github.com/qinglong/ql3/internal/testbed/testcluster"
	"github.com/qinglong/ql3/refuse"
	"github.com/qinglong/ql3/verdict/argv"
)

// open holds the executable at path for the test's lifetime.
func open(t testing.TB, path string, d digest.Digest) *stablefile.Executable {
	t.Helper()
	exe, err := stablefile.OpenExecutable(path, d)
	if err != nil {
		t.Fatalf("open executable %s: %v", path, err)
	}
	t.Cleanup(func() { _ = exe.Close() })
	return exe
}

// realRunner is a Runner over the real kubectl of the test cluster.
func realRunner(t testing.TB) *Runner {
	t.Helper()
	testcluster.Need(t)
	return &Runner{Exe: open(t, cluster.KubectlPath, cluster.KubectlDigest), Kubeconfig: cluster.KubeconfigBytes(),
		Context: cluster.Context, Timeout: time.Minute, MaxOutput: 4 << 20}
}

// offlineToken is the credential of offlineRunner's kubeconfig: no message may contain it.
const offlineToken = "ql3-offline-runner-token-0123456789abcdef"

// offlineRunner is a valid Runner that needs no cluster, for the refusals raised before kubectl
// starts: its executable is a script that was never meant to run, its kubeconfig names a server
// nobody listens on.
func offlineRunner(t testing.TB) *Runner {
	t.Helper()
	body := []byte("#!/bin/sh\nexit 99\n")
	path := filepath.Join(t.TempDir(), "kubectl")
	if err := os.WriteFile(path, body, 0o755); err != nil {
		t.Fatal(err)
	}
	kubeconfig := "apiVersion: v1\nkind: Config\ncurrent-context: offline\n" +
		"clusters: [{name: offline, cluster: {server: 'https://127.0.0.1:1'}}]\n" +
		"users: [{name: offline, user: {token: " + offlineToken + "}}]\n" +
		"contexts: [{name: offline, context: {cluster: offline, user: offline}}]\n"
	return &Runner{Exe: open(t, path, digest.FromBytes(body)), Kubeconfig: []byte(kubeconfig),
		Context: "offline", Timeout: time.Minute, MaxOutput: 4 << 20}
}

// secrets are what no message may contain: the offline runner's token, and the cluster's
// credentials once a test started it.
func secrets() [][]byte {
	s := [][]byte{[]byte(offlineToken)}
	if cluster != nil {
		s = append(append(s, cluster.Secrets()...), cluster.KubeconfigBytes())
	}
	return s
}

// runDir is the per-run directory a Result names (HOME=, the first entry of its fixed env).
func runDir(t testing.TB, res *Result) string {
	t.Helper()
	if res == nil || len(res.Env) == 0 || !strings.HasPrefix(res.Env[0], "HOME=") {
		t.Fatalf("result does not name its run directory: %+v", res)
	}
	return strings.TrimPrefix(res.Env[0], "HOME=")
}

// checkResult asserts what every Result must satisfy, whatever the step's outcome: the recorded
// invocation passes the auditor's check with the runner's context, argv[0] is the held
// descriptor, the run directory is gone, the streams are within the ceiling, and err (if any)
// carries a code and none of the kubeconfig's secrets nor the output's bytes.
func checkResult(t testing.TB, r *Runner, res *Result, err error) {
	t.Helper()
	if err := CheckInvocation(res.Step, r.Context, res.Argv, res.Env); err != nil {
		t.Errorf("recorded invocation fails CheckInvocation: %v", err)
	}
	if res.Argv[0] != r.Exe.ExecPath() {
		t.Errorf("argv[0] %q, want the held descriptor %q", res.Argv[0], r.Exe.ExecPath())
	}
	if _, serr := os.Lstat(runDir(t, res)); !errors.Is(serr, fs.ErrNotExist) {
		t.Errorf("run directory %s still exists: %v", runDir(t, res), serr)
	}
	if len(res.Stdout) > r.MaxOutput || len(res.Stderr) > r.MaxOutput || res.Stdout == nil || res.Stderr == nil {
		t.Errorf("streams of %d and %d bytes (nil: %v %v), ceiling %d", len(res.Stdout), len(res.Stderr),
			res.Stdout == nil, res.Stderr == nil, r.MaxOutput)
	}
	if res.StartedAt.IsZero() || res.FinishedAt.Before(res.StartedAt) {
		t.Errorf("timing %v .. %v", res.StartedAt, res.FinishedAt)
	}
	checkMessage(t, err, res)
}

// checkMessage asserts that a refusal has a code and leaks no secret and no output.
func checkMessage(t testing.TB, err error, res *Result) {
	t.Helper()
	if err == nil {
		return
	}
	if refuse.CodeOf(err) == "" {
		t.Errorf("error without a reason code: %v", err)
	}
	msg := err.Error()
	if r, ok := refuse.As(err); ok {
		msg += "\n" + r.Hint
	}
	for _, s := range secrets() {
		if bytes.Contains([]byte(msg), s) {
			t.Errorf("message contains kubeconfig secret material: %q", msg)
		}
	}
	if res == nil {
		return
	}
	for _, out := range [][]byte{res.Stdout, res.Stderr} {
		if line, _, _ := bytes.Cut(bytes.TrimSpace(out), []byte("\n")); len(line) >= 8 && strings.Contains(msg, string(line)) {
			t.Errorf("message contains kubectl output %q: %q", line, msg)
		}
	}
}

func wantCode(t testing.TB, err error, code refuse.Code) {
	t.Helper()
	if got := refuse.CodeOf(err); got != code {
		t.Fatalf("code %q, want %q (err: %v)", got, code, err)
	}
}

// namespaceUID decodes an identity read's stdout.
func namespaceUID(t testing.TB, stdout []byte) string {
	t.Helper()
	var ns struct {
		Kind     string `json:"kind"`
		Metadata struct {
			Name          string            `json:"name"`
			UID           string            `json:"uid"`
			ManagedFields []json.RawMessage `json:"managedFields"`
		} `json:"metadata"`
	}
	if err := json.Unmarshal(stdout, &ns); err != nil {
		t.Fatalf("identity stdout is not JSON (%d bytes): %v", len(stdout), err)
	}
	if ns.Kind != "Namespace" || ns.Metadata.Name != "kube-system" || ns.Metadata.ManagedFields != nil {
		t.Fatalf("identity stdout is %s %s with %d managedFields entries, want Namespace kube-system without",
			ns.Kind, ns.Metadata.Name, len(ns.Metadata.ManagedFields))
	}
	return ns.Metadata.UID
}

// configMap is a small manifest in namespace ns.
func configMap(ns, name, value string) []byte {
	return []byte("apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: " + name + "\n  namespace: " + ns + "\ndata:\n  key: " + value + "\n")
}

// liveManagers returns "manager/operation;" for each managedFields entry of a live ConfigMap, or
// "" and false when it does not exist.
func liveManagers(t testing.TB, ns, name string) (string, bool) {
	t.Helper()
	out, se, err := cluster.Kubectl(context.Background(), nil, "get", "-n", ns, "configmap", name, "--show-managed-fields",
		"-o=jsonpath={range .metadata.managedFields[*]}{.manager}/{.operation};{end}")
	if err != nil {
		if bytes.Contains(se, []byte("NotFound")) {
			return "", false
		}
		t.Fatalf("get configmap %s/%s: %v %s", ns, name, err, se)
	}
	return string(out), true
}

// directIdentityRead runs the identity read in dir as the Runner would (its argv, environment and
// working directory) but directly through os/exec, without the Runner's run directory; dir must
// already hold the kubeconfig copy. It returns stdout.
func directIdentityRead(t testing.TB, dir string) []byte {
	t.Helper()
	argv, _ := buildArgv(cluster.KubectlPath, evidence.StepIdentity, dir, cluster.Context)
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Env, cmd.Dir = environ(dir), dir
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	if err := cmd.Run(); err != nil || out.Len() == 0 {
		t.Fatalf("direct identity read: %v (stderr %q)", err, errb.Bytes())
	}
	return out.Bytes()
}

// writableRunDir makes dir look like a run directory whose cache path is a writable directory
// (what a run directory held before 6 December 2026), with the kubeconfig copy.
func writableRunDir(t testing.TB, dir string) {
	t.Helper()
	for _, sub := range []string{argv.CacheName, argv.ConfigName, argv.TmpName} {
		if err := os.Mkdir(filepath.Join(dir, sub), 0o700); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(filepath.Join(dir, argv.KubeconfigName), cluster.KubeconfigBytes(), 0o600); err != nil {
		t.Fatal(err)
	}
}
