// Command ql3 is the qinglong deployment ceremony CLI. Subcommands register themselves from
// their own files through registerCommand; error mapping to exit codes lives here only.
package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"

	"github.com/spf13/cobra"

	"github.com/qinglong/ql3/internal/refuse"
	"github.com/qinglong/ql3/store"
)

// Codes raised by the CLI skeleton.
const (
	CodeUsage       refuse.Code = "USAGE"        // a flag or argument error reported by cobra
	CodeInternal    refuse.Code = "INTERNAL"     // an error that carries no reason code
	CodeStoreNeeded refuse.Code = "STORE_NEEDED" // no --store and no QL3_STORE
	CodeOutputFlag  refuse.Code = "OUTPUT_FLAG"  // --output is neither text nor json
)

// RootOptions are the persistent flags every subcommand sees.
type RootOptions struct {
	Output string // text or json
	Store  string // store directory (--store or QL3_STORE)
}

var registered []func(*RootOptions) *cobra.Command

// registerCommand adds a subcommand; call it from init().
func registerCommand(f func(*RootOptions) *cobra.Command) { registered = append(registered, f) }

// OpenStore opens the store named by --store or QL3_STORE.
func (o *RootOptions) OpenStore() (*store.Store, error) {
	if o.Store == "" {
		return nil, refuse.NewUsage(CodeStoreNeeded, "no store given").WithHint("pass --store DIR or set QL3_STORE")
	}
	return store.Open(o.Store)
}

// printResult prints v as one JSON object under --output json, or text otherwise.
func (o *RootOptions) printResult(w io.Writer, v any, text string) error {
	if o.Output == "json" {
		b, err := json.Marshal(v)
		if err != nil {
			return err
		}
		_, err = fmt.Fprintf(w, "%s\n", b)
		return err
	}
	_, err := fmt.Fprintln(w, text)
	return err
}

type usageError struct{ error }

// printedError is a refusal whose command already printed its JSON result object (a report with
// ok false); report then prints only the stderr line.
type printedError struct{ error }

func (e printedError) Unwrap() error { return e.error }

func newRoot(o *RootOptions) *cobra.Command {
	root := &cobra.Command{
		Use:           "ql3",
		Short:         "qinglong deployment ceremony with an offline-auditable evidence store",
		SilenceErrors: true,
		SilenceUsage:  true,
		PersistentPreRunE: func(*cobra.Command, []string) error {
			if o.Output != "text" && o.Output != "json" {
				return refuse.NewUsage(CodeOutputFlag, "--output must be text or json")
			}
			return nil
		},
	}
	root.PersistentFlags().StringVar(&o.Output, "output", "text", "output format: text or json")
	root.PersistentFlags().StringVar(&o.Store, "store", os.Getenv("QL3_STORE"), "store directory (env QL3_STORE)")
	root.SetFlagErrorFunc(func(_ *cobra.Command, err error) error { return usageError{err} })
	for _, f := range registered {
		c := f(o)
		wrapArgs(c)
		root.AddCommand(c)
	}
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

// report writes err to stderr (and stdout under json) and returns the exit status.
func report(o *RootOptions, stdout, stderr io.Writer, err error) int {
	if err == nil {
		return 0
	}
	var code refuse.Code
	var msg, hint string
	status := 1
	if u, ok := err.(usageError); ok {
		fmt.Fprintf(stderr, "ql3: usage: %v\n", u.error)
		code, msg, status = CodeUsage, u.Error(), 2
	} else if r, ok := refuse.As(err); ok {
		code, msg, hint = r.Code, r.Message(), r.Hint
		fmt.Fprintf(stderr, "ql3: refused: %s: %s\n", code, msg)
		if hint != "" {
			fmt.Fprintf(stderr, "ql3: hint: %s\n", hint)
		}
		if r.Class == refuse.Usage {
			status = 2
		}
	} else {
		code, msg = CodeInternal, err.Error()
		fmt.Fprintf(stderr, "ql3: refused: %s: %s\n", code, msg)
	}
	var printed printedError
	if o.Output == "json" && !errors.As(err, &printed) {
		b, _ := json.Marshal(map[string]any{"ok": false, "code": code, "message": msg, "hint": hint})
		fmt.Fprintf(stdout, "%s\n", b)
	}
	return status
}

func main() {
	o := &RootOptions{}
	root := newRoot(o)
	err := root.Execute()
	if err != nil && refuse.CodeOf(err) == "" {
		if _, ok := err.(usageError); !ok && isCobraUsage(err) {
			err = usageError{err}
		}
	}
	os.Exit(report(o, os.Stdout, os.Stderr, err))
}

// isCobraUsage recognises cobra's own unknown-command error, which bypasses the flag hook.
func isCobraUsage(err error) bool {
	s := err.Error()
	return len(s) > 16 && s[:16] == "unknown command "
}
