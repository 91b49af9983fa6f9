package pipeline

import (
	"fmt"
	"io"
	"time"
)

// progress prints one line per step of a long pass, at most every couple of
// seconds, so logs from CI stay short while a person still sees movement.
type progress struct {
	w     io.Writer
	name  string
	total int
	start time.Time
	last  time.Time
}

func newProgress(w io.Writer, name string, total int) *progress {
	p := &progress{w: w, name: name, total: total, start: time.Now()}
	fmt.Fprintf(w, "%s: %d steps\n", name, total)
	return p
}

func (p *progress) step(i int, what string) {
	now := time.Now()
	if i < p.total && now.Sub(p.last) < 2*time.Second {
		return
	}
	p.last = now
	el := now.Sub(p.start)
	eta := time.Duration(0)
	if i > 0 {
		eta = time.Duration(float64(el) / float64(i) * float64(p.total-i))
	}
	fmt.Fprintf(p.w, "%s: %d/%d (%s) elapsed %s eta %s\n", p.name, i, p.total, what, el.Round(100*time.Millisecond), eta.Round(time.Second))
}
