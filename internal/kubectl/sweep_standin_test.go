package kubectl

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/opencontainers/go-digest"

	"github.com/qinglong/ql3/evidence"
	"github.com/qinglong/ql3/internal/stablefile"
	"github.com/qinglong/ql3/internal/testbed/kubectltest"
)

// killedRunEnv, set in a re-executed test binary, makes TestMain run killedRunChild instead of
// the tests: "<root>\n<stand-in path>\n<digest>".
const killedRunEnv = "QL3_KUBECTL_KILLED_RUN"

// killedRunChild is a ql3 in the middle of a step: it runs the hanging stand-in through a
// Runner with its run directory under the given root, until it is killed.
func killedRunChild() {
	parts := strings.Split(os.Getenv(killedRunEnv), "\n")
	if len(parts) != 3 {
		fmt.Fprintln(os.Stderr, "bad", killedRunEnv)
		os.Exit(2)
	}
	tempRoot = parts[0]
	exe, err := stablefile.OpenExecutable(parts[1], digest.Digest(parts[2]))
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(2)
	}
	r := &Runner{Exe: exe, Kubeconfig: []byte("stand-in kubeconfig"), Context: "c", Timeout: time.Hour, MaxOutput: 1 << 20}
	_, err = r.Run(context.Background(), evidence.StepIdentity, nil)
	fmt.Fprintln(os.Stderr, "the hanging run ended:", err)
	os.Exit(2)
}

// TestStandInKilledRunSwept: a ql3 killed with SIGKILL while kubectl (the hanging stand-in)
// runs leaves its run directory with the kubeconfig copy behind; the next run of any ql3 of the
// same user sweeps it before it makes its own, and is unaffected otherwise.
func TestStandInKilledRunSwept(t *testing.T) {
	path, d := kubectltest.BuildStandIn(t, kubectltest.ModeHang, "")
	child := exec.Command(os.Args[0], "-test.run=^$")
	child.Env = append(os.Environ(), killedRunEnv+"="+tempRoot+"\n"+path+"\n"+string(d))
	child.Stderr = os.Stderr
	if err := child.Start(); err != nil {
		t.Fatal(err)
	}
	live := findRun(t)
	dir := strings.TrimSuffix(strings.TrimPrefix(live.argv[1], "--kubeconfig="), "/"+kubeconfigName)
	if err := child.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	if err := child.Wait(); err == nil || child.ProcessState.Sys().(syscall.WaitStatus).Signal() != syscall.SIGKILL {
		t.Fatalf("the child was not killed: %v", err)
	}
	// Pdeathsig ends the stand-in with its ql3.
	for deadline := time.Now().Add(30 * time.Second); !procGone(live.pid); time.Sleep(20 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("stand-in pid %d outlived its killed ql3", live.pid)
		}
	}
	if b, err := os.ReadFile(filepath.Join(dir, kubeconfigName)); err != nil || string(b) != "stand-in kubeconfig" {
		t.Fatalf("the killed run's kubeconfig copy: %q %v (the test needs it left behind)", b, err)
	}
	r := realRunner(t)
	res, err := r.Run(context.Background(), evidence.StepIdentity, nil)
	if err != nil {
		t.Fatal(err)
	}
	checkResult(t, r, res, err)
	if _, err := os.Lstat(dir); !os.IsNotExist(err) {
		t.Fatalf("the killed run's directory %s was not swept: %v", dir, err)
	}
}
