package main

import (
	"github.com/spf13/cobra"

	"github.com/qinglong/ql3/evidence"
)

func init() {
	registerCommand(func(o *RootOptions) *cobra.Command {
		return &cobra.Command{
			Use:   "canonicalize [FILE|-]",
			Short: "Print the RFC 8785 canonical form of a JSON document",
			Args:  cobra.MaximumNArgs(1),
			RunE: func(cmd *cobra.Command, a []string) error {
				name := "-"
				if len(a) == 1 {
					name = a[0]
				}
				b, err := readInput(name)
				if err != nil {
					return err
				}
				c, err := evidence.Canonicalize(b)
				if err != nil {
					return err
				}
				if o.Output == "json" {
					return o.printResult(cmd.OutOrStdout(), map[string]any{"ok": true, "canonical": string(c), "digest": evidence.FromBytes(c)}, "")
				}
				_, err = cmd.OutOrStdout().Write(append(c, '\n'))
				return err
			},
		}
	})
}
