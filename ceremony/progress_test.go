package ceremony

import (
	"bytes"
	"errors"
	"testing"
	"time"
)

func TestProgressLines(t *testing.T) {
	var buf bytes.Buffer
	clock := time.Unix(0, 0)
	now := func() time.Time { clock = clock.Add(205 * time.Millisecond); return clock }
	p := &progress{w: &buf, total: 2, now: now}
	if err := p.step("server-side dry-run", func() error { return nil }); err != nil {
		t.Fatal(err)
	}
	boom := errors.New("boom")
	if err := p.step("publish", func() error { return boom }); err != boom {
		t.Fatalf("step error %v", err)
	}
	want := "[1/2] server-side dry-run … ok (0.20 s)\n[2/2] publish … refused (0.20 s)\n"
	if buf.String() != want {
		t.Fatalf("got %q want %q", buf.String(), want)
	}
}
