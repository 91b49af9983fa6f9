// Package stream runs one backend Eval call in the background and hands its
// logits rows to the host over a small buffered channel, so that the
// reference and the candidates advance in lockstep and only a few rows per
// backend are ever in memory. Rows are decoded straight into buffers
// recycled through a Pool: no allocation per row once the pool is full.
//
// The time limit is measured by the consumer, as the wait for each next row:
// a plugin blocked only because the host has not yet taken its rows (another
// backend is slow) is not timed out, while a hung plugin is.
package stream

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"time"

	"github.com/evalrun/evalrun/backend"
)

// ErrTimeout marks a call that exceeded its time limit.
var ErrTimeout = errors.New("timed out")

// Pool recycles one backend's logits rows.
type Pool struct{ rows chan []float32 }

// NewPool holds up to n rows for reuse.
func NewPool(n int) Pool { return Pool{make(chan []float32, n)} }

// Take returns a row of n values, reused when the pool has one.
func (p Pool) Take(n int) []float32 {
	select {
	case r := <-p.rows:
		if cap(r) >= n {
			return r[:n]
		}
	default:
	}
	return make([]float32, n)
}

// Fill puts rows of n values in the pool until it holds k (or is full),
// writing to every page of them: a call then takes rows whose memory the
// process already has, where fresh rows would each take a hundred page
// faults (a 128k vocabulary) in the middle of the call.
func (p Pool) Fill(k, n int) {
	for range min(k, cap(p.rows)) - len(p.rows) {
		row := make([]float32, n)
		for i := 0; i < n; i += 1024 { // 4 KiB pages
			row[i] = 0
		}
		select {
		case p.rows <- row:
		default:
			return
		}
	}
}

// Release hands a row back once the host is done with it.
func (p Pool) Release(row []float32) {
	select {
	case p.rows <- row:
	default:
	}
}

// Config is what every call of one backend shares.
type Config struct {
	Pool    Pool
	NVocab  int           // the length of every row
	Timeout time.Duration // the wait for each next row
	// Book receives the timing of each call that ended within its time
	// limit (not of a replay).
	Book func(Timing)
}

// Timing is one call's cost.
type Timing struct {
	Rows     int
	CallS    float64 // from the start of the call to its end, as the host saw it
	ComputeS float64 // the plugin's compute (its last row's compute_ns)
	DecodeS  float64 // the host decoding the rows
}

// Call is one Eval call's rows as they arrive.
type Call struct {
	cfg     Config
	ch      chan row
	done    chan struct{} // closed with ch
	err     error         // set before ch is closed
	cancel  context.CancelFunc
	start   time.Time
	compute int64         // the last row's compute_ns: the call's compute so far
	decode  time.Duration // written by the producer, read after ch is closed
	replay  bool
	// alive is when the plugin last showed progress (Unix ns): the call's
	// start, a row arriving, or the host taking a row from a full buffer
	// (the plugin may have been waiting for room). The time limit counts
	// from it, so a wait that already ran (Received) is not waited again.
	alive atomic.Int64
}

type row struct {
	values    []float32
	computeNS int64
}

// Start starts req on be; the host buffers its rows up to buffer deep.
func Start(ctx context.Context, be backend.Backend, req backend.EvalRequest, buffer int, cfg Config) *Call {
	cctx, cancel := context.WithCancel(ctx)
	s := &Call{cfg: cfg, ch: make(chan row, buffer), done: make(chan struct{}), cancel: cancel, start: time.Now()}
	s.alive.Store(s.start.UnixNano())
	go func() {
		var t0 time.Time
		buf := func(n int) []float32 {
			t0 = time.Now()
			return cfg.Pool.Take(n)
		}
		next := req.LogitsFrom // rows come in order, one per token from LogitsFrom
		// check refuses a row the request did not ask for.
		check := func(l backend.Logits, values []float32) error {
			if len(values) != cfg.NVocab {
				return fmt.Errorf("the plugin sent a row of %d logits, the vocabulary has %d", len(values), cfg.NVocab)
			}
			if next == len(req.Tokens) {
				// At once: a row past the buffer would block the plugin's
				// stream, and a caller waiting for the call to end would
				// wait out the time limit.
				return errors.New("the plugin sent 1 more logits rows than requested")
			}
			if l.Index != next {
				return fmt.Errorf("the plugin sent the row of token %d where token %d's was due (rows come in order from logits_from %d)", l.Index, next, req.LogitsFrom)
			}
			return nil
		}
		send := func(l backend.Logits, values []float32) error {
			err := check(l, values)
			if err != nil {
				cfg.Pool.Release(values)
				return err
			}
			next++
			s.alive.Store(time.Now().UnixNano())
			select {
			case s.ch <- row{values, l.ComputeNS}:
				return nil
			case <-cctx.Done():
				cfg.Pool.Release(values)
				return cctx.Err()
			}
		}
		var err error
		if rd, ok := be.(backend.RowDecoder); ok {
			err = rd.EvalInto(cctx, req, buf, func(l backend.Logits) error {
				s.decode += time.Since(t0)
				return send(l, l.Values)
			})
		} else { // an in-process backend lends its own buffer: copy it
			err = be.Eval(cctx, req, func(l backend.Logits) error {
				t := time.Now()
				own := cfg.Pool.Take(len(l.Values))
				copy(own, l.Values)
				s.decode += time.Since(t)
				return send(l, own)
			})
		}
		s.err = err
		close(s.ch)
		close(s.done)
	}()
	return s
}

// Replay is a finished call whose rows were computed before (data holds
// rows rows of cfg.NVocab values): no plugin call, nothing booked.
func Replay(data []float32, rows int, cfg Config) *Call {
	s := &Call{cfg: cfg, ch: make(chan row, rows), done: make(chan struct{}), cancel: func() {}, replay: true}
	n := cfg.NVocab
	for i := range rows {
		s.ch <- row{values: data[i*n : (i+1)*n : (i+1)*n]} // a row's capacity ends with it: the pool may reuse it
	}
	close(s.ch)
	close(s.done)
	return s
}

// Received waits until the call has ended and its rows are all buffered,
// or until the plugin has shown no progress for the time limit (false). No
// call (nil) has nothing to wait for.
func (s *Call) Received() bool {
	if s == nil {
		return true
	}
	for {
		select {
		case <-s.done:
			return true
		default:
		}
		left := s.left()
		if left <= 0 {
			return false
		}
		select {
		case <-s.done:
			return true
		case <-time.After(left):
		}
	}
}

// left is what remains of the time limit since the plugin's last progress.
func (s *Call) left() time.Duration {
	return s.cfg.Timeout - time.Since(time.Unix(0, s.alive.Load()))
}

var errShort = errors.New("the plugin sent fewer logits rows than requested")

// Next returns the next row (Release it to the pool when done), or the
// error that ended the call early, or ErrTimeout when the plugin produced
// nothing for the time limit.
func (s *Call) Next() ([]float32, error) {
	for {
		full := len(s.ch) == cap(s.ch)
		select {
		case r, ok := <-s.ch:
			return s.took(r, ok, full)
		default:
		}
		left := s.left()
		if left <= 0 {
			s.cancel()
			return nil, fmt.Errorf("%w after %s waiting for the next logits row", ErrTimeout, s.cfg.Timeout)
		}
		timer := time.NewTimer(left)
		select {
		case r, ok := <-s.ch:
			timer.Stop()
			return s.took(r, ok, full)
		case <-timer.C:
		}
	}
}

// took is Next's answer for a receive from the call's rows; full: the
// buffer was full before it, so the plugin may have been waiting for room.
func (s *Call) took(r row, ok, full bool) ([]float32, error) {
	if !ok {
		if s.err != nil {
			return nil, s.err
		}
		return nil, errShort
	}
	if full {
		s.alive.Store(time.Now().UnixNano())
	}
	s.compute = r.computeNS
	return r.values, nil
}

// One takes the only row of a call that must return exactly one.
func (s *Call) One() ([]float32, error) {
	r, err := s.Next()
	if err != nil {
		s.Abandon()
		return nil, err
	}
	if err := s.Finish(1); err != nil {
		s.cfg.Pool.Release(r)
		return nil, err
	}
	return r, nil
}

// Finish waits for the call to end, reports an error if it failed or sent
// more rows than expected, and books its timing.
func (s *Call) Finish(rows int) error {
	defer s.cancel()
	extra := 0
	r, err := s.Next()
	for ; err == nil; r, err = s.Next() {
		if extra == 0 {
			s.cancel() // a plugin streaming rows forever must not hold the host
		}
		extra++
		s.cfg.Pool.Release(r)
	}
	if errors.Is(err, ErrTimeout) {
		return err
	} else if s.replay {
		return nil
	}
	if s.cfg.Book != nil {
		s.cfg.Book(Timing{Rows: rows, CallS: time.Since(s.start).Seconds(), ComputeS: float64(s.compute) / 1e9, DecodeS: s.decode.Seconds()})
	}
	if extra > 0 {
		return fmt.Errorf("the plugin sent %d more logits rows than requested", extra)
	}
	return s.err
}

// Compute is the plugin's compute in the call so far, in nanoseconds (the
// last row's compute_ns); 0 for no call (nil).
func (s *Call) Compute() int64 {
	if s == nil {
		return 0
	}
	return s.compute
}

// Abandon stops a call whose rows are no longer wanted, without waiting
// for a hung plugin; nil is no call.
func (s *Call) Abandon() {
	if s == nil {
		return
	}
	s.cancel()
	go func() {
		for r := range s.ch {
			s.cfg.Pool.Release(r.values)
		}
	}()
}
