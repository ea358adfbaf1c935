package audit_test

import (
	"os/exec"
	"testing"

	"github.com/qinglong/ql3/audit/internal/audittest"
)

// TestNoNetworkNoProgram runs the built ql3 audit of each committed root under strace -f: exactly
// one execve (ql3 itself), no process created (the Go runtime's threads are clone calls with
// CLONE_THREAD), no socket or connect; then in a process without a network of its own (unshare -n).
// Without strace the test fails under CI=true and skips otherwise.
func TestNoNetworkNoProgram(t *testing.T) {
	fx := committed(t)
	root := fx.Snap.Materialize(t)
	for _, d := range []string{string(fx.Roots.Receipt.Digest), string(fx.Roots.RecoveredReceipt.Digest), string(fx.Roots.Preflight.Digest)} {
		audittest.NoNetworkNoProgram(t, root, d)
	}
}

// TestTraceParser: the trace reader sees what the test above asserts is absent, on programs that
// do it: a shell that forks and execs, and a shell that opens a TCP connection.
func TestTraceParser(t *testing.T) {
	strace := audittest.Need(t, "strace")
	sh, err := exec.LookPath("bash")
	if err != nil {
		t.Skip("no bash")
	}
	tr, out, _ := audittest.Strace(t, strace, sh, "-c", "/bin/true; /bin/true; :")
	if len(tr.Execs) != 3 || tr.Processes < 2 {
		t.Fatalf("bash running /bin/true twice: execs %q, %d processes\n%s", tr.Execs, tr.Processes, out)
	}
	tr, out, _ = audittest.Strace(t, strace, sh, "-c", "exec 3<>/dev/tcp/127.0.0.1/9; true")
	if len(tr.Network) < 2 || tr.Network[0] != "socket" || tr.Network[1] != "connect" {
		t.Fatalf("bash opening a tcp connection: network calls %q\n%s", tr.Network, out)
	}
}
