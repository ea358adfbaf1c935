package main

import (
	"context"
	"fmt"
	"io"
	"time"

	"github.com/spf13/cobra"

	"github.com/qinglong/ql3/refuse"
	"github.com/qinglong/ql3/store"
	"github.com/qinglong/ql3/store/retention"
)

// storeGCOptions: `ql3 store gc --keep-last N --keep-since DATE [--dry-run]`.
type storeGCOptions struct {
	root     *RootOptions
	keepLast int
	since    string
	dryRun   bool
	wait     time.Duration
	policy   retention.Policy
}

func newStoreGCCmd(root *RootOptions) *cobra.Command {
	o := &storeGCOptions{root: root}
	c := readsStore(&cobra.Command{
		Use:   "gc",
		Short: "Drop old receipts and what only they reach, with a tombstone in the deployment log for each",
		Long: "Apply a retention policy to the store. Kept: every current receipt (the last receipt of its\n" +
			"cluster for one of the objects it proved), the last --keep-last receipts of each cluster, and\n" +
			"every receipt finished at or after --keep-since. An intent follows its receipt (an unfinished\n" +
			"apply is kept), a live audit the receipt it audited, attestations their subject; a preflight\n" +
			"is dropped when every apply that used it is (one never applied: when it finished before\n" +
			"--keep-since). For each dropped root gc appends a tombstone leaf to the deployment log, then\n" +
			"removes its index entry, then the objects no kept root reaches. A killed gc is finished by the\n" +
			"next one. A store without a deployment log is refused (ql3 log init first). gc waits (--wait)\n" +
			"for runs that write into the store to end. --dry-run prints what would go and writes nothing.",
		Example: "  ql3 store gc --store /abs/evidence --keep-last 10 --dry-run\n" +
			"  ql3 store gc --store /abs/evidence --keep-last 3 --keep-since 2026-01-01",
		Args: cobra.NoArgs, RunE: runE(o),
	})
	c.Flags().IntVar(&o.keepLast, "keep-last", 0, "keep the last N receipts of each cluster (0: the current ones only)")
	c.Flags().StringVar(&o.since, "keep-since", "", "keep every receipt finished at or after DATE (RFC 3339, or YYYY-MM-DD in UTC)")
	c.Flags().BoolVar(&o.dryRun, "dry-run", false, "print what would be dropped and removed; write nothing")
	c.Flags().DurationVar(&o.wait, "wait", 30*time.Second, "how long to wait for runs writing into the store to end")
	return c
}

func (o *storeGCOptions) complete(c *cobra.Command, _ []string) error {
	o.policy = retention.Policy{KeepLast: o.keepLast, LastSet: c.Flags().Changed("keep-last"), SinceSet: c.Flags().Changed("keep-since")}
	if o.policy.SinceSet {
		t, err := retention.ParseDate(o.since)
		if err != nil {
			return refuse.Wrap(refuse.CodeUsage, err, "store gc")
		}
		o.policy.KeepSince = t
	}
	return nil
}

func (o *storeGCOptions) validate() error {
	if !o.policy.LastSet && !o.policy.SinceSet {
		return refuse.New(refuse.CodeFlagRequired, "store gc needs a retention rule: --keep-last N, --keep-since DATE or both")
	}
	if o.keepLast < 0 {
		return refuse.New(refuse.CodeUsage, "--keep-last %d: want 0 or more", o.keepLast)
	}
	if o.wait <= 0 {
		return refuse.New(refuse.CodeUsage, "--wait %s: want a positive duration", o.wait)
	}
	return nil
}

func (o *storeGCOptions) run(_ context.Context, s streams) error {
	st, err := o.root.OpenStore()
	if err != nil {
		return err
	}
	defer st.Close()
	rep, _, err := retention.GC(st, o.policy, store.GCOptions{DryRun: o.dryRun, Wait: o.wait})
	if err != nil {
		return err
	}
	return o.root.printResult(s.out, storeGCResult{OK: true, GCReport: rep}, nil)
}

// storeGCResult: the gc report.
type storeGCResult struct {
	OK bool `json:"ok"`
	*store.GCReport
}

func (r storeGCResult) writeText(w io.Writer) error {
	verb := "dropped"
	if r.DryRun {
		verb = "would drop"
	}
	for _, d := range r.Dropped {
		what := fmt.Sprintf("%s %s", d.Kind, d.Key)
		if d.Bundle != "" {
			what += " bundle " + string(d.Bundle)
		}
		tomb := "tombstone leaf " + fmt.Sprint(d.Tombstone)
		if d.Tombstone < 0 {
			tomb = "tombstone to append"
		}
		resumed := ""
		if d.Resumed {
			resumed = " (tombstoned by an interrupted gc, finished now)"
		}
		fmt.Fprintf(w, "%s %s record %s, published as leaf %d, %s%s\n", verb, what, d.Record, d.Leaf, tomb, resumed)
	}
	_, err := fmt.Fprintf(w, "%s: %d roots %s, %d kept; %d entries, %d objects (%d bytes) removed; log %s: %d leaves\n",
		map[bool]string{true: "dry run", false: "gc"}[r.DryRun], len(r.Dropped), verb, r.Kept, r.EntriesRemoved, r.ObjectsRemoved, r.BytesRemoved,
		refuse.Ident(r.Origin), r.LogSize)
	return err
}
