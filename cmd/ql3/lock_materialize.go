package main

import (
	"context"
	"io"

	"github.com/spf13/cobra"

	"github.com/qinglong/ql3/evidence"
	"github.com/qinglong/ql3/internal/input"
	"github.com/qinglong/ql3/internal/materialize"
)

// lockMaterializeOptions are the flags of `ql3 lock materialize` (docs/materialize.md).
type lockMaterializeOptions struct {
	root                   *RootOptions
	catalog, manifest, out string
}

func newLockMaterializeCmd(o *RootOptions) *cobra.Command {
	opts := &lockMaterializeOptions{root: o}
	c := &cobra.Command{
		Use:   "materialize --catalog FILE --manifest FILE --out DIR",
		Short: "Lock an unlocked manifest with a release catalog (synthetic releases, tests, the demo)",
		Long: "Pins every workload image of the unlocked manifest from the release catalog, stamps the five\n" +
			"release annotations and writes locked.yaml and lock-report.json (mode 0600) into DIR (mode 0700,\n" +
			"created when absent). Existing files are never replaced. See docs/materialize.md.",
		Example: "  ql3 lock materialize --catalog testdata/release-3.4.1/catalog.json \\\n" +
			"    --manifest testdata/release-3.4.1/unlocked.yaml --out /abs/private",
		Args: cobra.NoArgs,
		RunE: runE(opts),
	}
	pathVar(c.Flags(), &opts.catalog, "catalog", "release catalog (qinglong/release-catalog@v1 JSON)")
	pathVar(c.Flags(), &opts.manifest, "manifest", "unlocked manifest (YAML)")
	pathVar(c.Flags(), &opts.out, "out", "output directory, mode 0700 (created when absent)")
	return c
}

func (o *lockMaterializeOptions) complete(*cobra.Command, []string) error { return nil }

// validate checks that every flag is given.
func (o *lockMaterializeOptions) validate() error {
	return requireFlags([2]string{"--catalog", o.catalog}, [2]string{"--manifest", o.manifest}, [2]string{"--out", o.out})
}

// run materializes and commits both files, then prints what it wrote: each file's own digest, and
// the report's self-digest labelled as such.
func (o *lockMaterializeOptions) run(_ context.Context, s streams) error {
	w := s.out
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
	return o.root.printResult(w, materializeResult{true, l.Release.Version,
		materializedFile{written.Manifest, string(l.Manifest.Digest), len(r.Manifest)},
		materializedFile{written.Report, string(evidence.FromBytes(r.Report)), len(r.Report)},
		string(l.ReportDigest), string(l.Catalog.Digest), string(l.Catalog.ReleaseSet)}, nil)
}

// materializedFile is one file lock materialize wrote.
type materializedFile struct {
	Path   string `json:"path"`
	Digest string `json:"digest"` // sha256 of the file's bytes
	Bytes  int    `json:"bytes"`
}

// materializeResult: the two files written and the lock's identity.
type materializeResult struct {
	OK           bool             `json:"ok"`
	Release      string           `json:"release"`
	Manifest     materializedFile `json:"manifest"`
	Report       materializedFile `json:"report"`
	ReportDigest string           `json:"reportDigest"` // the report's self-digest
	Catalog      string           `json:"catalogDigest"`
	ReleaseSet   string           `json:"releaseSet"`
}

func (r materializeResult) writeText(w io.Writer) error {
	return lines(w, "manifest "+r.Manifest.Path+" "+r.Manifest.Digest, "report "+r.Report.Path+" "+r.Report.Digest,
		"reportDigest "+r.ReportDigest)
}
