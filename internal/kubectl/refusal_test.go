package kubectl

import (
	"context"
	"crypto/rand"
	"errors"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/opencontainers/go-digest"

	"github.com/qinglong/ql3/evidence"
	"github.com/qinglong/ql3/internal/kubectl/rundir"
	"github.com/qinglong/ql3/refuse"
)

// TestRunRefusesBeforeStarting covers every refusal raised before kubectl starts: none of them
// returns a Result, and none leaves a run directory behind (TestMain checks the root). No kubectl
// starts, so no cluster is needed.
func TestRunRefusesBeforeStarting(t *testing.T) {
	manifest := configMap("default", "never", "v")
	canceled, cancel := context.WithCancel(context.Background())
	cancel()
	expired, cancel2 := context.WithDeadline(context.Background(), time.Now().Add(-time.Second))
	defer cancel2()
	vectors := []struct {
		name  string          // the deviation
		edit  func(*Runner)   // applied to a valid Runner
		ctx   context.Context // nil: context.Background()
		step  string          // the step to run
		stdin []byte          // its stdin
		code  refuse.Code     // the expected refusal
	}{
		{"unknown step", nil, nil, "delete", nil, CodeUnknownStep},
		{"empty step", nil, nil, "", nil, CodeUnknownStep},
		{"step with different case", nil, nil, "Identity", nil, CodeUnknownStep},
		{"no executable", func(r *Runner) { r.Exe = nil }, nil, evidence.StepIdentity, nil, CodeRunnerInvalid},
		{"no kubeconfig", func(r *Runner) { r.Kubeconfig = nil }, nil, evidence.StepIdentity, nil, CodeRunnerInvalid},
		{"empty context", func(r *Runner) { r.Context = "" }, nil, evidence.StepIdentity, nil, CodeRunnerInvalid},
		{"context with NUL", func(r *Runner) { r.Context = "a\x00b" }, nil, evidence.StepIdentity, nil, CodeRunnerInvalid},
		{"zero timeout", func(r *Runner) { r.Timeout = 0 }, nil, evidence.StepIdentity, nil, CodeRunnerInvalid},
		{"negative timeout", func(r *Runner) { r.Timeout = -time.Second }, nil, evidence.StepIdentity, nil, CodeRunnerInvalid},
		{"zero output ceiling", func(r *Runner) { r.MaxOutput = 0 }, nil, evidence.StepIdentity, nil, CodeRunnerInvalid},
		{"stdin to identity", nil, nil, evidence.StepIdentity, manifest, CodeStdinMismatch},
		{"stdin to identity-final", nil, nil, evidence.StepIdentityFinal, manifest, CodeStdinMismatch},
		{"no stdin to dry-run", nil, nil, evidence.StepDryRun, nil, CodeStdinMismatch},
		{"empty stdin to apply", nil, nil, evidence.StepApply, []byte{}, CodeStdinMismatch},
		{"no stdin to convergence", nil, nil, evidence.StepConvergence, nil, CodeStdinMismatch},
		{"context already canceled", nil, canceled, evidence.StepIdentity, nil, CodeCanceled},
		{"deadline already passed", nil, expired, evidence.StepIdentity, nil, CodeTimeout},
	}
	for _, v := range vectors {
		t.Run(v.name, func(t *testing.T) {
			r := offlineRunner(t)
			if v.edit != nil {
				v.edit(r)
			}
			ctx := v.ctx
			if ctx == nil {
				ctx = context.Background()
			}
			res, err := r.Run(ctx, v.step, v.stdin)
			wantCode(t, err, v.code)
			checkMessage(t, err, nil)
			if res != nil {
				t.Fatalf("a refusal before start returned a Result: %+v", res)
			}
		})
	}
}

// TestRunExecFailed: a file that passes the executable checks but is no program cannot be started.
func TestRunExecFailed(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "kubectl")
	junk := make([]byte, 4096)
	if _, err := rand.Read(junk); err != nil {
		t.Fatal(err)
	}
	junk[0], junk[1] = 0, 0 // neither ELF nor #!
	if err := os.WriteFile(path, junk, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(path, 0o755); err != nil {
		t.Fatal(err)
	}
	r := offlineRunner(t)
	r.Exe = open(t, path, digest.FromBytes(junk))
	res, err := r.Run(context.Background(), evidence.StepIdentity, nil)
	wantCode(t, err, CodeExecFailed)
	checkMessage(t, err, nil)
	if res != nil {
		t.Fatalf("a run that never started returned a Result: %+v", res)
	}
}

func TestRunWorkdirFailed(t *testing.T) {
	file := filepath.Join(t.TempDir(), "file")
	if err := os.WriteFile(file, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	for _, root := range []string{filepath.Join(t.TempDir(), "missing"), file} {
		t.Run(filepath.Base(root), func(t *testing.T) {
			old := tempRoot
			tempRoot = root
			defer func() { tempRoot = old }()
			res, err := offlineRunner(t).Run(context.Background(), evidence.StepIdentity, nil)
			wantCode(t, err, rundir.CodeTmpdirInvalid)
			checkMessage(t, err, nil)
			if res != nil {
				t.Fatal("a refusal before start returned a Result")
			}
		})
	}
}

// TestRunCleanupFailed: when the run directory cannot be removed the step is refused (it holds a
// kubeconfig copy) but its Result is still returned for the record. The refusal itself is
// rundir's (its TestRemoveFailedIsSwept makes a real removal fail); here it is injected.
func TestRunCleanupFailed(t *testing.T) {
	var dirs []string
	var held []*rundir.Dir
	old := removeDir
	removeDir = func(d *rundir.Dir) error {
		dirs, held = append(dirs, d.Path), append(held, d)
		return refuse.Wrap(CodeCleanup, errors.New("injected removal failure"), "remove run directory %s", d.Path).
			WithHint("it holds a copy of the kubeconfig")
	}
	defer func() { removeDir = old }()
	r := realRunner(t)
	res, err := r.Run(context.Background(), evidence.StepIdentity, nil)
	removeDir = old
	for _, d := range held {
		if err := d.Remove(); err != nil {
			t.Fatal(err)
		}
	}
	wantCode(t, err, CodeCleanup)
	checkMessage(t, err, res)
	if res == nil || res.ExitCode != 0 || namespaceUID(t, res.Stdout) != cluster.KubeSystemUID {
		t.Fatalf("the completed step's Result is missing: %+v", res)
	}
	if len(dirs) == 0 || dirs[0] != runDir(t, res) {
		t.Fatalf("removal was attempted on %q, want the run directory", dirs)
	}
}
