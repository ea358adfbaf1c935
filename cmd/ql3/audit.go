package main

import (
	"context"
	"fmt"
	"io"

	"github.com/opencontainers/go-digest"
	"github.com/spf13/cobra"

	"github.com/qinglong/ql3/audit"
)

// auditOptions are the flags and argument of `ql3 audit`.
type auditOptions struct {
	root    *RootOptions
	subject digest.Digest
}

func newAuditCmd(root *RootOptions) *cobra.Command {
	o := &auditOptions{root: root}
	return &cobra.Command{
		Use:   "audit DIGEST",
		Short: "Audit a receipt or preflight report offline, re-deriving every verdict from the store",
		Long: "Audit a receipt or a preflight report from a copy of the evidence store alone: no network\n" +
			"connection is opened and no program is run. Exit 0 only if every check passes.",
		Example: "  ql3 audit --store /abs/evidence sha256:5f0c...\n  QL3_STORE=/abs/evidence ql3 audit -o json sha256:5f0c...",
		Args:    cobra.ExactArgs(1),
		RunE:    runE(o),
	}
}

func (o *auditOptions) complete(_ *cobra.Command, args []string) error {
	var err error
	o.subject, err = digestArg("DIGEST", args[0])
	return err
}

func (o *auditOptions) validate() error { return nil }

func (o *auditOptions) run(_ context.Context, s streams) error {
	st, err := o.root.OpenStore()
	if err != nil {
		return err
	}
	defer st.Close()
	rep, err := audit.Audit(st, o.subject)
	if err != nil {
		return err
	}
	return o.root.printAudit(s.out, rep)
}

// printAudit prints the report (one line per check, or the report object under --output json) and
// returns its refusal, marked as printed so that the JSON result object is not printed twice.
func (o *RootOptions) printAudit(w io.Writer, rep *audit.Report) error {
	if o.Output == "json" {
		if err := o.printResult(w, rep, ""); err != nil {
			return err
		}
	} else {
		for _, c := range rep.Checks {
			if c.OK {
				fmt.Fprintf(w, "ok    %s: %s\n", c.Name, c.Detail)
			} else {
				fmt.Fprintf(w, "FAIL  %s: %s: %s\n", c.Name, c.Code, c.Detail)
			}
		}
		for _, n := range rep.NotChecked {
			fmt.Fprintf(w, "not checked: %s\n", n)
		}
		verdict := "passed"
		if !rep.OK {
			verdict = "FAILED"
		}
		fmt.Fprintf(w, "audit of %s %s %s: %d checks, externalResultsReplayed %v, crossResourceAtomicity %v\n",
			rep.Kind, rep.Subject, verdict, len(rep.Checks), rep.ExternalResultsReplayed, rep.CrossResourceAtomicity)
	}
	if err := rep.Err(); err != nil {
		return printedError{err}
	}
	return nil
}
