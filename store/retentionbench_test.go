package store

import (
	"testing"

	"github.com/opencontainers/go-digest"

	"github.com/qinglong/ql3/evidence"
)

// BenchmarkGC10000 drops 10,000 published roots (each a record and its own blob, all sharing one
// kept blob) of a logged store: tombstones, entries and closures. The store is built outside the
// timer; each iteration gc's a fresh one.
//
// It lives in a file named to sort after logbench_test.go, so that it runs after the log's
// benchmarks (go test runs a package's benchmarks in the order of its files): each iteration
// deletes about 30,000 files, and on a journal-less ext4 (this project's VMs) every file created
// in the next one to six minutes pays for the freed inodes ext4 skips (docs/testbed.md, "What a
// file costs here"). BenchmarkPublishLog, which creates files, measured right after it twice the
// CPU per log append (1.09 against 0.41-0.52 ms).
func BenchmarkGC10000(b *testing.B) {
	for range b.N {
		b.StopTimer()
		s := newLogStore(b)
		keys := make([]digest.Digest, 0, 10000)
		for i := range 10000 {
			_, k := publishGCIntent(b, s, i)
			keys = append(keys, k)
		}
		publishGCIntent(b, s, 10000) // kept
		drop := map[digest.Digest]bool{}
		for _, k := range keys {
			drop[k] = true
		}
		policy := func(v GCView) ([]GCRoot, error) {
			var out []GCRoot
			for _, e := range v.Entries[evidence.IndexIntents] {
				if drop[e.Key] {
					out = append(out, GCRoot{Kind: "intent", Key: e.Key, Record: e.Descriptor.Digest})
				}
			}
			return out, nil
		}
		b.StartTimer()
		rep, err := s.GC(policy, GCOptions{})
		b.StopTimer()
		if err != nil || len(rep.Dropped) != 10000 {
			b.Fatalf("gc: %v", err)
		}
		s.Close()
	}
}
