package pipeline

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/evalrun/evalrun/pipeline/stream"
)

// TestTimedOutAtTheDeadline: a call the plugin's side ends as its deadline comes
// (gRPC's RST_STREAM CANCEL, a moment before the host's own timer) is
// labelled a timeout like one the host's timer ended; an error well before
// the deadline, or with no deadline, is the plugin's failure.
func TestTimedOutAtTheDeadline(t *testing.T) {
	cancelled := errors.New("stream terminated by RST_STREAM with error code: CANCEL")
	expired, cancel := context.WithTimeout(context.Background(), time.Nanosecond)
	defer cancel()
	<-expired.Done()
	closing, cancel2 := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel2()
	far, cancel3 := context.WithTimeout(context.Background(), time.Hour)
	defer cancel3()
	for _, c := range []struct {
		name    string
		ctx     context.Context
		timeout bool
	}{
		{"the host's timer fired", expired, true},
		{"the plugin's side ended the call 50 ms before the deadline", closing, true},
		{"an error an hour before the deadline", far, false},
		{"no deadline", context.Background(), false},
	} {
		if got := errors.Is(timedOut(c.ctx, time.Second, cancelled), stream.ErrTimeout); got != c.timeout {
			t.Errorf("%s: timeout %v, want %v", c.name, got, c.timeout)
		}
	}
	if timedOut(expired, time.Second, nil) != nil {
		t.Error("no error became one")
	}
}
