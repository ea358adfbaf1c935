// Package kubectl runs the seven kubectl invocations of the ceremony (docs/rationale.md#6-kubectl-invocations) and checks the
// shape of recorded ones for the offline auditor.
//
// Each run gets a fresh private 0700 directory holding a copy of the verified kubeconfig and
// kubectl's cache, config and tmp directories, and nothing else of the parent: the environment is
// a fixed list, the argv is a fixed list, and the binary is executed through the descriptor that
// was hashed (Executable.ExecPath), never through a path that could be resolved again. The
// kubeconfig copy, stdout and stderr are never put into any message: sizes and codes only.
package kubectl

import (
	"context"
	"errors"
	"slices"
	"strings"
	"time"

	"github.com/qinglong/ql3/internal/stablefile"
	"github.com/qinglong/ql3/refuse"
	"github.com/qinglong/ql3/verdict/argv"
)

const (
	// CodeRunnerInvalid: the Runner is missing its executable, kubeconfig, context, timeout or ceiling.
	CodeRunnerInvalid refuse.Code = "KUBECTL_RUNNER_INVALID"
	// CodeStdinMismatch: stdin was given to an identity read, or withheld from a step that reads -f=-.
	CodeStdinMismatch refuse.Code = "KUBECTL_STDIN_MISMATCH"
)

// Runner runs ceremony steps with one kubectl binary, kubeconfig and context.
type Runner struct {
	Exe        *stablefile.Executable
	Kubeconfig []byte        // verified kubeconfig bytes; a private 0600 copy is written per run
	Context    string        // the kubeconfig context, passed as --context
	Timeout    time.Duration // per run, from start until kubectl has exited and closed its output
	MaxOutput  int           // per stream (stdout, stderr); 4 MiB in the ceremony
}

// Result is one kubectl run as it happened: what was executed and what came back.
type Result struct {
	Step                  string
	Argv, Env             []string // exactly what was executed (argv[0] = ExecPath())
	Stdout, Stderr        []byte   // raw, possibly partial when err != nil; at most MaxOutput each
	ExitCode              int      // -1 when a signal ended the process
	StartedAt, FinishedAt time.Time
}

func (r *Runner) validate(step string, stdin []byte) error {
	switch {
	case r.Exe == nil:
		return refuse.New(CodeRunnerInvalid, "runner has no kubectl executable")
	case stdStream(r.Exe.ExecPath()):
		// The child's stdin, stdout and stderr are set up over descriptors 0-2 before execve:
		// a kubectl held there would be replaced by a pipe.
		return refuse.New(CodeRunnerInvalid, "kubectl is held on standard descriptor %s", r.Exe.ExecPath()).
			WithHint("start ql3 with stdin, stdout and stderr open")
	case len(r.Kubeconfig) == 0:
		return refuse.New(CodeRunnerInvalid, "runner has no kubeconfig bytes")
	case r.Context == "" || strings.ContainsRune(r.Context, 0):
		return refuse.New(CodeRunnerInvalid, "runner context is empty or contains NUL")
	case r.Timeout <= 0:
		return refuse.New(CodeRunnerInvalid, "runner timeout %s is not positive", r.Timeout)
	case r.MaxOutput <= 0:
		return refuse.New(CodeRunnerInvalid, "runner output ceiling %d is not positive", r.MaxOutput)
	}
	if reads := argv.ReadsStdin(step); reads != (len(stdin) > 0) {
		if reads {
			return refuse.New(CodeStdinMismatch, "step %s reads the manifest on stdin but got none", step)
		}
		return refuse.New(CodeStdinMismatch, "step %s takes no stdin but got %d bytes", step, len(stdin))
	}
	return nil
}

// Run runs one ceremony step with stdin as kubectl's standard input (nil: empty input).
//
// Result is non-nil whenever the process was started, also on the timeout, cancellation,
// output-limit and killed refusals, so that the caller can store it as evidence. A non-zero exit
// is not an error of Run: the caller judges ExitCode. Every error is a *refuse.Error with one of
// this package's codes (the caller passes it on as it is), and means the step did not complete
// as kubectl's own answer, whatever ExitCode says:
//
//   - KUBECTL_TIMEOUT, KUBECTL_CANCELED, KUBECTL_OUTPUT_LIMIT: ql3 killed the process group
//     (ExitCode is then -1 unless kubectl had already exited on its own).
//   - KUBECTL_KILLED: a signal that ql3 did not send ended kubectl (a crash, an OOM kill, a
//     kill -9 from outside). For the apply step this means the mutation may have happened with
//     its response lost.
//
// The caller re-verifies the executable (ReverifyIdentity) before each run; Run executes
// whatever the held descriptor holds.
//
// names are the namespace read's operands (argv.ValidOperands); every other step takes none.
func (r *Runner) Run(ctx context.Context, step string, stdin []byte, names ...string) (res *Result, err error) {
	if !argv.Known(step) {
		return nil, refuse.New(argv.CodeUnknownStep, "unknown kubectl step %s", argv.QuoteShort(step))
	}
	if err := r.validate(step, stdin); err != nil {
		return nil, err
	}
	if _, ok := argv.Build("/proc/self/fd/3", step, "/"+argv.DirPrefix+"0", r.Context, names...); !ok {
		return nil, refuse.New(argv.CodeArgvShape, "step %s: %d operands that do not fit the step", step, len(names))
	}
	if err := ctx.Err(); err != nil {
		return nil, ctxRefusal(ctx, step)
	}
	wd, err := makeWorkdir(r.Kubeconfig)
	if err != nil {
		return nil, err
	}
	dir := wd.Path
	defer func() {
		if cerr := removeDir(wd); cerr != nil {
			if err == nil {
				err = cerr
			} else {
				err = errors.Join(err, cerr)
			}
		}
	}()
	args, _ := argv.Build(r.Exe.ExecPath(), step, dir, r.Context, names...)
	env := argv.Environ(dir)
	// The invocation must pass the auditor's own check; refusing here means no record that the
	// auditor would reject can ever be made.
	if err := argv.CheckInvocation(step, r.Context, args, env); err != nil {
		return nil, err
	}
	res = &Result{Step: step, Argv: slices.Clone(args), Env: slices.Clone(env), ExitCode: -1}
	return r.supervise(ctx, res, dir, stdin)
}

func stdStream(execPath string) bool {
	return execPath == "/proc/self/fd/0" || execPath == "/proc/self/fd/1" || execPath == "/proc/self/fd/2"
}

func ctxRefusal(ctx context.Context, step string) error {
	if errors.Is(ctx.Err(), context.DeadlineExceeded) {
		return refuse.New(CodeTimeout, "step %s: the caller's deadline passed", step)
	}
	return refuse.New(CodeCanceled, "step %s: canceled by the caller", step)
}
