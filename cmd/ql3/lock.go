package main

import (
	"context"
	"fmt"
	"io"
	"strings"

	"github.com/spf13/cobra"

	"github.com/qinglong/ql3/evidence/lock"
	"github.com/qinglong/ql3/internal/input"
)

func newLockCmd(root *RootOptions) *cobra.Command {
	c := &cobra.Command{
		Use:   "lock",
		Short: "Verify (and, for synthetic releases, materialize) lock reports v2",
		Example: "  ql3 lock verify --manifest locked.yaml --lock-report lock-report.json\n" +
			"  ql3 lock materialize --catalog catalog.json --manifest unlocked.yaml --out /abs/private",
		Args: cobra.NoArgs,
	}
	c.AddCommand(newLockVerifyCmd(root), newLockMaterializeCmd(root))
	return c
}

// lockVerifyOptions are the flags of `ql3 lock verify`.
type lockVerifyOptions struct {
	root             *RootOptions
	manifest, report string
}

func newLockVerifyCmd(root *RootOptions) *cobra.Command {
	o := &lockVerifyOptions{root: root}
	c := &cobra.Command{
		Use:     "verify --manifest FILE --lock-report FILE",
		Short:   "Verify a lock report against its locked manifest, offline (docs/lock-v2.md)",
		Example: "  ql3 lock verify --manifest locked.yaml --lock-report lock-report.json -o json",
		Args:    cobra.NoArgs,
		RunE:    runE(o),
	}
	pathVar(c.Flags(), &o.manifest, "manifest", "locked manifest (locked.yaml)")
	pathVar(c.Flags(), &o.report, "lock-report", "lock report (lock-report.json)")
	return c
}

func (v *lockVerifyOptions) complete(*cobra.Command, []string) error { return nil }

func (v *lockVerifyOptions) validate() error {
	return requireFlags([2]string{"--manifest", v.manifest}, [2]string{"--lock-report", v.report})
}

func (v *lockVerifyOptions) run(_ context.Context, s streams) error {
	w := s.out
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
	return v.root.printResult(w, lockResult{true, lockSummary(res), res}, nil)
}

// lockResult: a verified lock, its identity and authorities (not the manifest's content).
type lockResult struct {
	OK   bool           `json:"ok"`
	Lock map[string]any `json:"lock"`
	res  *lock.Result
}

func (r lockResult) writeText(w io.Writer) error { return lines(w, lockText(r.res)) }

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
