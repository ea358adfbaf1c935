package ceremony

import (
	"fmt"
	"io"
	"time"
)

// progress prints one stderr line per step: "[3/8] server-side dry-run … ok (0.41 s)".
type progress struct {
	w     io.Writer
	total int
	n     int
	now   func() time.Time
}

// step runs f as the next step and reports its outcome and duration.
func (p *progress) step(title string, f func() error) error {
	p.n++
	start := p.now()
	err := f()
	verdict := "ok"
	if err != nil {
		verdict = "refused"
	}
	if p.w != nil {
		fmt.Fprintf(p.w, "[%d/%d] %s … %s (%.2f s)\n", p.n, p.total, title, verdict, p.now().Sub(start).Seconds())
	}
	return err
}
