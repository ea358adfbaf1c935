package ceremony

import (
	"context"
	"time"

	"github.com/opencontainers/go-digest"

	"github.com/qinglong/ql3/evidence"
	"github.com/qinglong/ql3/internal/kubeconfig"
	"github.com/qinglong/ql3/internal/kubectl"
	"github.com/qinglong/ql3/internal/stablefile"
	"github.com/qinglong/ql3/refuse"
	"github.com/qinglong/ql3/verdict/kubeout"
)

// IdentityOptions name what `ql3 cluster identity` reads.
type IdentityOptions struct {
	Kubeconfig    string        // absolute path of the private kubeconfig
	Context       string        // explicit context
	Kubectl       string        // absolute path of kubectl
	KubectlDigest digest.Digest // pinned digest; empty to report the digest for review
	StepTimeout   time.Duration // DefaultStepTimeout when zero
}

// Identity is what an operator reviews before pinning a cluster in a command file.
type Identity struct {
	Kubeconfig    *evidence.KubeconfigSummary `json:"kubeconfig"`
	KubectlDigest digest.Digest               `json:"kubectlDigest"`
	KubeSystemUID string                      `json:"kubeSystemUid"`
}

// ClusterIdentity applies the kubeconfig policy and the executable checks of a ceremony, then runs
// the ceremony's identity read through the held kubectl descriptor in a private run directory.
// It writes nothing to any store.
func ClusterIdentity(ctx context.Context, o IdentityOptions) (*Identity, error) {
	if o.StepTimeout == 0 {
		o.StepTimeout = DefaultStepTimeout
	}
	kc, err := stablefile.Read(o.Kubeconfig, evidence.RoleKubeconfig, MaxKubeconfig)
	if err != nil {
		return nil, err
	}
	sum, err := kubeconfig.Check(kc.Bytes, o.Context)
	if err != nil {
		return nil, err
	}
	var exe *stablefile.Executable
	if o.KubectlDigest != "" {
		exe, err = stablefile.OpenExecutable(o.Kubectl, o.KubectlDigest)
	} else {
		exe, err = stablefile.InspectExecutable(o.Kubectl)
	}
	if err != nil {
		return nil, err
	}
	defer exe.Close()
	r := &kubectl.Runner{Exe: exe, Kubeconfig: kc.Bytes, Context: o.Context, Timeout: o.StepTimeout, MaxOutput: MaxKubectlOutput}
	res, err := r.Run(ctx, evidence.StepIdentity, nil)
	if err != nil {
		return nil, err // coded by the runner, as every error of Run
	}
	if res.ExitCode != 0 {
		if c := kubeout.Classify(res.Stderr); c.Code != "" {
			return nil, refuse.New(c.Code, "%s: %s (kubectl exited %d; stderr not stored: cluster identity writes no store)",
				evidence.StepIdentity, c.Detail, res.ExitCode).WithHint("%s", c.Hint)
		}
		return nil, refuse.New(kubeout.CodeIdentityOutput, "%s: kubectl exited %d (%d bytes of stderr, not stored: cluster identity writes no store)",
			evidence.StepIdentity, res.ExitCode, len(res.Stderr))
	}
	uid, err := kubeout.NamespaceUID(res.Stdout)
	if err != nil {
		return nil, err
	}
	if err := exe.ReverifyFull(); err != nil {
		return nil, err
	}
	if err := kc.Reverify(); err != nil {
		return nil, err
	}
	return &Identity{Kubeconfig: sum, KubectlDigest: exe.Digest(), KubeSystemUID: uid}, nil
}
