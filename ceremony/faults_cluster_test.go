package ceremony_test

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/opencontainers/go-digest"

	"github.com/qinglong/ql3/audit"
	"github.com/qinglong/ql3/ceremony"
	"github.com/qinglong/ql3/evidence"
	"github.com/qinglong/ql3/internal/testbed/testcluster"
	"github.com/qinglong/ql3/refuse"
	"github.com/qinglong/ql3/store"
	"github.com/qinglong/ql3/verdict/kubeout"
)

// faultStepTimeout is the step timeout of a run against a paused API server: ql3 kills kubectl
// after it. The other kinds keep the default, since with etcd down each request waits for the
// server's own request timeout (faultRequestTimeout) and an apply makes one request per object.
const (
	faultStepTimeout    = 5 * time.Second
	faultRequestTimeout = 5 * time.Second
)

// faultCommand is one ceremony command of the grid and the kubectl steps it runs, in order.
type faultCommand struct {
	name  string
	steps []string
}

var faultCommands = []faultCommand{
	{evidence.CommandPreflight, []string{evidence.StepIdentity, evidence.StepVersion, evidence.StepDryRun}},
	{evidence.CommandApply, []string{evidence.StepIdentity, evidence.StepDryRun, evidence.StepApply, evidence.StepConvergence, evidence.StepNamespaces, evidence.StepIdentityFinal}},
	{evidence.CommandLiveAudit, []string{evidence.StepIdentity, evidence.StepConvergence, evidence.StepNamespaces, evidence.StepIdentityFinal}},
}

// faultKind is one fault the cluster produces on its own: inject it, undo it, and the code a
// step that meets it is refused with ("" for a fault the ceremony must ride through).
type faultKind struct {
	name           string
	inject, repair func(context.Context) error
	code           refuse.Code
	stepTimeout    time.Duration
	// passes are the steps that do not meet the fault: the version read asks the API server for
	// /version, which it answers without etcd.
	passes []string
}

// faultPosition is where a fault is injected: before step (SetRunHook) or after it returned and
// was recorded (SetAfterStep); hit is the step that meets it, "" when none runs after it.
type faultPosition struct {
	when, step, hit string
}

func (p faultPosition) String() string { return p.when + ":" + p.step }

// hitBy is the step of c that meets fault k injected at pos: pos.hit, or the first step after it
// that k does not pass ("" when none).
func (c faultCommand) hitBy(k faultKind, pos faultPosition) string {
	hit := pos.hit
	for hit != "" && slices.Contains(k.passes, hit) {
		i := slices.Index(c.steps, hit)
		hit = ""
		if i+1 < len(c.steps) {
			hit = c.steps[i+1]
		}
	}
	return hit
}

// positions are before:S and after:S for every step S of c.
func (c faultCommand) positions() []faultPosition {
	var out []faultPosition
	for i, s := range c.steps {
		next := ""
		if i+1 < len(c.steps) {
			next = c.steps[i+1]
		}
		out = append(out, faultPosition{"before", s, s}, faultPosition{"after", s, next})
	}
	return out
}

// faultRun is one run of a command of the grid on a bed: its command file, and what the store
// held before it.
type faultRun struct {
	b                                         *bed
	file                                      string
	preflights, receipts, liveAudits, intents int
}

// counts returns the bed's index counts: preflights, receipts, live audits, intents.
func (b *bed) counts() [4]int {
	return [4]int{b.Count(evidence.IndexPreflights), b.Count(evidence.IndexReceipts), b.Count(evidence.IndexLiveAudits), b.Count(evidence.IndexIntents)}
}

// faultBed prepares a bed on c for command: nothing for a preflight, a preflight for an apply, a
// preflight and an apply for a live audit, whose command file names the receipt.
func faultBed(t *testing.T, c *testcluster.Cluster, command string) *faultRun {
	t.Helper()
	b := causeBed(t, c, true, nil)
	r := &faultRun{b: b, file: b.WriteCommand("preflight.json", evidence.CommandPreflight, "")}
	if command != evidence.CommandPreflight {
		pre, err := b.preflight()
		if err != nil {
			t.Fatalf("preflight of the bed: %v", err)
		}
		r.file = b.applyFile(string(pre.Preflight))
	}
	if command == evidence.CommandLiveAudit {
		rc, err := b.apply(r.file)
		if err != nil {
			t.Fatalf("apply of the bed: %v", err)
		}
		r.file = b.liveAuditFile("live.json", rc.Receipt)
	}
	n := b.counts()
	r.preflights, r.receipts, r.liveAudits, r.intents = n[0], n[1], n[2], n[3]
	return r
}

// faultOutcome is what one run of the grid's command returned.
type faultOutcome struct {
	res  *ceremony.Result          // preflight, apply
	live *ceremony.LiveAuditResult // live audit
	err  error
}

func (r *faultRun) run(command string, timeout time.Duration) faultOutcome {
	b := r.b
	opts := ceremony.Options{CommandFile: r.file, StepTimeout: timeout, Progress: &b.out}
	var o faultOutcome
	switch command {
	case evidence.CommandPreflight:
		o.res, o.err = ceremony.Preflight(context.Background(), opts)
	case evidence.CommandApply:
		o.res, o.err = ceremony.Apply(context.Background(), opts)
	default:
		o.live, o.err = ceremony.LiveAudit(context.Background(), opts)
		if o.live != nil {
			o.live.WriteText(&b.out)
		}
	}
	b.note(o.err)
	return o
}

// wantCounts asserts the bed's index counts against those before the run plus the given ones.
func (r *faultRun) wantCounts(what string, preflights, receipts, liveAudits, intents int) {
	t := r.b.t
	t.Helper()
	want := [4]int{r.preflights + preflights, r.receipts + receipts, r.liveAudits + liveAudits, r.intents + intents}
	if got := r.b.counts(); got != want {
		t.Fatalf("%s: published (preflights, receipts, live audits, intents) %v, want %v", what, got, want)
	}
}

// wantVerified asserts that store verify is clean.
func (r *faultRun) wantVerified(what string) {
	t := r.b.t
	t.Helper()
	st, err := store.Open(r.b.Store)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	if rep, err := st.Verify(); err != nil || !rep.OK() {
		t.Fatalf("store verify %s: %v %+v", what, err, rep)
	}
}

// record decodes the published record d of media type mt and audits it offline.
func (r *faultRun) record(d digest.Digest, mt string, v any) {
	t := r.b.t
	t.Helper()
	st, err := store.Open(r.b.Store)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	raw, err := st.Get(d)
	if err != nil {
		t.Fatal(err)
	}
	if err := evidence.DecodeRecord(mt, raw, v); err != nil {
		t.Fatal(err)
	}
	if ar, err := audit.Audit(st, d); err != nil || ar.Err() != nil {
		t.Fatalf("audit of %s: %v %v", d, err, ar.Err())
	}
}

// wantDone asserts that the run completed and published its record, of cluster uid, and
// returns what it returned.
func (r *faultRun) wantDone(command string, o faultOutcome, uid string, recovered bool) {
	t := r.b.t
	t.Helper()
	if o.err != nil {
		t.Fatalf("%s: %v\n%s%s", command, o.err, r.b.out.String(), r.storedStderr(o.err))
	}
	switch command {
	case evidence.CommandPreflight:
		var p evidence.Preflight
		r.record(o.res.Preflight, evidence.MediaTypePreflight, &p)
		if !o.res.OK || p.ClusterUID != uid {
			t.Fatalf("preflight %+v, cluster uid %s, want %s", o.res, p.ClusterUID, uid)
		}
		r.wantCounts("the preflight", 1, 0, 0, 0)
	case evidence.CommandApply:
		var rc evidence.Receipt
		r.record(o.res.Receipt, evidence.MediaTypeReceipt, &rc)
		if !o.res.OK || o.res.Offline || o.res.Recovered != recovered || rc.Recovered != recovered || rc.ClusterUID != uid || len(rc.Objects) != 6 {
			t.Fatalf("apply %+v (receipt recovered %v, cluster uid %s, %d objects), want recovered %v on %s with 6 objects",
				o.res, rc.Recovered, rc.ClusterUID, len(rc.Objects), recovered, uid)
		}
		r.wantCounts("the apply", 0, 1, 0, 1)
	default:
		var la evidence.LiveAudit
		r.record(o.live.Report, evidence.MediaTypeLiveAudit, &la)
		if !o.live.OK || o.live.Converged != 6 || !la.Converged || la.ClusterUID != uid || len(la.Execs) != 4 {
			t.Fatalf("live audit %+v (report converged %v, cluster uid %s, %d execs) on %s", o.live, la.Converged, la.ClusterUID, len(la.Execs), uid)
		}
		r.wantCounts("the live audit", 0, 0, 1, 0)
	}
}

// storedStderr is the stderr blob an unexpected refusal points at, for the failure message: the
// store lives in the test's temp dir and is gone once the test ends.
func (r *faultRun) storedStderr(refusal error) string {
	ref, b, err := r.b.pointedStderr(refusal.Error())
	switch {
	case ref == "":
		return ""
	case err != nil:
		return fmt.Sprintf("(%s: %v)", ref, err)
	case len(b) > 4<<10:
		b = b[:4<<10]
	}
	return fmt.Sprintf("==== %s (the stored stderr)\n%s", ref, b)
}

// wantFault asserts a refusal with code naming step, pointing at the stored stderr of the step,
// whose own classification agrees (a step ql3 killed at its timeout may have written nothing
// kubectl classifies), with a hint.
func (r *faultRun) wantFault(err error, code refuse.Code, step string) {
	t := r.b.t
	t.Helper()
	if got := refuse.CodeOf(err); got != code {
		t.Fatalf("code %q, want %q (%v)\n%s%s", got, code, err, r.b.out.String(), r.storedStderr(err))
	}
	e, _ := refuse.As(err)
	msg := e.Message()
	if !strings.HasPrefix(msg, step+": ") || e.Hint == "" {
		t.Fatalf("message %q does not start with step %s, or no hint (%q)", msg, step, e.Hint)
	}
	ref, stderr, serr := r.b.pointedStderr(msg)
	if ref == "" {
		t.Fatalf("message %q does not point at the stored stderr", msg)
	}
	if serr != nil {
		t.Fatalf("the stderr the message points at: %v", serr)
	}
	if got := kubeout.Classify(stderr).Code; len(stderr) > 0 && got != code && !(code == kubeout.CodeTimeout && got == "") {
		t.Fatalf("stored stderr classifies as %q, the refusal is %q:\n%s", got, code, stderr)
	}
}

// ownCluster starts a cluster for one test alone, with the API server's request timeout given:
// a test that stops, pauses or restarts parts of a cluster must not share it. Its logs are shown
// when the test fails, and it is stopped when the test ends.
func ownCluster(t *testing.T, requestTimeout time.Duration) *testcluster.Cluster {
	t.Helper()
	tools := testcluster.NeedTools(t)
	c, err := testcluster.Start(context.Background(), tools, testcluster.Options{RequestTimeout: requestTimeout})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if t.Failed() {
			t.Log(c.Logs())
		}
		if err := c.Stop(); err != nil {
			t.Error(err)
		}
	})
	return c
}

// TestCeremonyRealFaults: on a cluster of the test's own, each fault the cluster produces on its
// own is injected before and after every kubectl step of a preflight, an apply and a live audit.
// A step that meets the fault is refused with the fault's code, naming the step; the store
// verifies clean and holds nothing published for the refused run (an intent exactly when the
// apply had reached it). Once the fault is repaired, the rerun of the same command file
// completes: a preflight and a live audit publish, an apply recovers from its intent or is a
// fresh apply. A fault after the last step, and an API server restarted at any position, is met
// by no step: the command completes. The bed's cleanup audits every published root.
func TestCeremonyRealFaults(t *testing.T) {
	ctx := context.Background()
	c := ownCluster(t, faultRequestTimeout)
	uid := c.KubeSystemUID
	restart := func(ctx context.Context) error {
		if err := c.StopAPIServer(ctx); err != nil {
			return err
		}
		return c.StartAPIServer(ctx)
	}
	kinds := []faultKind{
		{"api-server-stopped", c.StopAPIServer, c.StartAPIServer, kubeout.CodeConnectionRefused, 0, nil},
		{"api-server-paused", c.PauseAPIServer, c.ResumeAPIServer, kubeout.CodeTimeout, faultStepTimeout, nil},
		{"etcd-stopped", c.StopEtcd, c.StartEtcd, kubeout.CodeServerError, 0, []string{evidence.StepVersion}},
		{"api-server-restarted", restart, nil, "", 0, nil},
	}
	type tally struct {
		cases   int
		elapsed time.Duration
	}
	spent := map[string]*tally{}
	begin := time.Now()
	t.Cleanup(func() {
		for _, k := range kinds {
			if s := spent[k.name]; s != nil && s.cases > 0 {
				t.Logf("%s: %d cases in %s", k.name, s.cases, s.elapsed.Round(time.Second))
			}
		}
		t.Logf("the grid: %s", time.Since(begin).Round(time.Second))
	})
	// A fault that only the convergence read meets: the API server stopped before it and started
	// again after it returned. A read that never reached the objects is no evidence of drift: it
	// is refused, and no report is published.
	for _, cmd := range faultCommands[1:] {
		t.Run("api-server-stopped-during-convergence/"+cmd.name, func(t *testing.T) {
			r := faultBed(t, c, cmd.name)
			down := false
			t.Cleanup(func() {
				if down {
					if err := c.StartAPIServer(ctx); err != nil {
						t.Errorf("repair: %v", err)
					}
				}
			})
			var hookErr []error
			restoreRun := ceremony.SetRunHook(func(step string) {
				if step == evidence.StepConvergence && len(hookErr) == 0 {
					down = true
					hookErr = append(hookErr, c.StopAPIServer(ctx))
				}
			})
			restoreAfter := ceremony.SetAfterStep(func(step string) {
				if step == evidence.StepConvergence && down {
					hookErr = append(hookErr, c.StartAPIServer(ctx))
					down = false
				}
			})
			o := r.run(cmd.name, 0)
			restoreRun()
			restoreAfter()
			if len(hookErr) != 2 || hookErr[0] != nil || hookErr[1] != nil {
				t.Fatalf("stop and start around the convergence read: %v", hookErr)
			}
			r.wantFault(o.err, kubeout.CodeConnectionRefused, evidence.StepConvergence)
			r.wantCounts("the refused run", 0, 0, 0, map[bool]int{true: 1}[cmd.name == evidence.CommandApply])
			r.wantVerified("after the refusal")
			r.wantDone(cmd.name, r.run(cmd.name, 0), uid, cmd.name == evidence.CommandApply)
		})
	}
	for _, k := range kinds {
		spent[k.name] = &tally{}
		for _, cmd := range faultCommands {
			for _, pos := range cmd.positions() {
				t.Run(fmt.Sprintf("%s/%s/%s", k.name, cmd.name, pos), func(t *testing.T) {
					start := time.Now()
					defer func() { spent[k.name].cases++; spent[k.name].elapsed += time.Since(start) }()
					faultCase(t, c, uid, k, cmd, pos)
				})
			}
		}
	}
}

// faultCase runs one cell of the grid.
func faultCase(t *testing.T, c *testcluster.Cluster, uid string, k faultKind, cmd faultCommand, pos faultPosition) {
	ctx := context.Background()
	r := faultBed(t, c, cmd.name)
	// down is true from the injection until the repair; the cleanup repairs a fault a failing
	// test left, so that the next case finds the cluster up.
	down, fired := false, false
	var hookErr error
	repair := func() error {
		if !down || k.repair == nil {
			return nil
		}
		if err := k.repair(ctx); err != nil {
			return err
		}
		down = false
		return nil
	}
	t.Cleanup(func() {
		if err := repair(); err != nil {
			t.Errorf("repair %s: %v", k.name, err)
		}
	})
	hook := func(when string) func(string) {
		return func(step string) {
			if fired || when != pos.when || step != pos.step {
				return
			}
			fired, down = true, true
			hookErr = k.inject(ctx)
		}
	}
	restoreRun := ceremony.SetRunHook(hook("before"))
	restoreAfter := ceremony.SetAfterStep(hook("after"))
	o := r.run(cmd.name, k.stepTimeout)
	restoreRun()
	restoreAfter()
	if hookErr != nil {
		t.Fatalf("inject %s: %v", k.name, hookErr)
	}
	if !fired {
		t.Fatalf("the run never reached %s", pos)
	}
	hit := cmd.hitBy(k, pos)
	if k.code == "" || hit == "" {
		// No step meets the fault: the command completes on the cluster as it is.
		r.wantDone(cmd.name, o, uid, false)
		r.wantVerified("after the run")
		if err := repair(); err != nil {
			t.Fatalf("repair %s: %v", k.name, err)
		}
		if c.KubeSystemUID != uid {
			t.Fatalf("kube-system uid %s, was %s", c.KubeSystemUID, uid)
		}
		if cmd.name == evidence.CommandApply {
			// The apply is done: its rerun answers offline with the same receipt.
			again := r.run(cmd.name, 0)
			if again.err != nil || !again.res.Offline || again.res.Receipt != o.res.Receipt {
				t.Fatalf("offline rerun %+v: %v", again.res, again.err)
			}
		}
		return
	}
	r.wantFault(o.err, k.code, hit)
	intent := cmd.name == evidence.CommandApply && slices.Index(cmd.steps, hit) >= slices.Index(cmd.steps, evidence.StepApply)
	n := 0
	if intent {
		n = 1
	}
	r.wantCounts("the refused run", 0, 0, 0, n)
	r.wantVerified("after the refusal")
	if err := repair(); err != nil {
		t.Fatalf("repair %s: %v", k.name, err)
	}
	if c.KubeSystemUID != uid {
		t.Fatalf("kube-system uid %s after the repair, was %s", c.KubeSystemUID, uid)
	}
	r.wantDone(cmd.name, r.run(cmd.name, 0), uid, intent)
	r.wantVerified("after the rerun")
}
