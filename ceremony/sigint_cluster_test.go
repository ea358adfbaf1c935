package ceremony_test

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"

	"github.com/qinglong/ql3/ceremony"
	"github.com/qinglong/ql3/evidence"
	"github.com/qinglong/ql3/internal/testbed/testcluster"
	"github.com/qinglong/ql3/refuse"
	"github.com/qinglong/ql3/store"
)

// sigintEnv names the command file a re-executed test binary applies under ceremony.WithSignals,
// sending itself SIGINT while the kubectl of the server-side apply runs.
const sigintEnv = "QL3_CEREMONY_TEST_SIGINT"

// sigintChild runs the apply; when the apply step starts it waits until kubectl is running (a
// child process of ours exists) and sends SIGINT to itself, as a terminal's ^C would. It prints
// the progress and refusal on stderr and exits 3 when refused.
func sigintChild(cf string) int {
	ceremony.SetRunHook(func(step string) {
		if step != evidence.StepApply {
			return
		}
		go func() {
			for !hasChild() {
				// Polls /proc until kubectl exists; the ceremony is blocked in that very run.
			}
			_ = syscall.Kill(os.Getpid(), syscall.SIGINT)
		}()
	})
	ctx, stop := ceremony.WithSignals(context.Background())
	defer stop()
	_, err := ceremony.Apply(ctx, ceremony.Options{CommandFile: cf, Progress: os.Stderr})
	if err != nil {
		if r, ok := refuse.As(err); ok {
			os.Stderr.WriteString("refused: " + string(r.Code) + ": " + r.Message() + "\nhint: " + r.Hint + "\n")
		}
		return 3
	}
	return 0
}

// hasChild reports whether a process whose parent is this one exists.
func hasChild() bool {
	self := strconv.Itoa(os.Getpid())
	ents, _ := os.ReadDir("/proc")
	for _, e := range ents {
		if _, err := strconv.Atoi(e.Name()); err != nil {
			continue
		}
		b, err := os.ReadFile(filepath.Join("/proc", e.Name(), "stat"))
		if err != nil {
			continue
		}
		// pid (comm) state ppid ...: comm may hold spaces, so split after its closing parenthesis.
		if i := bytes.LastIndexByte(b, ')'); i > 0 {
			if f := strings.Fields(string(b[i+1:])); len(f) > 1 && f[1] == self {
				return true
			}
		}
	}
	return false
}

// TestApplySIGINT interrupts a real server-side apply with SIGINT: ql3 stops kubectl's process
// group, stores the interrupted run's exec record, prints the recovery line and exits non-zero;
// the store verifies and reports the unfinished apply; the rerun recovers and says so.
func TestApplySIGINT(t *testing.T) {
	testcluster.Need(t)
	b := newBed(t, true, nil)
	pre, err := b.preflight()
	if err != nil {
		t.Fatal(err)
	}
	af := b.applyFile(string(pre.Preflight))
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	child := exec.Command(self, "-test.run=^$")
	child.Env = append(os.Environ(), sigintEnv+"="+af)
	var stderr bytes.Buffer
	child.Stderr = &stderr
	err = child.Run()
	b.out.Write(stderr.Bytes())
	if ee, ok := err.(*exec.ExitError); !ok || ee.ExitCode() != 3 {
		t.Fatalf("child: %v, want exit 3\n%s", err, stderr.String())
	}
	want := "interrupted by interrupt: a mutation MAY HAVE HAPPENED (the apply intent was written, no receipt); recover and roll forward with: ql3 apply --command-file=" + af + "\n"
	if !strings.Contains(stderr.String(), want) || !strings.Contains(stderr.String(), "refused: "+string(ceremony.CodeInterrupted)+": ") {
		t.Fatalf("no recovery line:\n%s", stderr.String())
	}
	st, err := store.Open(b.Store)
	if err != nil {
		t.Fatal(err)
	}
	rep, err := st.Verify()
	if err != nil || !rep.OK() || len(rep.Unfinished) != 1 || len(rep.Receipts) != 0 {
		t.Fatalf("store verify after SIGINT: %v %+v", err, rep)
	}
	// The interrupted apply's exec record is stored.
	var applied []evidence.Exec
	for _, e := range b.unreferencedExecs() {
		if e.Step == evidence.StepApply {
			applied = append(applied, e)
		}
	}
	if len(applied) != 1 {
		t.Fatalf("%d exec records of the interrupted apply, want 1", len(applied))
	}
	// The rerun recovers, and says so in text.
	b.out.Reset()
	rc, err := b.apply(af)
	if err != nil || !rc.Recovered {
		t.Fatalf("rerun: %+v %v", rc, err)
	}
	if !strings.Contains(b.out.String(), "recovering from intent sha256:") {
		t.Fatalf("the rerun does not say it recovers:\n%s", b.out.String())
	}
}

// A preflight interrupted before it starts is refused INTERRUPTED and says nothing was mutated.
func TestPreflightInterruptedLine(t *testing.T) {
	testcluster.Need(t)
	b := newBed(t, true, nil)
	ctx, cancel := context.WithCancelCause(context.Background())
	cancel(&ceremony.Interrupted{Signal: syscall.SIGTERM})
	cf := b.WriteCommand("preflight.json", evidence.CommandPreflight, "")
	_, err := ceremony.Preflight(ctx, ceremony.Options{CommandFile: cf, Progress: &b.out})
	if refuse.CodeOf(err) != ceremony.CodeInterrupted {
		t.Fatalf("code %q, want %s (%v)", refuse.CodeOf(err), ceremony.CodeInterrupted, err)
	}
	if !strings.Contains(b.out.String(), "interrupted by terminated: a preflight mutates nothing; rerun with: ql3 preflight --command-file="+cf+"\n") {
		t.Fatalf("line:\n%s", b.out.String())
	}
	b.wantRefused(err, ceremony.CodeInterrupted, 0)
}
