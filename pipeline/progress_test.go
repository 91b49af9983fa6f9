package pipeline

import (
	"bytes"
	"context"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/evalrun/evalrun/internal/testkit"
	"github.com/evalrun/evalrun/pipeline/spec"
)

// Not on a terminal (logs, CI) a run prints one line per pass when it
// ends, naming the backends it ran on; --quiet (ProgressOff) prints none.
func TestProgressLinesOnePerPass(t *testing.T) {
	p := testPlan(t, 64, 256, 32, 5, spec.Backend{Name: "b", Plugin: "fake"})
	_, stderr := runFakes(t, p, map[string]*fakeBackend{"ref": newFake(64), "b": newFake(64)})
	var passes []string
	for _, l := range strings.Split(strings.TrimSpace(stderr), "\n") {
		if !strings.HasPrefix(l, "time=") { // the log's lines
			passes = append(passes, l)
		}
	}
	want := []*regexp.Regexp{
		regexp.MustCompile(`^score \[ref \(ref\), b\]: 8/8 chunks \(248 tokens\), [0-9.]+m?s, \d+ tokens/s, slowest (ref|b) \([0-9.]+[mµn]?s computing\)$`),
		regexp.MustCompile(`^generate \[ref \(ref\), b\]: 3/3 prompts \(15 tokens\), [0-9.]+m?s, \d+ tokens/s, slowest (ref|b) \(.*computing\)$`),
		regexp.MustCompile(`^bench pp8\+tg4 \[ref \(ref\), b\]: 3/3 rounds, [0-9.]+m?s$`),
	}
	if len(passes) != len(want) {
		t.Fatalf("%d progress lines, want one per pass:\n%s", len(passes), stderr)
	}
	for i, re := range want {
		if !re.MatchString(passes[i]) {
			t.Errorf("pass %d: %q does not match %s", i, passes[i], re)
		}
	}

	var quiet bytes.Buffer
	p = testPlan(t, 64, 256, 32, 5, spec.Backend{Name: "b", Plugin: "fake"})
	if _, err := Run(context.Background(), p, Options{OutDir: t.TempDir(), Stderr: &quiet, Progress: NewProgress(&quiet, ProgressOff),
		Launch: fakeLauncher(map[string]*fakeBackend{"ref": newFake(64), "b": newFake(64)})}); err != nil {
		t.Fatal(err)
	}
	if strings.Contains(quiet.String(), "chunks") || strings.Contains(quiet.String(), "rounds") {
		t.Errorf("ProgressOff printed progress:\n%s", quiet.String())
	}
}

// The ETA is the rest of the pass's work at the rate measured in it, from
// the end of its first item on: a first chunk slowed by start-up does not
// make the estimate of the others wrong, nor does an item of more work.
func TestProgressETA(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	clock := t0
	ph := &phase{p: NewProgress(&bytes.Buffer{}, ProgressLines), name: "score", unit: "chunks", items: 10, work: 1000, start: t0, now: func() time.Time { return clock }}
	at := func(s float64) { clock = t0.Add(time.Duration(s * float64(time.Second))) }
	if _, ok := ph.eta(clock); ok {
		t.Error("an ETA before any item ended")
	}
	at(5) // the first item: 5 s, start-up included
	ph.done(100)
	if _, ok := ph.eta(clock); ok || !strings.HasSuffix(ph.status(), "ETA -") {
		t.Errorf("an ETA from the first item alone: %q", ph.status())
	}
	at(6) // then 100 units a second
	ph.done(100)
	at(7)
	ph.done(100)
	if eta, ok := ph.eta(clock); !ok || eta != 7*time.Second {
		t.Errorf("ETA %v after 3 items at t=7 s, want 7s (700 units left at 100/s)", eta)
	}
	if s := ph.status(); s != "3/10 chunks  7s  ETA 7s" {
		t.Errorf("status %q", s)
	}
	at(9) // an item of twice the work takes twice as long: the rate holds
	ph.done(200)
	if eta, _ := ph.eta(clock); eta != 5*time.Second {
		t.Errorf("ETA %v after 500 of 1000 units at t=9 s, want 5s", eta)
	}
}

// On a terminal each pass is a live bar named after the pass and its
// backends (the one being benched while the bench runs), whose last state
// is the pass's line; log lines written meanwhile print above it.
func TestProgressBar(t *testing.T) {
	var out testkit.SyncBuffer // the bar draws from a goroutine of its own
	pr := NewProgress(&out, ProgressBar)
	pr.redraw = true
	r := &runner{progress: pr}
	ref := &runBackend{Backend: spec.Backend{Name: "ref", Key: "reference"}}
	cand := &runBackend{Backend: spec.Backend{Name: "cand-b", Key: "backends[0]"}}
	ph := r.startPhase("score", "chunks", "tokens", 2, 200, []*runBackend{ref, cand})
	ph.done(100)
	pr.Write([]byte("a log line\n"))
	// A refresh draws 1/2 (every 200 ms; a loaded machine may take longer).
	for deadline := time.Now().Add(10 * time.Second); !strings.Contains(out.String(), "1/2 chunks") && time.Now().Before(deadline); {
		time.Sleep(20 * time.Millisecond)
	}
	ph.done(100)
	ph.finish(false)
	got := out.String()
	for _, want := range []string{"a log line\n", "score [ref (ref), cand-b]", "1/2 chunks", "2/2 chunks, "} {
		if !strings.Contains(got, want) {
			t.Errorf("the bar lacks %q:\n%q", want, got)
		}
	}
	if l := ph.label(22); l != "score [ref (ref) +1]" {
		t.Errorf("label on a narrow terminal: %q", l)
	}
}
