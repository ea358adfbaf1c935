package main

import (
	"context"
	"fmt"
	"io"
	"path/filepath"
	"strings"

	"github.com/opencontainers/go-digest"
	"github.com/spf13/cobra"

	"github.com/qinglong/ql3/evidence"
	"github.com/qinglong/ql3/internal/input"
	"github.com/qinglong/ql3/internal/kubeconfig"
	"github.com/qinglong/ql3/internal/stablefile"
	"github.com/qinglong/ql3/refuse"
)

// kubeconfigExtractOptions: `ql3 kubeconfig extract --kubeconfig IN --context NAME --out FILE`.
type kubeconfigExtractOptions struct {
	root                          *RootOptions
	in, context, out, kubectlPath string
}

func newKubeconfigExtractCmd(root *RootOptions) *cobra.Command {
	o := &kubeconfigExtractOptions{root: root}
	c := &cobra.Command{
		Use:   "extract --kubeconfig IN --context NAME --out FILE [--kubectl F]",
		Short: "Write a private kubeconfig of one context, its cluster and its user, file references inlined",
		Long: "Reads the kubeconfig you use every day (any number of contexts) and writes at --out a new one\n" +
			"that holds only the chosen context, its cluster and its user, with the files they reference\n" +
			"(certificate-authority, client-certificate, client-key) inlined as -data: what `kubectl config\n" +
			"view --minify --flatten` prints, done by ql3 itself without running kubectl. The file is written\n" +
			"mode 0600 in a 0700 directory of yours, never replacing one, and must pass the policy of\n" +
			"ql3 kubeconfig check. A chosen user that needs an exec plugin, an auth provider or a token file\n" +
			"is refused with advice on getting a static credential (docs/kubeconfig.md). Nothing of either\n" +
			"file's content is printed. Prints the ql3 cluster identity and ql3 command new lines to run next.",
		Example: "  ql3 kubeconfig extract --kubeconfig ~/.kube/config --context prod --out /abs/private/kubeconfig\n" +
			"  ql3 kubeconfig extract -o json --kubeconfig ~/.kube/config --context prod --out private/kubeconfig --kubectl /usr/local/bin/kubectl",
		Args: cobra.NoArgs,
		RunE: runE(o),
	}
	f := c.Flags()
	pathVar(f, &o.in, "kubeconfig", "the kubeconfig to extract from")
	f.StringVar(&o.context, "context", "", "the context to extract (explicit, required)")
	pathVar(f, &o.out, "out", "where to write the new kubeconfig (0600, never replaced)")
	pathVar(f, &o.kubectlPath, "kubectl", "the kubectl to name in the printed next commands (default: the one on PATH)")
	return c
}

func (o *kubeconfigExtractOptions) complete(*cobra.Command, []string) error { return nil }

func (o *kubeconfigExtractOptions) validate() error {
	return requireFlags([2]string{"--kubeconfig", o.in}, [2]string{"--context", o.context}, [2]string{"--out", o.out})
}

func (o *kubeconfigExtractOptions) run(_ context.Context, s streams) error {
	// The path first: a kubeconfig that could not be written is refused before any input is read.
	if err := stablefile.CheckCreatable("kubeconfig", o.out); err != nil {
		return err
	}
	raw, err := input.ReadFile(o.in, kubeconfig.MaxSize)
	if err != nil {
		return err
	}
	x, err := kubeconfig.Extract(raw, o.context, filepath.Dir(o.in), input.ReadFile)
	if err != nil {
		return err
	}
	if err := stablefile.Create("kubeconfig", o.out, x.Raw); err != nil {
		return err
	}
	kubectl := `"$(command -v kubectl)"`
	if o.kubectlPath != "" {
		kubectl = shellQuote(o.kubectlPath)
	}
	kc, ctx := shellQuote(o.out), shellQuote(o.context)
	next := []string{
		"ql3 cluster identity --kubeconfig " + kc + " --context " + ctx + " --kubectl " + kubectl,
		"ql3 command new --store STORE --manifest LOCKED_YAML --lock-report LOCK_REPORT_JSON --kubeconfig " + kc +
			" --context " + ctx + " --kubectl " + kubectl + " --cluster-uid KUBE_SYSTEM_UID --out PREFLIGHT_JSON",
	}
	inlined := x.Inlined
	if inlined == nil {
		inlined = []string{}
	}
	return o.root.printResult(s.out, extractResult{OK: true, Path: o.out, Digest: evidence.FromBytes(x.Raw),
		Kubeconfig: x.Summary, Inlined: inlined, Next: next}, nil)
}

// extractResult: the kubeconfig written, its redacted summary and the commands to run next.
type extractResult struct {
	OK         bool                        `json:"ok"`
	Path       string                      `json:"path"`
	Digest     digest.Digest               `json:"digest"`
	Kubeconfig *evidence.KubeconfigSummary `json:"kubeconfig"`
	Inlined    []string                    `json:"inlined"`
	Next       []string                    `json:"next"`
}

func (r extractResult) writeText(w io.Writer) error {
	k := r.Kubeconfig
	inl := "nothing: the context's cluster and user carry their data inline"
	if len(r.Inlined) > 0 {
		inl = strings.Join(r.Inlined, ", ")
	}
	_, err := fmt.Fprintf(w, "wrote %s (%s)\ncontext      %s (cluster %s, server %s, user %s, auth %s)\ninlined      %s\n"+
		"next: %s\nnext: %s\n",
		r.Path, r.Digest, refuse.Ident(k.Context), refuse.Ident(k.Cluster), k.Server, refuse.Ident(k.User), k.AuthKind, inl, r.Next[0], r.Next[1])
	return err
}
