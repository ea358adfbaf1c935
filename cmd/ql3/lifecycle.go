package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"

	"github.com/spf13/cobra"

	"github.com/qinglong/ql3/ceremony"
	"github.com/qinglong/ql3/history"
)

// liveAuditOptions: `ql3 live-audit --command-file=F`.
type liveAuditOptions struct {
	ceremonyOptions
}

func newLiveAuditCmd(root *RootOptions) *cobra.Command {
	o := &liveAuditOptions{ceremonyOptions{root: root}}
	c := readsStore(&cobra.Command{
		Use:   "live-audit --command-file=PATH",
		Short: "Read the live state of a receipt's objects and judge it; publish a live-audit report (read-only)",
		Long: "Takes an apply command file whose receipt is in its store, or a live-audit command file\n" +
			"(cluster.deployment.live.audit, written by ql3 command new --from-receipt). Runs the identity\n" +
			"read, the convergence read fed with the receipt's manifest from the store, and the final\n" +
			"identity read; gives every object one verdict (converged, field-differs, ownership-lost,\n" +
			"missing, recreated, image-differs, annotation-differs) and publishes a self-digest live-audit\n" +
			"report whether or not it finds drift. It changes nothing in the cluster. Exit 0 only when every\n" +
			"object converged; drift is LIVE_DRIFT, exit 1, with the report published, the drifted fields\n" +
			"with the managers that hold them, and the commands that repair it (docs/lifecycle.md). A\n" +
			"receipt a later receipt of the cluster superseded is refused (LIVE_AUDIT_SUPERSEDED) unless\n" +
			"--allow-superseded is given.",
		Example: "  ql3 live-audit --command-file=/abs/private/apply.json\n  ql3 live-audit -o json --command-file=/abs/private/live-audit.json",
		Args:    cobra.NoArgs,
		RunE:    runE(o),
	})
	pathVar(c.Flags(), &o.commandFile, "command-file", "the apply or live-audit command file")
	c.Flags().DurationVar(&o.stepTimeout, "step-timeout", ceremony.DefaultStepTimeout, "timeout of one kubectl run")
	o.logKey.register(c)
	c.Flags().BoolVar(&o.allowSuperseded, "allow-superseded", false, "compare the cluster with the receipt even when a later receipt superseded it (LIVE_AUDIT_SUPERSEDED otherwise)")
	return c
}

func (o *liveAuditOptions) run(ctx context.Context, s streams) error {
	cf, err := ceremony.ReadCommand(o.commandFile, "")
	if err != nil {
		return err
	}
	if err := o.checkFile(&cf.Parsed.Command); err != nil {
		return err
	}
	if err := o.logKey.prepare(cf.Parsed.Command.Store); err != nil {
		return err
	}
	return o.liveAudit(ctx, s, cf.Parsed.Command.Store)
}

// liveAudit runs the live audit of the command file and prints its result; a drift refusal comes
// with a published report, which is printed before the refusal.
func (o *ceremonyOptions) liveAudit(ctx context.Context, s streams, storeDir string) error {
	res, err := ceremony.LiveAudit(ctx, ceremony.Options{CommandFile: o.commandFile, StepTimeout: o.stepTimeout, Progress: s.err,
		AllowSuperseded: o.allowSuperseded})
	if res == nil {
		return err
	}
	// The report is published, drift or not: sign the checkpoint that includes it.
	if serr := o.logKey.sign(storeDir, s.err); serr != nil && err == nil {
		err = serr
	}
	if err := o.root.printResult(s.out, liveAuditResult{res}, err); err != nil {
		return err
	}
	return next(s, "ql3 status --command-file="+shellQuote(o.commandFile))
}

// liveAuditResult: the live-audit result with every verdict; it carries its own ok.
type liveAuditResult struct{ *ceremony.LiveAuditResult }

func (r liveAuditResult) MarshalJSON() ([]byte, error) { return json.Marshal(r.LiveAuditResult) }

func (r liveAuditResult) writeText(w io.Writer) error {
	r.WriteText(w)
	return nil
}

// historyOptions: `ql3 history`.
type historyOptions struct {
	root    *RootOptions
	cluster string
	trust   logTrustFlags // --log-key, --policy
}

func newHistoryCmd(root *RootOptions) *cobra.Command {
	o := &historyOptions{root: root}
	c := readsStore(&cobra.Command{
		Use:   "history [--cluster-uid UID] [--log-key VKEY | --policy FILE]",
		Short: "List receipts, preflights, live audits and unfinished applies, newest first (offline)",
		Long: "Reads the store offline and prints one line per receipt, preflight report, live-audit report\n" +
			"and unfinished apply, newest first: the time, the kind, the release, the cluster UID, the\n" +
			"context, whether it recovered, the live-audit verdict and a short digest (docs/lifecycle.md).\n" +
			"With a deployment log, by leaf index: --log-key or --policy checks the checkpoints' signatures\n" +
			"(and witness quorum) and says up to which one the story is signed; later leaves are marked unsigned.",
		Example: "  ql3 history --store /abs/evidence\n  ql3 history --store /abs/evidence --cluster-uid 4fd9a2fb-bc12-4e5c-b216-d4abd4edb95d -o json\n" +
			"  ql3 history --store /abs/evidence --policy /abs/keys/log.policy",
		Args: cobra.NoArgs,
		RunE: runE(o),
	})
	c.Flags().StringVar(&o.cluster, "cluster-uid", "", "only this kube-system UID")
	// --cluster was this flag's first name; --cluster-uid is its name everywhere (docs/cli.md).
	c.Flags().StringVar(&o.cluster, "cluster", "", "only this kube-system UID")
	_ = c.Flags().MarkHidden("cluster")
	o.trust.register(c, logKeyUsage, logPolicyUsage)
	return c
}

// Usage of history's and describe's --log-key and --policy.
const (
	logKeyUsage    = "the deployment log's verifier key: check every stored checkpoint's signature and say up to which the story is signed"
	logPolicyUsage = "a C2SP tlog-policy (log key, witnesses, quorum) instead of --log-key: the story is signed up to the checkpoint the quorum cosigned"
)

func (o *historyOptions) complete(c *cobra.Command, _ []string) error {
	if c.Flags().Changed("cluster") {
		// On stderr: pflag's own deprecation notice goes to stdout, which -o json keeps to one object.
		fmt.Fprintln(c.ErrOrStderr(), "ql3: warning: --cluster is deprecated: use --cluster-uid")
	}
	return nil
}
func (o *historyOptions) validate() error { return o.trust.validate() }
func (o *historyOptions) run(_ context.Context, s streams) error {
	v, err := o.trust.verifier()
	if err != nil {
		return err
	}
	st, err := o.root.OpenStore()
	if err != nil {
		return err
	}
	defer st.Close()
	rep, err := history.HistoryWith(st, history.Filter{Cluster: o.cluster}, history.Options{LogVerifier: v})
	if err != nil {
		return err
	}
	return o.root.printResult(s.out, historyResult{true, rep}, nil)
}

// historyResult: the store's story, newest first.
type historyResult struct {
	OK bool `json:"ok"`
	*history.Report
}

func (r historyResult) writeText(w io.Writer) error { return r.WriteText(w) }

// describeOptions: `ql3 describe DIGEST`.
type describeOptions struct {
	root    *RootOptions
	subject digestRef
	trust   logTrustFlags // --log-key, --policy
}

func newDescribeCmd(root *RootOptions) *cobra.Command {
	o := &describeOptions{root: root}
	c := readsStore(&cobra.Command{
		Use:   "describe DIGEST [--log-key VKEY | --policy FILE]",
		Short: "Say in human terms what a receipt, preflight, live audit or intent records (offline)",
		Long: "Prints a summary of a root record: for a receipt, the release, catalog commit, cluster,\n" +
			"context, kubectl digest, when, whether it recovered, the objects with their UIDs, and which\n" +
			"receipt it superseded and which superseded it. A digest that is not a published root record\n" +
			"is refused with DESCRIBE_NOT_ROOT. With a deployment log: its leaf, and with --log-key or\n" +
			"--policy up to which checkpoint the story is signed (as ql3 history).",
		Example: "  ql3 describe --store /abs/evidence sha256:5f0c...\n  ql3 describe --store /abs/evidence --log-key /abs/keys/log.vkey sha256:5f0c...",
		Args:    cobra.ExactArgs(1),
		RunE:    runE(o),
	})
	o.trust.register(c, logKeyUsage, logPolicyUsage)
	return c
}

func (o *describeOptions) complete(_ *cobra.Command, a []string) error {
	var err error
	o.subject, err = digestRefArg("DIGEST", a[0])
	return err
}
func (o *describeOptions) validate() error { return o.trust.validate() }
func (o *describeOptions) run(_ context.Context, s streams) error {
	v, err := o.trust.verifier()
	if err != nil {
		return err
	}
	st, err := o.root.OpenStore()
	if err != nil {
		return err
	}
	defer st.Close()
	subject, err := o.subject.resolve(st)
	if err != nil {
		return err
	}
	d, err := history.DescribeWith(st, subject, history.Options{LogVerifier: v})
	if err != nil {
		return err
	}
	return o.root.printResult(s.out, describeResult{true, d}, nil)
}

// describeResult: one root record in human terms.
type describeResult struct {
	OK bool `json:"ok"`
	*history.Description
}

func (r describeResult) writeText(w io.Writer) error {
	r.WriteText(w)
	return nil
}
