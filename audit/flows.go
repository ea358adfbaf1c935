package audit

import (
	"fmt"
	"slices"

	"github.com/qinglong/ql3/evidence"
	"github.com/qinglong/ql3/refuse"
)

var (
	// preflightSteps are the execs of a preflight report with a versions member. A report without
	// one was written before the version read: its execs are preflightStepsBefore, which are also
	// an apply's own first two (an intent's execs).
	preflightSteps       = []string{evidence.StepIdentity, evidence.StepVersion, evidence.StepDryRun}
	preflightStepsBefore = []string{evidence.StepIdentity, evidence.StepDryRun}
	// The namespace read is optional here: a receipt holds it exactly when the objects live in a
	// namespace the manifest does not hold, which convergenceCheck binds (namespaceRead).
	receiptSteps = []string{evidence.StepIdentity, evidence.StepDryRun, evidence.StepApply, evidence.StepConvergence, evidence.StepNamespaces, evidence.StepIdentityFinal}
)

// preflightRun is the run view of a preflight report. Its versions member says which rules it was
// written under (docs/audit.md): with it, the version read is required and must show exactly it;
// without it, the report predates the version read and holds none.
func preflightRun(p *evidence.Preflight, prefix string) *run {
	steps := preflightStepsBefore
	if p.Versions != nil {
		steps = preflightSteps
	}
	return &run{prefix: prefix, command: p.Command, wantCommand: evidence.CommandPreflight, target: p.Target,
		inputs: p.Inputs, kubeconfig: p.Kubeconfig, manifest: p.Manifest, lockReport: p.LockReport, lock: p.Lock,
		clusterUID: p.ClusterUID, fieldManager: p.FieldManager, execs: p.Execs, steps: steps, versions: p.Versions}
}

// preflightRoot audits a preflight report that is the audit's subject.
func (a *auditor) preflightRoot(root evidence.Descriptor) {
	var p evidence.Preflight
	if !a.check("preflight", func() (string, error) { return loadPreflight(a, root, &p) }) {
		return
	}
	r := preflightRun(&p, "")
	runs := a.runChecks(r)
	a.planCheck(r, &p)
	if runs != nil {
		a.chainChecks([]chainPart{{"", runs}})
		a.recordTimes("record times", []span{{"preflight report", p.StartedAt, p.FinishedAt, runs}}, func() error {
			return follows("the preflight report", runs, "the receipt its plan names", a.previousRuns(&p))
		})
	}
	a.published("published", evidence.IndexPreflights, root, root)
}

func loadPreflight(a *auditor, d evidence.Descriptor, p *evidence.Preflight) (string, error) {
	if err := a.load(d, evidence.MediaTypePreflight, p); err != nil {
		return "", err
	}
	if !p.NetworkAccess || p.KubernetesMutation {
		return "", refuse.New(CodeClaim, "preflight %s claims networkAccess %v and kubernetesMutation %v; a preflight reads the network and mutates nothing",
			d.Digest, p.NetworkAccess, p.KubernetesMutation)
	}
	return fmt.Sprintf("preflight report %s, target %s", d.Digest, p.Target), nil
}

// runChecks applies the checks shared by preflight reports and receipts, each only when what it
// needs was established by the checks before it.
func (a *auditor) runChecks(r *run) []execRun {
	if !a.commandCheck(r) {
		return nil
	}
	a.inputsCheck(r)
	a.kubeconfigCheck(r)
	a.lockCheck(r)
	runs, _ := a.execsCheck(r)
	return runs
}

// receipt audits a receipt, the preflight it consumed and the intent it wrote or recovered from.
func (a *auditor) receipt(root evidence.Descriptor) {
	var rc evidence.Receipt
	if !a.check("receipt", func() (string, error) {
		if err := a.load(root, evidence.MediaTypeReceipt, &rc); err != nil {
			return "", err
		}
		if rc.CrossResourceAtomicity || !rc.NetworkAccess || !rc.KubernetesMutation {
			return "", refuse.New(CodeClaim, "receipt claims crossResourceAtomicity %v, networkAccess %v, kubernetesMutation %v",
				rc.CrossResourceAtomicity, rc.NetworkAccess, rc.KubernetesMutation)
		}
		return fmt.Sprintf("receipt %s, target %s, recovered %v", root.Digest, rc.Target, rc.Recovered), nil
	}) {
		return
	}
	a.report.Recovered = rc.Recovered
	r := &run{command: rc.Command, wantCommand: evidence.CommandApply, target: rc.Target, inputs: rc.Inputs,
		kubeconfig: rc.Kubeconfig, manifest: rc.Manifest, lockReport: rc.LockReport, lock: rc.Lock,
		clusterUID: rc.ClusterUID, fieldManager: rc.FieldManager, execs: rc.Execs, steps: receiptSteps}
	runs := a.runChecks(r)
	if r.pc == nil {
		return
	}
	a.check("pins", func() (string, error) {
		if rc.KubectlDigest != r.pc.Command.Kubectl.Digest {
			return "", refuse.New(CodeKubectl, "receipt names kubectl %s, the command pins %s", rc.KubectlDigest, r.pc.Command.Kubectl.Digest)
		}
		if rc.KubeconfigDigest != r.pc.Command.Kubeconfig.Digest {
			return "", refuse.New(CodeKubeconfig, "receipt names kubeconfig %s, the command pins %s", rc.KubeconfigDigest, r.pc.Command.Kubeconfig.Digest)
		}
		return "receipt names the pinned kubectl and kubeconfig", nil
	})
	var p evidence.Preflight
	var in evidence.Intent
	preflightRuns, preflightOK := a.preflightLink(r, &rc, &p)
	intentRuns, intentLoaded, intentOK := a.intentLink(r, &rc, &in)
	// The chain's checks need every exec record of it loaded and in shape; when one is not, a
	// check before has failed already.
	if runs != nil && preflightRuns != nil && intentOK {
		parts := []chainPart{{"preflight.", preflightRuns}}
		if rc.Recovered {
			parts = append(parts, chainPart{"intent.", intentRuns})
		}
		a.chainChecks(append(parts, chainPart{"", runs}))
		a.recordTimes("record times", []span{{"preflight report", p.StartedAt, p.FinishedAt, preflightRuns}, {"receipt", rc.StartedAt, rc.FinishedAt, runs}},
			func() error {
				if err := follows("the preflight report", preflightRuns, "the receipt its plan names", a.previousRuns(&p)); err != nil {
					return err
				}
				return intentTime(&in, rc.Recovered, intentRuns, runs)
			})
	}
	if runs != nil {
		a.convergenceCheck(r, runs, rc.Objects)
	}
	// The index checks run last, so that a forgery the index does not name is reported by its
	// own finding first.
	a.published("published", evidence.IndexReceipts, evidence.Descriptor{Digest: r.pc.Digest}, root)
	if preflightOK {
		a.published("preflight.published", evidence.IndexPreflights, rc.Preflight, rc.Preflight)
	}
	if intentLoaded {
		a.published("intent.published", evidence.IndexIntents, evidence.Descriptor{Digest: r.pc.Digest}, rc.Intent)
	}
}

// preflightLink checks that the receipt's preflight is the one its command consumed, that it
// binds the same target, and audits that preflight in full. It returns the preflight's exec
// runs (nil when they could not all be established) and whether the preflight was loaded.
func (a *auditor) preflightLink(r *run, rc *evidence.Receipt, p *evidence.Preflight) ([]execRun, bool) {
	if !a.check("preflight", func() (string, error) {
		if r.pc.Command.Preflight == nil || *r.pc.Command.Preflight != rc.Preflight.Digest {
			return "", refuse.New(CodePreflight, "receipt names preflight %s, its command consumes another", rc.Preflight.Digest)
		}
		detail, err := loadPreflight(a, rc.Preflight, p)
		if err != nil {
			return "", err
		}
		if p.Target != rc.Target {
			return "", refuse.New(CodeTarget, "preflight %s binds target %s, the receipt binds %s", rc.Preflight.Digest, p.Target, rc.Target)
		}
		return detail, nil
	}) {
		return nil, false
	}
	pr := preflightRun(p, "preflight.")
	runs := a.runChecks(pr)
	a.planCheck(pr, p)
	return runs, true
}

// intentLink checks the apply intent: it binds this command, preflight, target and cluster, and
// its identity read and dry-run are this run's (or, in a recovery, an earlier attempt's, audited
// the same way). It returns the earlier attempt's exec runs of a recovery, whether the intent was
// loaded and bound, and whether, in a recovery, those runs were established too.
func (a *auditor) intentLink(r *run, rc *evidence.Receipt, in *evidence.Intent) (runs []execRun, loaded, ok bool) {
	if !a.check("intent", func() (string, error) {
		if err := a.load(rc.Intent, evidence.MediaTypeIntent, in); err != nil {
			return "", err
		}
		if in.Command != rc.Command || in.Preflight != rc.Preflight || in.Target != rc.Target {
			return "", refuse.New(CodeIntent, "intent %s binds another command, preflight or target than the receipt", rc.Intent.Digest)
		}
		if in.ClusterUID != r.pc.Command.ExpectedClusterUID {
			return "", refuse.New(CodeClusterUID, "intent %s names cluster %s, the command expects %s", rc.Intent.Digest, in.ClusterUID, r.pc.Command.ExpectedClusterUID)
		}
		if !rc.Recovered && !slices.Equal(in.Execs, rc.Execs[:min(2, len(rc.Execs))]) {
			return "", refuse.New(CodeIntent, "intent %s does not hold this run's identity read and dry-run", rc.Intent.Digest)
		}
		// A recovery rolls forward from an intent an earlier process wrote: its exec records
		// (their times and run directories) can never be this run's.
		if rc.Recovered && slices.ContainsFunc(in.Execs, func(d evidence.Descriptor) bool { return slices.Contains(rc.Execs, d) }) {
			return "", refuse.New(CodeIntent, "intent %s holds an exec record of this run: the receipt claims a recovery from an earlier attempt", rc.Intent.Digest)
		}
		return fmt.Sprintf("intent %s written before the mutation (recovered %v)", rc.Intent.Digest, rc.Recovered), nil
	}) {
		return nil, false, false
	}
	if !rc.Recovered {
		return nil, true, true
	}
	ir := *r
	ir.prefix, ir.execs, ir.steps, ir.clusterUID = "intent.", in.Execs, preflightStepsBefore, in.ClusterUID
	runs, _ = a.execsCheck(&ir)
	return runs, true, runs != nil
}

// published checks that the store's index names want under key: the ceremony writes the index
// entry only after the record, so an unindexed record was never published.
func (a *auditor) published(name, kind string, key, want evidence.Descriptor) {
	a.check(name, func() (string, error) {
		got, ok, err := a.src.GetIndex(kind, key.Digest)
		if err != nil {
			return "", err
		}
		if !ok {
			return "", refuse.New(CodeUnpublished, "index %s has no entry for %s", kind, key.Digest)
		}
		if got != want {
			return "", refuse.New(CodeUnpublished, "index %s entry %s names %s, not %s", kind, key.Digest, got.Digest, want.Digest)
		}
		return fmt.Sprintf("index %s/%s names %s", kind, key.Digest.Encoded()[:12], want.Digest), nil
	})
}
