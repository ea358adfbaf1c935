package main

import (
	"context"
	"fmt"
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
		Use:     "kubeconfig",
		Short:   "Check a kubeconfig against ql3's policy",
		Example: "  ql3 kubeconfig check /abs/private/kubeconfig --context prod",
		Args:    cobra.NoArgs,
	}
	c.AddCommand(newKubeconfigCheckCmd(root))
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
	o.path = a[0]
	return nil
}

func (o *kubeconfigCheckOptions) validate() error {
	if err := requireFlags([2]string{"--context", o.context}); err != nil {
		return err
	}
	return checkAbsolute("FILE", o.path)
}

// violation is one finding of the policy.
type violation struct {
	Code    refuse.Code `json:"code"`
	Message string      `json:"message"`
}

func (o *kubeconfigCheckOptions) run(_ context.Context, s streams) error {
	f, err := stablefile.Read(o.path, evidence.RoleKubeconfig, ceremony.MaxKubeconfig)
	if err != nil {
		return err
	}
	sum, errs := kubeconfig.CheckAll(f.Bytes, o.context)
	vs := make([]violation, 0, len(errs))
	var b strings.Builder
	for _, e := range errs {
		vs = append(vs, violation{e.Code, e.Message()})
		fmt.Fprintf(&b, "violation: %s: %s\n", e.Code, e.Message())
	}
	res := struct {
		OK         bool                        `json:"ok"`
		Code       refuse.Code                 `json:"code,omitempty"`
		Message    string                      `json:"message,omitempty"`
		Hint       string                      `json:"hint,omitempty"`
		Kubeconfig *evidence.KubeconfigSummary `json:"kubeconfig,omitempty"`
		Violations []violation                 `json:"violations"`
	}{OK: len(errs) == 0, Kubeconfig: sum, Violations: vs}
	if len(errs) == 0 {
		fmt.Fprintf(&b, "ok: context %s (server %s, user %s, auth %s) passes the policy", sum.Context, sum.Server, refuse.Ident(sum.User), sum.AuthKind)
		return o.root.printResult(s.out, res, b.String())
	}
	fail := refuse.New(CodeKubeconfigViolations, "kubeconfig %s has %d policy violations", o.path, len(errs)).
		WithHint("see docs/kubeconfig.md#recipe-a-serviceaccount-kubeconfig-eks-gke-aks")
	res.Code, res.Message, res.Hint = fail.Code, fail.Message(), fail.Hint
	if err := o.root.printResult(s.out, res, strings.TrimSuffix(b.String(), "\n")); err != nil {
		return err
	}
	if o.root.Output == "json" {
		return printedError{fail}
	}
	return fail
}
