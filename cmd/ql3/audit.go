package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"

	"github.com/spf13/cobra"

	"github.com/qinglong/ql3/attest"
	"github.com/qinglong/ql3/audit"
	"github.com/qinglong/ql3/deploylog"
	"github.com/qinglong/ql3/internal/input"
	"github.com/qinglong/ql3/ociartifact"
	"github.com/qinglong/ql3/refuse"
)

// auditOptions are the flags and argument of `ql3 audit`.
type auditOptions struct {
	root     *RootOptions
	subject  digestRef
	keyPaths []string
	layout   string
	keys     []*attest.PublicKey
	trust    logTrustFlags // --log-key, --policy
	proof    string        // a tlog-proof file of the subject
}

func newAuditCmd(root *RootOptions) *cobra.Command {
	o := &auditOptions{root: root}
	c := readsStore(&cobra.Command{
		Use:   "audit DIGEST",
		Short: "Audit a receipt or preflight report offline, re-deriving every verdict from the store",
		Long: "Audit a receipt or a preflight report from a copy of the evidence store alone: no network\n" +
			"connection is opened and no program is run. Exit 0 only if every check passes.",
		Example: "  ql3 audit --store /abs/evidence sha256:5f0c...\n  QL3_STORE=/abs/evidence ql3 audit -o json sha256:5f0c...\n" +
			"  ql3 audit --store /abs/evidence --key /abs/keys/release.pub sha256:5f0c...\n" +
			"  ql3 audit --layout /abs/oci-layout sha256:5f0c...",
		Args: cobra.ExactArgs(1),
		RunE: runE(o),
	})
	c.Flags().StringArrayVar(&o.keyPaths, "key", nil, "trusted public key (PKIX PEM, ECDSA P-256 or Ed25519); repeatable: at least one attestation must verify")
	o.trust.register(c, "the deployment log's verifier key: the record must be included in a checkpoint it verifies",
		"a C2SP tlog-policy (log key, witnesses, quorum) instead of --log-key")
	pathVar(c.Flags(), &o.proof, "proof", "a tlog-proof file of the record (ql3 log proof) instead of the store's log")
	pathVar(c.Flags(), &o.layout, "layout", "audit an OCI image layout (ql3 store export, oras copy --to-oci-layout) read-only instead of a store")
	return c
}

func (o *auditOptions) complete(_ *cobra.Command, args []string) error {
	for i, k := range o.keyPaths {
		a, err := absPath("--key", k)
		if err != nil {
			return err
		}
		o.keyPaths[i] = a
	}
	var err error
	o.subject, err = digestRefArg("DIGEST", args[0])
	return err
}

func (o *auditOptions) validate() error {
	if o.layout != "" && o.root.Store != "" && !o.root.storeFromEnv {
		return refuse.New(CodeFlagNotApplicable, "--layout and --store name two evidence sources: give one")
	}
	if o.layout != "" && o.subject.full == "" {
		return refuse.New(refuse.CodeDigestArg, "DIGEST sha256:%s is a prefix: an OCI layout is audited by the full digest", o.subject.prefix)
	}
	if err := o.trust.validate(); err != nil {
		return err
	}
	if o.proof != "" && !o.trust.given() {
		return refuse.New(CodeFlagNotApplicable, "--proof needs --log-key or --policy to trust its checkpoint")
	}
	return nil
}

func (o *auditOptions) run(_ context.Context, s streams) error {
	for _, k := range o.keyPaths {
		pk, err := attest.LoadPublicKey(k)
		if err != nil {
			return err
		}
		o.keys = append(o.keys, pk)
	}
	var src audit.Source
	subject := o.subject.full
	if o.layout != "" {
		l, err := ociartifact.OpenLayout(o.layout)
		if err != nil {
			return err
		}
		defer l.Close()
		src = l
	} else {
		st, err := o.root.OpenStore()
		if err != nil {
			return err
		}
		defer st.Close()
		if subject, err = o.subject.resolve(st); err != nil {
			return err
		}
		src = st
	}
	opts := audit.Options{Keys: o.keys}
	v, err := o.trust.verifier()
	if err != nil {
		return err
	}
	opts.LogVerifier = v
	if o.proof != "" {
		if opts.LogProof, err = input.ReadFile(o.proof, deploylog.MaxProofSize); err != nil {
			return err
		}
	}
	rep, err := audit.AuditWith(src, subject, opts)
	if err != nil {
		return err
	}
	return o.root.printAudit(s.out, rep)
}

// printAudit prints the report (one line per check, or the report object under --output json) and
// returns its refusal.
func (o *RootOptions) printAudit(w io.Writer, rep *audit.Report) error {
	return o.printResult(w, auditResult{rep}, rep.Err())
}

// auditResult: the audit report, which carries its own ok and code.
type auditResult struct{ *audit.Report }

func (r auditResult) MarshalJSON() ([]byte, error) { return json.Marshal(r.Report) }

func (r auditResult) writeText(w io.Writer) error {
	rep := r.Report
	for _, c := range rep.Checks {
		if c.OK {
			fmt.Fprintf(w, "ok    %s: %s\n", c.Name, c.Detail)
		} else {
			fmt.Fprintf(w, "FAIL  %s: %s: %s\n", c.Name, c.Code, c.Detail)
		}
	}
	if a := rep.Attestations; a != nil {
		for _, f := range a.Attestations {
			state := "not verified"
			if f.Verified {
				state = "verified by key " + string(f.Key)
			} else if f.Code != "" {
				state = "not verified: " + string(f.Code)
			}
			fmt.Fprintf(w, "attestation bundle %s: %s\n", f.Bundle, state)
		}
	}
	if l := rep.Log; l != nil {
		fmt.Fprintf(w, "log: leaf %d of %s, in its trusted checkpoint of size %d (from the %s)\n", l.Index, l.Origin, l.CheckpointSize, l.Source)
	}
	for _, n := range rep.NotChecked {
		fmt.Fprintf(w, "not checked: %s\n", n)
	}
	verdict := "passed"
	if !rep.OK {
		verdict = "FAILED"
	}
	_, err := fmt.Fprintf(w, "audit of %s %s %s: %d checks, externalResultsReplayed %v, crossResourceAtomicity %v\n",
		rep.Kind, rep.Subject, verdict, len(rep.Checks), rep.ExternalResultsReplayed, rep.CrossResourceAtomicity)
	return err
}
