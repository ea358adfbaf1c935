package livetest

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/qinglong/ql3/ceremony"
	"github.com/qinglong/ql3/evidence"
	"github.com/qinglong/ql3/internal/testbed/ceremonytest"
)

// bed is one release materialized into its own namespace, with private copies of its inputs and
// command files, applying into a store that several beds may share.
type bed struct {
	*ceremonytest.Release
	t *testing.T
}

// newBed materializes the synthetic 3.4.1 release, changed by edit if not nil, into namespace
// ns, creates ns unless it exists, and opens (or creates) the store at storeRoot.
func newBed(t *testing.T, storeRoot, ns string, edit func(unlocked string) string) *bed {
	t.Helper()
	return &bed{t: t, Release: ceremonytest.NewRelease(t, cluster, ceremonytest.ReleaseOptions{
		Namespace: ns, NamespaceMode: ceremonytest.EnsureNamespace, Store: storeRoot, Edit: edit})}
}

func (b *bed) preflight(file string) *ceremony.Result {
	b.t.Helper()
	res, err := ceremony.Preflight(context.Background(), ceremony.Options{CommandFile: b.WriteCommand(file, evidence.CommandPreflight, "")})
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
	rc = b.apply(b.WriteCommand("apply.json", evidence.CommandApply, string(pre.Preflight)))
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

// liveObjects returns how many objects of the bed's release exist in its namespace.
func (b *bed) liveObjects() int {
	out, se, err := cluster.Kubectl(context.Background(), nil, "get", "-n", b.Namespace, "deployments,services,configmaps", "-o=name")
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
