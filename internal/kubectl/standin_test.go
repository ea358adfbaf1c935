package kubectl

import (
	"bytes"
	"context"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/qinglong/ql3/evidence"
	"github.com/qinglong/ql3/internal/stablefile"
	"github.com/qinglong/ql3/internal/testbed/kubectltest"
	"github.com/qinglong/ql3/internal/testbed/testcluster"
	"github.com/qinglong/ql3/refuse"
)

// standInRunner is a Runner over a freshly built stand-in.
func standInRunner(t testing.TB, mode string, timeout time.Duration, maxOutput int) *Runner {
	t.Helper()
	testcluster.Need(t)
	path, d := kubectltest.BuildStandIn(t, mode, cluster.KubectlPath)
	return &Runner{Exe: open(t, path, d), Kubeconfig: cluster.KubeconfigBytes(), Context: cluster.Context,
		Timeout: timeout, MaxOutput: maxOutput}
}

// liveRun is a kubectl process of a run in progress, found through /proc.
type liveRun struct {
	pid     int
	argv    []string
	environ []string
}

// findRun polls /proc for the leader of the run in progress: the process whose argv[1] is
// --kubeconfig= inside tempRoot.
func findRun(t testing.TB) liveRun {
	t.Helper()
	prefix := "--kubeconfig=" + tempRoot + "/"
	for deadline := time.Now().Add(30 * time.Second); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		procs, _ := filepath.Glob("/proc/[0-9]*/cmdline")
		for _, p := range procs {
			raw, err := os.ReadFile(p)
			argv := strings.Split(strings.TrimSuffix(string(raw), "\x00"), "\x00")
			if err != nil || len(argv) < 2 || !strings.HasPrefix(argv[1], prefix) {
				continue
			}
			pid, _ := strconv.Atoi(filepath.Base(filepath.Dir(p)))
			env, err := os.ReadFile(filepath.Join(filepath.Dir(p), "environ"))
			if err != nil || len(env) == 0 {
				continue // not exec'd yet
			}
			return liveRun{pid: pid, argv: argv, environ: strings.Split(strings.TrimSuffix(string(env), "\x00"), "\x00")}
		}
	}
	t.Fatal("no kubectl run found in /proc")
	return liveRun{}
}

// procGone reports whether pid has ended: no /proc entry, or a zombie awaiting its reaper (the
// stand-in's child is reparented when the stand-in dies, and not every init reaps promptly).
func procGone(pid int) bool {
	raw, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if errors.Is(err, fs.ErrNotExist) {
		return true
	}
	i := bytes.LastIndexByte(raw, ')')
	return err == nil && i > 0 && len(raw) > i+2 && raw[i+2] == 'Z'
}

// procGroup is field 5 of /proc/<pid>/stat.
func procGroup(t testing.TB, pid int) int {
	t.Helper()
	raw, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		t.Fatal(err)
	}
	f := strings.Fields(string(raw[bytes.LastIndexByte(raw, ')')+1:]))
	g, _ := strconv.Atoi(f[2])
	return g
}

// TestStandInHangTimesOut checks, while the run is in progress, what the child really got (argv,
// environment, executable, working directory, process group, the private directory and the
// kubeconfig copy), then that the timeout kills the whole group and removes the directory.
func TestStandInHangTimesOut(t *testing.T) {
	r := standInRunner(t, kubectltest.ModeHang, 3*time.Second, 1<<20)
	type outcome struct {
		res *Result
		err error
	}
	done := make(chan outcome, 1)
	go func() {
		res, err := r.Run(context.Background(), evidence.StepIdentity, nil)
		done <- outcome{res, err}
	}()
	live := findRun(t)
	dir := strings.TrimSuffix(strings.TrimPrefix(live.argv[1], "--kubeconfig="), "/kubeconfig")
	if wantArgv, _ := buildArgv(r.Exe.ExecPath(), evidence.StepIdentity, dir, r.Context); !slices.Equal(live.argv, wantArgv) {
		t.Errorf("the child's argv is %q, want %q", live.argv, wantArgv)
	}
	if !slices.Equal(live.environ, environ(dir)) {
		t.Errorf("the child's environment is %q, want exactly %q", live.environ, environ(dir))
	}
	if cwd, err := os.Readlink("/proc/" + strconv.Itoa(live.pid) + "/cwd"); err != nil || cwd != dir {
		t.Errorf("the child's working directory is %q (%v), want %s", cwd, err, dir)
	}
	if g := procGroup(t, live.pid); g != live.pid {
		t.Errorf("the child is in process group %d, not its own %d", g, live.pid)
	}
	var exe, held syscall.Stat_t
	if err := syscall.Stat("/proc/"+strconv.Itoa(live.pid)+"/exe", &exe); err != nil {
		t.Error(err)
	} else if err := syscall.Stat(r.Exe.ExecPath(), &held); err != nil || exe.Dev != held.Dev || exe.Ino != held.Ino {
		t.Errorf("the child runs inode %d:%d, not the held %d:%d (%v)", exe.Dev, exe.Ino, held.Dev, held.Ino, err)
	}
	modes := map[string]os.FileMode{"": 0o700 | fs.ModeDir, "cache": 0o600, "config": 0o700 | fs.ModeDir,
		"tmp": 0o700 | fs.ModeDir, "kubeconfig": 0o600}
	for name, want := range modes {
		if fi, err := os.Lstat(filepath.Join(dir, name)); err != nil || fi.Mode() != want {
			t.Errorf("%s/%s: mode %v (%v), want %v", dir, name, fi.Mode(), err, want)
		}
	}
	if b, err := os.ReadFile(filepath.Join(dir, "kubeconfig")); err != nil || !bytes.Equal(b, cluster.KubeconfigBytes()) {
		t.Errorf("the kubeconfig copy differs from the verified bytes (%v)", err)
	}

	o := <-done
	wantCode(t, o.err, CodeTimeout)
	checkResult(t, r, o.res, o.err)
	if o.res.ExitCode != -1 {
		t.Errorf("exit code %d after the kill, want -1", o.res.ExitCode)
	}
	if d := o.res.FinishedAt.Sub(o.res.StartedAt); d > 30*time.Second {
		t.Errorf("the timed-out run took %s", d)
	}
	pids := regexp.MustCompile(`(?m)^pid=([0-9]+)$`).FindAllStringSubmatch(string(o.res.Stdout), -1)
	if len(pids) != 2 {
		t.Fatalf("stdout %q does not name the stand-in and its child", o.res.Stdout)
	}
	for _, m := range pids {
		pid, _ := strconv.Atoi(m[1])
		for deadline := time.Now().Add(10 * time.Second); !procGone(pid); time.Sleep(20 * time.Millisecond) {
			if time.Now().After(deadline) {
				t.Fatalf("pid %d of the timed-out run is still alive", pid)
			}
		}
	}
}

func TestStandInHangCanceledOrDeadline(t *testing.T) {
	vectors := []struct {
		name string                                               // what ends the run
		ctx  func() (context.Context, context.CancelFunc, func()) // the context, its cancel, and what to do once the run is live
		code refuse.Code                                          // the expected refusal
	}{
		{"cancel", func() (context.Context, context.CancelFunc, func()) {
			ctx, cancel := context.WithCancel(context.Background())
			return ctx, cancel, cancel
		}, CodeCanceled},
		{"deadline", func() (context.Context, context.CancelFunc, func()) {
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
			return ctx, cancel, func() {}
		}, CodeTimeout},
	}
	for _, v := range vectors {
		t.Run(v.name, func(t *testing.T) {
			r := standInRunner(t, kubectltest.ModeHang, time.Hour, 1<<20)
			ctx, cancel, act := v.ctx()
			defer cancel()
			done := make(chan error, 1)
			var res *Result
			go func() {
				var err error
				res, err = r.Run(ctx, evidence.StepIdentity, nil)
				done <- err
			}()
			live := findRun(t)
			act()
			err := <-done
			wantCode(t, err, v.code)
			checkResult(t, r, res, err)
			if res.ExitCode != -1 || !procGone(live.pid) {
				t.Fatalf("exit code %d, pid %d gone: %v", res.ExitCode, live.pid, procGone(live.pid))
			}
		})
	}
}

func TestStandInFloodKeepsExactlyMaxOutput(t *testing.T) {
	for _, max := range []int{4 << 20, 1<<20 + 3, 1} {
		t.Run(strconv.Itoa(max), func(t *testing.T) {
			r := standInRunner(t, kubectltest.ModeFlood, time.Minute, max)
			res, err := r.Run(context.Background(), evidence.StepIdentity, nil)
			wantCode(t, err, CodeOutputLimit)
			checkResult(t, r, res, err)
			want := bytes.Repeat([]byte(kubectltest.FloodLine), kubectltest.FloodBytes/len(kubectltest.FloodLine)+1)[:max]
			if !bytes.Equal(res.Stdout, want) || len(res.Stderr) != 0 || res.ExitCode != -1 {
				t.Fatalf("kept %d bytes of stdout (prefix of the flood: %v), %d of stderr, exit %d; want exactly %d",
					len(res.Stdout), bytes.HasPrefix(want, res.Stdout), len(res.Stderr), res.ExitCode, max)
			}
			if !strings.Contains(err.Error(), "to stdout") {
				t.Fatalf("message does not name stdout: %v", err)
			}
		})
	}
}

// TestStandInChattyDrainsConcurrently: 3 MiB of stderr before any stdout fills the stderr pipe
// long before stdout is written; only a concurrent drain finishes.
func TestStandInChattyDrainsConcurrently(t *testing.T) {
	r := standInRunner(t, kubectltest.ModeChatty, time.Minute, 4<<20)
	res, err := r.Run(context.Background(), evidence.StepIdentity, nil)
	if err != nil {
		t.Fatal(err)
	}
	checkResult(t, r, res, err)
	wantOut := bytes.Repeat([]byte("chatty-stdout\n"), 3<<20/14+1)[:3<<20]
	wantErr := bytes.Repeat([]byte("chatty-stderr\n"), 3<<20/14+1)[:3<<20]
	if res.ExitCode != 0 || !bytes.Equal(res.Stdout, wantOut) || !bytes.Equal(res.Stderr, wantErr) {
		t.Fatalf("exit %d, %d bytes of stdout, %d of stderr", res.ExitCode, len(res.Stdout), len(res.Stderr))
	}
	// With a 1 MiB ceiling stderr overflows first, and stdout has not been written yet.
	r.MaxOutput = 1 << 20
	res, err = r.Run(context.Background(), evidence.StepIdentity, nil)
	wantCode(t, err, CodeOutputLimit)
	checkResult(t, r, res, err)
	if !bytes.Equal(res.Stderr, wantErr[:1<<20]) || len(res.Stdout) != 0 || !strings.Contains(err.Error(), "to stderr") {
		t.Fatalf("%d bytes of stderr, %d of stdout: %v", len(res.Stderr), len(res.Stdout), err)
	}
}

// TestStandInPartialCrashIsDistinguishable: half an object then exit 1 is kubectl's answer (no
// error); half an object then SIGKILL is a crash (KUBECTL_KILLED). Both keep the partial bytes.
func TestStandInPartialCrashIsDistinguishable(t *testing.T) {
	vectors := []struct {
		mode string      // stand-in mode
		code refuse.Code // expected refusal; "" for none
		exit int         // expected ExitCode
	}{
		{kubectltest.ModePartial, "", 1},
		{kubectltest.ModePartialKill, CodeKilled, -1},
	}
	for _, v := range vectors {
		t.Run(v.mode, func(t *testing.T) {
			r := standInRunner(t, v.mode, time.Minute, 4<<20)
			res, err := r.Run(context.Background(), evidence.StepIdentity, nil)
			wantCode(t, err, v.code)
			checkResult(t, r, res, err)
			if res.ExitCode != v.exit || string(res.Stdout) != kubectltest.PartialJSON {
				t.Fatalf("exit %d, stdout %q", res.ExitCode, res.Stdout)
			}
			if v.code == CodeKilled && !strings.Contains(err.Error(), "signal killed") {
				t.Fatalf("message does not name the signal: %v", err)
			}
		})
	}
}

// TestStandInLostResponse: the apply reaches the cluster, the response does not reach us.
func TestStandInLostResponse(t *testing.T) {
	testcluster.Need(t)
	ctx := context.Background()
	ns := "kubectl-lost"
	if err := cluster.CreateNamespace(ctx, ns); err != nil {
		t.Fatal(err)
	}
	r := standInRunner(t, kubectltest.ModeLostResponse, time.Minute, 4<<20)
	// Everything but a real mutation passes through to the real kubectl unchanged.
	res, err := r.Run(ctx, evidence.StepIdentity, nil)
	if err != nil || res.ExitCode != 0 || namespaceUID(t, res.Stdout) != cluster.KubeSystemUID {
		t.Fatalf("identity through the stand-in: %v", err)
	}
	res, err = r.Run(ctx, evidence.StepDryRun, configMap(ns, "cm-lost", "v"))
	if err != nil || res.ExitCode != 0 || !bytes.Contains(res.Stdout, []byte("(server dry run)")) {
		t.Fatalf("dry-run through the stand-in: %v", err)
	}
	if _, ok := liveManagers(t, ns, "cm-lost"); ok {
		t.Fatal("the dry-run stored the object")
	}
	res, err = r.Run(ctx, evidence.StepApply, configMap(ns, "cm-lost", "v"))
	wantCode(t, err, CodeKilled)
	checkResult(t, r, res, err)
	if res.ExitCode != -1 || len(res.Stdout) != 0 {
		t.Fatalf("exit %d with %d bytes of stdout, want -1 and nothing", res.ExitCode, len(res.Stdout))
	}
	if m, ok := liveManagers(t, ns, "cm-lost"); !ok || m != evidence.FieldManager+"/Apply;" {
		t.Fatalf("the lost apply left managers %q (exists %v)", m, ok)
	}
}

// TestStandInExecThroughHeldDescriptor replaces the file at the kubectl path after it was opened
// and hashed: the run still executes the hashed bytes, and the identity check sees the swap.
func TestStandInExecThroughHeldDescriptor(t *testing.T) {
	testcluster.Need(t)
	path, d := kubectltest.BuildStandIn(t, kubectltest.ModeLostResponse, cluster.KubectlPath)
	r := &Runner{Exe: open(t, path, d), Kubeconfig: cluster.KubeconfigBytes(), Context: cluster.Context,
		Timeout: time.Minute, MaxOutput: 4 << 20}
	other, od := kubectltest.BuildStandIn(t, kubectltest.ModeFlood, "")
	if od == d {
		t.Fatal("the two stand-ins have the same digest")
	}
	if err := os.Rename(other, path); err != nil {
		t.Fatal(err)
	}
	res, err := r.Run(context.Background(), evidence.StepIdentity, nil)
	if err != nil {
		t.Fatalf("run after the swap: %v", err)
	}
	checkResult(t, r, res, err)
	if res.ExitCode != 0 || namespaceUID(t, res.Stdout) != cluster.KubeSystemUID {
		t.Fatalf("the swapped-in binary ran: exit %d, %d bytes of stdout", res.ExitCode, len(res.Stdout))
	}
	wantCode(t, r.Exe.ReverifyIdentity(), stablefile.CodeExecChanged)
}
