package main

import (
	"context"
	"encoding/json"
	"io"
	"time"

	"github.com/spf13/cobra"

	"github.com/qinglong/ql3/ceremony"
	"github.com/qinglong/ql3/refuse"
)

// statusOptions: `ql3 status`.
type statusOptions struct {
	root        *RootOptions
	commandFile string
	clusterUID  string
	stepTimeout time.Duration
}

func newStatusCmd(root *RootOptions) *cobra.Command {
	o := &statusOptions{root: root}
	c := readsStore(&cobra.Command{
		Use:   "status --command-file=PATH | --store DIR --cluster-uid UID",
		Short: "Say what the store says is deployed on the cluster now, and live-audit it (read-only)",
		Long: "Reads the store's published receipts of the cluster in publication order and prints the\n" +
			"current ones (for every object, the last receipt that applied it): the release, when it was\n" +
			"applied and the receipts it superseded. With --command-file (any preflight, apply or\n" +
			"live-audit command file of the cluster) it then runs the live audit of each current receipt,\n" +
			"as ql3 live-audit does (its command file is kept in ql3-status/ beside the command file;\n" +
			"each publishes its report; drift comes with the repair commands). It changes nothing in the\n" +
			"cluster. Exit 0 when every current receipt converged, 1 with LIVE_DRIFT otherwise.\n" +
			"With --store and --cluster-uid alone it reads the store only and says that the cluster was\n" +
			"not contacted (exit 0).",
		Example: "  ql3 status --command-file=/abs/private/apply.json\n  ql3 status --store /abs/evidence --cluster-uid 4fd9a2fb-bc12-4e5c-b216-d4abd4edb95d -o json",
		Args:    cobra.NoArgs,
		RunE:    runE(o),
	})
	pathVar(c.Flags(), &o.commandFile, "command-file", "any command file of the cluster (live audit)")
	c.Flags().StringVar(&o.clusterUID, "cluster-uid", "", "without --command-file: the kube-system UID (offline)")
	c.Flags().DurationVar(&o.stepTimeout, "step-timeout", ceremony.DefaultStepTimeout, "timeout of one kubectl run")
	return c
}

func (o *statusOptions) complete(*cobra.Command, []string) error { return nil }

func (o *statusOptions) validate() error {
	if o.commandFile != "" {
		if o.clusterUID != "" {
			return refuse.New(CodeFlagNotApplicable, "--cluster-uid applies without --command-file; the command file names its cluster")
		}
		return nil
	}
	if o.root.Store == "" || o.clusterUID == "" {
		return missingFlags("--command-file, or --store (or QL3_STORE) and --cluster-uid")
	}
	return nil
}

func (o *statusOptions) run(ctx context.Context, s streams) error {
	opts := ceremony.StatusOptions{CommandFile: o.commandFile, ClusterUID: o.clusterUID, StepTimeout: o.stepTimeout, Progress: s.err}
	if o.commandFile == "" {
		opts.Store = o.root.Store
	} else {
		cf, err := ceremony.ReadCommand(o.commandFile, "")
		if err != nil {
			return err
		}
		o.root.usedStore = cf.Parsed.Command.Store
		if o.root.Store != "" && o.root.Store != cf.Parsed.Command.Store {
			return refuse.New(CodeFlagNotApplicable, "%s names store %s, the command file names %s", o.root.storeName(), o.root.Store, cf.Parsed.Command.Store).
				WithHint("drop %s: status uses its command file's store", o.root.storeName())
		}
	}
	res, err := ceremony.Status(ctx, opts)
	if res == nil {
		return err
	}
	return o.root.printResult(s.out, statusResult{res}, err)
}

// statusResult: the status with its live audits; it carries its own ok.
type statusResult struct{ *ceremony.StatusResult }

func (r statusResult) MarshalJSON() ([]byte, error) { return json.Marshal(r.StatusResult) }

func (r statusResult) writeText(w io.Writer) error {
	r.WriteText(w)
	return nil
}
