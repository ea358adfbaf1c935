package ceremony_test

import (
	"os"
	"os/exec"
	"syscall"
	"testing"

	"github.com/qinglong/ql3/evidence"
	"github.com/qinglong/ql3/internal/testbed/testcluster"
	"github.com/qinglong/ql3/store"
)

// killChild runs the command file cf in a re-executed test binary that kills itself with SIGKILL
// at `at` ("before:<step>" or "after:<step>", see TestMain) and requires that it died so.
func killChild(t *testing.T, cf, at string) {
	t.Helper()
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	child := exec.Command(self, "-test.run=^$")
	child.Env = append(os.Environ(), childEnv+"="+cf, killEnv+"="+at)
	err = child.Run()
	if ee, ok := err.(*exec.ExitError); !ok || ee.ProcessState.Sys().(syscall.WaitStatus).Signal() != syscall.SIGKILL {
		t.Fatalf("child was not killed %s: %v", at, err)
	}
}

// TestCeremonyKillAtEveryStep: ql3 killed with SIGKILL before and after every kubectl step of a
// preflight and of an apply leaves a store that verifies clean, publishes nothing for the killed
// run, and the rerun of the same command is correct: a preflight publishes; an apply publishes a
// receipt that marks a recovery exactly when the killed run had written its intent. The bed's
// cleanup then audits every published root.
func TestCeremonyKillAtEveryStep(t *testing.T) {
	testcluster.Need(t)
	vectors := []struct {
		command string // evidence.CommandPreflight or evidence.CommandApply
		at      string // where the child dies
		intent  bool   // whether the killed apply had written its intent
	}{
		{evidence.CommandPreflight, "before:" + evidence.StepIdentity, false},
		{evidence.CommandPreflight, "after:" + evidence.StepIdentity, false},
		{evidence.CommandPreflight, "after:" + evidence.StepVersion, false},
		{evidence.CommandPreflight, "after:" + evidence.StepDryRun, false},
		{evidence.CommandApply, "before:" + evidence.StepIdentity, false},
		{evidence.CommandApply, "after:" + evidence.StepIdentity, false},
		{evidence.CommandApply, "after:" + evidence.StepDryRun, false},
		{evidence.CommandApply, "before:" + evidence.StepApply, true}, // intent written, nothing mutated
		{evidence.CommandApply, "after:" + evidence.StepApply, true},
		{evidence.CommandApply, "after:" + evidence.StepConvergence, true},
		{evidence.CommandApply, "after:" + evidence.StepNamespaces, true},
		{evidence.CommandApply, "before:" + evidence.StepIdentityFinal, true},
		{evidence.CommandApply, "after:" + evidence.StepIdentityFinal, true},
	}
	for _, v := range vectors {
		t.Run(v.command+"/"+v.at, func(t *testing.T) {
			b := newBed(t, true, nil)
			cf := b.WriteCommand("preflight.json", evidence.CommandPreflight, "")
			if v.command == evidence.CommandApply {
				pre, err := b.preflight()
				if err != nil {
					t.Fatal(err)
				}
				cf = b.applyFile(string(pre.Preflight))
			}
			published := b.Count(evidence.IndexPreflights)
			killChild(t, cf, v.at)
			if b.Count(evidence.IndexPreflights) != published || b.Count(evidence.IndexReceipts) != 0 {
				t.Fatal("the killed run published a record")
			}
			if got := b.Count(evidence.IndexIntents) == 1; got != v.intent {
				t.Fatalf("intent written: %v, want %v", got, v.intent)
			}
			st, err := store.Open(b.Store)
			if err != nil {
				t.Fatal(err)
			}
			defer st.Close()
			if rep, err := st.Verify(); err != nil || !rep.OK() {
				t.Fatalf("verify after the kill: %v %+v", err, rep.Corruption)
			}
			if v.command == evidence.CommandPreflight {
				if _, err := b.preflight(); err != nil {
					t.Fatalf("preflight rerun: %v", err)
				}
				return
			}
			rc, err := b.apply(cf)
			if err != nil {
				t.Fatalf("apply rerun: %v", err)
			}
			if rc.Recovered != v.intent || rc.Offline {
				t.Fatalf("rerun %+v, want recovered %v", rc, v.intent)
			}
			if len(liveManagers(t, b.Namespace)) != 6 {
				t.Fatal("the rerun did not converge the release")
			}
		})
	}
}
