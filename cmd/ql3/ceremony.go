package main

import (
	"encoding/json"
	"fmt"

	"github.com/spf13/cobra"

	"github.com/qinglong/ql3/audit"
	"github.com/qinglong/ql3/ceremony"
	"github.com/qinglong/ql3/evidence"
	"github.com/qinglong/ql3/internal/refuse"
	"github.com/qinglong/ql3/store"
)

// CodeCommandFileFlag: --command-file is missing.
const CodeCommandFileFlag refuse.Code = "COMMAND_FILE_REQUIRED"

func init() {
	registerCommand(func(root *RootOptions) *cobra.Command { return ceremonyCommand(root, "run", "") })
	registerCommand(func(root *RootOptions) *cobra.Command {
		return ceremonyCommand(root, "preflight", evidence.CommandPreflight)
	})
	registerCommand(func(root *RootOptions) *cobra.Command {
		return ceremonyCommand(root, "apply", evidence.CommandApply)
	})
}

// ceremonyCommand builds `ql3 run|preflight|apply --command-file=F`.
func ceremonyCommand(root *RootOptions, use, want string) *cobra.Command {
	var opts ceremony.Options
	short := map[string]string{
		"run":       "Run the command a command file names (preflight, apply or receipt.audit)",
		"preflight": "Verify inputs, cluster identity and a server-side dry-run; publish a preflight report",
		"apply":     "Apply a preflighted manifest and publish a receipt",
	}[use]
	cmd := &cobra.Command{
		Use:   use + " --command-file=PATH",
		Short: short,
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if opts.CommandFile == "" {
				return refuse.NewUsage(CodeCommandFileFlag, "--command-file is required")
			}
			opts.Progress = cmd.ErrOrStderr()
			cf, err := ceremony.ReadCommand(opts.CommandFile, want)
			if err != nil {
				return err
			}
			if c := &cf.Parsed.Command; c.Command == evidence.CommandReceiptAudit {
				st, err := store.Open(c.Store)
				if err != nil {
					return err
				}
				defer st.Close()
				rep, err := audit.AuditFor(st, *c.Receipt, cf.Parsed.Target)
				if err != nil {
					return err
				}
				return root.printAudit(cmd.OutOrStdout(), rep)
			}
			res, err := ceremony.Execute(cmd.Context(), opts, cf)
			if err != nil {
				return err
			}
			out := cmd.OutOrStdout()
			if root.Output == "json" {
				b, err := json.Marshal(res)
				if err != nil {
					return err
				}
				_, err = fmt.Fprintf(out, "%s\n", b)
				return err
			}
			d := res.Receipt
			if res.Command == evidence.CommandPreflight {
				d = res.Preflight
			}
			_, err = fmt.Fprintln(out, d)
			return err
		},
	}
	cmd.Flags().StringVar(&opts.CommandFile, "command-file", "", "absolute path of the private command file")
	cmd.Flags().DurationVar(&opts.StepTimeout, "step-timeout", ceremony.DefaultStepTimeout, "timeout of one kubectl run")
	if use != "apply" {
		cmd.Flags().StringVar(&opts.WriteApplyCommand, "write-apply-command", "", "preflight: write the apply command file here (0600, never replaced)")
	}
	return cmd
}
