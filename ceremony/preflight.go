package ceremony

import (
	"context"

	"github.com/qinglong/ql3/evidence"
	"github.com/qinglong/ql3/evidence/command"
	"github.com/qinglong/ql3/internal/buildinfo"
	"github.com/qinglong/ql3/internal/stablefile"
	"github.com/qinglong/ql3/refuse"
	"github.com/qinglong/ql3/store"
)

// CommandFile is a command file read as a stable private input and parsed. It is re-verified
// before every network step of the run that executes it.
type CommandFile struct {
	Parsed *command.Parsed
	file   *stablefile.File
}

// ReadCommand reads and parses the command file at path. want, when not empty, is the command a
// named subcommand accepts (COMMAND_MISMATCH otherwise).
func ReadCommand(path, want string) (*CommandFile, error) {
	pc, f, err := loadCommand(Options{CommandFile: path}, want)
	if err != nil {
		return nil, err
	}
	return &CommandFile{Parsed: pc, file: f}, nil
}

// Execute runs a preflight or apply command file. A receipt.audit command is the auditor's
// (package audit), which this package cannot import.
func Execute(ctx context.Context, opts Options, cf *CommandFile) (*Result, error) {
	opts.complete()
	switch cf.Parsed.Command.Command {
	case evidence.CommandPreflight:
		res, err := preflight(ctx, opts, cf.Parsed, cf.file)
		return res, interrupted(ctx, opts, cf.Parsed, err)
	case evidence.CommandApply:
		res, err := apply(ctx, opts, cf.Parsed, cf.file)
		return res, interrupted(ctx, opts, cf.Parsed, err)
	default:
		return nil, refuse.New(command.CodeCommandUnknown, "command %s is run by ql3 audit or ql3 run", cf.Parsed.Command.Command)
	}
}

// Run reads the command file named by opts and runs the command it names (see ReadCommand).
func Run(ctx context.Context, opts Options, want string) (*Result, error) {
	cf, err := ReadCommand(opts.CommandFile, want)
	if err != nil {
		return nil, err
	}
	return Execute(ctx, opts, cf)
}

// Preflight runs a preflight command file.
func Preflight(ctx context.Context, opts Options) (*Result, error) {
	return Run(ctx, opts, evidence.CommandPreflight)
}

// Apply runs an apply command file.
func Apply(ctx context.Context, opts Options) (*Result, error) {
	return Run(ctx, opts, evidence.CommandApply)
}

func newSession(opts Options, pc *command.Parsed, f *stablefile.File) (*session, error) {
	st, err := store.Open(pc.Command.Store)
	if err != nil {
		return nil, err
	}
	return &session{opts: opts, pc: pc, cmdFile: f, st: st, started: opts.Now()}, nil
}

func preflight(ctx context.Context, opts Options, pc *command.Parsed, f *stablefile.File) (_ *Result, err error) {
	s, err := newSession(opts, pc, f)
	if err != nil {
		return nil, err
	}
	defer s.close()
	defer s.startBatch()(&err)
	var plan *evidence.Descriptor
	res := &Result{Command: pc.Command.Command, CommandDigest: pc.Digest, Target: pc.Target, Store: pc.Command.Store}
	steps := []step{
		// OpenExecutable hashes kubectl in full: that is the start-of-run full hash. A bad
		// --write-apply-command path is refused with the other offline checks, before any network step.
		{"read and verify inputs, offline checks", func() error {
			if opts.WriteApplyCommand != "" {
				if err := CheckApplyCommandPath(opts.WriteApplyCommand); err != nil {
					return err
				}
			}
			return s.readInputs()
		}},
		{"cluster identity read", func() error { return s.identity(ctx, evidence.StepIdentity) }},
		{"kubectl and API server versions", func() error { return s.version(ctx) }},
		{"server-side dry-run", func() error { s.startEndHash(); return s.dryRun(ctx) }},
		{"re-verify inputs", s.reverifyEnd},
		{"plan against the cluster's latest receipt (offline)", func() error {
			var err error
			plan, err = s.plan(res)
			return err
		}},
		{"publish preflight report", func() error {
			d, err := s.publishPreflight(plan)
			if err == nil {
				res.Preflight, res.Versions = d.Digest, s.versions
			}
			return err
		}},
		{"write apply command", func() error {
			if opts.WriteApplyCommand == "" {
				return skipped{"no --write-apply-command, so no apply command file; the next preflight with --write-apply-command=PATH writes one"}
			}
			res.ApplyCommand = opts.WriteApplyCommand
			return WriteApplyCommand(opts.WriteApplyCommand, pc, res.Preflight)
		}},
	}
	if err := runSteps(opts.Progress, opts.Now, steps); err != nil {
		if res.Preflight != "" {
			// The report is published: the caller prints its digest with the refusal, so the
			// operator can still write the apply command by hand or with ql3 command new.
			return res, err
		}
		return nil, err
	}
	res.OK = true
	return res, nil
}

func (s *session) publishPreflight(plan *evidence.Descriptor) (evidence.Descriptor, error) {
	rec := evidence.Preflight{
		Schema: evidence.SchemaPreflight, Command: s.cmdDesc, Target: s.pc.Target, Inputs: s.inputs,
		Kubeconfig: s.kcDesc, Manifest: s.manDesc, LockReport: s.repDesc, Lock: s.lockBinding(),
		ClusterUID: s.clusterUID, FieldManager: evidence.FieldManager, Execs: s.execs,
		NetworkAccess: true, KubernetesMutation: false,
		StartedAt: stamp(s.started), FinishedAt: stamp(s.opts.Now()), Plan: plan, Writer: buildinfo.Read().Writer(),
		Versions: s.versions,
	}
	d, err := s.putRecord(evidence.MediaTypePreflight, rec)
	if err != nil {
		return d, storeErr(err, "preflight report")
	}
	return d, s.publish(evidence.IndexPreflights, d.Digest, d, "preflight")
}
