package ceremony

import (
	"bytes"
	"errors"
	"testing"
	"time"
)

// TestProgressLines: one line per step out of the table's length, the refused step named as
// such, and no step run after it.
func TestProgressLines(t *testing.T) {
	var buf bytes.Buffer
	clock := time.Unix(0, 0)
	now := func() time.Time { clock = clock.Add(205 * time.Millisecond); return clock }
	boom := errors.New("boom")
	ran := false
	steps := []step{
		{"server-side dry-run", func() error { return nil }},
		{"publish", func() error { return boom }},
		{"never", func() error { ran = true; return nil }},
	}
	if err := runSteps(&buf, now, steps); err != boom {
		t.Fatalf("step error %v", err)
	}
	want := "[1/3] server-side dry-run … ok (0.20 s)\n[2/3] publish … refused (0.20 s)\n"
	if buf.String() != want || ran {
		t.Fatalf("got %q (a step after the refusal ran: %v), want %q", buf.String(), ran, want)
	}
}

// TestProgressSkipped: a step that did not run says so, with why, and the ceremony goes on.
func TestProgressSkipped(t *testing.T) {
	var buf bytes.Buffer
	clock := time.Unix(0, 0)
	now := func() time.Time { clock = clock.Add(205 * time.Millisecond); return clock }
	ran := false
	steps := []step{
		{"write apply command", func() error { return skipped{"no --write-apply-command"} }},
		{"after", func() error { ran = true; return nil }},
	}
	if err := runSteps(&buf, now, steps); err != nil || !ran {
		t.Fatalf("err %v, later step ran %v", err, ran)
	}
	want := "[1/2] write apply command … skipped: no --write-apply-command (0.20 s)\n[2/2] after … ok (0.20 s)\n"
	if buf.String() != want {
		t.Fatalf("got %q, want %q", buf.String(), want)
	}
}
