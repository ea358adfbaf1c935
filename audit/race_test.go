//go:build race

package audit_test

// raceEnabled: the race detector slows every audit about tenfold and finds nothing in the flip
// sweep, whose audits share no state; under it the sweep flips sampled positions only.
const raceEnabled = true
