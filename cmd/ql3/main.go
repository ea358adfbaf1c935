// Command ql3 is the qinglong deployment ceremony CLI.
//
// Every subcommand has the same shape (kubectl's Options, Complete, Validate, Run): a constructor
// newXCmd(*RootOptions) *cobra.Command over an options type with complete, validate and run
// methods, added to the root explicitly in newRoot. The mapping of an error to its stderr line, its
// JSON result object and the exit status lives in this file only.
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
	"github.com/qinglong/ql3/refuse"
	"github.com/qinglong/ql3/store"
)

// Codes raised by the CLI skeleton.
const (
	CodeUsage    refuse.Code = "USAGE"    // a flag or argument error reported by cobra
	CodeInternal refuse.Code = "INTERNAL" // an error that carries no reason code
)

// RootOptions are the persistent flags every subcommand sees.
type RootOptions struct {
	Output string // text or json (-o, --output)
	Store  string // store directory (--store, or QL3_STORE)

	storeFromEnv bool // Store came from QL3_STORE, not from --store
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
	if err := checkAbsolute(o.storeName(), o.Store); err != nil {
		return nil, err
	}
	return store.Open(o.Store)
}

// result is the common shape of a JSON result object: ok first, then the command's own fields.
// A command passes a struct whose fields carry omitempty, so no empty field is printed.
func (o *RootOptions) printResult(w io.Writer, v any, text string) error {
	if o.Output == "json" {
		b, err := json.Marshal(v)
		if err != nil {
			return fmt.Errorf("encode result: %w", err)
		}
		_, err = fmt.Fprintf(w, "%s\n", b)
		return err
	}
	if text == "" {
		return nil
	}
	_, err := fmt.Fprintln(w, text)
	return err
}

// failure is the JSON result object of a refusal.
type failure struct {
	OK      bool        `json:"ok"`
	Code    refuse.Code `json:"code"`
	Message string      `json:"message"`
	Hint    string      `json:"hint,omitempty"`
}

type usageError struct{ error }

// printedError is a refusal whose command already printed its JSON result object (a report with
// ok false); report then prints only the stderr line.
type printedError struct{ error }

func (e printedError) Unwrap() error { return e.error }

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
				return refuse.NewUsage(CodeUsage, "--output must be text or json, not %s", refuse.Ident(o.Output))
			}
			if !cmd.Flags().Changed("store") {
				if env, ok := os.LookupEnv("QL3_STORE"); ok && env != "" {
					o.Store, o.storeFromEnv = env, true
				}
			}
			return nil
		},
	}
	root.SetVersionTemplate("{{.Version}}\n")
	root.PersistentFlags().StringVarP(&o.Output, "output", "o", "text", "output format: text or json")
	root.PersistentFlags().StringVar(&o.Store, "store", "", "store directory, absolute (default $QL3_STORE)")
	root.SetFlagErrorFunc(func(_ *cobra.Command, err error) error { return usageError{err} })
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
		newLockCmd(o),
		newCanonicalizeCmd(o),
		newVersionCmd(o),
	)
	wrapArgs(root)
	return root
}

// wrapArgs marks positional-argument errors of c and its subcommands as usage errors (exit 2).
func wrapArgs(c *cobra.Command) {
	if args := c.Args; args != nil {
		c.Args = func(cmd *cobra.Command, a []string) error {
			if err := args(cmd, a); err != nil {
				return usageError{err}
			}
			return nil
		}
	}
	for _, sub := range c.Commands() {
		wrapArgs(sub)
	}
}

// report writes err to stderr (and its result object to stdout under json) and returns the exit
// status: 0 success, 1 refused, 2 usage.
func report(o *RootOptions, stdout, stderr io.Writer, err error) int {
	if err == nil {
		return 0
	}
	f := failure{}
	status := 1
	var u usageError
	if errors.As(err, &u) {
		fmt.Fprintf(stderr, "ql3: usage: %v\n", u.error)
		f.Code, f.Message, status = CodeUsage, u.Error(), 2
	} else if r, ok := refuse.As(err); ok {
		f.Code, f.Message, f.Hint = r.Code, r.Message(), r.Hint
		fmt.Fprintf(stderr, "ql3: refused: %s: %s\n", f.Code, f.Message)
		if f.Hint != "" {
			fmt.Fprintf(stderr, "ql3: hint: %s\n", f.Hint)
		}
		if r.Class == refuse.Usage {
			status = 2
		}
	} else {
		f.Code, f.Message = CodeInternal, err.Error()
		fmt.Fprintf(stderr, "ql3: refused: %s: %s\n", f.Code, f.Message)
	}
	var printed printedError
	if o.Output == "json" && !errors.As(err, &printed) {
		b, _ := json.Marshal(f)
		fmt.Fprintf(stdout, "%s\n", b)
	}
	return status
}

func main() { os.Exit(mainStatus()) }

// mainStatus runs ql3 with the process's arguments and returns its exit status.
func mainStatus() int {
	o := &RootOptions{}
	root := newRoot(o)
	// A first SIGINT or SIGTERM cancels the context: a ceremony stops kubectl's process group,
	// records the interrupted run and says how to recover (ceremony.WithSignals).
	ctx, stop := ceremony.WithSignals(context.Background())
	defer stop()
	err := root.ExecuteContext(ctx)
	if err != nil && refuse.CodeOf(err) == "" {
		if _, ok := err.(usageError); !ok && isCobraUsage(err) {
			err = usageError{err}
		}
	}
	return report(o, os.Stdout, os.Stderr, err)
}

// isCobraUsage recognises cobra's own unknown-command error, which bypasses the flag hook.
func isCobraUsage(err error) bool {
	return strings.HasPrefix(err.Error(), "unknown command ")
}
