package audit

import (
	"fmt"
	"slices"
	"strings"

	"github.com/opencontainers/go-digest"

	"github.com/qinglong/ql3/evidence"
	"github.com/qinglong/ql3/refuse"
	"github.com/qinglong/ql3/verdict/convergence"
)

// KindLiveAudit is the subject kind of a live-audit report.
const KindLiveAudit = "live-audit"

// Reason codes of the live-audit report's audit.
const (
	// CodeLiveVerdicts: the report's verdicts are not what the live audit's verifier derives from
	// the stored convergence read, or its converged claim does not follow from them.
	CodeLiveVerdicts refuse.Code = "AUDIT_LIVE_VERDICTS"
	// CodeLiveReceipt: the report's receipt is not the one its command names, or binds another
	// target, manifest, lock report or lock, or fails its own audit.
	CodeLiveReceipt refuse.Code = "AUDIT_LIVE_RECEIPT"
)

// liveAuditSteps are the execs of a live audit under its rules: the namespace read (optional, as
// in a receipt) only under evidence.LiveJudgeNamespaces.
func liveAuditSteps(judge string) []string {
	if judge == evidence.LiveJudgeNamespaces {
		return []string{evidence.StepIdentity, evidence.StepConvergence, evidence.StepNamespaces, evidence.StepIdentityFinal}
	}
	return []string{evidence.StepIdentity, evidence.StepConvergence, evidence.StepIdentityFinal}
}

// liveAudit audits a live-audit report: its command and receipt, its inputs, its kubectl runs
// (three, or four with the namespace read), the identity reads, and every verdict re-derived
// from the stored convergence read.
func (a *auditor) liveAudit(root evidence.Descriptor) {
	var la evidence.LiveAudit
	if !a.check("live-audit", func() (string, error) {
		if err := a.load(root, evidence.MediaTypeLiveAudit, &la); err != nil {
			return "", err
		}
		if !la.NetworkAccess || la.KubernetesMutation {
			return "", refuse.New(CodeClaim, "live-audit report claims networkAccess %v and kubernetesMutation %v; a live audit reads the network and mutates nothing",
				la.NetworkAccess, la.KubernetesMutation)
		}
		return fmt.Sprintf("live-audit report %s of receipt %s, converged %v", root.Digest, la.Receipt.Digest, la.Converged), nil
	}) {
		return
	}
	r := &run{command: la.Command, target: la.Target, kubeconfig: la.Kubeconfig, manifest: la.Manifest,
		lockReport: la.LockReport, lock: la.Lock, clusterUID: la.ClusterUID, fieldManager: la.FieldManager,
		execs: la.Execs, steps: expectedSteps(liveAuditSteps(la.Judge), la.Execs),
		inputs: evidence.Inputs{CommandFile: la.Inputs.CommandFile, Kubeconfig: la.Inputs.Kubeconfig, Kubectl: la.Inputs.Kubectl}}
	if !a.liveCommandCheck(r, &la) {
		return
	}
	var rc evidence.Receipt
	receiptOK := a.liveReceiptCheck(r, &la, &rc)
	a.liveInputsCheck(r)
	a.kubeconfigCheck(r)
	a.check("pins", func() (string, error) {
		if la.KubectlDigest != r.pc.Command.Kubectl.Digest {
			return "", refuse.New(CodeKubectl, "live-audit report names kubectl %s, the command pins %s", la.KubectlDigest, r.pc.Command.Kubectl.Digest)
		}
		return "the report names the pinned kubectl", nil
	})
	a.lockCheck(r)
	runs := a.liveExecs(r)
	if runs != nil && receiptOK {
		a.liveVerdictsCheck(r, runs, &la, &rc)
	}
	if runs != nil {
		a.recordTimes("record times", []span{{"live-audit report", la.StartedAt, la.FinishedAt, runs}}, func() error {
			var last []execRun
			if receiptOK && len(rc.Execs) > 0 {
				var er execRun
				if err := a.load(rc.Execs[len(rc.Execs)-1], evidence.MediaTypeExec, &er.rec); err != nil {
					return err
				}
				last = []execRun{er}
			}
			return follows("the live-audit report", runs, "its receipt", last)
		})
	}
	a.published("published", evidence.IndexLiveAudits, root, root)
}

// liveCommandCheck loads the command record: a live-audit command, or the apply command of the
// receipt, of the report's target and cluster.
func (a *auditor) liveCommandCheck(r *run, la *evidence.LiveAudit) bool {
	return a.check("command", func() (string, error) {
		pc, err := a.commandRecord(r.command)
		if err != nil {
			return "", err
		}
		switch pc.Command.Command {
		case evidence.CommandLiveAudit:
			if *pc.Command.Receipt != la.Receipt.Digest {
				return "", refuse.New(CodeLiveReceipt, "the live-audit command names receipt %s, the report checked %s", *pc.Command.Receipt, la.Receipt.Digest)
			}
		case evidence.CommandApply:
		default:
			return "", refuse.New(CodeCommand, "command record %s is a %s command, not %s or %s", r.command.Digest, pc.Command.Command, evidence.CommandLiveAudit, evidence.CommandApply)
		}
		return r.bindCommand(pc, "report")
	})
}

// liveReceiptCheck binds the receipt: the one the command names (or the apply command's
// published receipt), of the same target, manifest, lock report and lock; and audits it in full.
func (a *auditor) liveReceiptCheck(r *run, la *evidence.LiveAudit, rc *evidence.Receipt) bool {
	if !a.check("receipt", func() (string, error) {
		if err := a.load(la.Receipt, evidence.MediaTypeReceipt, rc); err != nil {
			return "", err
		}
		if rc.Target != la.Target || rc.Manifest != la.Manifest || rc.LockReport != la.LockReport || rc.Lock != la.Lock {
			return "", refuse.New(CodeLiveReceipt, "receipt %s binds another target, manifest, lock report or lock than the report", la.Receipt.Digest)
		}
		if rc.ClusterUID != la.ClusterUID {
			return "", refuse.New(CodeClusterUID, "receipt %s names cluster %s, the report %s", la.Receipt.Digest, rc.ClusterUID, la.ClusterUID)
		}
		if r.pc.Command.Command == evidence.CommandApply && rc.Command.Digest != r.pc.Digest {
			return "", refuse.New(CodeLiveReceipt, "receipt %s binds command %s, the report ran apply command %s", la.Receipt.Digest, rc.Command.Digest, r.pc.Digest)
		}
		sub, err := Audit(a.src, la.Receipt.Digest)
		if err != nil {
			return "", err
		}
		if err := sub.Err(); err != nil {
			return "", refuse.Wrap(CodeLiveReceipt, err, "the receipt the report checked fails its audit")
		}
		return fmt.Sprintf("receipt %s of release %s passes its own audit (%d checks)", la.Receipt.Digest, rc.Lock.ReleaseVersion, len(sub.Checks)), nil
	}) {
		return false
	}
	a.published("receipt.published", evidence.IndexReceipts, rc.Command, la.Receipt)
	return true
}

// liveInputsCheck binds the three input records a live audit reads from disk to its command.
func (a *auditor) liveInputsCheck(r *run) bool {
	return a.check("inputs", func() (string, error) {
		c := &r.pc.Command
		var privateUID int64 = -1
		for _, w := range []struct {
			desc       evidence.Descriptor
			role, path string
			d          digest.Digest
		}{
			{r.inputs.Kubeconfig, evidence.RoleKubeconfig, c.Kubeconfig.Path, c.Kubeconfig.Digest},
			{r.inputs.Kubectl, evidence.RoleKubectl, c.Kubectl.Path, c.Kubectl.Digest},
		} {
			var in evidence.Input
			if err := a.load(w.desc, evidence.MediaTypeInput, &in); err != nil {
				return "", err
			}
			if in.Role != w.role || in.Path != w.path || in.Digest != w.d || in.Content != nil {
				return "", refuse.New(CodeInput, "input record %s (role %s) does not bind the command's %s path and digest", w.desc.Digest, in.Role, w.role)
			}
			if err := stableVerdict(&in, &privateUID); err != nil {
				return "", err
			}
		}
		if err := a.commandFileInput(r, privateUID); err != nil {
			return "", err
		}
		return "3 input records bind the command file, kubeconfig and kubectl; manifest and lock report are the receipt's stored blobs", nil
	})
}

// liveExecs checks the three exec records like a ceremony's; the convergence read alone may have
// exited non-zero (kubectl get exits 1 when an object is missing), which the verdicts check judges.
func (a *auditor) liveExecs(r *run) []execRun {
	var runs []execRun
	ok := a.check("execs", func() (string, error) {
		if len(r.execs) != len(r.steps) {
			return "", refuse.New(CodeExecSequence, "%d exec records where the steps %s are required", len(r.execs), strings.Join(r.steps, ", "))
		}
		for i, d := range r.execs {
			er, err := a.execRecord(r, d, r.steps[i], i)
			if refuse.CodeOf(err) == CodeExecExit && r.steps[i] == evidence.StepConvergence {
				// execRecord checks the exit code last: every other check of the record passed.
				if err = a.load(d, evidence.MediaTypeExec, &er.rec); err == nil {
					er.stdout, err = a.blob(er.rec.Stdout, evidence.MediaTypeStdout)
				}
			}
			if err != nil {
				return "", err
			}
			runs = append(runs, er)
		}
		return strings.Join(r.steps, ", ") + ": pinned kubectl, fixed argv and environment, stdin the receipt's manifest, byte counts bound", nil
	})
	if !ok {
		return nil
	}
	a.verdicts(r, runs)
	return runs
}

// liveVerdictsCheck re-derives every verdict from the stored convergence read with the live
// audit's own judge and requires the report to say exactly that.
func (a *auditor) liveVerdictsCheck(r *run, runs []execRun, la *evidence.LiveAudit, rc *evidence.Receipt) bool {
	return a.check("verdicts", func() (string, error) {
		if r.lockResult == nil {
			return "", refuse.New(CodeLock, "no verified lock to judge the live read against")
		}
		read := runs[1]
		fs, err := convergence.JudgeLiveRules(la.Judge, r.lockResult, rc.Objects, int(read.rec.ExitCode), read.stdout, int(read.rec.StderrBytes))
		if err != nil {
			return "", err
		}
		if la.Judge == evidence.LiveJudgeNamespaces {
			nss, err := namespaceRead(r, convergence.FoundObjects(fs), runs)
			if err != nil {
				return "", err
			}
			convergence.JudgeNamespaces(fs, nss)
		}
		want := convergence.Verdicts(fs, rc.Objects)
		if added := convergence.Additions(fs); !slices.Equal(added, la.Added) {
			return "", refuse.New(CodeLiveVerdicts, "report lists %d fields other managers added, the live read yields %d (or other ones)", len(la.Added), len(added))
		}
		if len(want) != len(la.Verdicts) {
			return "", refuse.New(CodeLiveVerdicts, "report holds %d verdicts, the live read yields %d", len(la.Verdicts), len(want))
		}
		converged := 0
		for i := range want {
			if want[i] != la.Verdicts[i] {
				return "", refuse.New(CodeLiveVerdicts, "verdict %d (%s %s) is %s in the report, the live read yields %s",
					i, want[i].Kind, want[i].Name, refuse.Ident(la.Verdicts[i].Verdict), want[i].Verdict)
			}
			if want[i].Verdict == evidence.VerdictConverged {
				converged++
			}
		}
		if la.Converged != (converged == len(want)) {
			return "", refuse.New(CodeLiveVerdicts, "report claims converged %v, its verdicts show %d of %d converged", la.Converged, converged, len(want))
		}
		if !slices.Equal(rcUIDs(rc), receiptUIDs(la)) {
			return "", refuse.New(CodeLiveVerdicts, "the verdicts' receipt uids are not the receipt's")
		}
		return fmt.Sprintf("%d verdicts re-derived from the stored convergence read: %d of %d converged", len(want), converged, len(want)), nil
	})
}

func rcUIDs(rc *evidence.Receipt) []string {
	out := make([]string, len(rc.Objects))
	for i, o := range rc.Objects {
		out[i] = o.UID
	}
	return out
}

func receiptUIDs(la *evidence.LiveAudit) []string {
	out := make([]string, len(la.Verdicts))
	for i, v := range la.Verdicts {
		out[i] = v.ReceiptUID
	}
	return out
}
