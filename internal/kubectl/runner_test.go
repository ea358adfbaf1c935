package kubectl

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/qinglong/ql3/evidence"
	"github.com/qinglong/ql3/internal/kubectl/rundir"
	"github.com/qinglong/ql3/internal/testbed/testcluster"
	"github.com/qinglong/ql3/verdict/argv"
)

func TestIdentityReadReturnsClusterUID(t *testing.T) {
	r := realRunner(t)
	for _, step := range []string{evidence.StepIdentity, evidence.StepIdentityFinal} {
		res, err := r.Run(context.Background(), step, nil)
		if err != nil {
			t.Fatalf("%s: %v", step, err)
		}
		checkResult(t, r, res, err)
		if res.ExitCode != 0 || len(res.Stderr) != 0 {
			t.Fatalf("%s: exit %d, %d bytes of stderr", step, res.ExitCode, len(res.Stderr))
		}
		if uid := namespaceUID(t, res.Stdout); uid != cluster.KubeSystemUID || uid == "" {
			t.Fatalf("%s: uid %q, want the cluster's %q", step, uid, cluster.KubeSystemUID)
		}
		dir := runDir(t, res)
		wantArgv := []string{r.Exe.ExecPath(), "--kubeconfig=" + dir + "/kubeconfig", "--context=" + cluster.Context,
			"--cache-dir=" + dir + "/cache", "get", "namespace", "kube-system", "-o=json"}
		if !slices.Equal(res.Argv, wantArgv) {
			t.Fatalf("argv %q, want %q", res.Argv, wantArgv)
		}
		wantEnv := []string{"HOME=" + dir, "XDG_CACHE_HOME=" + dir + "/cache", "XDG_CONFIG_HOME=" + dir + "/config",
			"TMPDIR=" + dir + "/tmp", "KUBECACHEDIR=" + dir + "/cache", "PATH=/nonexistent", "LANG=C", "KUBERC=off", "KUBECTL_KUBERC=false"}
		if !slices.Equal(res.Env, wantEnv) {
			t.Fatalf("env %q, want %q", res.Env, wantEnv)
		}
		if filepath.Dir(dir) != tempRoot {
			t.Fatalf("run directory %s is not under %s", dir, tempRoot)
		}
	}
}

func TestDryRunApplyConvergenceThroughStdin(t *testing.T) {
	testcluster.Need(t)
	ctx := context.Background()
	ns := "kubectl-runner"
	if err := cluster.CreateNamespace(ctx, ns); err != nil {
		t.Fatal(err)
	}
	r := realRunner(t)
	manifest := configMap(ns, "cm-apply", "v1")
	res, err := r.Run(ctx, evidence.StepDryRun, manifest)
	if err != nil {
		t.Fatalf("dry-run: %v", err)
	}
	if res.ExitCode != 0 {
		t.Fatalf("dry-run: exit %d, stderr %s", res.ExitCode, res.Stderr)
	}
	checkResult(t, r, res, err)
	if !bytes.Contains(res.Stdout, []byte("configmap/cm-apply serverside-applied (server dry run)")) {
		t.Fatalf("dry-run stdout %q", res.Stdout)
	}
	if _, ok := liveManagers(t, ns, "cm-apply"); ok {
		t.Fatal("the dry-run stored the object")
	}

	res, err = r.Run(ctx, evidence.StepApply, manifest)
	if err != nil {
		t.Fatalf("apply: %v", err)
	}
	if res.ExitCode != 0 {
		t.Fatalf("apply: exit %d, stderr %s", res.ExitCode, res.Stderr)
	}
	checkResult(t, r, res, err)
	if m, ok := liveManagers(t, ns, "cm-apply"); !ok || m != evidence.FieldManager+"/Apply;" {
		t.Fatalf("after apply the object has managers %q (exists %v)", m, ok)
	}

	res, err = r.Run(ctx, evidence.StepConvergence, manifest)
	if err != nil {
		t.Fatalf("convergence: %v", err)
	}
	if res.ExitCode != 0 {
		t.Fatalf("convergence: exit %d, stderr %s", res.ExitCode, res.Stderr)
	}
	checkResult(t, r, res, err)
	// get -f=- answers with a List even for one object.
	var list struct {
		Kind  string `json:"kind"`
		Items []struct {
			Metadata struct {
				UID           string `json:"uid"`
				ManagedFields []struct {
					Manager   string `json:"manager"`
					Operation string `json:"operation"`
				} `json:"managedFields"`
			} `json:"metadata"`
			Data map[string]string `json:"data"`
		} `json:"items"`
	}
	if err := json.Unmarshal(res.Stdout, &list); err != nil {
		t.Fatalf("convergence stdout: %v\n%s", err, res.Stdout)
	}
	if list.Kind != "List" || len(list.Items) != 1 {
		t.Fatalf("convergence read is a %s of %d items", list.Kind, len(list.Items))
	}
	live := list.Items[0]
	if live.Metadata.UID == "" || live.Data["key"] != "v1" || len(live.Metadata.ManagedFields) != 1 ||
		live.Metadata.ManagedFields[0].Manager != evidence.FieldManager || live.Metadata.ManagedFields[0].Operation != "Apply" {
		t.Fatalf("convergence read %+v", live)
	}

	// A strict-validation failure is kubectl's answer, not the runner's: exit 1, no error.
	bad := append(configMap(ns, "cm-bad", "v"), "bogus: 1\n"...)
	res, err = r.Run(ctx, evidence.StepDryRun, bad)
	if err != nil {
		t.Fatalf("strict validation: %v", err)
	}
	if res.ExitCode != 1 || !bytes.Contains(res.Stderr, []byte("bogus")) {
		t.Fatalf("strict validation: exit %d, stderr %q", res.ExitCode, res.Stderr)
	}
	checkResult(t, r, res, err)
}

// TestParentEnvironmentDoesNotLeak runs the identity read with a hostile parent environment: a
// HOME whose kuberc would add --show-managed-fields to every get, proxies, KUBECONFIG and
// KUBERC. The control run shows that the same kubectl given that environment does change its
// output, so the runner's clean result is not an accident.
func TestParentEnvironmentDoesNotLeak(t *testing.T) {
	testcluster.Need(t)
	realHome, _ := os.UserHomeDir()
	before := homeState(realHome, false)
	home := t.TempDir()
	kube := filepath.Join(home, ".kube")
	if err := os.Mkdir(kube, 0o700); err != nil {
		t.Fatal(err)
	}
	kuberc := "apiVersion: kubectl.config.k8s.io/v1beta1\nkind: Preference\ndefaults:\n- command: get\n  options:\n  - name: show-managed-fields\n    default: \"true\"\n"
	if err := os.WriteFile(filepath.Join(kube, "kuberc"), []byte(kuberc), 0o600); err != nil {
		t.Fatal(err)
	}
	homeBefore := homeState(home, true)
	t.Setenv("HOME", home)
	// Go never proxies a loopback server, so against the test cluster these two are inert; they
	// are set so that a leak would at least show in the recorded env, which is checked exactly.
	t.Setenv("HTTPS_PROXY", "http://127.0.0.1:1")
	t.Setenv("HTTP_PROXY", "http://127.0.0.1:1")
	t.Setenv("KUBECONFIG", "/nonexistent")
	t.Setenv("KUBERC", "/nonexistent")

	r := realRunner(t)
	res, err := r.Run(context.Background(), evidence.StepIdentity, nil)
	if err != nil {
		t.Fatalf("identity read under a hostile environment: %v", err)
	}
	if res.ExitCode != 0 {
		t.Fatalf("identity read under a hostile environment: exit %d, stderr %q", res.ExitCode, res.Stderr)
	}
	checkResult(t, r, res, err)
	if uid := namespaceUID(t, res.Stdout); uid != cluster.KubeSystemUID {
		t.Fatalf("uid %q", uid)
	}
	for _, e := range res.Env {
		for _, leaked := range []string{"HTTPS_PROXY=", "HTTP_PROXY=", "KUBECONFIG=", "KUBERC=/", "HOME=" + home} {
			if strings.HasPrefix(e, leaked) {
				t.Fatalf("parent variable %q reached kubectl", e)
			}
		}
	}
	if after := homeState(home, true); after != homeBefore {
		t.Fatalf("the parent's HOME changed:\n%s\n---\n%s", homeBefore, after)
	}
	if after := homeState(realHome, false); after != before {
		t.Fatalf("the real HOME changed:\n%s\n---\n%s", before, after)
	}

	// Control: the same read run with the parent's environment (what a runner that inherited it
	// would do) reads the planted kuberc and shows managedFields.
	dir := t.TempDir()
	kc := filepath.Join(dir, "kubeconfig")
	if err := os.WriteFile(kc, cluster.KubeconfigBytes(), 0o600); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(cluster.KubectlPath, "--kubeconfig="+kc, "--context="+cluster.Context, "get", "namespace", "kube-system", "-o=json")
	// Without the parent's KUBERC=/nonexistent: kubectl 1.34 ignores a KUBERC file that does not
	// exist and reads $HOME/.kube/kuberc, kubectl 1.37 exits 1 on it.
	for _, e := range os.Environ() {
		if !strings.HasPrefix(e, "KUBERC=") {
			cmd.Env = append(cmd.Env, e)
		}
	}
	out, err := cmd.Output()
	if err != nil || !bytes.Contains(out, []byte(`"managedFields"`)) {
		t.Fatalf("control run with the parent environment did not pick up the planted kuberc: %v", err)
	}
}

// homeState lists every file under the places kubectl reads or writes in home and, with top,
// the names in home itself (not for the real HOME, which other processes may be changing).
func homeState(home string, top bool) string {
	var b strings.Builder
	if ents, err := os.ReadDir(home); top && err == nil {
		for _, e := range ents {
			b.WriteString(e.Name() + "\n")
		}
	}
	for _, sub := range []string{".kube", ".config/kubectl", ".cache/kubectl"} {
		_ = filepath.WalkDir(filepath.Join(home, sub), func(p string, d os.DirEntry, err error) error {
			if err == nil {
				if fi, ierr := d.Info(); ierr == nil {
					b.WriteString(p + " " + fi.Mode().String() + " " + fi.ModTime().String() + "\n")
				}
			}
			return nil
		})
	}
	return b.String()
}

// TestRealKubectlWritesNothingInItsRunDirectory runs every step against the real cluster and, just
// before each run directory is removed, compares it with what makeWorkdir made: the lock, the
// kubeconfig copy, an empty regular file as the cache path, and empty config and tmp directories.
// The control runs the same kubectl with a writable cache directory and shows that it would fill
// it, so the empty cache is the file's doing, not kubectl's restraint.
func TestRealKubectlWritesNothingInItsRunDirectory(t *testing.T) {
	testcluster.Need(t)
	ctx := context.Background()
	ns := "kubectl-rundir"
	if err := cluster.CreateNamespace(ctx, ns); err != nil {
		t.Fatal(err)
	}
	var states []string
	old := removeDir
	removeDir = func(d *rundir.Dir) error {
		states = append(states, runDirState(t, d.Path))
		return old(d)
	}
	defer func() { removeDir = old }()

	r := realRunner(t)
	manifest := configMap(ns, "cm-rundir", "v1")
	// In WalkDir's (lexical) order.
	want := fmt.Sprintf("cache f 0 0600\nconfig d 0700\nkubeconfig f %d 0600\n%s f 0 0600\ntmp d 0700\n", len(cluster.KubeconfigBytes()), rundir.LockName)
	for _, step := range argv.Steps() {
		var stdin []byte
		var names []string
		switch {
		case step == evidence.StepNamespaces:
			names = []string{ns}
		case argv.ReadsStdin(step):
			stdin = manifest
		}
		states = states[:0]
		res, err := r.Run(ctx, step, stdin, names...)
		if err != nil || res.ExitCode != 0 {
			t.Fatalf("%s: %v (exit %v, stderr %q)", step, err, res.ExitCode, res.Stderr)
		}
		if len(res.Stderr) != 0 {
			t.Errorf("%s: kubectl wrote to stderr: %q", step, res.Stderr)
		}
		if len(states) != 1 || states[0] != want {
			t.Errorf("%s: the run directory before removal:\n%s\nwant exactly:\n%s", step, strings.Join(states, "---\n"), want)
		}
	}

	// Control: a writable cache directory, everything else as the runner has it.
	dir := t.TempDir()
	writableRunDir(t, dir)
	directIdentityRead(t, dir)
	if ents, err := os.ReadDir(filepath.Join(dir, argv.CacheName)); err != nil || len(ents) == 0 {
		t.Fatalf("control: kubectl wrote nothing into a writable cache directory (%v): the test proves nothing", err)
	}
}

// runDirState lists the run directory at path, recursively: name, type, size (files) and mode.
func runDirState(t testing.TB, path string) string {
	var b strings.Builder
	err := filepath.WalkDir(path, func(p string, d os.DirEntry, err error) error {
		if err != nil || p == path {
			return err
		}
		fi, err := d.Info()
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(path, p)
		switch {
		case fi.Mode().IsRegular():
			fmt.Fprintf(&b, "%s f %d %04o\n", rel, fi.Size(), fi.Mode().Perm())
		case fi.IsDir():
			fmt.Fprintf(&b, "%s d %04o\n", rel, fi.Mode().Perm())
		default:
			fmt.Fprintf(&b, "%s %v\n", rel, fi.Mode())
		}
		return nil
	})
	if err != nil {
		t.Errorf("listing %s: %v", path, err)
	}
	return b.String()
}
