package main

import (
	"context"
	"io"

	"github.com/spf13/cobra"

	"github.com/qinglong/ql3/internal/buildinfo"
)

// versionOptions: `ql3 version` (and `ql3 --version`, which prints the same line).
type versionOptions struct{ root *RootOptions }

func newVersionCmd(root *RootOptions) *cobra.Command {
	o := &versionOptions{root: root}
	return &cobra.Command{
		Use:     "version",
		Short:   "Print the module version, VCS revision and Go version of this ql3",
		Example: "  ql3 version\n  ql3 version -o json",
		Args:    cobra.NoArgs,
		RunE:    runE(o),
	}
}

func (o *versionOptions) complete(*cobra.Command, []string) error { return nil }
func (o *versionOptions) validate() error                         { return nil }
func (o *versionOptions) run(_ context.Context, s streams) error {
	in := buildinfo.Read()
	return o.root.printResult(s.out, versionResult{true, in}, nil)
}

// versionResult: the build information.
type versionResult struct {
	OK bool `json:"ok"`
	buildinfo.Info
}

func (r versionResult) writeText(w io.Writer) error { return lines(w, r.Info.String()) }
