package audit_test

import (
	"slices"
	"testing"

	"github.com/qinglong/ql3/audit/internal/audittest"
)

// TestTamperEveryObject damages every object of the committed receipts' closures on disk, one
// damage at a time: every single-byte flip (objects over 4 KiB: the first and last byte and 64
// spread positions), truncation by one byte and to zero, extension, deletion, a symlink to a copy
// of the same bytes, an added hard link, mode 0644, a directory or a fifo in its place, another
// owner. Each must fail the audit with the store's code for that class. The exhaustive sweep is
// about 23,000 audits (5 minutes on 2 cores); under -race (ten times slower per audit) or -short
// only the first and last byte of each object are flipped.
func TestTamperEveryObject(t *testing.T) {
	fx := committed(t)
	if raceEnabled || testing.Short() {
		n := audittest.TamperEveryObject(t, fx.Snap, fx.Roots.Receipt, audittest.Ends)
		n += audittest.TamperEveryObject(t, fx.Snap, fx.Roots.RecoveredReceipt, nil)
		t.Logf("%d tampered audits (reduced sweep), every one refused with its class's code", n)
		return
	}
	n := audittest.TamperEveryObject(t, fx.Snap, fx.Roots.Receipt, audittest.Exhaustive)
	n += audittest.TamperEveryObject(t, fx.Snap, fx.Roots.RecoveredReceipt, audittest.Sampled)
	n += audittest.TamperEveryObject(t, fx.Snap, fx.Roots.Preflight, nil)
	t.Logf("%d tampered audits, every one refused with its class's code", n)
}

// TestRewrites: records rewritten canonically under their new digests with every reference and
// the index re-pointed, each refused with its exact code (see audittest.Cases).
func TestRewrites(t *testing.T) { audittest.RunRewrites(t, committed(t), audittest.Cases()) }

// TestOldPreflightRewrites: the committed fixture's preflight reports were written before the
// version read (no versions member, execs identity and dry-run) and pass (TestCommittedStoresPass);
// one given a versions member must hold the version read.
func TestOldPreflightRewrites(t *testing.T) {
	fx := committed(t)
	audittest.RunRewrites(t, fx, audittest.OldPreflightCases())
}

// TestIndexTampers: a damaged index, and subjects that are no published root.
func TestIndexTampers(t *testing.T) { audittest.RunIndexTampers(t, committed(t)) }

func TestPositions(t *testing.T) {
	vectors := []struct {
		n, limit int // object size, exhaustive limit
		want     int // number of positions
	}{
		{0, 4096, 0},
		{1, 0, 1},
		{66, 0, 66},
		{67, 0, 66},
		{4096, 4096, 4096},
		{4097, 4096, 66},
		{45038, 4096, 66},
	}
	for _, v := range vectors {
		ps := audittest.Positions(v.n, v.limit)
		if len(ps) != v.want || (v.n > 0 && (ps[0] != 0 || ps[len(ps)-1] != v.n-1)) || !slices.IsSorted(ps) || len(slices.Compact(slices.Clone(ps))) != len(ps) {
			t.Fatalf("Positions(%d, %d) = %d positions %v", v.n, v.limit, len(ps), ps)
		}
	}
}

// TestFieldSweep changes every leaf of every record of the straight receipt's closure, one at a
// time, re-pointing everything: a time must pass or be refused by the record-time check alone, anything else not documented as
// uncheckable must be refused by a check of its own. The leaves the audit cannot bind are listed.
func TestFieldSweep(t *testing.T) {
	if raceEnabled {
		t.Skip("about 700 audits: ten times slower under the race detector and racing nothing")
	}
	fx := committed(t)
	outcomes := append(audittest.FieldSweep(t, fx, fx.Roots.Receipt), audittest.FieldSweep(t, fx, fx.Roots.RecoveredReceipt)...)
	passed := 0
	for _, o := range outcomes {
		if o.Passed {
			passed++
			t.Logf("passes: object %d %s", o.Object, o.Path)
		}
	}
	t.Logf("%d leaves changed, %d refused, %d passed (times and the documented uncheckable fields)", len(outcomes), len(outcomes)-passed, passed)
}
