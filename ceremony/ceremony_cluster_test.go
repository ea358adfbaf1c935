package ceremony_test

import (
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"strings"
	"sync"
	"syscall"
	"testing"

	"github.com/qinglong/ql3/ceremony"
	"github.com/qinglong/ql3/evidence"
	"github.com/qinglong/ql3/internal/testbed/testcluster"
	"github.com/qinglong/ql3/store"
)

func kubectl(t *testing.T, stdin []byte, args ...string) []byte {
	t.Helper()
	out, se, err := cluster.Kubectl(context.Background(), stdin, args...)
	if err != nil {
		t.Fatalf("kubectl %v: %v %s", args, err, se)
	}
	return out
}

func readReceipt(t *testing.T, st *store.Store, d evidence.Descriptor) evidence.Receipt {
	t.Helper()
	raw, err := st.Get(d.Digest)
	if err != nil {
		t.Fatal(err)
	}
	var r evidence.Receipt
	if err := evidence.DecodeRecord(evidence.MediaTypeReceipt, raw, &r); err != nil {
		t.Fatal(err)
	}
	return r
}

// liveManagers returns, per object of the namespace, the managers with their operations.
func liveManagers(t *testing.T, ns string) map[string][]string {
	out := kubectl(t, nil, "get", "-n", ns, "configmaps,deployments,services", "-o=json", "--show-managed-fields=true")
	var list struct {
		Items []struct {
			Kind     string `json:"kind"`
			Metadata struct {
				Name          string `json:"name"`
				ManagedFields []struct {
					Manager, Operation string
				} `json:"managedFields"`
			} `json:"metadata"`
		} `json:"items"`
	}
	if err := json.Unmarshal(out, &list); err != nil {
		t.Fatal(err)
	}
	m := map[string][]string{}
	for _, it := range list.Items {
		if it.Kind == "ConfigMap" && it.Metadata.Name == "kube-root-ca.crt" {
			continue
		}
		for _, mf := range it.Metadata.ManagedFields {
			m[it.Kind+"/"+it.Metadata.Name] = append(m[it.Kind+"/"+it.Metadata.Name], mf.Manager+"/"+mf.Operation)
		}
	}
	return m
}

func TestCeremonyHappyPathAndOfflineRerun(t *testing.T) {
	testcluster.Need(t)
	b := newBed(t, true, nil)
	pre, rc, af := b.mustApply()
	if rc.Recovered || rc.Offline || rc.Receipt == "" || rc.Preflight != pre.Preflight {
		t.Fatalf("result %+v", rc)
	}
	st, err := store.Open(b.Store)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	d, ok, err := st.GetIndex(evidence.IndexReceipts, rc.CommandDigest)
	if err != nil || !ok || d.Digest != rc.Receipt {
		t.Fatalf("receipt index: %v %v %v", d, ok, err)
	}
	r := readReceipt(t, st, d)
	if len(r.Objects) != 6 || len(r.Execs) != 6 || r.CrossResourceAtomicity || !r.KubernetesMutation || r.ClusterUID != cluster.KubeSystemUID {
		t.Fatalf("receipt: %d objects, %d execs, %+v", len(r.Objects), len(r.Execs), r)
	}
	for _, o := range r.Objects {
		if o.UID == "" || o.ResourceVersion == "" || o.Namespace != b.Namespace {
			t.Fatalf("object %+v", o)
		}
	}
	managers := liveManagers(t, b.Namespace)
	if len(managers) != 6 {
		t.Fatalf("live objects with managers: %v", managers)
	}
	for obj, ms := range managers {
		if len(ms) != 1 || ms[0] != evidence.FieldManager+"/Apply" {
			t.Fatalf("%s managed by %v, want only %s/Apply", obj, ms, evidence.FieldManager)
		}
	}
	runs := 0
	defer ceremony.SetRunHook(func(string) { runs++ })()
	again, err := b.apply(af)
	if err != nil {
		t.Fatal(err)
	}
	if again.Receipt != rc.Receipt || !again.Offline || runs != 0 {
		t.Fatalf("rerun: receipt %s (want %s), offline %v, %d kubectl runs", again.Receipt, rc.Receipt, again.Offline, runs)
	}
}

// TestCeremonyConcurrentApplies: two applies of one command at once mutate once; the second
// waits on the command lock and returns the first one's receipt offline.
func TestCeremonyConcurrentApplies(t *testing.T) {
	testcluster.Need(t)
	b := newBed(t, true, nil)
	pre, err := b.preflight()
	if err != nil {
		t.Fatal(err)
	}
	af := b.applyFile(string(pre.Preflight))
	var mu sync.Mutex
	applies := 0
	defer ceremony.SetRunHook(func(step string) {
		if step == evidence.StepApply {
			mu.Lock()
			applies++
			mu.Unlock()
		}
	})()
	var wg sync.WaitGroup
	results := make([]*ceremony.Result, 2)
	errs := make([]error, 2)
	for i := range results {
		wg.Go(func() {
			results[i], errs[i] = ceremony.Apply(context.Background(), ceremony.Options{CommandFile: af})
		})
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
	if results[0].Receipt != results[1].Receipt || results[0].Offline == results[1].Offline || applies != 1 {
		t.Fatalf("results %+v %+v, %d server-side applies", results[0], results[1], applies)
	}
}

// TestCeremonyRecoveryAfterKill: the ql3 process is killed with SIGKILL right after the
// server-side apply returned (the mutation happened, no receipt). The rerun recovers from the
// intent: same field manager, full convergence, and the receipt names the intent it recovered.
func TestCeremonyRecoveryAfterKill(t *testing.T) {
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
	child.Env = append(os.Environ(), childEnv+"="+af)
	err = child.Run()
	if ee, ok := err.(*exec.ExitError); !ok || ee.ProcessState.Sys().(syscall.WaitStatus).Signal() != syscall.SIGKILL {
		t.Fatalf("child was not killed after apply: %v", err)
	}
	if b.Count(evidence.IndexIntents) != 1 || b.Count(evidence.IndexReceipts) != 0 {
		t.Fatal("the killed child did not leave exactly an intent")
	}
	if len(liveManagers(t, b.Namespace)) != 6 {
		t.Fatal("the killed child's apply did not reach the cluster")
	}
	st, err := store.Open(b.Store)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	rep, err := st.Verify()
	if err != nil || !rep.OK() || len(rep.Unfinished) != 1 {
		t.Fatalf("verify after the kill: %v %+v", err, rep)
	}
	intent := rep.Unfinished[0].Descriptor
	rc, err := b.apply(af)
	if err != nil {
		t.Fatal(err)
	}
	if !rc.Recovered || rc.Intent != intent.Digest {
		t.Fatalf("rerun did not recover from intent %s: %+v", intent.Digest, rc)
	}
	r := readReceipt(t, st, evidence.Descriptor{MediaType: evidence.MediaTypeReceipt, Digest: rc.Receipt})
	if !r.Recovered || r.Intent != intent || len(r.Objects) != 6 {
		t.Fatalf("receipt: recovered %v intent %s objects %d", r.Recovered, r.Intent.Digest, len(r.Objects))
	}
	if rep, err := st.Verify(); err != nil || len(rep.Unfinished) != 0 {
		t.Fatalf("verify after recovery: %v %+v", err, rep.Unfinished)
	}
}

// TestCeremonyWriteApplyCommand: the preflight writes the apply command for the operator, and
// that file applies.
func TestCeremonyWriteApplyCommand(t *testing.T) {
	testcluster.Need(t)
	b := newBed(t, true, nil)
	af := b.Dir + "/apply-written.json"
	pre, err := ceremony.Preflight(context.Background(), ceremony.Options{
		CommandFile: b.WriteCommand("preflight.json", evidence.CommandPreflight, ""), WriteApplyCommand: af, Progress: &b.out})
	if err != nil {
		t.Fatal(err)
	}
	raw, err := os.ReadFile(af)
	if err != nil || !strings.Contains(string(raw), string(pre.Preflight)) {
		t.Fatalf("apply command: %v %s", err, raw)
	}
	if _, err := b.apply(af); err != nil {
		t.Fatal(err)
	}
}
