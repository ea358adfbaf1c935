package ceremony

import (
	"errors"
	"fmt"
	"io"
	"time"
)

// step is one line of a ceremony's progress: what it does, and doing it.
type step struct {
	title string
	f     func() error
}

// runSteps runs a ceremony's step table in order, printing one line per step out of len(steps)
// (the count is the table's, so a step added or removed cannot leave a stale total), and stops at
// the first refusal, which it returns.
func runSteps(w io.Writer, now func() time.Time, steps []step) error {
	p := &progress{w: w, total: len(steps), now: now}
	for _, st := range steps {
		if err := p.step(st.title, st.f); err != nil {
			return err
		}
	}
	return nil
}

// progress prints one stderr line per step: "[3/8] server-side dry-run … ok (0.41 s)".
type progress struct {
	w     io.Writer
	total int
	n     int
	now   func() time.Time
}

// skipped is what a step returns when it did not run: the step's line says so, with why and what
// to do instead, and the ceremony goes on.
type skipped struct{ why string }

func (s skipped) Error() string { return "skipped: " + s.why }

// step runs f as the next step and reports its outcome and duration.
func (p *progress) step(title string, f func() error) error {
	p.n++
	start := p.now()
	err := f()
	verdict := "ok"
	var skip skipped
	if errors.As(err, &skip) {
		verdict, err = skip.Error(), nil
	} else if err != nil {
		verdict = "refused"
	}
	if p.w != nil {
		fmt.Fprintf(p.w, "[%d/%d] %s … %s (%.2f s)\n", p.n, p.total, title, verdict, p.now().Sub(start).Seconds())
	}
	return err
}
