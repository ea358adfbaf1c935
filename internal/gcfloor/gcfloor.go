// Package gcfloor gives a short-lived ql3 process a minimum heap goal: the garbage collector does
// not collect until the heap reaches the floor, and once the live heap is half the floor or more
// it collects as GOGC=100 would. The runtime's default policy is made for long-running servers: it
// starts collecting at a 4 MiB heap and doubles from the live heap, so a command that allocates
// tens of megabytes of short-lived parse trees (an audit of a 1,000-resource receipt allocates
// about 49 MB and keeps little of it) spends a third of its CPU time collecting garbage it would
// free at exit anyway. The Go compiler does the same for itself (cmd/compile's
// AdjustStartingHeap). docs/cli.md ("Memory") says what it costs.
package gcfloor

import (
	"os"
	"runtime"
	"runtime/debug"
	"runtime/metrics"
	"sync"
)

// Default is the floor cmd/ql3 sets: the audit of a 1,000-resource receipt fits under it
// without a collection, and a process that never allocates it never touches it (the floor is a
// goal, not a reservation: memory is only what the command allocates).
const Default = 64 << 20

// runtimeMinimum is the heap goal of the runtime's first cycle at GOGC=100 (runtime's
// heapMinimum): a percentage of floor/runtimeMinimum*100 puts the first collection at the floor.
const runtimeMinimum = 4 << 20

var mu sync.Mutex

// state is the running policy: nil when none is set. Each GC cycle's hook reads it.
var state *policy

type policy struct {
	floor   uint64
	percent int // the GOGC percent in force when Set was called, restored by its undo
	sample  []metrics.Sample
}

// Set makes floor bytes the minimum heap goal of this process and returns the function that
// restores the percentage in force before (100 unless a caller changed it). With GOGC set in the
// environment it does nothing: the operator's choice stands. A GOMEMLIMIT, set or not, still
// bounds the heap: the runtime collects near it whatever the percentage. Set is for a process's
// main (and for a benchmark that measures a command as its process runs it); a second Set
// replaces the first.
func Set(floor uint64) (undo func()) {
	if _, ok := os.LookupEnv("GOGC"); ok || floor == 0 {
		return func() {}
	}
	mu.Lock()
	defer mu.Unlock()
	p := &policy{floor: floor, sample: []metrics.Sample{{Name: "/gc/heap/live:bytes"}}}
	// From the live heap the last cycle left (0 before the first): a Set after the heap has
	// grown does not multiply it.
	p.percent = debug.SetGCPercent(percentFor(floor, p.live()))
	if state != nil {
		p.percent = state.percent
	}
	state = p
	eachGC(p)
	return func() {
		mu.Lock()
		defer mu.Unlock()
		if state == p {
			state = nil
			debug.SetGCPercent(p.percent)
		}
	}
}

// live is the heap the last cycle marked live (0 before the first cycle).
func (p *policy) live() uint64 {
	metrics.Read(p.sample)
	if p.sample[0].Value.Kind() != metrics.KindUint64 {
		return 0
	}
	return p.sample[0].Value.Uint64()
}

// percentFor is the GOGC percentage whose next heap goal is about max(floor, 2*live). The
// runtime's goal is the larger of live*(1+percent/100) and its minimum, 4 MiB*percent/100, which
// alone decides while the live heap is under 4 MiB (and before the first cycle, live 0).
func percentFor(floor, live uint64) int {
	switch {
	case live*2 >= floor:
		return 100
	case live < runtimeMinimum:
		return int(max(100, floor*100/runtimeMinimum))
	}
	return int(floor*100/live) - 100
}

// eachGC re-arms itself on a fresh object every cycle: the finalizer of an object made
// unreachable in one cycle runs after that cycle ends, when the live heap it left is known. It
// stops with the policy that armed it.
func eachGC(p *policy) {
	type sentinel [32]byte // beyond the tiny allocator, whose blocks are finalized late
	var hook func(*sentinel)
	hook = func(s *sentinel) {
		mu.Lock()
		defer mu.Unlock()
		if state != p {
			return
		}
		debug.SetGCPercent(percentFor(p.floor, p.live()))
		runtime.SetFinalizer(new(sentinel), hook)
	}
	runtime.SetFinalizer(new(sentinel), hook)
}
