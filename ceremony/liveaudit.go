package ceremony

import (
	"context"
	"fmt"
	"io"
	"sort"
	"strings"

	"github.com/opencontainers/go-digest"

	"github.com/qinglong/ql3/evidence"
	"github.com/qinglong/ql3/evidence/command"
	"github.com/qinglong/ql3/evidence/lock"
	"github.com/qinglong/ql3/internal/kubeconfig"
	"github.com/qinglong/ql3/internal/kubectl"
	"github.com/qinglong/ql3/internal/stablefile"
	"github.com/qinglong/ql3/refuse"
	"github.com/qinglong/ql3/store"
	"github.com/qinglong/ql3/verdict/convergence"
	"github.com/qinglong/ql3/verdict/kubeout"
)

// Reason codes of the live audit.
const (
	// CodeLiveDrift: the live audit ran to the end and published its report, but at least one
	// object of the receipt has not converged (changed, no longer ours, missing or recreated).
	CodeLiveDrift refuse.Code = "LIVE_DRIFT"
	// CodeLiveReceiptNotFound: the receipt the live audit must check is not a published receipt
	// of the store (no receipt for the apply command, or the digest names no receipt).
	CodeLiveReceiptNotFound refuse.Code = "LIVE_AUDIT_RECEIPT_NOT_FOUND"
	// CodeLiveReceiptMismatch: the receipt was made for another target or another cluster than
	// the live-audit command names.
	CodeLiveReceiptMismatch refuse.Code = "LIVE_AUDIT_RECEIPT_MISMATCH"
	// CodeLiveSuperseded: a later receipt of the same cluster that shares objects with the
	// receipt superseded it (plan.Lineage), and the live audit was not told to compare the
	// cluster with the older receipt anyway (--allow-superseded).
	CodeLiveSuperseded refuse.Code = "LIVE_AUDIT_SUPERSEDED"
)

// LiveAuditResult is what a live audit found and published.
type LiveAuditResult struct {
	OK            bool                    `json:"ok"` // every object converged
	Command       string                  `json:"command"`
	CommandDigest digest.Digest           `json:"commandDigest"`
	Target        digest.Digest           `json:"target"`
	Store         string                  `json:"store"`
	Receipt       digest.Digest           `json:"receipt"`
	Release       string                  `json:"release"`
	ClusterUID    string                  `json:"clusterUid"`
	Report        digest.Digest           `json:"report"` // the published live-audit report
	Converged     int                     `json:"converged"`
	Objects       int                     `json:"objects"`
	Verdicts      []evidence.LiveVerdict  `json:"verdicts"`
	Added         []evidence.LiveAddition `json:"added,omitempty"`  // every field other managers added
	Repair        *Repair                 `json:"repair,omitempty"` // when an object has not converged
	// SupersededBy names the later receipt that superseded this one (only with AllowSuperseded).
	SupersededBy *Supersede `json:"supersededBy,omitempty"`
}

// WriteText prints one line per object that has not converged, then the summary line.
func (r *LiveAuditResult) WriteText(w io.Writer) {
	for _, v := range r.Verdicts {
		if v.Verdict == evidence.VerdictConverged {
			continue
		}
		fmt.Fprintln(w, VerdictLine(v))
	}
	for _, a := range r.Added {
		fmt.Fprintln(w, AddedLine(a))
	}
	if r.Repair != nil {
		r.Repair.WriteText(w, r.Release)
	}
	if sb := r.SupersededBy; sb != nil {
		fmt.Fprintf(w, "superseded: receipt %s of release %s (finished %s) superseded this one; this audit compared the cluster with the older receipt\n",
			sb.Receipt, sb.Release, sb.FinishedAt)
	}
	fmt.Fprintln(w, r.Summary())
}

// VerdictLine renders one verdict: "drift: Deployment ns/name: image-differs at PATH live V expected V (manager M)".
func VerdictLine(v evidence.LiveVerdict) string {
	var b strings.Builder
	fmt.Fprintf(&b, "drift: %s %s: %s", v.Kind, objectName(v.Namespace, v.Name), v.Verdict)
	switch v.Verdict {
	case evidence.VerdictRecreated:
		fmt.Fprintf(&b, " (uid %s, the receipt's %s)", v.UID, v.ReceiptUID)
	case evidence.VerdictMissing:
		fmt.Fprintf(&b, " (the receipt's uid %s)", v.ReceiptUID)
	}
	if v.Path != "" {
		fmt.Fprintf(&b, " at %s", v.Path)
	}
	if v.Verdict != evidence.VerdictOwnershipLost && (v.Live != "" || v.Expected != "") {
		live := v.Live
		if live == "" {
			live = "(absent)"
		}
		fmt.Fprintf(&b, " live %s expected %s", live, v.Expected)
	}
	switch v.Manager {
	case "":
	case "no manager":
		b.WriteString(" (no manager)")
	default:
		fmt.Fprintf(&b, " (manager %s)", v.Manager)
	}
	if v.Path == "" && v.Code != "" {
		fmt.Fprintf(&b, " [%s]", v.Code)
	}
	return b.String()
}

// AddedLine renders one field another manager added: "drift: Deployment ns/name: added-by-other
// [security] at PATH live V (manager M)".
func AddedLine(a evidence.LiveAddition) string {
	sec := ""
	if a.Security {
		sec = " [security]"
	}
	return fmt.Sprintf("drift: %s %s: %s%s at %s live %s (manager %s)", a.Kind, objectName(a.Namespace, a.Name), evidence.VerdictAddedByOther, sec, a.Path, a.Live, a.Manager)
}

func objectName(ns, name string) string {
	if ns == "" {
		return name
	}
	return ns + "/" + name
}

// Summary is the last line of the text output.
func (r *LiveAuditResult) Summary() string {
	counts := map[string]int{}
	for _, v := range r.Verdicts {
		if v.Verdict != evidence.VerdictConverged {
			counts[v.Verdict]++
		}
	}
	kinds := make([]string, 0, len(counts))
	for k, n := range counts {
		kinds = append(kinds, fmt.Sprintf("%d %s", n, k))
	}
	sort.Strings(kinds)
	verdict := "converged"
	if !r.OK {
		verdict = "DRIFT (" + strings.Join(kinds, ", ") + ")"
	}
	return fmt.Sprintf("live audit %s: release %s, receipt %s, cluster %s: %d of %d objects converged: %s",
		r.Report, r.Release, r.Receipt, r.ClusterUID, r.Converged, r.Objects, verdict)
}

// LiveAudit runs the live audit of opts.CommandFile: an apply command file whose receipt is in
// its store, or a cluster.deployment.live.audit command file naming a receipt. It reads the live
// state with three kubectl calls (identity, convergence read fed with the receipt's stored
// manifest, final identity), judges every object, and publishes a live-audit report. It returns
// the result and a nil error when every object converged; when one has not, the report is still
// published and the error is a LIVE_DRIFT refusal alongside the result. Any other refusal returns
// no result and publishes nothing.
func LiveAudit(ctx context.Context, opts Options) (*LiveAuditResult, error) {
	opts.complete()
	pc, f, err := loadCommand(opts, "")
	if err != nil {
		return nil, err
	}
	if c := pc.Command.Command; c != evidence.CommandLiveAudit && c != evidence.CommandApply {
		return nil, refuse.New(command.CodeCommandMismatch, "command file holds %s, not %s or %s", c, evidence.CommandLiveAudit, evidence.CommandApply)
	}
	s, err := newSession(opts, pc, f)
	if err != nil {
		return nil, err
	}
	defer s.close()
	res, err := s.liveAudit(ctx)
	if refuse.CodeOf(err) == CodeLiveDrift {
		return res, err
	}
	return res, interrupted(ctx, opts, pc, err)
}

func (s *session) liveAudit(ctx context.Context) (_ *LiveAuditResult, err error) {
	// A live audit mutates nothing and publishes one root, its report, at its end: its evidence
	// is written as it comes and made durable together just before the report is published. A
	// refused or interrupted run makes it durable here, so its exec records stay in the store.
	defer s.startBatch()(&err)
	pc := s.pc
	res := &LiveAuditResult{Command: pc.Command.Command, CommandDigest: pc.Digest, Target: pc.Target, Store: pc.Command.Store,
		ClusterUID: pc.Command.ExpectedClusterUID}
	var rcDesc evidence.Descriptor
	var rc evidence.Receipt
	var manBytes []byte
	var inputs evidence.LiveAuditInputs
	var conv *kubectlOutcome
	var findings []convergence.Finding
	type judged struct {
		findings []convergence.Finding
		err      error
	}
	judgeCh := make(chan judged, 1) // buffered: a run refused before it is read leaves no goroutine behind
	var judgment judged
	steps := []step{
		// OpenExecutable hashes kubectl in full (the start-of-run full hash, about 50 ms) on the
		// other core while the receipt is loaded, its lock verified and the inputs stored.
		{"load receipt from the store, read and verify inputs", func() error {
			type opened struct {
				exe *stablefile.Executable
				err error
			}
			exeCh := make(chan opened, 1)
			go func() {
				exe, err := stablefile.OpenExecutable(pc.Command.Kubectl.Path, pc.Command.Kubectl.Digest)
				exeCh <- opened{exe, err}
			}()
			var err error
			if rcDesc, err = s.liveReceipt(&rc); err == nil {
				err = s.liveSuperseded(res, rcDesc, &rc)
			}
			if err == nil {
				if manBytes, err = s.receiptLock(&rc); err == nil {
					inputs, err = s.liveInputs()
				}
			}
			o := <-exeCh
			s.exe = o.exe
			if err != nil {
				return err
			}
			if o.err != nil {
				return o.err
			}
			return s.liveKubectl(&inputs)
		}},
		{"cluster identity read", func() error { return s.identity(ctx, evidence.StepIdentity) }},
		{"convergence read", func() error {
			// The end-of-run kubectl hash overlaps the two last reads; reverifyEnd's identity
			// check after the final read refuses a write to kubectl after the hash read it.
			s.startEndHash()
			r, err := s.run(ctx, evidence.StepConvergence, manBytes)
			if err != nil {
				return err
			}
			// A failed read is judged (a deleted object is a missing verdict, kubectl's NotFound)
			// only when kubectl reached the objects: any other cause (the server refused, silent,
			// failing, the credential refused) is the read's refusal, never a drift report.
			if r.ExitCode != 0 {
				if c := kubeout.Classify(r.Stderr); c.Code != "" && c.Code != kubeout.CodeNotFound {
					return c.Refusal(evidence.StepConvergence, r.ExitCode, s.lastStderr)
				}
			}
			conv = &kubectlOutcome{exit: r.ExitCode, stdout: r.Stdout, stderrBytes: len(r.Stderr)}
			// The judge reads only this output and the verified lock: it runs during the final
			// identity read. Its findings are used only once the end re-verification passed.
			go func() {
				var j judged
				j.findings, j.err = convergence.JudgeLiveRules(evidence.LiveJudgeNamespaces, s.lock, rc.Objects, conv.exit, conv.stdout, conv.stderrBytes)
				judgeCh <- j
			}()
			return nil
		}},
		{"namespace read", func() error {
			// The namespaces to read are those the read found objects in: the judge's findings.
			// A read the judge refused is refused after the end re-verification, as before.
			judgment = <-judgeCh
			if judgment.err != nil {
				return skipped{"the convergence read could not be judged"}
			}
			nss, err := s.namespaceRead(ctx, convergence.FoundObjects(judgment.findings))
			if err == nil || refuse.CodeOf(err) == convergence.CodeNamespaceTerminating {
				convergence.JudgeNamespaces(judgment.findings, nss)
				return nil
			}
			return err
		}},
		{"final identity read", func() error { return s.identity(ctx, evidence.StepIdentityFinal) }},
		{"re-verify inputs, judge every object", func() error {
			if err := s.reverifyEnd(); err != nil {
				return err
			}
			findings = judgment.findings
			return judgment.err
		}},
		{"publish live-audit report", func() error {
			d, err := s.publishLiveAudit(rcDesc, &rc, inputs, findings)
			res.Report = d.Digest
			return err
		}},
	}
	if err := runSteps(s.opts.Progress, s.opts.Now, steps); err != nil {
		return nil, err
	}
	res.Receipt, res.Release, res.Objects = rcDesc.Digest, rc.Lock.ReleaseVersion, len(findings)
	res.Verdicts = convergence.Verdicts(findings, rc.Objects)
	res.Added = convergence.Additions(findings)
	for _, v := range res.Verdicts {
		if v.Verdict == evidence.VerdictConverged {
			res.Converged++
		}
	}
	res.OK = res.Converged == res.Objects
	if !res.OK && res.SupersededBy != nil {
		sb := res.SupersededBy
		return res, refuse.New(CodeLiveDrift, "%d of %d objects of receipt %s (release %s) have not converged; live-audit report %s published",
			res.Objects-res.Converged, res.Objects, res.Receipt, res.Release, res.Report).
			WithHint("receipt %s of release %s superseded this one: drift where release %s changed the shared objects is expected; audit the current receipt instead (ql3 status)",
				sb.Receipt, sb.Release, sb.Release)
	}
	if !res.OK {
		res.Repair = s.buildRepair(conv.stdout, string(res.Report))
		if n := len(res.Added); n > 0 {
			res.Repair.Note = fmt.Sprintf("the %d field(s) other managers added (added-by-other above) stay: an apply never removes a field it does not own; remove them with kubectl if they must go, then audit again", n)
		}
		hint := "run the repair commands printed above, in order: they hand the fields back without --force-conflicts and re-assert the release (docs/lifecycle.md, repairing drift)"
		if res.Repair.Error != "" {
			hint = "re-assert the release with a new preflight and apply of its lock once the fields other managers hold are handed back (docs/lifecycle.md, repairing drift)"
		}
		return res, refuse.New(CodeLiveDrift, "%d of %d objects of receipt %s (release %s) have not converged; live-audit report %s published",
			res.Objects-res.Converged, res.Objects, res.Receipt, res.Release, res.Report).WithHint("%s", hint)
	}
	return res, nil
}

type kubectlOutcome struct {
	exit        int
	stdout      []byte
	stderrBytes int
}

// liveReceipt finds the receipt the command names and checks it is published and of this target
// and cluster.
func (s *session) liveReceipt(rc *evidence.Receipt) (evidence.Descriptor, error) {
	c := &s.pc.Command
	var d evidence.Descriptor
	if c.Command == evidence.CommandApply {
		got, ok, err := s.st.GetIndex(evidence.IndexReceipts, s.pc.Digest)
		if err != nil {
			return d, err
		}
		if !ok {
			return d, refuse.New(CodeLiveReceiptNotFound, "apply command %s has no receipt in store %s", s.pc.Digest, c.Store).
				WithHint("a live audit checks a release a receipt proves was applied: run the apply first")
		}
		d = got
	} else {
		b, err := s.st.Get(*c.Receipt)
		if refuse.CodeOf(err) == store.CodeObjectNotFound {
			return d, refuse.New(CodeLiveReceiptNotFound, "receipt %s is not in store %s", *c.Receipt, c.Store)
		}
		if err != nil {
			return d, err
		}
		d = evidence.Descriptor{MediaType: evidence.MediaTypeReceipt, Digest: *c.Receipt, Size: int64(len(b))}
		if evidence.DecodeRecord(evidence.MediaTypeReceipt, b, rc) != nil {
			return d, refuse.New(CodeLiveReceiptNotFound, "object %s of store %s is not a receipt", *c.Receipt, c.Store)
		}
		// Only a published receipt proves an apply: its command's index entry must name it.
		got, ok, err := s.st.GetIndex(evidence.IndexReceipts, rc.Command.Digest)
		if err != nil {
			return d, err
		}
		if !ok || got != d {
			return d, refuse.New(CodeLiveReceiptNotFound, "receipt %s is not published in store %s", *c.Receipt, c.Store)
		}
	}
	if err := s.decode(d, evidence.MediaTypeReceipt, rc); err != nil {
		return d, err
	}
	if rc.Target != s.pc.Target {
		return d, refuse.New(CodeLiveReceiptMismatch, "receipt %s was made for target %s, this command's target is %s", d.Digest, rc.Target, s.pc.Target).
			WithHint("a live-audit command is the apply command's target with command and receipt: copy them from the apply command file")
	}
	if rc.ClusterUID != c.ExpectedClusterUID {
		return d, refuse.New(CodeLiveReceiptMismatch, "receipt %s was made on cluster %s, this command expects %s", d.Digest, rc.ClusterUID, c.ExpectedClusterUID)
	}
	return d, nil
}

// liveSuperseded refuses a receipt a later receipt of the cluster superseded, naming the current
// one, unless the caller asked to compare the cluster with the older receipt anyway.
func (s *session) liveSuperseded(res *LiveAuditResult, d evidence.Descriptor, rc *evidence.Receipt) error {
	sb, err := supersededBy(s.st, d.Digest)
	if err != nil || sb == nil {
		return err
	}
	if !s.opts.AllowSuperseded {
		return refuse.New(CodeLiveSuperseded, "receipt %s of release %s is superseded on cluster %s by receipt %s of release %s (finished %s): the objects they share are release %s's now",
			d.Digest, rc.Lock.ReleaseVersion, rc.ClusterUID, sb.Receipt, sb.Release, sb.FinishedAt, sb.Release).
			WithHint("audit the current receipt: ql3 status --command-file=%s (or ql3 command new --store %s --from-receipt %s --out FILE, then ql3 live-audit --command-file=FILE); to compare the cluster with this older receipt anyway: ql3 live-audit --allow-superseded --command-file=%s",
				s.opts.CommandFile, s.pc.Command.Store, sb.Receipt, s.opts.CommandFile)
	}
	res.SupersededBy = sb
	return nil
}

// receiptLock reads the receipt's manifest and lock report from the store, not from disk, and
// verifies the lock again.
func (s *session) receiptLock(rc *evidence.Receipt) ([]byte, error) {
	man, err := s.st.GetDescriptor(rc.Manifest)
	if err != nil {
		return nil, err
	}
	rep, err := s.st.GetDescriptor(rc.LockReport)
	if err != nil {
		return nil, err
	}
	if rc.Manifest.MediaType != evidence.MediaTypeManifest || rc.LockReport.MediaType != evidence.MediaTypeLockReport ||
		rc.Manifest.Digest != s.pc.Command.Manifest.Digest || rc.LockReport.Digest != s.pc.Command.LockReport.Digest {
		return nil, refuse.New(CodeRecordInvalid, "receipt does not bind the command's manifest and lock report blobs")
	}
	if s.lock, err = lock.Verify(man, rep); err != nil {
		return nil, err
	}
	if len(rc.Objects) != len(s.lock.Objects) {
		return nil, refuse.New(CodeRecordInvalid, "receipt lists %d objects, its manifest %d", len(rc.Objects), len(s.lock.Objects))
	}
	s.manDesc, s.repDesc = rc.Manifest, rc.LockReport
	return man, nil
}

// liveInputs reads the kubeconfig, under the ceremony's policy (the command file was read
// already), and stores the evidence of both; kubectl's is stored by liveKubectl.
func (s *session) liveInputs() (evidence.LiveAuditInputs, error) {
	var in evidence.LiveAuditInputs
	c := &s.pc.Command
	var err error
	if s.kubeconfig, err = readPinned(c.Kubeconfig.Path, evidence.RoleKubeconfig, MaxKubeconfig, c.Kubeconfig.Digest); err != nil {
		return in, err
	}
	if s.summary, err = kubeconfig.Check(s.kubeconfig.Bytes, c.Kubeconfig.Context); err != nil {
		return in, err
	}
	put := func(mt string, v any) evidence.Descriptor {
		if err != nil {
			return evidence.Descriptor{}
		}
		var d evidence.Descriptor
		d, err = s.putRecord(mt, v)
		return d
	}
	s.cmdDesc = put(evidence.MediaTypeCommand, &s.pc.Command)
	if err == nil && s.cmdDesc.Digest != s.pc.Digest {
		return in, refuse.New(CodeStoreWrite, "command record digest %s differs from the command identity %s", s.cmdDesc.Digest, s.pc.Digest)
	}
	var raw evidence.Descriptor
	if err == nil {
		raw, err = s.putBlob(evidence.MediaTypeCommandFile, s.cmdFile.Bytes)
	}
	s.kcDesc = put(evidence.MediaTypeKubeconfig, s.summary)
	in.CommandFile = put(evidence.MediaTypeInput, s.cmdFile.Input(&raw))
	in.Kubeconfig = put(evidence.MediaTypeInput, s.kubeconfig.Input(nil))
	if err != nil {
		return in, storeErr(err, "inputs")
	}
	return in, nil
}

// liveKubectl stores kubectl's input record once its start hash is done, and makes the runner.
func (s *session) liveKubectl(in *evidence.LiveAuditInputs) error {
	c := &s.pc.Command
	s.runner = &kubectl.Runner{Exe: s.exe, Kubeconfig: s.kubeconfig.Bytes, Context: c.Kubeconfig.Context,
		Timeout: s.opts.StepTimeout, MaxOutput: MaxKubectlOutput}
	var err error
	if in.Kubectl, err = s.putRecord(evidence.MediaTypeInput, s.exe.Input()); err != nil {
		return storeErr(err, "kubectl input")
	}
	return nil
}

func (s *session) publishLiveAudit(rcDesc evidence.Descriptor, rc *evidence.Receipt, in evidence.LiveAuditInputs, fs []convergence.Finding) (evidence.Descriptor, error) {
	vs := convergence.Verdicts(fs, rc.Objects)
	converged := true
	for _, v := range vs {
		converged = converged && v.Verdict == evidence.VerdictConverged
	}
	rec := evidence.LiveAudit{
		Schema: evidence.SchemaLiveAudit, Command: s.cmdDesc, Receipt: rcDesc, Target: s.pc.Target, Inputs: in,
		Kubeconfig: s.kcDesc, Manifest: rc.Manifest, LockReport: rc.LockReport, Lock: rc.Lock,
		KubectlDigest: s.pc.Command.Kubectl.Digest, ClusterUID: s.clusterUID, FieldManager: evidence.FieldManager,
		Execs: s.execs, Verdicts: vs, Judge: evidence.LiveJudgeNamespaces, Added: convergence.Additions(fs), Converged: converged, NetworkAccess: true, KubernetesMutation: false,
		StartedAt: stamp(s.started), FinishedAt: stamp(s.opts.Now()),
	}
	d, err := s.putRecord(evidence.MediaTypeLiveAudit, rec)
	if err != nil {
		return d, storeErr(err, "live-audit report")
	}
	return d, s.publish(evidence.IndexLiveAudits, d.Digest, d, "live-audit")
}
