package ceremony_test

import (
	"context"
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
// goal is ql3-x-three-calls <= 1.10.
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
	var tThree, tLive time.Duration
	b.ResetTimer()
	for range b.N {
		t0 := time.Now()
		three(b)
		t1 := time.Now()
		live(b)
		tThree, tLive = tThree+t1.Sub(t0), tLive+time.Since(t1)
	}
	n := float64(b.N)
	b.ReportMetric(float64(tThree.Milliseconds())/n, "three-calls-ms")
	b.ReportMetric(float64(tLive.Milliseconds())/n, "ql3-ms")
	b.ReportMetric(tLive.Seconds()/tThree.Seconds(), "ql3-x-three-calls")
}
