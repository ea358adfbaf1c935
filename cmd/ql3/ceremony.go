package main

import (
	"context"
	"fmt"
	"io"
	"path/filepath"
	"strings"
	"time"

	"github.com/opencontainers/go-digest"
	"github.com/spf13/cobra"

	"github.com/qinglong/ql3/audit"
	"github.com/qinglong/ql3/ceremony"
	"github.com/qinglong/ql3/evidence"
	"github.com/qinglong/ql3/refuse"
	"github.com/qinglong/ql3/store"
)

// ceremonyOptions are the flags of `ql3 preflight`, `ql3 apply` and `ql3 run`, which differ only
// in the command a file must name (want; "" for run, which dispatches on the file).
type ceremonyOptions struct {
	root         *RootOptions
	want         string
	commandFile  string
	writeApply   string
	stepTimeout  time.Duration
	writeApplyOK bool // the subcommand takes --write-apply-command at all
	logKey       logKeyFlag
	// live-audit only: compare the cluster with a receipt a later one superseded.
	allowSuperseded bool
}

func newCeremonyCmd(root *RootOptions, use, want, short, example string) *cobra.Command {
	o := &ceremonyOptions{root: root, want: want, writeApplyOK: use != "apply"}
	c := readsStore(&cobra.Command{
		Use:     use + " --command-file=PATH",
		Short:   short,
		Example: example,
		Args:    cobra.NoArgs,
		RunE:    runE(o),
	})
	pathVar(c.Flags(), &o.commandFile, "command-file", "the private command file")
	c.Flags().DurationVar(&o.stepTimeout, "step-timeout", ceremony.DefaultStepTimeout, "timeout of one kubectl run")
	o.logKey.register(c)
	if o.writeApplyOK {
		pathVar(c.Flags(), &o.writeApply, "write-apply-command", "preflight: write the apply command file here (0600, never replaced)")
	}
	return c
}

func newPreflightCmd(root *RootOptions) *cobra.Command {
	return newCeremonyCmd(root, "preflight", evidence.CommandPreflight,
		"Verify inputs, cluster identity and a server-side dry-run; publish a preflight report",
		"  ql3 preflight --command-file=/abs/private/preflight.json --write-apply-command=/abs/private/apply.json")
}

func newApplyCmd(root *RootOptions) *cobra.Command {
	return newCeremonyCmd(root, "apply", evidence.CommandApply,
		"Apply a preflighted manifest server-side and publish a receipt",
		"  ql3 apply --command-file=/abs/private/apply.json")
}

func newRunCmd(root *RootOptions) *cobra.Command {
	return newCeremonyCmd(root, "run", "",
		"Run the command a command file names (preflight, apply, live.audit or receipt.audit)",
		"  ql3 run --command-file=/abs/private/apply.json\n  ql3 run --command-file=/abs/private/audit.json -o json")
}

func (o *ceremonyOptions) complete(*cobra.Command, []string) error { return nil }

func (o *ceremonyOptions) validate() error {
	return requireFlags([2]string{"--command-file", o.commandFile})
}

// checkFile refuses flags that contradict the command file: a store other than the file's (the
// file names its store; ql3 never silently uses another) and --write-apply-command on a file that
// is not a preflight.
func (o *ceremonyOptions) checkFile(c *evidence.Command) error {
	o.root.usedStore = c.Store
	if o.root.Store != "" && o.root.Store != c.Store {
		return refuse.New(CodeFlagNotApplicable, "%s names store %s, the command file names %s", o.root.storeName(), o.root.Store, c.Store).
			WithHint("drop %s: a ceremony always uses its command file's store", o.root.storeName())
	}
	if o.writeApply != "" && c.Command != evidence.CommandPreflight {
		return refuse.New(CodeFlagNotApplicable, "--write-apply-command applies to a preflight command file, this one is %s", c.Command)
	}
	return nil
}

func (o *ceremonyOptions) run(ctx context.Context, s streams) error {
	cf, err := ceremony.ReadCommand(o.commandFile, o.want)
	if err != nil {
		return err
	}
	c := &cf.Parsed.Command
	if err := o.checkFile(c); err != nil {
		return err
	}
	if c.Command == evidence.CommandReceiptAudit {
		st, err := store.Open(c.Store)
		if err != nil {
			return err
		}
		defer st.Close()
		rep, err := audit.AuditFor(st, *c.Receipt, cf.Parsed.Target)
		if err != nil {
			return err
		}
		if err := o.root.printAudit(s.out, rep); err != nil {
			return err
		}
		return next(s, "ql3 describe --store "+shellQuote(c.Store)+" "+string(*c.Receipt))
	}
	if err := o.logKey.prepare(c.Store); err != nil {
		return err
	}
	if c.Command == evidence.CommandLiveAudit {
		return o.liveAudit(ctx, s, c.Store)
	}
	res, err := ceremony.Execute(ctx, ceremony.Options{CommandFile: o.commandFile, WriteApplyCommand: o.writeApply,
		StepTimeout: o.stepTimeout, Progress: s.err}, cf)
	if res != nil && (res.Preflight != "" || res.Receipt != "") {
		// Published (a refusal after the preflight report was published included): sign the
		// checkpoint that includes it before exiting.
		if serr := o.logKey.sign(c.Store, s.err); serr != nil && err == nil {
			return serr
		}
	}
	if err != nil && res != nil && res.Preflight != "" {
		return o.publishedButRefused(s, res, err)
	}
	if err != nil {
		return err
	}
	r := ceremonyResult{Result: res, Next: o.next(res)}
	if err := o.root.printResult(s.out, r, nil); err != nil {
		return err
	}
	// A kubectl out of the supported skew is named, not refused: on stderr, as progress is, so
	// that stdout stays the one digest (json carries it as versions).
	if w := ceremony.SkewWarning(res.Versions); w != "" {
		if _, err := fmt.Fprintln(s.err, w); err != nil {
			return err
		}
	}
	return next(s, r.Next)
}

// next is the command to run after a successful preflight or apply.
func (o *ceremonyOptions) next(res *ceremony.Result) string {
	if res.Command == evidence.CommandPreflight {
		if res.ApplyCommand != "" {
			return "ql3 apply --command-file=" + shellQuote(res.ApplyCommand)
		}
		return "ql3 preflight --command-file=" + shellQuote(o.commandFile) + " --write-apply-command=" +
			shellQuote(strings.TrimSuffix(o.commandFile, filepath.Ext(o.commandFile))+"-apply.json")
	}
	return "ql3 live-audit --command-file=" + shellQuote(o.commandFile)
}

// next ends a successful ceremony's progress with the command to run next, as command new ends
// its output: on stderr, so that stdout stays the one digest a script reads.
func next(s streams, cmd string) error {
	_, err := fmt.Fprintf(s.err, "next: %s\n", cmd)
	return err
}

// ceremonyResult: the result of a preflight or an apply; its text is the digest it published.
type ceremonyResult struct {
	*ceremony.Result
	Next string `json:"next"`
}

func (r ceremonyResult) writeText(w io.Writer) error {
	d := r.Receipt
	if r.Command == evidence.CommandPreflight {
		d = r.Preflight
	}
	return lines(w, string(d))
}

// publishedButRefused reports a preflight whose report was published but whose apply command file
// could not be written: the digest still goes to stdout (in json, beside the refusal), since the
// report is in the store and an apply command can still consume it.
func (o *ceremonyOptions) publishedButRefused(s streams, res *ceremony.Result, err error) error {
	r, ok := refuse.As(err)
	if !ok {
		return err
	}
	pointAtStore(r, o.root.usedStore)
	return o.root.printResult(s.out, publishedRefusal{failureOf(err), res.Preflight}, err)
}

// publishedRefusal: a refusal that comes after the preflight report was published.
type publishedRefusal struct {
	failure
	Preflight digest.Digest `json:"preflight"`
}

func (r publishedRefusal) writeText(w io.Writer) error { return lines(w, string(r.Preflight)) }
