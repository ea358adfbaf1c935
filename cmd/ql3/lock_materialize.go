package main

import (
	"fmt"
	"io"

	"github.com/spf13/cobra"

	"github.com/qinglong/ql3/evidence"
	"github.com/qinglong/ql3/internal/input"
	"github.com/qinglong/ql3/internal/materialize"
	"github.com/qinglong/ql3/internal/refuse"
)

// CodeMaterializeFlags is raised when a required flag of `ql3 lock materialize` is missing.
const CodeMaterializeFlags refuse.Code = "MATERIALIZE_FLAGS"

func init() { lockSubcommands = append(lockSubcommands, newLockMaterializeCommand) }

// lockMaterializeOptions are the flags of `ql3 lock materialize` (docs/materialize.md).
type lockMaterializeOptions struct {
	root                   *RootOptions
	catalog, manifest, out string
}

func newLockMaterializeCommand(o *RootOptions) *cobra.Command {
	opts := &lockMaterializeOptions{root: o}
	c := &cobra.Command{
		Use:   "materialize --catalog FILE --manifest FILE --out DIR",
		Short: "Lock an unlocked manifest with a release catalog (synthetic releases, tests, the demo)",
		Long: "Pins every workload image of the unlocked manifest from the release catalog, stamps the five\n" +
			"release annotations and writes locked.yaml and lock-report.json (mode 0600) into DIR (mode 0700,\n" +
			"created when absent). Existing files are never replaced. See docs/materialize.md.",
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := opts.Validate(); err != nil {
				return err
			}
			return opts.Run(cmd.OutOrStdout())
		},
	}
	c.Flags().StringVar(&opts.catalog, "catalog", "", "release catalog (qinglong/release-catalog@v1 JSON)")
	c.Flags().StringVar(&opts.manifest, "manifest", "", "unlocked manifest (YAML)")
	c.Flags().StringVar(&opts.out, "out", "", "output directory, mode 0700 (created when absent)")
	return c
}

// Validate checks that every flag is given.
func (o *lockMaterializeOptions) Validate() error {
	if o.catalog == "" || o.manifest == "" || o.out == "" {
		return refuse.NewUsage(CodeMaterializeFlags, "--catalog, --manifest and --out are all required")
	}
	return nil
}

// Run materializes and commits both files, then prints what it wrote.
func (o *lockMaterializeOptions) Run(w io.Writer) error {
	catalog, err := input.ReadFile(o.catalog, materialize.MaxCatalogBytes)
	if err != nil {
		return err
	}
	unlocked, err := input.ReadFile(o.manifest, materialize.MaxManifestBytes)
	if err != nil {
		return err
	}
	r, err := materialize.Materialize(catalog, unlocked)
	if err != nil {
		return err
	}
	written, err := materialize.WriteDir(o.out, r)
	if err != nil {
		return err
	}
	l := r.Lock
	type file struct {
		Path   string `json:"path"`
		Digest string `json:"digest"` // sha256 of the file's bytes
		Bytes  int    `json:"bytes"`
	}
	out := struct {
		OK           bool   `json:"ok"`
		Release      string `json:"release"`
		Manifest     file   `json:"manifest"`
		Report       file   `json:"report"`
		ReportDigest string `json:"reportDigest"` // the report's self-digest
		Catalog      string `json:"catalogDigest"`
		ReleaseSet   string `json:"releaseSet"`
	}{true, l.Release.Version,
		file{written.Manifest, string(l.Manifest.Digest), len(r.Manifest)},
		file{written.Report, string(evidence.FromBytes(r.Report)), len(r.Report)},
		string(l.ReportDigest), string(l.Catalog.Digest), string(l.Catalog.ReleaseSet)}
	text := fmt.Sprintf("manifest %s %s\nreport %s %s", written.Manifest, l.Manifest.Digest, written.Report, l.ReportDigest)
	return o.root.printResult(w, out, text)
}
