// Command ql3 is the qinglong deployment ceremony CLI.
//
// Every subcommand has the same shape (kubectl's Options, Complete, Validate, Run): a constructor
// newXCmd(*RootOptions) *cobra.Command over an options type with complete, validate and run
// methods, added to the root explicitly in newRoot. A command's answer is a result type printed by
// printResult (output.go), the one place that knows the output format. The mapping of an error to
// its stderr line, its JSON result object and the exit status (refuse.ExitStatus, one table) lives
// in this file only, and every usage error comes through usage (usage.go).
package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/spf13/cobra"

	"github.com/qinglong/ql3/ceremony"
	"github.com/qinglong/ql3/internal/buildinfo"
	"github.com/qinglong/ql3/internal/gcfloor"
	"github.com/qinglong/ql3/refuse"
	"github.com/qinglong/ql3/store"
)

// CodeInternal: an error that carries no reason code reached the CLI.
const CodeInternal refuse.Code = "INTERNAL"

// The command line's own codes live beside their exit status in refuse (exit.go); these names keep
// the CLI's raise sites short.
const (
	CodeUsage             = refuse.CodeUsage
	CodeFlagRequired      = refuse.CodeFlagRequired
	CodeFlagNotApplicable = refuse.CodeFlagNotApplicable
)

// RootOptions are the persistent flags every subcommand sees.
type RootOptions struct {
	Output string // text or json (-o, --output)
	Store  string // store directory (--store, or QL3_STORE), absolute once the flags are parsed

	storeFromEnv bool   // Store came from QL3_STORE, not from --store
	usedStore    string // the store the command read or wrote, for the pointers of its refusals
}

// streams are a command's outputs: results on out, progress and refusals on err.
type streams struct{ out, err io.Writer }

// options is the shape of every subcommand: complete fills what the flags and arguments imply,
// validate refuses a usage error before anything is read or opened, run does the work.
type options interface {
	complete(cmd *cobra.Command, args []string) error
	validate() error
	run(ctx context.Context, s streams) error
}

// runE adapts an options value to cobra, so that no subcommand orders the three steps itself.
func runE(o options) func(*cobra.Command, []string) error {
	return func(cmd *cobra.Command, args []string) error {
		if err := o.complete(cmd, args); err != nil {
			return err
		}
		if err := o.validate(); err != nil {
			return err
		}
		return o.run(cmd.Context(), streams{out: cmd.OutOrStdout(), err: cmd.ErrOrStderr()})
	}
}

// storeName describes where the store path came from, for messages.
func (o *RootOptions) storeName() string {
	if o.storeFromEnv {
		return "QL3_STORE"
	}
	return "--store"
}

// OpenStore opens the store named by --store or QL3_STORE.
func (o *RootOptions) OpenStore() (*store.Store, error) {
	if o.Store == "" {
		return nil, missingFlags("--store (or QL3_STORE)")
	}
	o.usedStore = o.Store
	return store.Open(o.Store)
}

// storeCat is how a refusal points at a stored blob (kubeout.StoreRef).
const storeCat = "see: ql3 store cat sha256:"

// pointAtStore puts --store DIR into every `see: ql3 store cat DIGEST` pointer of r's chain, so
// that the pointer runs as printed from any directory, without QL3_STORE.
func pointAtStore(r *refuse.Error, dir string) {
	if dir == "" {
		return
	}
	with := "see: ql3 store cat --store " + shellQuote(dir) + " sha256:"
	for e := r; e != nil; {
		e.Msg = strings.ReplaceAll(e.Msg, storeCat, with)
		e.Hint = strings.ReplaceAll(e.Hint, storeCat, with)
		next, ok := refuse.As(e.Err)
		if !ok || next == e {
			break
		}
		e = next
	}
}

// failure is the JSON result object of a refusal.
type failure struct {
	OK      bool        `json:"ok"`
	Code    refuse.Code `json:"code"`
	Message string      `json:"message"`
	Hint    string      `json:"hint,omitempty"`
}

// failureOf is the result object of err.
func failureOf(err error) failure {
	r := asRefusal(err)
	return failure{Code: r.Code, Message: r.Message(), Hint: r.Hint}
}

// asRefusal is err's refusal, or an INTERNAL one for an error that carries no code.
func asRefusal(err error) *refuse.Error {
	if r, ok := refuse.As(err); ok {
		return r
	}
	return &refuse.Error{Code: CodeInternal, Msg: err.Error()}
}

// printedError is a refusal whose command already printed its JSON result object (a report with
// ok false); report then prints only the stderr line.
type printedError struct{ error }

func (e printedError) Unwrap() error { return e.error }

// storeReader marks a command that reads the store named by --store or QL3_STORE; a --store given
// to any other command is FLAG_NOT_APPLICABLE.
const storeReader = "ql3/reads-store"

func readsStore(c *cobra.Command) *cobra.Command {
	if c.Annotations == nil {
		c.Annotations = map[string]string{}
	}
	c.Annotations[storeReader] = "yes"
	return c
}

func newRoot(o *RootOptions) *cobra.Command {
	root := &cobra.Command{
		Use:   "ql3",
		Short: "qinglong deployment ceremony with an offline-auditable evidence store",
		Long: "ql3 runs a catalog-bound Kubernetes deployment ceremony (preflight, apply) from one private\n" +
			"command file and keeps a content-addressed evidence store that anyone can audit offline.",
		Example: "  ql3 cluster identity --kubeconfig /abs/private/kubeconfig --context prod --kubectl /usr/local/bin/kubectl\n" +
			"  ql3 command new --store /abs/evidence ... --out /abs/private/preflight.json\n" +
			"  ql3 preflight --command-file=/abs/private/preflight.json --write-apply-command=/abs/private/apply.json\n" +
			"  ql3 apply --command-file=/abs/private/apply.json\n" +
			"  ql3 audit --store /abs/evidence sha256:5f0c...",
		Version:       buildinfo.Read().String(),
		SilenceErrors: true,
		SilenceUsage:  true,
		PersistentPreRunE: func(cmd *cobra.Command, _ []string) error {
			if o.Output != "text" && o.Output != "json" {
				return usage("--output must be text or json, not %s", refuse.Ident(o.Output))
			}
			if cmd.Flags().Changed("store") {
				if cmd.Annotations[storeReader] == "" {
					return refuse.New(CodeFlagNotApplicable, "%s reads no store: --store does not apply", cmd.CommandPath()).
						WithHint("drop --store")
				}
			} else if env, ok := os.LookupEnv("QL3_STORE"); ok && env != "" && cmd.Annotations[storeReader] != "" {
				p, err := absPath("QL3_STORE", env)
				if err != nil {
					return err
				}
				o.Store, o.storeFromEnv = p, true
			}
			return nil
		},
	}
	root.SetVersionTemplate("{{.Version}}\n")
	root.PersistentFlags().StringVarP(&o.Output, "output", "o", "text", "output format: text or json")
	pathVar(root.PersistentFlags(), &o.Store, "store", "store directory (default $QL3_STORE)")
	root.SetFlagErrorFunc(flagUsage)
	// Shell completion is not part of ql3's contract (docs/cli.md): no completion command.
	root.CompletionOptions.DisableDefaultCmd = true
	root.AddCommand(
		newPreflightCmd(o),
		newApplyCmd(o),
		newRunCmd(o),
		newLiveAuditCmd(o),
		newStatusCmd(o),
		newCommandCmd(o),
		newClusterCmd(o),
		newKubeconfigCmd(o),
		newAuditCmd(o),
		newHistoryCmd(o),
		newDescribeCmd(o),
		newAttestCmd(o),
		newStoreCmd(o),
		newLogCmd(o),
		newLockCmd(o),
		newCanonicalizeCmd(o),
		newVersionCmd(o),
	)
	root.SetHelpCommand(newHelpCmd(root))
	group(root)
	wrapArgs(root)
	return root
}

// report writes err to stderr (and its result object to stdout under json) and returns the exit
// status its code has in the one table (refuse.ExitStatus): 0 success, 1 refused, 2 usage.
func report(o *RootOptions, stdout, stderr io.Writer, err error) int {
	if err == nil {
		return refuse.ExitOK
	}
	r := asRefusal(err)
	pointAtStore(r, o.usedStore)
	status := refuse.ExitStatus(r.Code)
	kind := "refused"
	if status == refuse.ExitUsage {
		kind = "usage"
	}
	fmt.Fprintf(stderr, "ql3: %s: %s: %s\n", kind, r.Code, r.Message())
	if r.Hint != "" {
		fmt.Fprintf(stderr, "ql3: hint: %s\n", r.Hint)
	}
	var printed printedError
	if o.Output == "json" && !errors.As(err, &printed) {
		b, _ := json.Marshal(failureOf(err))
		fmt.Fprintf(stdout, "%s\n", b)
	}
	return status
}

func main() { os.Exit(mainStatus()) }

// mainStatus runs ql3 with the process's arguments and returns its exit status.
func mainStatus() int {
	// A command lives for one run: the collector waits for a heap of 64 MiB before its first
	// cycle instead of 4 MiB (internal/gcfloor; GOGC in the environment overrides it).
	defer gcfloor.Set(gcfloor.Default)()
	// A first SIGINT or SIGTERM cancels the context: a ceremony stops kubectl's process group,
	// records the interrupted run and says how to recover (ceremony.WithSignals).
	ctx, stop := ceremony.WithSignals(context.Background())
	defer stop()
	return execute(ctx, os.Args[1:], os.Stdout, os.Stderr)
}

// execute runs ql3 with args and returns its exit status; the tests and the generated help
// reference run the command line through it, as main does.
func execute(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	o := &RootOptions{}
	root := newRoot(o)
	root.SetArgs(args)
	root.SetOut(stdout)
	root.SetErr(stderr)
	err := root.ExecuteContext(ctx)
	if err != nil && wantsJSON(args) {
		// A flag error stops the parse before a later -o json is read.
		o.Output = "json"
	}
	return report(o, stdout, stderr, err)
}
