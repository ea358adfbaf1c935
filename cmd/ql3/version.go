package main

import (
	"runtime/debug"

	"github.com/spf13/cobra"
)

func init() {
	registerCommand(func(o *RootOptions) *cobra.Command {
		return &cobra.Command{
			Use:   "version",
			Short: "Print the ql3 version",
			Args:  cobra.NoArgs,
			RunE: func(cmd *cobra.Command, _ []string) error {
				v := "devel"
				if bi, ok := debug.ReadBuildInfo(); ok && bi.Main.Version != "" {
					v = bi.Main.Version
				}
				return o.printResult(cmd.OutOrStdout(), map[string]any{"ok": true, "version": v}, "ql3 "+v)
			},
		}
	})
}
