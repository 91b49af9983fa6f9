package pipeline

import (
	"cmp"
	"fmt"
	"io"
	"strings"
	"sync"
	"time"

	"github.com/vbauerster/mpb/v8"
	"github.com/vbauerster/mpb/v8/decor"
)

// ProgressMode says how a run shows its passes (score, generate, bench) as
// they go.
type ProgressMode int

const (
	// ProgressLines prints one line per pass when it ends: its items, the
	// backends it ran on, how long it took and how fast, the slowest
	// backend. For logs and CI, which a live bar would fill with redraws.
	ProgressLines ProgressMode = iota
	// ProgressBar draws a live bar per pass on a terminal: the backends
	// (the one being benched), the items done, the elapsed time and the
	// ETA; log lines print above it. A finished bar stays as the pass's line.
	ProgressBar
	// ProgressOff shows nothing (run --quiet).
	ProgressOff
)

// Progress shows a run's passes on a writer, the run's stderr
// (Options.Progress). It is also an io.Writer for the run's log, whose
// lines go above a live bar instead of through it.
type Progress struct {
	w    io.Writer
	mode ProgressMode

	mu     sync.Mutex
	live   *mpb.Progress // the bar of the pass under way (ProgressBar)
	redraw bool          // redraw bars even when w is not a terminal (tests)
}

// NewProgress shows progress on w in the given mode.
func NewProgress(w io.Writer, mode ProgressMode) *Progress {
	return &Progress{w: w, mode: mode}
}

// Write writes a log line: above the bar while one is drawn.
func (p *Progress) Write(b []byte) (int, error) {
	p.mu.Lock()
	live := p.live
	p.mu.Unlock()
	if live != nil {
		if n, err := live.Write(b); err == nil {
			return n, nil
		}
	}
	return p.w.Write(b)
}

// phase is one pass's progress. Its work (tokens fed, prompt tokens
// generated, bench rounds) measures how far it is and how fast it goes.
type phase struct {
	p        *Progress
	name     string // "score", "generate", "bench pp64+tg16"
	unit     string // what an item is: "chunks", "prompts", "rounds"
	workUnit string // what the work is, for the rate: "tokens", or "" (none shown)
	backends []*runBackend
	items    int // total
	work     int // total
	start    time.Time
	now      func() time.Time
	compute0 []float64 // each backend's compute time at the start

	mu        sync.Mutex
	doneItems int
	doneWork  int
	first     time.Time // when the first item finished
	firstWork int
	current   string // the backend at work, when one runs at a time (bench)
	end       string // the line of the finished pass
	bar       *mpb.Bar
	container *mpb.Progress
}

// startPhase starts a pass of items items and work units of work on
// backends.
func (r *runner) startPhase(name, unit, workUnit string, items, work int, backends []*runBackend) *phase {
	ph := &phase{p: r.progress, name: name, unit: unit, workUnit: workUnit, backends: backends, items: items, work: work, now: time.Now}
	ph.start = ph.now()
	for _, rb := range backends {
		ph.compute0 = append(ph.compute0, rb.computeS())
	}
	if ph.p.mode == ProgressBar {
		ph.startBar()
	}
	return ph
}

func (ph *phase) startBar() {
	opts := []mpb.ContainerOption{mpb.WithOutput(ph.p.w), mpb.WithRefreshRate(200 * time.Millisecond)}
	if ph.p.redraw {
		opts = append(opts, mpb.WithAutoRefresh())
	}
	c := mpb.New(opts...)
	ph.container = c
	// The status is what matters on a narrow terminal: the label gives way
	// to it and to a bar of minBar cells.
	const minBar = 12
	// Built with total 0 and given its total after, the bar completes only
	// when finish says so: its last state is then the pass's line.
	ph.bar = c.AddBar(0,
		mpb.PrependDecorators(decor.Any(func(st decor.Statistics) string {
			return ph.label(st.AvailableWidth-len([]rune(ph.status()))-minBar-4) + " "
		})),
		mpb.AppendDecorators(decor.Any(func(decor.Statistics) string { return " " + ph.status() })),
		mpb.BarWidth(30), mpb.BarFillerClearOnComplete(),
	)
	ph.bar.SetTotal(int64(ph.work), false)
	ph.p.mu.Lock()
	ph.p.live = c
	ph.p.mu.Unlock()
}

// benching names the backend a bench round is measuring now.
func (ph *phase) benching(name string) {
	ph.mu.Lock()
	ph.current = name
	ph.mu.Unlock()
}

// done records a finished item of work units.
func (ph *phase) done(work int) {
	now := ph.now()
	ph.mu.Lock()
	ph.doneItems++
	ph.doneWork += work
	if ph.doneItems == 1 {
		ph.first, ph.firstWork = now, ph.doneWork
	}
	ph.mu.Unlock()
	if ph.bar != nil {
		ph.bar.SetCurrent(int64(ph.doneWork))
	}
}

// eta is how long the rest of the pass takes at the rate measured so far
// in it. The rate is counted from the end of the first item on: the first
// carries the pass's start-up (the plugins' first calls, the pipeline of
// prefetched chunks filling), which does not repeat, so there is no ETA
// (false) before a second item has ended.
func (ph *phase) eta(now time.Time) (time.Duration, bool) {
	ph.mu.Lock()
	defer ph.mu.Unlock()
	if ph.doneItems < 2 || ph.doneWork <= ph.firstWork || !now.After(ph.first) {
		return 0, false
	}
	left := float64(ph.work - ph.doneWork)
	return time.Duration(left / float64(ph.doneWork-ph.firstWork) * float64(now.Sub(ph.first))), true
}

// label is the bar's head, at most width runes when it can: the pass and
// its backends (the last ones counted, "+2", when they do not all fit), or
// the backend being benched.
func (ph *phase) label(width int) string {
	ph.mu.Lock()
	current := ph.current
	ph.mu.Unlock()
	if current != "" {
		return fmt.Sprintf("%s [%s]", ph.name, current)
	}
	names := ph.nameList()
	for n := len(names); n > 0; n-- {
		l := ph.name + " [" + strings.Join(names[:n], ", ")
		if n < len(names) {
			l += fmt.Sprintf(" +%d", len(names)-n)
		}
		if l += "]"; len([]rune(l)) <= width || n == 1 {
			return l
		}
	}
	return ph.name
}

// status is the bar's tail: items done, elapsed time and the ETA; the
// finished pass's figures once it ended.
func (ph *phase) status() string {
	now := ph.now()
	eta, ok := ph.eta(now)
	ph.mu.Lock()
	defer ph.mu.Unlock()
	if ph.end != "" {
		return ph.end
	}
	s := fmt.Sprintf("%d/%d %s  %s", ph.doneItems, ph.items, ph.unit, roundDuration(now.Sub(ph.start)))
	if ok {
		return s + "  ETA " + roundDuration(eta)
	}
	return s + "  ETA -"
}

// nameList is the pass's backends, the reference marked.
func (ph *phase) nameList() []string {
	var n []string
	for _, rb := range ph.backends {
		if rb.Key == "reference" {
			n = append(n, rb.Name+" (ref)")
		} else {
			n = append(n, rb.Name)
		}
	}
	return n
}

// finish ends the pass: its line (ProgressLines) or its bar's last state.
// stopped says it ended before its last item (an interruption, the
// reference failing).
func (ph *phase) finish(stopped bool) {
	now := ph.now()
	el := now.Sub(ph.start)
	ph.mu.Lock()
	ph.current = ""
	// The line says how much work, the bar's last state (a terminal's
	// width) only how many items.
	end, short := fmt.Sprintf("%d/%d %s", ph.doneItems, ph.items, ph.unit), ""
	if ph.workUnit != "" {
		short = end
		end += fmt.Sprintf(" (%d %s)", ph.doneWork, ph.workUnit)
	}
	rate := ", " + roundDuration(el)
	if ph.workUnit != "" && el > 0 {
		rate += fmt.Sprintf(", %.0f %s/s", float64(ph.doneWork)/el.Seconds(), ph.workUnit)
	}
	end, short = end+rate, cmp.Or(short, end)+rate
	if name, computing := ph.slowest(); name != "" {
		end += fmt.Sprintf(", slowest %s (%s computing)", name, computing)
		short += ", slowest " + name
	}
	if stopped {
		end, short = end+": stopped", short+": stopped"
	}
	ph.end = short
	ph.mu.Unlock()

	switch {
	case ph.p.mode == ProgressLines:
		fmt.Fprintf(ph.p.w, "%s [%s]: %s\n", ph.name, strings.Join(ph.nameList(), ", "), end)
	case ph.bar != nil:
		if stopped {
			ph.bar.Abort(false)
		} else {
			ph.bar.SetTotal(-1, true)
		}
		ph.p.mu.Lock()
		ph.p.live = nil
		ph.p.mu.Unlock()
		ph.container.Wait()
	}
}

// slowest names the backend that spent the most time computing in the
// pass, the one a lockstep pass waits for, when more than one ran, and
// that time.
func (ph *phase) slowest() (name, computing string) {
	if len(ph.backends) < 2 {
		return "", ""
	}
	most := 0.0
	for i, rb := range ph.backends {
		if d := rb.computeS() - ph.compute0[i]; d > most {
			name, most = rb.Name, d
		}
	}
	return name, roundDuration(time.Duration(most * float64(time.Second)))
}

// roundDuration prints a duration to a tenth of a second below a minute,
// to the second above.
func roundDuration(d time.Duration) string {
	if d < time.Minute {
		return d.Round(100 * time.Millisecond).String()
	}
	return d.Round(time.Second).String()
}
