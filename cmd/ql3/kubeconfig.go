package main

import (
	"context"
	"fmt"
	"io"
	"strings"

	"github.com/spf13/cobra"

	"github.com/qinglong/ql3/ceremony"
	"github.com/qinglong/ql3/evidence"
	"github.com/qinglong/ql3/internal/kubeconfig"
	"github.com/qinglong/ql3/internal/stablefile"
	"github.com/qinglong/ql3/refuse"
)

// CodeKubeconfigViolations: ql3 kubeconfig check found one or more policy violations.
const CodeKubeconfigViolations refuse.Code = "KUBECONFIG_VIOLATIONS"

func newKubeconfigCmd(root *RootOptions) *cobra.Command {
	c := &cobra.Command{
		Use:   "kubeconfig",
		Short: "Check a kubeconfig against ql3's policy, or extract one context into a pinned one",
		Example: "  ql3 kubeconfig check /abs/private/kubeconfig --context prod\n" +
			"  ql3 kubeconfig extract --kubeconfig ~/.kube/config --context prod --out /abs/private/kubeconfig",
		Args: cobra.NoArgs,
	}
	c.AddCommand(newKubeconfigCheckCmd(root), newKubeconfigExtractCmd(root))
	return c
}

// kubeconfigCheckOptions: `ql3 kubeconfig check FILE --context NAME`.
type kubeconfigCheckOptions struct {
	root          *RootOptions
	path, context string
}

func newKubeconfigCheckCmd(root *RootOptions) *cobra.Command {
	o := &kubeconfigCheckOptions{root: root}
	c := &cobra.Command{
		Use:   "check FILE --context NAME",
		Short: "List every violation of the kubeconfig policy, not only the first",
		Long: "Reads the kubeconfig as a private stable input and applies the policy of a ceremony with the\n" +
			"parser kubectl uses (exec and auth-provider users, file references, insecure-skip-tls-verify,\n" +
			"proxy-url, a missing or ambiguous context, repeated keys). It lists every violation with its\n" +
			"code, and exits 1 if there is any. Nothing of the file's content is printed. For a cluster\n" +
			"whose kubeconfig uses an exec plugin (EKS, GKE, AKS) see docs/kubeconfig.md for a\n" +
			"ServiceAccount kubeconfig that passes.",
		Example: "  ql3 kubeconfig check /abs/private/kubeconfig --context prod\n  ql3 kubeconfig check -o json /abs/private/kubeconfig --context prod",
		Args:    cobra.ExactArgs(1),
		RunE:    runE(o),
	}
	c.Flags().StringVar(&o.context, "context", "", "kubeconfig context to check (explicit, required)")
	return c
}

func (o *kubeconfigCheckOptions) complete(_ *cobra.Command, a []string) error {
	var err error
	o.path, err = absPath("FILE", a[0])
	return err
}

func (o *kubeconfigCheckOptions) validate() error {
	return requireFlags([2]string{"--context", o.context})
}

// violation is one finding of the policy.
type violation struct {
	Code    refuse.Code `json:"code"`
	Message string      `json:"message"`
	Hint    string      `json:"hint,omitempty"`
}

func (o *kubeconfigCheckOptions) run(_ context.Context, s streams) error {
	f, err := stablefile.Read(o.path, evidence.RoleKubeconfig, ceremony.MaxKubeconfig)
	if err != nil {
		return err
	}
	sum, errs := kubeconfig.CheckAll(f.Bytes, o.context)
	vs := make([]violation, 0, len(errs))
	unused := 0 // violations in entries the context does not use
	for _, e := range errs {
		vs = append(vs, violation{e.Code, e.Message(), e.Hint})
		if e.Hint == kubeconfig.ExtractHint(o.context) {
			unused++
		}
	}
	res := kubeconfigCheckResult{OK: len(errs) == 0, Kubeconfig: sum, Violations: vs}
	if len(errs) == 0 {
		return o.root.printResult(s.out, res, nil)
	}
	fail := refuse.New(CodeKubeconfigViolations, "kubeconfig %s has %d policy violations", o.path, len(errs)).
		WithHint("see %s", kubeconfig.RecipeRef)
	switch extract := "ql3 kubeconfig extract --kubeconfig " + shellQuote(o.path) + " --context " + shellQuote(o.context) + " --out NEW_FILE"; {
	case unused == len(errs):
		fail.Hint = fmt.Sprintf("context %s uses none of these: %s writes a kubeconfig of only what it uses", refuse.Ident(o.context), extract)
	case unused > 0:
		fail.Hint = fmt.Sprintf("%d of these are in entries context %s does not use (%s leaves them behind); for the rest see %s",
			unused, refuse.Ident(o.context), extract, kubeconfig.RecipeRef)
	}
	fo := failureOf(fail)
	res.Code, res.Message, res.Hint = fo.Code, fo.Message, fo.Hint
	return o.root.printResult(s.out, res, fail)
}

// kubeconfigCheckResult: every violation of the policy, or the summary of a kubeconfig that
// passes.
type kubeconfigCheckResult struct {
	OK         bool                        `json:"ok"`
	Code       refuse.Code                 `json:"code,omitempty"`
	Message    string                      `json:"message,omitempty"`
	Hint       string                      `json:"hint,omitempty"`
	Kubeconfig *evidence.KubeconfigSummary `json:"kubeconfig,omitempty"`
	Violations []violation                 `json:"violations"`
}

func (r kubeconfigCheckResult) writeText(w io.Writer) error {
	var b strings.Builder
	for _, v := range r.Violations {
		fmt.Fprintf(&b, "violation: %s: %s\n", v.Code, v.Message)
	}
	if r.OK {
		k := r.Kubeconfig
		fmt.Fprintf(&b, "ok: context %s (server %s, user %s, auth %s) passes the policy\n", k.Context, k.Server, refuse.Ident(k.User), k.AuthKind)
	}
	_, err := io.WriteString(w, b.String())
	return err
}
