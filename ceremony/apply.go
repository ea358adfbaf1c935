package ceremony

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/opencontainers/go-digest"

	"github.com/qinglong/ql3/evidence"
	"github.com/qinglong/ql3/evidence/command"
	"github.com/qinglong/ql3/internal/buildinfo"
	"github.com/qinglong/ql3/internal/stablefile"
	"github.com/qinglong/ql3/refuse"
	"github.com/qinglong/ql3/verdict/convergence"
	"github.com/qinglong/ql3/verdict/kubeout"
)

// Reason codes of the apply ceremony.
const (
	// CodePreflightNotFound: the preflight digest the apply command names is not a stored preflight.
	CodePreflightNotFound refuse.Code = "PREFLIGHT_NOT_FOUND"
	// CodePreflightTarget: the preflight was made for another target than this apply command's.
	CodePreflightTarget refuse.Code = "PREFLIGHT_TARGET_MISMATCH"
	// CodeRecordInvalid: a stored record the apply relies on does not decode or binds something else.
	CodeRecordInvalid refuse.Code = "RECORD_INVALID"
	// CodeApplyFailed: the server-side apply exited non-zero; the cluster may be partially applied.
	CodeApplyFailed refuse.Code = "APPLY_FAILED"
)

// partialHint is the advice of every refusal after the intent was written.
const partialHint = "nothing was rolled back and no receipt was published; the cluster may be partially applied: " +
	"audit live state with kubectl get --show-managed-fields, then rerun this apply command to roll forward " +
	"(it recovers from its intent) or apply an earlier lock"

func apply(ctx context.Context, opts Options, pc *command.Parsed, f *stablefile.File) (_ *Result, err error) {
	s, err := newSession(opts, pc, f)
	if err != nil {
		return nil, err
	}
	defer s.close()
	defer s.startBatch()(&err)
	res := &Result{Command: pc.Command.Command, CommandDigest: pc.Digest, Target: pc.Target,
		Store: pc.Command.Store, Preflight: *pc.Command.Preflight}

	// One apply of one command at a time: two concurrent runs must not both mutate.
	unlock, err := s.st.Lock(ctx, pc.Digest)
	if err != nil {
		return nil, err
	}
	defer func() { _ = unlock() }()

	// A command with a receipt is done: return it offline, without any kubectl run.
	if d, ok, err := s.st.GetIndex(evidence.IndexReceipts, pc.Digest); err != nil {
		return nil, err
	} else if ok {
		var r evidence.Receipt
		if err := s.decode(d, evidence.MediaTypeReceipt, &r); err != nil {
			return nil, err
		}
		if r.Command.Digest != pc.Digest {
			return nil, refuse.New(CodeRecordInvalid, "receipt %s binds command %s, not %s", d.Digest, r.Command.Digest, pc.Digest)
		}
		if opts.Progress != nil {
			_ = runSteps(opts.Progress, opts.Now, []step{{"existing receipt (offline)", func() error { return nil }}})
		}
		res.Receipt, res.Intent, res.Recovered, res.Offline, res.OK = d.Digest, r.Intent.Digest, r.Recovered, true, true
		if err := s.offlineAnswer(res, d, &r); err != nil {
			return nil, err
		}
		return res, nil
	}

	var preDesc, intentDesc evidence.Descriptor
	var objects []evidence.LiveObject
	recovered := false
	steps := []step{
		{"load preflight report", func() error {
			var err error
			preDesc, err = s.loadPreflight()
			if err != nil {
				return err
			}
			d, ok, err := s.st.GetIndex(evidence.IndexIntents, pc.Digest)
			if err != nil {
				return err
			}
			if ok {
				var in evidence.Intent
				if err := s.decode(d, evidence.MediaTypeIntent, &in); err != nil {
					return err
				}
				intentDesc, recovered = d, true
				if opts.Progress != nil {
					fmt.Fprintf(opts.Progress, "recovering from intent %s (written %s): an earlier attempt may have mutated the cluster; rolling forward\n", d.Digest, in.CreatedAt)
				}
			}
			return nil
		}},
		// OpenExecutable hashes kubectl in full: that is the start-of-run full hash.
		{"read and verify inputs, offline checks", s.readInputs},
		{"cluster identity read", func() error { return s.identity(ctx, evidence.StepIdentity) }},
		{"server-side dry-run", func() error { return s.dryRun(ctx) }},
		{"write apply intent", func() error {
			// Nothing may have changed between the dry-run and the intent that licenses the mutation.
			if err := s.reverify(); err != nil {
				return err
			}
			if recovered {
				return nil // the earlier attempt's intent already covers this mutation
			}
			var err error
			intentDesc, err = s.publishIntent(preDesc)
			return err
		}},
		{"server-side apply", func() error {
			r, err := s.run(ctx, evidence.StepApply, s.manifest.Bytes)
			if err != nil {
				return partial(err)
			}
			if r.ExitCode != 0 {
				if c := kubeout.Classify(r.Stderr); c.Code != "" {
					return partial(c.Refusal(evidence.StepApply, r.ExitCode, s.lastStderr))
				}
				return refuse.New(CodeApplyFailed, "server-side apply exited %d (%d bytes of stderr stored; %s); the cluster may be partially applied",
					r.ExitCode, len(r.Stderr), kubeout.StoreRef(s.lastStderr)).WithHint(partialHint)
			}
			return partial(kubeout.Applied(r.Stdout, s.resources(), false))
		}},
		{"convergence read and verification", func() error {
			var err error
			objects, err = s.converge(ctx)
			return partial(err)
		}},
		{"namespace read", func() error {
			_, err := s.namespaceRead(ctx, objects)
			return partial(err)
		}},
		{"final identity read", func() error {
			s.startEndHash()
			return partial(s.identity(ctx, evidence.StepIdentityFinal))
		}},
		{"re-verify inputs", func() error { return partial(s.reverifyEnd()) }},
		{"publish receipt", func() error {
			d, err := s.publishReceipt(preDesc, intentDesc, recovered, objects)
			res.Receipt = d.Digest
			return partial(err)
		}},
	}
	if err := runSteps(opts.Progress, opts.Now, steps); err != nil {
		return nil, err
	}
	res.Intent, res.Recovered, res.OK = intentDesc.Digest, recovered, true
	return res, nil
}

// partial adds the partial-apply hint to a refusal raised after the mutation may have happened.
// A refusal that carries its own hint (the convergence verifier's, kubectl's) keeps it, followed
// by the partial-apply hint: the operator must learn both what went wrong and what state the
// cluster may be in.
func partial(err error) error {
	if err == nil {
		return nil
	}
	if errors.As(err, new(skipped)) {
		return err // a step that did not run is no refusal
	}
	if r, ok := refuse.As(err); ok {
		switch {
		case r.Hint == "":
			r.Hint = partialHint
		case !strings.Contains(r.Hint, partialHint):
			r.Hint += "; " + partialHint
		}
		return r
	}
	return refuse.Wrap(CodeApplyFailed, err, "apply did not complete; the cluster may be partially applied").WithHint(partialHint)
}

func (s *session) decode(d evidence.Descriptor, mediaType string, v any) error {
	if d.MediaType != mediaType {
		return refuse.New(CodeRecordInvalid, "stored object %s has media type %s, want %s", d.Digest, d.MediaType, mediaType)
	}
	b, err := s.st.GetDescriptor(d)
	if err != nil {
		return err
	}
	if err := evidence.DecodeRecord(mediaType, b, v); err != nil {
		return refuse.Wrap(CodeRecordInvalid, err, "stored record %s does not decode", d.Digest)
	}
	return nil
}

func (s *session) loadPreflight() (evidence.Descriptor, error) {
	want := *s.pc.Command.Preflight
	d, ok, err := s.st.GetIndex(evidence.IndexPreflights, want)
	if err != nil {
		return d, err
	}
	if !ok || d.Digest != want {
		return d, refuse.New(CodePreflightNotFound, "preflight %s is not in store %s", want, s.pc.Command.Store).
			WithHint("run ql3 preflight with the matching preflight command first")
	}
	var p evidence.Preflight
	if err := s.decode(d, evidence.MediaTypePreflight, &p); err != nil {
		return d, err
	}
	if p.Target != s.pc.Target {
		return d, s.targetMismatch(want, p)
	}
	if p.ClusterUID != s.pc.Command.ExpectedClusterUID || p.FieldManager != evidence.FieldManager || !p.NetworkAccess || p.KubernetesMutation {
		return d, refuse.New(CodeRecordInvalid, "preflight %s does not bind this command's cluster and field manager", want)
	}
	return d, nil
}

func (s *session) publishIntent(pre evidence.Descriptor) (evidence.Descriptor, error) {
	in := evidence.Intent{Schema: evidence.SchemaIntent, Command: s.cmdDesc, Preflight: pre, Target: s.pc.Target,
		ClusterUID: s.clusterUID, Execs: append([]evidence.Descriptor(nil), s.execs...), CreatedAt: stamp(s.opts.Now())}
	d, err := s.putRecord(evidence.MediaTypeIntent, in)
	if err != nil {
		return d, storeErr(err, "apply intent")
	}
	// The intent, and the dry-run and identity evidence it names, are durable and published
	// before the mutation it licenses.
	return d, s.publish(evidence.IndexIntents, s.pc.Digest, d, "intent")
}

// converge reads the applied objects back and proves convergence with the auditor's verifier.
func (s *session) converge(ctx context.Context) ([]evidence.LiveObject, error) {
	r, err := s.run(ctx, evidence.StepConvergence, s.manifest.Bytes)
	if err != nil {
		return nil, err
	}
	if r.ExitCode != 0 {
		if c := kubeout.Classify(r.Stderr); c.Code != "" {
			return nil, c.Refusal(evidence.StepConvergence, r.ExitCode, s.lastStderr)
		}
		return nil, refuse.New(convergence.CodeReadFailed, "convergence read exited %d (%d bytes of stderr stored; %s)", r.ExitCode, len(r.Stderr), kubeout.StoreRef(s.lastStderr))
	}
	out, err := convergence.Verify(convergence.Input{Objects: s.lock.Objects, Authorities: s.lock.Authorities,
		FieldManager: evidence.FieldManager, Stdout: r.Stdout})
	if err != nil {
		return nil, err
	}
	return out.Objects, nil
}

// namespaceRead reads the namespaces the applied objects live in and the manifest does not hold
// (convergence.OutsideNamespaces), and judges them: an object in a Terminating namespace has not
// converged to anything lasting. It returns a skipped step when there are none to read, and the
// namespaces read otherwise.
func (s *session) namespaceRead(ctx context.Context, live []evidence.LiveObject) ([]convergence.Namespace, error) {
	names, err := convergence.OutsideNamespaces(s.lock.Objects, live)
	if err != nil {
		return nil, err
	}
	if len(names) == 0 {
		return nil, skipped{"the objects live in no namespace the manifest does not hold"}
	}
	r, err := s.run(ctx, evidence.StepNamespaces, nil, names...)
	if err != nil {
		return nil, err
	}
	if r.ExitCode != 0 {
		if c := kubeout.Classify(r.Stderr); c.Code != "" {
			return nil, c.Refusal(evidence.StepNamespaces, r.ExitCode, s.lastStderr)
		}
		return nil, refuse.New(convergence.CodeNamespaceRead, "namespace read exited %d (%d bytes of stderr stored; %s)", r.ExitCode, len(r.Stderr), kubeout.StoreRef(s.lastStderr))
	}
	nss, err := convergence.ReadNamespaces(names, r.Stdout)
	if err != nil {
		return nil, err
	}
	return nss, convergence.CheckNamespaces(nss)
}

func (s *session) publishReceipt(pre, intent evidence.Descriptor, recovered bool, objects []evidence.LiveObject) (evidence.Descriptor, error) {
	rc := evidence.Receipt{
		Schema: evidence.SchemaReceipt, Command: s.cmdDesc, Preflight: pre, Intent: intent, Recovered: recovered,
		Target: s.pc.Target, Inputs: s.inputs, Kubeconfig: s.kcDesc, Manifest: s.manDesc, LockReport: s.repDesc,
		Lock: s.lockBinding(), KubeconfigDigest: s.pc.Command.Kubeconfig.Digest, KubectlDigest: s.pc.Command.Kubectl.Digest,
		ClusterUID: s.clusterUID, FieldManager: evidence.FieldManager, Execs: s.execs, Objects: objects,
		CrossResourceAtomicity: false, NetworkAccess: true, KubernetesMutation: true,
		StartedAt: stamp(s.started), FinishedAt: stamp(s.opts.Now()), Writer: buildinfo.Read().Writer(),
	}
	if rc.Objects == nil {
		rc.Objects = []evidence.LiveObject{}
	}
	d, err := s.putRecord(evidence.MediaTypeReceipt, rc)
	if err != nil {
		return d, storeErr(err, "receipt")
	}
	return d, s.publish(evidence.IndexReceipts, s.pc.Digest, d, "receipt")
}

// targetMismatch names the target fields in which the preflight's command differs from this one.
func (s *session) targetMismatch(pre digest.Digest, p evidence.Preflight) error {
	err := refuse.New(CodePreflightTarget, "preflight %s was made for another target than this command's", pre)
	var pc evidence.Command
	if derr := s.decode(p.Command, evidence.MediaTypeCommand, &pc); derr == nil {
		if diff := pc.Target().Diff(s.pc.Command.Target()); len(diff) > 0 {
			err = refuse.New(CodePreflightTarget, "preflight %s was made for another target: %s differ", pre, strings.Join(diff, ", "))
		}
	}
	return err.WithHint("an apply consumes the preflight of the same target: run ql3 preflight for this one, which writes its apply command")
}
