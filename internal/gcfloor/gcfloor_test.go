package gcfloor

import (
	"os"
	"runtime"
	"runtime/metrics"
	"testing"
	"time"
)

const mib = 1 << 20

func TestPercentFor(t *testing.T) {
	for _, c := range []struct {
		floor, live uint64
		want        int
	}{
		{64 * mib, 0, 1600},        // before the first cycle: the runtime's minimum is the goal
		{64 * mib, 3 * mib, 1600},  // under the minimum still
		{64 * mib, 4 * mib, 1500},  // 4 MiB * 16
		{64 * mib, 16 * mib, 300},  // 16 MiB * 4
		{64 * mib, 31 * mib, 106},  // just under half the floor
		{64 * mib, 32 * mib, 100},  // half the floor: GOGC=100's goal is the floor
		{64 * mib, 500 * mib, 100}, // beyond it: the default policy
		{2 * mib, 0, 100},          // a floor under the runtime's minimum changes nothing
		{8 * mib, 0, 200},
	} {
		if got := percentFor(c.floor, c.live); got != c.want {
			t.Errorf("percentFor(%d MiB, %d MiB) = %d, want %d", c.floor/mib, c.live/mib, got, c.want)
		}
		// The goal it gives: max(live*(1+p/100), 4 MiB*p/100) is the floor (to the rounding of
		// the division), or twice the live heap once that is larger.
		p := uint64(percentFor(c.floor, c.live))
		goal := max(c.live*(100+p)/100, runtimeMinimum*p/100)
		if want := max(c.floor, 2*c.live, runtimeMinimum); goal > want || goal+want/50 < want {
			t.Errorf("floor %d MiB, live %d MiB: goal %d, want about %d", c.floor/mib, c.live/mib, goal, want)
		}
	}
}

// gcState reads the percentage in force and the heap goal.
func gcState() (percent, goal uint64) {
	s := []metrics.Sample{{Name: "/gc/gogc:percent"}, {Name: "/gc/heap/goal:bytes"}}
	metrics.Read(s)
	return s[0].Value.Uint64(), s[1].Value.Uint64()
}

// settle runs a collection and waits until the hook has run after it (the percentage it sets
// is percentFor of the live heap the cycle left).
func settle(t *testing.T, want func(percent, goal uint64) bool) (uint64, uint64) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		runtime.GC()
		p, g := gcState()
		if want(p, g) {
			return p, g
		}
		if time.Now().After(deadline) {
			t.Fatalf("the collector's hook did not settle: percent %d, goal %d MiB", p, g/mib)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// unsetGOGC runs the test without GOGC in the environment, as ql3 runs by default.
func unsetGOGC(t *testing.T) {
	if v, ok := os.LookupEnv("GOGC"); ok {
		t.Setenv("GOGC", v) // restored at the end
		os.Unsetenv("GOGC")
	}
}

func TestSetFloorThenDefaultThenUndo(t *testing.T) {
	unsetGOGC(t)
	before, _ := gcState()
	undo := Set(64 * mib)
	// A small live heap: the goal is the floor.
	p, g := settle(t, func(p, g uint64) bool { return p > 1000 })
	if g < 60*mib || g > 68*mib {
		t.Errorf("with a small live heap: goal %d MiB (percent %d), want about 64", g/mib, p)
	}
	// A live heap beyond half the floor: the default policy, the goal twice the live heap.
	live := make([]byte, 80*mib)
	for i := range live {
		live[i] = byte(i)
	}
	_, g = settle(t, func(p, g uint64) bool { return p == 100 })
	if g < 160*mib || g > 200*mib {
		t.Errorf("with 80 MiB live: goal %d MiB, want about 160", g/mib)
	}
	runtime.KeepAlive(live)
	// Dropped again: the floor is back.
	live = nil
	settle(t, func(p, g uint64) bool { return p > 1000 })
	undo()
	if p, _ := gcState(); p != before {
		t.Errorf("after undo: percent %d, want %d as before", p, before)
	}
	// The hook of an undone policy changes nothing any more.
	settle(t, func(p, g uint64) bool { return p == before })
}

func TestSetTwiceKeepsTheFirstPercentForUndo(t *testing.T) {
	unsetGOGC(t)
	before, _ := gcState()
	undo1 := Set(64 * mib)
	undo2 := Set(128 * mib)
	settle(t, func(p, g uint64) bool { return p == 3200 })
	undo1() // replaced: does nothing
	if p, _ := gcState(); p != 3200 {
		t.Errorf("undo of a replaced policy changed the percent to %d", p)
	}
	undo2()
	if p, _ := gcState(); p != before {
		t.Errorf("after undo: percent %d, want %d", p, before)
	}
}

func TestGOGCInTheEnvironmentWins(t *testing.T) {
	before, _ := gcState()
	t.Setenv("GOGC", "100")
	undo := Set(64 * mib)
	defer undo()
	runtime.GC()
	time.Sleep(20 * time.Millisecond)
	runtime.GC()
	if p, _ := gcState(); p != before {
		t.Errorf("GOGC set: percent %d, want %d unchanged", p, before)
	}
}

// TestSetAfterTheHeapGrew: Set reads the live heap the last cycle left, so a process that already
// holds more than half the floor keeps the default percentage from the start.
func TestSetAfterTheHeapGrew(t *testing.T) {
	unsetGOGC(t)
	before, _ := gcState()
	live := make([]byte, 80*mib)
	for i := range live {
		live[i] = byte(i)
	}
	runtime.GC()
	undo := Set(64 * mib)
	if p, _ := gcState(); p != 100 {
		t.Errorf("Set with 80 MiB live: percent %d, want 100", p)
	}
	runtime.KeepAlive(live)
	undo()
	if p, _ := gcState(); p != before {
		t.Errorf("after undo: percent %d, want %d", p, before)
	}
}
