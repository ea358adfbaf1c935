package ceremony_test

import (
	"context"
	"crypto/sha256"
	"testing"
	"time"

	"github.com/qinglong/ql3/ceremony"
	"github.com/qinglong/ql3/evidence"
	kubectlrun "github.com/qinglong/ql3/internal/kubectl"
	"github.com/qinglong/ql3/internal/stablefile"
	"github.com/qinglong/ql3/internal/testbed/testcluster"
)

// BenchmarkLiveAudit compares, on the real cluster and in one run, a live audit of the synthetic
// 3.4.1 release with its three kubectl calls (identity, convergence read, identity) run back to
// back through internal/kubectl's Runner with the ceremony's exact argv and environment. Each
// iteration runs one of each, so that load from elsewhere on the machine weighs on both alike. The
// goal is ql3-x-floor <= 1.10: the live audit over its three kubectl calls plus one full SHA-256 of
// kubectl, which docs/rationale.md#4-private-inputs requires before kubectl runs.
func BenchmarkLiveAudit(b *testing.B) {
	testcluster.Need(b)
	bd := newBed(b, true, nil)
	_, _, af := bd.mustApply()
	ctx := context.Background()
	manifest := bd.blobFile("manifest")
	exe, err := stablefile.OpenExecutable(cluster.KubectlPath, cluster.KubectlDigest)
	if err != nil {
		b.Fatal(err)
	}
	defer exe.Close()
	runner := &kubectlrun.Runner{Exe: exe, Kubeconfig: cluster.KubeconfigBytes(), Context: cluster.Context,
		Timeout: ceremony.DefaultStepTimeout, MaxOutput: ceremony.MaxKubectlOutput}
	three := func(b *testing.B) {
		for _, s := range []struct {
			step  string
			stdin []byte
		}{{evidence.StepIdentity, nil}, {evidence.StepConvergence, manifest}, {evidence.StepIdentityFinal, nil}} {
			res, err := runner.Run(ctx, s.step, s.stdin)
			if err != nil || res.ExitCode != 0 {
				b.Fatalf("%s: %v", s.step, err)
			}
		}
	}
	live := func(b *testing.B) {
		res, err := ceremony.LiveAudit(ctx, ceremony.Options{CommandFile: af})
		if err != nil || !res.OK {
			b.Fatalf("live audit: %v", err)
		}
	}
	three(b)
	live(b)
	kubectlBytes := readKubectl(b)
	var tThree, tLive, tHash time.Duration
	b.ResetTimer()
	for range b.N {
		t0 := time.Now()
		three(b)
		t1 := time.Now()
		live(b)
		t2 := time.Now()
		sha256.Sum256(kubectlBytes)
		tThree, tLive, tHash = tThree+t1.Sub(t0), tLive+t2.Sub(t1), tHash+time.Since(t2)
	}
	n := float64(b.N)
	b.ReportMetric(float64(tThree.Milliseconds())/n, "three-calls-ms")
	b.ReportMetric(float64(tHash.Milliseconds())/n, "kubectl-sha256-ms")
	b.ReportMetric(float64(tLive.Milliseconds())/n, "ql3-ms")
	b.ReportMetric(tLive.Seconds()/tThree.Seconds(), "ql3-x-three-calls")
	// The floor: docs/rationale.md#4-private-inputs hashes kubectl in full before it runs (no cache keyed by file metadata).
	b.ReportMetric(tLive.Seconds()/(tThree+tHash).Seconds(), "ql3-x-floor")
}
