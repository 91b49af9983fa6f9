package backend

import (
	"bytes"
	"io"
	"strings"
	"sync"
)

// tailBuffer keeps the last n lines written through its sources, so a crash
// report can show what the plugin said last.
type tailBuffer struct {
	mu   sync.Mutex
	n    int
	ring []string
}

// maxTailLine caps one stored line; a runaway line must not pin memory.
const maxTailLine = 4096

func newTailBuffer(n int) *tailBuffer { return &tailBuffer{n: n} }

func (t *tailBuffer) add(line string) {
	line = strings.TrimRight(line, "\r")
	if line == "" {
		return
	}
	if len(line) > maxTailLine {
		line = line[:maxTailLine] + "…"
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	t.ring = append(t.ring, line)
	if len(t.ring) > t.n {
		t.ring = append(t.ring[:0], t.ring[len(t.ring)-t.n:]...)
	}
}

func (t *tailBuffer) lines() []string {
	t.mu.Lock()
	defer t.mu.Unlock()
	return append([]string(nil), t.ring...)
}

// suffix formats the tail for an error message ("" when empty).
func (t *tailBuffer) suffix() string {
	l := t.lines()
	if len(l) == 0 {
		return ""
	}
	return "; last stderr lines:\n  " + strings.Join(l, "\n  ")
}

// source returns a writer that splits its input into lines for the tail.
func (t *tailBuffer) source() io.Writer { return &lineSplitter{tail: t} }

type lineSplitter struct {
	mu      sync.Mutex
	tail    *tailBuffer
	partial []byte
}

func (s *lineSplitter) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	n := len(p)
	for {
		i := bytes.IndexByte(p, '\n')
		if i < 0 {
			break
		}
		s.partial = append(s.partial, p[:i]...)
		s.tail.add(string(s.partial))
		s.partial = s.partial[:0]
		p = p[i+1:]
	}
	s.partial = append(s.partial, p...)
	if len(s.partial) > maxTailLine {
		s.tail.add(string(s.partial))
		s.partial = s.partial[:0]
	}
	return n, nil
}
