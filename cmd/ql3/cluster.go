package main

import (
	"context"
	"fmt"
	"io"
	"time"

	"github.com/opencontainers/go-digest"
	"github.com/spf13/cobra"

	"github.com/qinglong/ql3/ceremony"
	"github.com/qinglong/ql3/refuse"
)

func newClusterCmd(root *RootOptions) *cobra.Command {
	c := &cobra.Command{
		Use:     "cluster",
		Short:   "Review a cluster before pinning it in a command file",
		Example: "  ql3 cluster identity --kubeconfig /abs/private/kubeconfig --context prod --kubectl /usr/local/bin/kubectl",
		Args:    cobra.NoArgs,
	}
	c.AddCommand(newClusterIdentityCmd(root))
	return c
}

// clusterIdentityOptions: `ql3 cluster identity`.
type clusterIdentityOptions struct {
	root                         *RootOptions
	kubeconfig, context, kubectl string
	kubectlDigest                string
	stepTimeout                  time.Duration
	pinned                       digest.Digest
}

func newClusterIdentityCmd(root *RootOptions) *cobra.Command {
	o := &clusterIdentityOptions{root: root}
	c := &cobra.Command{
		Use:   "identity --kubeconfig F --context NAME --kubectl F [--kubectl-digest D]",
		Short: "Print the server, CA digest, context, user, auth kind and kube-system UID for review",
		Long: "Applies the kubeconfig policy and the kubectl executable checks of a ceremony, runs the\n" +
			"ceremony's identity read (get namespace kube-system) through the held kubectl descriptor in a\n" +
			"private run directory, and prints what a human reviews before pinning the cluster: the server\n" +
			"URL, the CA digest, the context, the user, the auth kind and the kube-system UID, which is the\n" +
			"expectedClusterUid of a command file. It writes nothing to any store.",
		Example: "  ql3 cluster identity --kubeconfig /abs/private/kubeconfig --context prod --kubectl /usr/local/bin/kubectl\n" +
			"  ql3 cluster identity -o json --kubeconfig /abs/private/kubeconfig --context prod \\\n" +
			"    --kubectl /usr/local/bin/kubectl --kubectl-digest sha256:6a5e...",
		Args: cobra.NoArgs,
		RunE: runE(o),
	}
	pathVar(c.Flags(), &o.kubeconfig, "kubeconfig", "the kubeconfig (inline credentials, 0600)")
	c.Flags().StringVar(&o.context, "context", "", "kubeconfig context (explicit, required)")
	pathVar(c.Flags(), &o.kubectl, "kubectl", "the kubectl executable")
	c.Flags().StringVar(&o.kubectlDigest, "kubectl-digest", "", "pinned kubectl digest; without it the digest is printed for review")
	c.Flags().DurationVar(&o.stepTimeout, "step-timeout", ceremony.DefaultStepTimeout, "timeout of the kubectl run")
	return c
}

func (o *clusterIdentityOptions) complete(*cobra.Command, []string) error {
	if o.kubectlDigest == "" {
		return nil
	}
	var err error
	o.pinned, err = digestArg("--kubectl-digest", o.kubectlDigest)
	return err
}

func (o *clusterIdentityOptions) validate() error {
	return requireFlags([2]string{"--kubeconfig", o.kubeconfig}, [2]string{"--context", o.context},
		[2]string{"--kubectl", o.kubectl})
}

func (o *clusterIdentityOptions) run(ctx context.Context, s streams) error {
	id, err := ceremony.ClusterIdentity(ctx, ceremony.IdentityOptions{Kubeconfig: o.kubeconfig, Context: o.context,
		Kubectl: o.kubectl, KubectlDigest: o.pinned, StepTimeout: o.stepTimeout})
	if err != nil {
		return err
	}
	return o.root.printResult(s.out, identityResult{true, id, o.kubectl}, nil)
}

// identityResult: what a human reviews before pinning a cluster.
type identityResult struct {
	OK bool `json:"ok"`
	*ceremony.Identity
	kubectl string
}

func (r identityResult) writeText(w io.Writer) error {
	k := r.Kubeconfig
	_, err := fmt.Fprintf(w, "server         %s\nca digest      %s\ncontext        %s\nuser           %s\nauth kind      %s\n"+
		"kubectl        %s %s\nkube-system    %s\n"+
		"review the server and CA with the cluster's owner; then pin the uid as expectedClusterUid (ql3 command new --cluster-uid)\n",
		k.Server, k.CADigest, k.Context, refuse.Ident(k.User), k.AuthKind, r.kubectl, r.KubectlDigest, r.KubeSystemUID)
	return err
}
