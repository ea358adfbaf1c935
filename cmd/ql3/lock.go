package main

import (
	"fmt"
	"io"
	"strings"

	"github.com/spf13/cobra"

	"github.com/qinglong/ql3/evidence/lock"
	"github.com/qinglong/ql3/internal/input"
	"github.com/qinglong/ql3/internal/refuse"
)

// lockSubcommands are added under `ql3 lock` when the root is built; files append in init().
var lockSubcommands []func(*RootOptions) *cobra.Command

func init() {
	registerCommand(func(o *RootOptions) *cobra.Command {
		c := &cobra.Command{Use: "lock", Short: "Verify (and, for synthetic releases, materialize) lock reports v2"}
		c.AddCommand(newLockVerify(o))
		for _, f := range lockSubcommands {
			c.AddCommand(f(o))
		}
		return c
	})
}

// lockVerifyOptions are the flags of `ql3 lock verify`.
type lockVerifyOptions struct {
	root             *RootOptions
	manifest, report string
}

func newLockVerify(o *RootOptions) *cobra.Command {
	opts := &lockVerifyOptions{root: o}
	c := &cobra.Command{
		Use:   "verify --manifest FILE --report FILE",
		Short: "Verify a lock report against its locked manifest, offline (docs/lock-v2.md)",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := opts.validate(); err != nil {
				return err
			}
			return opts.run(cmd.OutOrStdout())
		},
	}
	c.Flags().StringVar(&opts.manifest, "manifest", "", "locked manifest (locked.yaml)")
	c.Flags().StringVar(&opts.report, "report", "", "lock report (lock-report.json)")
	return c
}

func (v *lockVerifyOptions) validate() error {
	if v.manifest == "" || v.report == "" {
		return refuse.NewUsage(CodeUsage, "--manifest and --report are required")
	}
	return nil
}

func (v *lockVerifyOptions) run(w io.Writer) error {
	man, err := input.ReadFile(v.manifest, lock.MaxManifestBytes)
	if err != nil {
		return err
	}
	rep, err := input.ReadFile(v.report, lock.MaxReportBytes)
	if err != nil {
		return err
	}
	res, err := lock.Verify(man, rep)
	if err != nil {
		return err
	}
	return v.root.printResult(w, map[string]any{"ok": true, "lock": lockSummary(res)}, lockText(res))
}

type lockContainerJSON struct {
	Field string `json:"field"`
	Name  string `json:"name"`
	Image string `json:"image"`
}

type lockAuthorityJSON struct {
	Role        string              `json:"role"`
	ObjectIndex int                 `json:"objectIndex"`
	APIVersion  string              `json:"apiVersion"`
	Kind        string              `json:"kind"`
	Namespace   string              `json:"namespace"`
	Name        string              `json:"name"`
	Containers  []lockContainerJSON `json:"containers"`
}

// lockSummary is the --output json form of a verified lock: its identity and authorities, not
// the manifest's content.
func lockSummary(r *lock.Result) map[string]any {
	auths := make([]lockAuthorityJSON, 0, len(r.Authorities))
	for _, a := range r.Authorities {
		j := lockAuthorityJSON{Role: a.Role, ObjectIndex: a.ObjectIndex, APIVersion: a.APIVersion, Kind: a.Kind,
			Namespace: a.Namespace, Name: a.Name, Containers: []lockContainerJSON{}}
		for _, c := range a.Containers {
			j.Containers = append(j.Containers, lockContainerJSON(c))
		}
		auths = append(auths, j)
	}
	return map[string]any{
		"release": map[string]any{"product": lock.Product, "version": r.ReleaseVersion},
		"catalog": map[string]any{"workflow": r.CatalogWorkflow, "ref": r.CatalogRef, "commit": r.CatalogCommit,
			"digest": r.CatalogDigest, "releaseSet": r.ReleaseSet},
		"reportDigest": r.ReportDigest,
		"manifest": map[string]any{"digest": r.ManifestDigest, "bytes": r.ManifestBytes, "resources": len(r.Objects),
			"imageAuthorities": len(r.Authorities)},
		"authorities": auths,
	}
}

func lockText(r *lock.Result) string {
	var b strings.Builder
	fmt.Fprintf(&b, "lock verified: %s %s (%s, commit %s)\n", lock.Product, r.ReleaseVersion, r.CatalogRef, r.CatalogCommit)
	fmt.Fprintf(&b, "catalog      %s\n", r.CatalogDigest)
	fmt.Fprintf(&b, "release set  %s\n", r.ReleaseSet)
	fmt.Fprintf(&b, "report       %s\n", r.ReportDigest)
	fmt.Fprintf(&b, "manifest     %s (%d bytes, %d resources, %d image authorities)\n",
		r.ManifestDigest, r.ManifestBytes, len(r.Objects), len(r.Authorities))
	for _, a := range r.Authorities {
		for _, c := range a.Containers {
			fmt.Fprintf(&b, "%-10s %s %s/%s %s/%s %s\n", a.Role, a.Kind, a.Namespace, a.Name, c.Field, c.Name, c.Image)
		}
	}
	return strings.TrimSuffix(b.String(), "\n")
}
