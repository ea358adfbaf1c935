package audit_test

import (
	"crypto/sha256"
	"syscall"
	"testing"
	"time"

	"github.com/qinglong/ql3/audit"
	"github.com/qinglong/ql3/audit/internal/audittest"
	"github.com/qinglong/ql3/evidence"
	"github.com/qinglong/ql3/internal/gcfloor"
)

// benchAudit audits subject in the store at root b.N times and reports, besides ns/op and MB/s
// of closure bytes, what plain crypto/sha256 over the same closure (object by object, as the
// store hashes them) costs in the same run: sha256-MB/s, hash-ns/op, beyond-hash-ns/op (the
// audit's time minus one hashing pass) and x-hash (the audit's time over the hashing time), and beyond-hash-cpu-ms/op (the same difference in the
// process's CPU time). floor is the collector's heap floor (internal/gcfloor) the audit runs
// under: gcfloor.Default as cmd/ql3 runs it, 0 for the runtime's default policy.
func benchAudit(b *testing.B, root string, subject evidence.Descriptor, floor uint64) {
	defer gcfloor.Set(floor)()
	st := audittest.Open(b, root)
	var objects [][]byte
	var total int64
	for _, d := range audittest.Closure(b, st, subject) {
		o, err := st.GetDescriptor(d)
		if err != nil {
			b.Fatal(err)
		}
		objects = append(objects, o)
		total += int64(len(o))
	}
	b.SetBytes(total)
	b.ReportAllocs()
	c0 := processCPU(b)
	for b.Loop() {
		rep, err := audit.Audit(st, subject.Digest)
		if err != nil || !rep.OK {
			b.Fatalf("audit: %v %v", err, rep.Err())
		}
	}
	auditCPU := float64((processCPU(b) - c0).Nanoseconds()) / float64(b.N)
	auditNs := float64(b.Elapsed().Nanoseconds()) / float64(b.N)

	start, c1 := time.Now(), processCPU(b)
	var sink byte
	for range b.N {
		for _, o := range objects {
			s := sha256.Sum256(o)
			sink ^= s[0]
		}
	}
	hashNs := float64(time.Since(start).Nanoseconds()) / float64(b.N)
	hashCPU := float64((processCPU(b) - c1).Nanoseconds()) / float64(b.N)
	_ = sink
	// The CPU figures count the whole process (the audit's own goroutines and the collector):
	// on a machine shared with other work they measure the work done, where wall time also
	// measures waiting for a core.
	b.ReportMetric((auditCPU-hashCPU)/1e6, "beyond-hash-cpu-ms/op")
	b.ReportMetric(hashNs, "hash-ns/op")
	b.ReportMetric(float64(total)/hashNs*1e3, "sha256-MB/s")
	b.ReportMetric(auditNs-hashNs, "beyond-hash-ns/op")
	b.ReportMetric(auditNs/hashNs, "x-hash")
	b.ReportMetric(float64(len(objects)), "objects")
}

// processCPU is this process's user and system CPU time.
func processCPU(b *testing.B) time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		b.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// BenchmarkAuditSynthetic: the straight receipt of the synthetic 3.4.1 release (6 resources).
func BenchmarkAuditSynthetic(b *testing.B) {
	fx := committed(b)
	benchAudit(b, fx.Snap.Materialize(b), fx.Roots.Receipt, gcfloor.Default)
}

// BenchmarkAudit1000: the receipt of a 1,000-resource release, under the collector's floor that
// cmd/ql3 sets. In one process the audits share the floor, so the collector runs about once per
// audit and a half here, where a ql3 audit process of this receipt runs it not at all: the figure
// errs high.
func BenchmarkAudit1000(b *testing.B) {
	root, rc := receipt1000(b)
	benchAudit(b, root, rc, gcfloor.Default)
}

// BenchmarkAudit1000DefaultGC: the same audit under the runtime's default policy (GOGC=100 and a
// 4 MiB first goal), reported beside it.
func BenchmarkAudit1000DefaultGC(b *testing.B) {
	root, rc := receipt1000(b)
	benchAudit(b, root, rc, 0)
}
