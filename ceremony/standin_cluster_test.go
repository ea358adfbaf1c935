package ceremony_test

import (
	"bytes"
	"context"
	"strings"
	"testing"
	"time"

	"github.com/qinglong/ql3/ceremony"
	"github.com/qinglong/ql3/evidence"
	kubectlrun "github.com/qinglong/ql3/internal/kubectl"
	"github.com/qinglong/ql3/internal/testbed/kubectltest"
	"github.com/qinglong/ql3/internal/testbed/testcluster"
	"github.com/qinglong/ql3/refuse"
	"github.com/qinglong/ql3/store"
	"github.com/qinglong/ql3/verdict/kubeout"
)

// standInBed is a bed whose command pins a stand-in kubectl (testdata/standin-kubectl) in mode.
func standInBed(t *testing.T, mode string) *bed {
	t.Helper()
	real := ""
	if mode == kubectltest.ModeLostResponse || mode == kubectltest.ModeVersionClientOnly {
		real = cluster.KubectlPath
	}
	path, d := kubectltest.BuildStandIn(t, mode, real)
	b := newBed(t, true, nil)
	b.Set("kubectl", "path", path)
	b.Set("kubectl", "digest", string(d))
	return b
}

// failedExec returns the one unreferenced exec record of step: the evidence of the failed run.
func (b *bed) failedExec(step string) evidence.Exec {
	b.t.Helper()
	var found []evidence.Exec
	for _, e := range b.unreferencedExecs() {
		if e.Step == step {
			found = append(found, e)
		}
	}
	if len(found) != 1 {
		b.t.Fatalf("%d unreferenced exec records of step %s, want 1", len(found), step)
	}
	return found[0]
}

// TestCeremonyStandInFaults: faults a real kubectl cannot produce on demand, injected at the first
// kubectl run of a preflight (the identity read). Each is refused with its code, nothing is
// published, and the failed run's exec record is stored with the output kubectl gave before it
// failed.
func TestCeremonyStandInFaults(t *testing.T) {
	testcluster.Need(t)
	flood := bytes.Repeat([]byte(kubectltest.FloodLine), ceremony.MaxKubectlOutput/len(kubectltest.FloodLine)+1)[:ceremony.MaxKubectlOutput]
	vectors := []struct {
		mode string
		code refuse.Code
		// stdout checks the stored partial stdout.
		stdout func(b []byte) bool
		exit   int64
	}{
		// Hangs past the step timeout (with a child in its process group): killed by ql3, and
		// refused with the timeout cause (docs/kubectl.md, "Why kubectl failed").
		{kubectltest.ModeHang, kubeout.CodeTimeout, func(b []byte) bool {
			return bytes.HasPrefix(b, []byte("pid=")) && bytes.Count(b, []byte("pid=")) == 2
		}, -1},
		// 5 MiB of stdout: killed at the 4 MiB ceiling; exactly the ceiling is kept.
		{kubectltest.ModeFlood, kubectlrun.CodeOutputLimit, func(b []byte) bool { return bytes.Equal(b, flood) }, -1},
		// Half a JSON object, then exit 1: kubectl's own failure, judged from the exit status.
		{kubectltest.ModePartial, kubeout.CodeIdentityOutput, func(b []byte) bool { return string(b) == kubectltest.PartialJSON }, 1},
		// Half a JSON object, then SIGKILL: a crash mid-output.
		{kubectltest.ModePartialKill, kubectlrun.CodeKilled, func(b []byte) bool { return string(b) == kubectltest.PartialJSON }, -1},
	}
	for _, v := range vectors {
		t.Run(v.mode, func(t *testing.T) {
			b := standInBed(t, v.mode)
			start := time.Now()
			_, err := ceremony.Preflight(context.Background(), ceremony.Options{
				CommandFile: b.WriteCommand("preflight.json", evidence.CommandPreflight, ""),
				StepTimeout: 2 * time.Second, Progress: &b.out})
			b.note(err)
			b.wantRefused(err, v.code, 0)
			if v.mode == kubectltest.ModeHang && time.Since(start) > 30*time.Second {
				t.Fatalf("the hang was not cut at the step timeout (%s)", time.Since(start))
			}
			e := b.failedExec(evidence.StepIdentity)
			out := b.blob(e.Stdout)
			if !v.stdout(out) || e.StdoutBytes != int64(len(out)) || e.ExitCode != v.exit {
				t.Fatalf("exec record: exit %d (want %d), %d stdout bytes stored: %.80q", e.ExitCode, v.exit, e.StdoutBytes, out)
			}
			if string(e.KubectlDigest) != b.Field("kubectl", "digest") {
				t.Fatalf("exec record names kubectl %s, the command pins %s", e.KubectlDigest, b.Field("kubectl", "digest"))
			}
		})
	}
}

// TestCeremonyStandInLostResponse: the preflight passes (the stand-in delegates everything but a
// mutation to the real kubectl); in the apply the mutation happens but the response is lost. The
// apply is refused with the partial-apply hint; the intent exists without a receipt, the store
// lists it as unfinished, and the live objects exist.
func TestCeremonyStandInLostResponse(t *testing.T) {
	testcluster.Need(t)
	b := standInBed(t, kubectltest.ModeLostResponse)
	pre, err := b.preflight()
	if err != nil {
		t.Fatalf("preflight through the delegating stand-in: %v", err)
	}
	_, err = b.apply(b.applyFile(string(pre.Preflight)))
	b.wantRefused(err, kubectlrun.CodeKilled, 1)
	wantPartialHint(t, err)
	if b.Count(evidence.IndexIntents) != 1 {
		t.Fatal("no apply intent before the lost mutation")
	}
	st, err := store.Open(b.Store)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	rep, err := st.Verify()
	if err != nil || !rep.OK() || len(rep.Unfinished) != 1 {
		t.Fatalf("verify: %v %+v", err, rep)
	}
	if m := liveManagers(t, b.Namespace); len(m) != 6 {
		t.Fatalf("the lost apply did not reach the cluster: %v", m)
	}
	e := b.failedExec(evidence.StepApply)
	if e.ExitCode != -1 || e.StdoutBytes != 0 || len(b.blob(e.Stdout)) != 0 || e.Stdin == nil {
		t.Fatalf("apply exec record: exit %d, %d stdout bytes, stdin %v", e.ExitCode, e.StdoutBytes, e.Stdin)
	}
	if !strings.Contains(b.out.String(), "server-side apply … refused") {
		t.Fatalf("progress does not show the refused apply step:\n%s", b.out.String())
	}
}

// TestCeremonyStandInVersionClientOnly: a version read that exits 0 with kubectl's own version
// alone (the real kubectl run with --client by a stand-in: a real one that reaches no server exits
// 1) is refused with VERSION_READ_FAILED; nothing is published, and the failed read's exec record
// holds what kubectl printed.
func TestCeremonyStandInVersionClientOnly(t *testing.T) {
	testcluster.Need(t)
	b := standInBed(t, kubectltest.ModeVersionClientOnly)
	_, err := ceremony.Preflight(context.Background(), ceremony.Options{
		CommandFile: b.WriteCommand("preflight.json", evidence.CommandPreflight, ""), Progress: &b.out})
	b.note(err)
	b.wantRefused(err, kubeout.CodeVersionRead, 0)
	if r, _ := refuse.As(err); !strings.Contains(r.Message(), "no serverVersion") {
		t.Fatalf("message %q", r.Message())
	}
	e := b.failedExec(evidence.StepVersion)
	out := b.blob(e.Stdout)
	if e.ExitCode != 0 || !bytes.Contains(out, []byte(`"clientVersion"`)) || bytes.Contains(out, []byte(`"serverVersion"`)) {
		t.Fatalf("stored version read: exit %d, stdout %q", e.ExitCode, out)
	}
}
