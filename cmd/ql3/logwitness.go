package main

import (
	"context"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"golang.org/x/mod/sumdb/tlog"

	"github.com/qinglong/ql3/deploylog"
	"github.com/qinglong/ql3/deploylog/policy"
	"github.com/qinglong/ql3/deploylog/witness"
	"github.com/qinglong/ql3/internal/input"
	"github.com/qinglong/ql3/refuse"
	"github.com/qinglong/ql3/store"
)

// maxWitnessKeyFile bounds a witness verifier key file (one vkey line).
const maxWitnessKeyFile = 4 << 10

// loadPolicyFile reads a C2SP tlog-policy file into the verifier of `log verify --policy` and
// `audit --policy`: the checkpoint
// must be signed by a policy log and cosigned by the policy's quorum (docs/log.md).
func loadPolicyFile(path string) (deploylog.CheckpointVerifier, error) {
	b, err := input.ReadFile(path, policy.MaxPolicySize)
	if err != nil {
		return nil, err
	}
	p, err := policy.Parse(b)
	if err != nil {
		return nil, err
	}
	return policy.Verifier{Policy: p}, nil
}

// logWitnessOptions: `ql3 log witness --witness URL --witness-key VKEY`.
type logWitnessOptions struct {
	root    *RootOptions
	url     string
	keyPath string
	timeout time.Duration
}

func newLogWitnessCmd(root *RootOptions) *cobra.Command {
	o := &logWitnessOptions{root: root}
	c := readsStore(&cobra.Command{
		Use:   "witness --witness URL --witness-key VKEY",
		Short: "Submit the latest signed checkpoint to a witness and keep its cosignature beside it",
		Long: "Sends the store's latest signed checkpoint to the witness's add-checkpoint endpoint (C2SP\n" +
			"tlog-witness) with the consistency proof from the size the witness last cosigned, checks the\n" +
			"returned cosignature against the witness's key (C2SP tlog-cosignature, type 0x04) and keeps it\n" +
			"under log/cosignatures, never replacing one. A witness that has seen a larger tree\n" +
			"(WITNESS_AHEAD) or another tree (WITNESS_INCONSISTENT) refuses: the log was rolled back or forked.",
		Example: "  ql3 log witness --store /abs/evidence --witness https://witness.example/ --witness-key /abs/keys/witness.vkey",
		Args:    cobra.NoArgs, RunE: runE(o),
	})
	c.Flags().StringVar(&o.url, "witness", "", "the witness's submission prefix (http or https URL)")
	pathVar(c.Flags(), &o.keyPath, "witness-key", "the witness's cosignature verifier key (a vkey file)")
	c.Flags().DurationVar(&o.timeout, "timeout", witness.DefaultTimeout, "bound on each request to the witness")
	return c
}

func (o *logWitnessOptions) complete(*cobra.Command, []string) error { return nil }
func (o *logWitnessOptions) validate() error {
	return requireFlags([2]string{"--witness", o.url}, [2]string{"--witness-key", o.keyPath})
}

func (o *logWitnessOptions) run(ctx context.Context, s streams) error {
	b, err := input.ReadFile(o.keyPath, maxWitnessKeyFile)
	if err != nil {
		return err
	}
	v, err := policy.NewCosignatureVerifier(strings.TrimSpace(string(b)))
	if err != nil {
		return err
	}
	client, err := witness.New(o.url, v, o.timeout)
	if err != nil {
		return err
	}
	st, err := o.root.OpenStore()
	if err != nil {
		return err
	}
	defer st.Close()
	cps, err := st.Checkpoints()
	if err != nil {
		return err
	}
	if len(cps) == 0 {
		return refuse.New(store.CodeLogUnsigned, "the store's log has no signed checkpoint to submit").
			WithHint("sign one with: ql3 log sign --key FILE")
	}
	latest := cps[len(cps)-1]
	cp, _, err := deploylog.ParseSignedCheckpoint(latest)
	if err != nil {
		return err
	}
	hint, err := st.WitnessedSize(v)
	if err != nil {
		return err
	}
	res, err := client.Submit(ctx, latest, hint, func(old int64) (tlog.TreeProof, error) {
		return st.ConsistencyProof(old, cp.Size)
	})
	if err != nil {
		return err
	}
	stored, err := st.PutCosignatures(cp.Size, v, res.Cosignatures)
	if err != nil {
		return err
	}
	return o.root.printResult(s.out, logWitnessResult{OK: true, Witness: v.Name(), Origin: cp.Origin, Size: cp.Size,
		OldSize: res.OldSize, Stored: stored, Cosignatures: string(res.Cosignatures)}, nil)
}

// logWitnessResult: what the witness cosigned and whether its cosignature was kept (false: one
// of that size was already kept, and stays).
type logWitnessResult struct {
	OK           bool   `json:"ok"`
	Witness      string `json:"witness"`
	Origin       string `json:"origin"`
	Size         int64  `json:"size"`
	OldSize      int64  `json:"oldSize"`
	Stored       bool   `json:"stored"`
	Cosignatures string `json:"cosignatures"`
}

func (r logWitnessResult) writeText(w io.Writer) error {
	kept := "kept"
	if !r.Stored {
		kept = "already kept (the first cosignature of this size stays)"
	}
	return lines(w, fmt.Sprintf("witness %s cosigned %s size %d (from size %d): %s", r.Witness, r.Origin, r.Size, r.OldSize, kept))
}
