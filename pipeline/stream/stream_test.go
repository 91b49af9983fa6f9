package stream

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/evalrun/evalrun/backend"
	"github.com/evalrun/evalrun/backend/backendtest"
)

// evalBackend is a backend whose Eval is the test's.
type evalBackend struct {
	backendtest.Fake
	eval func(ctx context.Context, emit func(backend.Logits) error) error
}

func (b *evalBackend) Eval(ctx context.Context, _ backend.EvalRequest, emit func(backend.Logits) error) error {
	return b.eval(ctx, emit)
}

// emitting sends n rows of nVocab values (row i holds i), the compute so far
// growing by 10 ns a row, then returns end.
func emitting(n, nVocab int, end error) *evalBackend {
	return &evalBackend{eval: func(ctx context.Context, emit func(backend.Logits) error) error {
		row := make([]float32, nVocab) // lent, as an in-process backend does
		for i := range n {
			row[0] = float32(i)
			if err := emit(backend.Logits{Index: i, Values: row, ComputeNS: int64(10 * (i + 1))}); err != nil {
				return err
			}
		}
		return end
	}}
}

// tokens is a request for n rows.
func tokens(n int) backend.EvalRequest { return backend.EvalRequest{Tokens: make([]int32, n)} }

// hangingAfter sends n rows and then waits for its context, recording
// that it was cancelled.
func hangingAfter(n int) *evalBackend {
	return &evalBackend{eval: func(ctx context.Context, emit func(backend.Logits) error) error {
		for i := range n {
			if err := emit(backend.Logits{Index: i, Values: make([]float32, 4)}); err != nil {
				return err
			}
		}
		<-ctx.Done()
		return ctx.Err()
	}}
}

// decoder is a backend that decodes rows into the host's buffers, as the
// plugin client does (backend.RowDecoder).
type decoder struct {
	evalBackend
	bufs [][]float32 // the buffers it was handed
}

func (d *decoder) EvalInto(ctx context.Context, _ backend.EvalRequest, buf func(n int) []float32, emit func(backend.Logits) error) error {
	for i := range 2 {
		row := buf(4)
		d.bufs = append(d.bufs, row)
		row[0] = float32(i)
		if err := emit(backend.Logits{Index: i, Values: row, ComputeNS: 5}); err != nil {
			return err
		}
	}
	return nil
}

func testConfig(booked *[]Timing) Config {
	return Config{Pool: NewPool(8), NVocab: 4, Timeout: 200 * time.Millisecond, Book: func(t Timing) { *booked = append(*booked, t) }}
}

// A call's rows arrive in order, each in a buffer of its own (the backend
// lends one buffer for all), and its timing is booked once it ends.
func TestCallDeliversRowsAndBooksTheCall(t *testing.T) {
	var booked []Timing
	s := Start(context.Background(), emitting(3, 4, nil), tokens(3), 1, testConfig(&booked))
	var got [][]float32
	for range 3 {
		row, err := s.Next()
		if err != nil {
			t.Fatal(err)
		}
		got = append(got, row)
	}
	for i, row := range got {
		if row[0] != float32(i) {
			t.Fatalf("row %d holds %v: rows share a buffer or came out of order", i, row[0])
		}
	}
	if err := s.Finish(3); err != nil {
		t.Fatal(err)
	}
	if len(booked) != 1 || booked[0].Rows != 3 || booked[0].ComputeS != 30e-9 || s.Compute() != 30 || booked[0].CallS <= 0 || booked[0].DecodeS <= 0 {
		t.Fatalf("booked %+v, compute %d ns; want one call of 3 rows, 30 ns of compute, its time and its copies' time", booked, s.Compute())
	}
}

// A backend that decodes into the host's buffers gets them from the pool,
// and the rows it sends are those buffers.
func TestCallDecodesIntoPooledRows(t *testing.T) {
	var booked []Timing
	cfg := testConfig(&booked)
	recycled := make([]float32, 4)
	cfg.Pool.Release(recycled)
	d := &decoder{}
	s := Start(context.Background(), d, tokens(2), 2, cfg)
	a, err := s.Next()
	if err != nil {
		t.Fatal(err)
	}
	b, _ := s.Next()
	if &a[0] != &recycled[0] || &b[0] != &d.bufs[1][0] || b[0] != 1 {
		t.Fatal("the rows are not the pooled buffers the backend decoded into")
	}
	if err := s.Finish(2); err != nil || len(booked) != 1 || booked[0].ComputeS != 5e-9 {
		t.Fatalf("Finish %v, booked %+v", err, booked)
	}
}

// One takes a call's only row; a call that sends more fails, and its row
// goes back to the pool.
func TestOne(t *testing.T) {
	var booked []Timing
	cfg := testConfig(&booked)
	if row, err := Start(context.Background(), emitting(1, 4, nil), tokens(1), 1, cfg).One(); err != nil || len(row) != 4 {
		t.Fatalf("one row: %v, %v", row, err)
	}
	_, err := Start(context.Background(), emitting(2, 4, nil), tokens(1), 1, cfg).One()
	if err == nil || !strings.Contains(err.Error(), "1 more logits rows") {
		t.Fatalf("two rows: %v", err)
	}
	if n := len(cfg.Pool.rows); n != 2 {
		t.Fatalf("%d rows back in the pool after a failed call of 2 rows: One kept its row", n)
	}
}

// A timed-out call is cancelled, so the plugin stops computing, and
// Received gives up after the time limit.
func TestTimeoutCancelsTheCall(t *testing.T) {
	cancelled := make(chan struct{})
	hung := &evalBackend{eval: func(ctx context.Context, _ func(backend.Logits) error) error {
		<-ctx.Done()
		close(cancelled)
		return ctx.Err()
	}}
	var booked []Timing
	s := Start(context.Background(), hung, tokens(1), 1, testConfig(&booked))
	start := time.Now()
	if s.Received() {
		t.Fatal("Received said a hung call had ended")
	}
	if d := time.Since(start); d < 150*time.Millisecond || d > 2*time.Second {
		t.Fatalf("Received gave up after %s, want the 200ms limit", d)
	}
	if _, err := s.Next(); !errors.Is(err, ErrTimeout) {
		t.Fatal(err)
	}
	select {
	case <-cancelled:
	case <-time.After(time.Second):
		t.Fatal("the timed-out call was not cancelled")
	}
}

// Every way a plugin can get a call wrong ends it with an error that says
// so, within the time limit.
func TestCallErrors(t *testing.T) {
	for _, c := range []struct {
		name  string
		be    backend.Backend
		reads int // rows taken before Finish
		want  string
	}{
		{"hung", hangingAfter(0), 1, "timed out after 200ms waiting for the next logits row"},
		{"short row", emitting(1, 3, nil), 1, "the plugin sent a row of 3 logits, the vocabulary has 4"},
		{"fewer rows", emitting(1, 4, nil), 2, "the plugin sent fewer logits rows than requested"},
		{"more rows", emitting(3, 4, nil), 2, "the plugin sent 1 more logits rows than requested"},
		{"hung after its rows", hangingAfter(1), 1, "timed out after 200ms waiting for the next logits row"},
		{"plugin error mid-call", emitting(1, 4, errors.New("device lost")), 2, "device lost"},
		{"plugin error after its rows", emitting(1, 4, errors.New("device lost")), 1, "device lost"},
	} {
		t.Run(c.name, func(t *testing.T) {
			var booked []Timing
			start := time.Now()
			s := Start(context.Background(), c.be, tokens(c.reads), 4, testConfig(&booked))
			var err error
			for i := 0; i < c.reads && err == nil; i++ {
				_, err = s.Next()
			}
			if err == nil {
				err = s.Finish(c.reads)
			}
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("error %v, want %q", err, c.want)
			}
			if strings.HasPrefix(c.name, "hung") && (!errors.Is(err, ErrTimeout) || len(booked) != 0) {
				t.Fatalf("a hung plugin: error %v (want ErrTimeout), booked %+v (want nothing)", err, booked)
			}
			if d := time.Since(start); d > 2*time.Second {
				t.Fatalf("took %s", d)
			}
		})
	}
}

// A row past those requested ends the call at once, even when the host's
// buffer is full: waiting for the call to end (Received) does not wait out
// the time limit.
func TestExtraRowEndsTheCallAtOnce(t *testing.T) {
	var booked []Timing
	s := Start(context.Background(), emitting(3, 4, nil), tokens(2), 2, testConfig(&booked))
	if !s.Received() {
		t.Fatal("a call with a row too many held the host until its time limit")
	}
	for range 2 {
		if _, err := s.Next(); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.Finish(2); err == nil || !strings.Contains(err.Error(), "1 more logits rows than requested") {
		t.Fatalf("Finish: %v", err)
	}
}

// The time limit counts from the plugin's last progress: a plugin that
// stalls mid-call is given up on once, not again by each wait of the host
// (Received, then Next), and a plugin that waits for room in a full buffer
// is not timed meanwhile.
func TestTimeLimitCountsFromTheLastProgress(t *testing.T) {
	var booked []Timing
	cfg := testConfig(&booked)
	cfg.Timeout = 2 * time.Second
	s := Start(context.Background(), hangingAfter(2), tokens(3), 4, cfg)
	if s.Received() {
		t.Fatal("Received said a stalled call had ended")
	}
	for range 2 {
		if _, err := s.Next(); err != nil {
			t.Fatal(err)
		}
	}
	start := time.Now()
	if _, err := s.Next(); !errors.Is(err, ErrTimeout) {
		t.Fatalf("the stalled row: %v", err)
	}
	if d := time.Since(start); d > cfg.Timeout/2 {
		t.Errorf("the stalled row was waited for again: %s after Received had waited %s", d, cfg.Timeout)
	}

	// A plugin that waited for room in a full buffer longer than the limit
	// is timed from when the host made room: its next row, computed
	// afterwards, is not late.
	cfg.Timeout = time.Second
	s = Start(context.Background(), &evalBackend{eval: func(ctx context.Context, emit func(backend.Logits) error) error {
		for i := range 3 {
			if i == 2 {
				time.Sleep(300 * time.Millisecond)
			}
			if err := emit(backend.Logits{Index: i, Values: make([]float32, 4)}); err != nil {
				return err
			}
		}
		return nil
	}}, tokens(3), 1, cfg)
	time.Sleep(3 * cfg.Timeout / 2)
	for i := range 3 {
		if _, err := s.Next(); err != nil {
			t.Fatalf("row %d: %v", i, err)
		}
	}
	if err := s.Finish(3); err != nil {
		t.Fatal(err)
	}
}

// Abandon does not wait for a plugin that never answers.
func TestAbandonDoesNotWait(t *testing.T) {
	release := make(chan struct{})
	defer close(release)
	var booked []Timing
	s := Start(context.Background(), &evalBackend{eval: func(context.Context, func(backend.Logits) error) error {
		<-release // ignores its context
		return nil
	}}, tokens(1), 1, testConfig(&booked))
	done := make(chan struct{})
	go func() { s.Abandon(); close(done) }()
	select {
	case <-done:
	case <-time.After(time.Second):
		t.Fatal("Abandon waited for the plugin")
	}
	cfg := testConfig(&booked)
	s = Start(context.Background(), emitting(2, 4, nil), tokens(2), 2, cfg)
	s.Received()
	s.Abandon()
	for deadline := time.Now().Add(time.Second); len(cfg.Pool.rows) < 2; time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("Abandon gave back %d of the call's 2 rows", len(cfg.Pool.rows))
		}
	}
	var none *Call
	none.Abandon() // no call: nothing to do
	if !none.Received() || none.Compute() != 0 {
		t.Fatal("a nil call has nothing to wait for")
	}
}

// A replay hands back rows computed before, books no plugin call, and its
// rows can go back to the pool without overwriting each other.
func TestReplay(t *testing.T) {
	var booked []Timing
	cfg := testConfig(&booked)
	data := []float32{0, 1, 2, 3, 10, 11, 12, 13}
	s := Replay(data, 2, cfg)
	a, err := s.Next()
	if err != nil || a[0] != 0 || len(a) != 4 || cap(a) != 4 {
		t.Fatalf("first row %v (cap %d), %v", a, cap(a), err)
	}
	b, _ := s.Next()
	if b[0] != 10 {
		t.Fatalf("second row %v", b)
	}
	if err := s.Finish(2); err != nil || len(booked) != 0 {
		t.Fatalf("Finish %v, booked %+v: a replay books nothing", err, booked)
	}
	cfg.Pool.Release(a)
	for i, row := 0, cfg.Pool.Take(8); i < len(row); i++ { // a longer row, from the pool if it fits
		row[i] = -1
	}
	if b[0] != 10 {
		t.Fatal("a reused replay row overwrote the next one")
	}
}

// The pool hands a released row out again, and a row too small for the
// request is not reused.
func TestPool(t *testing.T) {
	p := NewPool(1)
	a := p.Take(4)
	p.Release(a)
	if b := p.Take(3); &b[0] != &a[0] || len(b) != 3 {
		t.Fatal("a released row was not reused")
	}
	p.Release(a)
	if c := p.Take(8); len(c) != 8 || &c[0] == &a[0] {
		t.Fatal("a row too small was handed out")
	}
	p.Release(make([]float32, 1))
	p.Release(make([]float32, 1)) // the pool is full: dropped, not blocked
}

// TestPoolFill: Fill makes the rows up front, up to the pool's size and
// no further; Take then allocates nothing.
func TestPoolFill(t *testing.T) {
	p := NewPool(5)
	p.Take(2) // nothing released: the pool is empty
	p.Fill(3, 4096)
	if n := len(p.rows); n != 3 {
		t.Fatalf("Fill(3) left %d rows", n)
	}
	p.Fill(9, 4096)
	if n := len(p.rows); n != 5 {
		t.Fatalf("Fill(9) on a pool of 5 left %d rows", n)
	}
	if allocs := testing.AllocsPerRun(1, func() { p.Release(p.Take(4096)) }); allocs != 0 {
		t.Errorf("Take after Fill allocated %.0f times", allocs)
	}
}

// TestCallRefusesRowsOutOfOrder: a row whose index is not the next one due (a duplicate,
// one skipped, 2^30) ends the call with an error naming both, and the
// backend is failed by its caller; in-order rows pass.
func TestCallRefusesRowsOutOfOrder(t *testing.T) {
	for _, c := range []struct {
		name    string
		indices []int
		from    int
		want    string
	}{
		{"duplicate", []int{0, 0}, 0, "the row of token 0 where token 1's was due"},
		{"skipped", []int{0, 2}, 0, "the row of token 2 where token 1's was due"},
		{"2^30", []int{1 << 30}, 0, "the row of token 1073741824 where token 0's was due"},
		{"before logits_from", []int{0}, 3, "the row of token 0 where token 3's was due (rows come in order from logits_from 3)"},
		{"in order from logits_from", []int{3, 4}, 3, ""},
	} {
		t.Run(c.name, func(t *testing.T) {
			be := &evalBackend{eval: func(ctx context.Context, emit func(backend.Logits) error) error {
				for _, i := range c.indices {
					if err := emit(backend.Logits{Index: i, Values: make([]float32, 4)}); err != nil {
						return err
					}
				}
				return nil
			}}
			var booked []Timing
			req := backend.EvalRequest{Tokens: make([]int32, 5), LogitsFrom: c.from}
			s := Start(context.Background(), be, req, 4, testConfig(&booked))
			var err error
			for range c.indices {
				if _, err = s.Next(); err != nil {
					break
				}
			}
			if err == nil {
				err = s.Finish(len(c.indices))
			}
			if (c.want == "") != (err == nil) || (err != nil && !strings.Contains(err.Error(), c.want)) {
				t.Errorf("err = %v, want %q", err, c.want)
			}
		})
	}
}
