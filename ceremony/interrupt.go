package ceremony

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/signal"
	"syscall"

	"github.com/qinglong/ql3/evidence"
	"github.com/qinglong/ql3/evidence/command"
	"github.com/qinglong/ql3/refuse"
	"github.com/qinglong/ql3/store"
)

// CodeInterrupted: SIGINT or SIGTERM ended the run; kubectl's process group was killed and the
// exec record of the interrupted step stored. The message says whether a mutation may have
// happened, the hint the exact command that recovers or reruns.
const CodeInterrupted refuse.Code = "INTERRUPTED"

// Interrupted is the cancel cause of a context that WithSignals ended.
type Interrupted struct{ Signal os.Signal }

func (i *Interrupted) Error() string { return "interrupted by " + i.Signal.String() }

// WithSignals returns a context that the first SIGINT or SIGTERM cancels with cause *Interrupted,
// and the function that stops listening. A ceremony run with it stops kubectl's process group
// (the runner kills the group when the context ends), stores the interrupted step's exec record,
// and returns an INTERRUPTED refusal.
func WithSignals(parent context.Context) (context.Context, func()) {
	ctx, cancel := context.WithCancelCause(parent)
	ch := make(chan os.Signal, 1)
	signal.Notify(ch, os.Interrupt, syscall.SIGTERM)
	done := make(chan struct{})
	go func() {
		select {
		case s := <-ch:
			cancel(&Interrupted{Signal: s})
		case <-done:
		}
	}()
	return ctx, func() {
		signal.Stop(ch)
		close(done)
		cancel(nil)
	}
}

// interrupted turns the refusal of a run that a signal ended into an INTERRUPTED refusal that
// says whether a mutation may have happened and which command recovers, and prints that line.
func interrupted(ctx context.Context, opts Options, pc *command.Parsed, err error) error {
	var in *Interrupted
	if err == nil || !errors.As(context.Cause(ctx), &in) {
		return err
	}
	sub := map[string]string{evidence.CommandPreflight: "preflight", evidence.CommandApply: "apply",
		evidence.CommandLiveAudit: "live-audit"}[pc.Command.Command]
	if sub == "" {
		sub = "run"
	}
	cmd := refuse.ShellLine("ql3", sub, "--command-file="+opts.CommandFile)
	var line string
	switch pc.Command.Command {
	case evidence.CommandApply:
		intent, ok := false, false
		if st, oerr := store.Open(pc.Command.Store); oerr == nil {
			_, intent, _ = st.GetIndex(evidence.IndexIntents, pc.Digest)
			_, ok, _ = st.GetIndex(evidence.IndexReceipts, pc.Digest)
		}
		if intent && !ok {
			line = fmt.Sprintf("interrupted by %s: a mutation MAY HAVE HAPPENED (the apply intent was written, no receipt); recover and roll forward with: %s", in.Signal, cmd)
		} else {
			line = fmt.Sprintf("interrupted by %s before the apply intent: nothing was mutated; rerun with: %s", in.Signal, cmd)
		}
	default:
		line = fmt.Sprintf("interrupted by %s: a %s mutates nothing; rerun with: %s", in.Signal, sub, cmd)
	}
	if opts.Progress != nil {
		fmt.Fprintln(opts.Progress, line)
	}
	return refuse.Wrap(CodeInterrupted, err, "%s", line).WithHint("%s", cmd)
}
