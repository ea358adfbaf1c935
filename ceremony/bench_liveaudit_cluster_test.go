package ceremony_test

import (
	"context"
	"crypto/sha256"
	"testing"
	"time"

	"github.com/qinglong/ql3/ceremony"
	"github.com/qinglong/ql3/internal/gcfloor"
	kubectlrun "github.com/qinglong/ql3/internal/kubectl"
	"github.com/qinglong/ql3/internal/stablefile"
	"github.com/qinglong/ql3/internal/testbed/testcluster"
)

// BenchmarkLiveAudit compares, on the real cluster and in one run, a live audit of the synthetic
// 3.4.1 release with its kubectl calls (identity, convergence read, namespace read, identity), as
// a live audit's report stored them, run back to back through internal/kubectl's Runner with the
// ceremony's exact argv and environment. Each iteration runs one of each, so that load from
// elsewhere on the machine weighs on both alike. The goal is ql3-x-floor <= 1.10: the live audit
// over its kubectl calls plus one full SHA-256 of kubectl, which
// docs/rationale.md#4-private-inputs requires before kubectl runs.
func BenchmarkLiveAudit(b *testing.B) {
	testcluster.Need(b)
	defer gcfloor.Set(gcfloor.Default)() // as cmd/ql3 runs a live audit
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
	live := func(b *testing.B) *ceremony.LiveAuditResult {
		res, err := ceremony.LiveAudit(ctx, ceremony.Options{CommandFile: af})
		if err != nil || !res.OK {
			b.Fatalf("live audit: %v", err)
		}
		return res
	}
	// The reference's calls are those the warm-up live audit stored.
	calls := storedCalls(b, bd, bd.liveReport(live(b).Report).Execs)
	ref := func(b *testing.B) { runCalls(b, runner, calls, manifest) }
	ref(b)
	kubectlBytes := readKubectl(b)
	var tCalls, tLive, tHash time.Duration
	b.ResetTimer()
	for range b.N {
		t0 := time.Now()
		ref(b)
		t1 := time.Now()
		live(b)
		t2 := time.Now()
		sha256.Sum256(kubectlBytes)
		tCalls, tLive, tHash = tCalls+t1.Sub(t0), tLive+t2.Sub(t1), tHash+time.Since(t2)
	}
	n := float64(b.N)
	b.ReportMetric(float64(len(calls)), "calls")
	b.ReportMetric(float64(tCalls.Milliseconds())/n, "calls-ms")
	b.ReportMetric(float64(tHash.Milliseconds())/n, "kubectl-sha256-ms")
	b.ReportMetric(float64(tLive.Milliseconds())/n, "ql3-ms")
	b.ReportMetric(tLive.Seconds()/tCalls.Seconds(), "ql3-x-calls")
	// The floor: docs/rationale.md#4-private-inputs hashes kubectl in full before it runs (no cache keyed by file metadata).
	b.ReportMetric(tLive.Seconds()/(tCalls+tHash).Seconds(), "ql3-x-floor")
}
