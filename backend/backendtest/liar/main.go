// Command liar is a plugin for the host's tests that lies in one way the
// contract allows, chosen by its option "lie" or else $TEST_EVALRUN_LIE
// (the option lets two backends of one run lie differently): it is the CPU
// plugin (the
// engine) with its Load, Eval or Bench answers bent, or with processes it
// leaves behind. The host must label each lie, keep the other backends'
// results and leave nothing running (cmd/evalrun's TestLyingPlugins).
package main

import (
	"context"
	"maps"
	"math"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/evalrun/evalrun/backend"
	"github.com/evalrun/evalrun/backend/internal/backendpb"
	"github.com/evalrun/evalrun/backend/internal/wirelie"
	"github.com/evalrun/evalrun/plugins/enginebackend"
)

// benchSleep is one repetition of the bench-sleep lies.
const benchSleep = 4 * time.Millisecond

// wait waits d and returns how long it took: a sleep to within 1 ms of
// the end (Go's sleeps may overshoot by up to a millisecond), then a spin.
func wait(d time.Duration) time.Duration {
	start := time.Now()
	time.Sleep(d - time.Millisecond)
	for time.Since(start) < d {
	}
	return time.Since(start)
}

type liar struct {
	*enginebackend.Backend
	lie     string
	shmRows int // rows sent through shared memory (one Eval at a time)
}

func main() {
	log := backend.NewPluginLogger("liar")
	be := enginebackend.New(enginebackend.Config{Name: "liar", Version: "test", Device: "cpu",
		Options: enginebackend.NoOptions(), Logger: log})
	l := &liar{Backend: be, lie: os.Getenv("TEST_EVALRUN_LIE")}
	wirelie.Chunk = l.chunk
	backend.Serve(l, backend.WithLogger(log))
}

// chunk bends the EvalChunk messages for the shm- lies, on the second row
// of a call sent through shared memory (the host lent slots: its region
// is shared):
//   - shm-offset: the row's place reported past the end of the region;
//   - shm-slot: the place of the next slot, inside the region;
//   - shm-length: the rest of the region overwritten from the row's slot,
//     and reported as the row's length;
//   - shm-both: the row in the message too;
//   - shm-unmapped: the region unmapped, so that writing the next row into
//     it crashes the plugin.
func (l *liar) chunk(c *backendpb.EvalChunk, region []byte) {
	if c.SharedBytes == 0 || !strings.HasPrefix(l.lie, "shm-") {
		return
	}
	if l.shmRows++; l.shmRows != 2 {
		return
	}
	switch l.lie {
	case "shm-offset":
		c.SharedOffset = int64(len(region)) + 4096
	case "shm-slot":
		c.SharedOffset += c.SharedBytes
	case "shm-length":
		for i := c.SharedOffset + c.SharedBytes; i < int64(len(region)); i++ {
			region[i] = 0xff
		}
		c.SharedBytes = int64(len(region)) - c.SharedOffset
	case "shm-both":
		c.Logits = region[c.SharedOffset : c.SharedOffset+c.SharedBytes]
	case "shm-unmapped":
		unmap(region)
	}
}

// leaveChild starts a sleep the plugin never waits for, in its process
// group (fork) or in a session of its own (setsid), and writes its pid to
// $TEST_EVALRUN_PIDFILE.
func leaveChild(setsid bool) {
	cmd := exec.Command("sleep", "1000")
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: setsid}
	if cmd.Start() == nil {
		os.WriteFile(os.Getenv("TEST_EVALRUN_PIDFILE"), []byte(strconv.Itoa(cmd.Process.Pid)+"\n"), 0o644)
	}
}

// takeLie moves the option "lie" out of req's options (the engine knows
// no such option) into l.lie.
func (l *liar) takeLie(req backend.LoadRequest) backend.LoadRequest {
	lie, ok := req.Options["lie"].(string)
	if !ok {
		return req
	}
	l.lie = lie
	opts := maps.Clone(req.Options)
	delete(opts, "lie")
	req.Options = opts
	return req
}

func (l *liar) Validate(ctx context.Context, req backend.LoadRequest) ([]string, error) {
	return l.Backend.Validate(ctx, l.takeLie(req))
}

func (l *liar) Load(ctx context.Context, req backend.LoadRequest) (backend.LoadResult, error) {
	res, err := l.Backend.Load(ctx, l.takeLie(req))
	switch l.lie {
	case "load-memory":
		res.MemoryBytes = -4096
	case "load-ns":
		res.LoadNS = -1
	case "fork":
		leaveChild(false)
	case "setsid":
		leaveChild(true)
	}
	return res, err
}

func (l *liar) Eval(ctx context.Context, req backend.EvalRequest, emit func(backend.Logits) error) error {
	n := 0
	err := l.Backend.Eval(ctx, req, func(lg backend.Logits) error {
		n++
		switch {
		case l.lie == "row-index" && n == 2:
			lg.Index-- // the first row again
		case l.lie == "row-short" && n == 2:
			lg.Values = lg.Values[:len(lg.Values)-1]
		case l.lie == "rows-fewer" && lg.Index == len(req.Tokens)-1:
			return nil
		case l.lie == "row-nan" && n == 2:
			lg.Values[0] = float32(math.NaN())
		case l.lie == "stream-stall" && n == 2:
			select {} // stops sending, ignoring the host's cancel
		case l.lie == "huge-row" && n == 2:
			lg.Values = make([]float32, 72<<20) // 288 MiB in one message: over the host's limit
		}
		if err := emit(lg); err != nil {
			return err
		}
		if l.lie == "rows-extra" && lg.Index == len(req.Tokens)-1 {
			lg.Index++
			return emit(lg)
		}
		return nil
	})
	return err
}

func (l *liar) Bench(ctx context.Context, req backend.BenchRequest) (backend.BenchResult, error) {
	if l.lie == "bench-hang" {
		select {} // ignores the host's deadline
	}
	res, err := l.Backend.Bench(ctx, req)
	switch l.lie {
	case "bench-negative":
		res.SamplesNS[0] = -1
	case "bench-count":
		res.SamplesNS = res.SamplesNS[:len(res.SamplesNS)-1]
	case "bench-sleep", "bench-sleep-slower-5":
		// Each repetition is a timed wait, 5 % longer for the slower lie:
		// a planted slowdown that a busy machine's noise in real compute
		// (which exceeds 5 % between processes on 2 shared cores) cannot
		// hide. The fastest repetitions, which the gates read, end within
		// microseconds of the nominal time.
		d := benchSleep
		if l.lie == "bench-sleep-slower-5" {
			d += d / 20
		}
		for i := range res.SamplesNS {
			res.SamplesNS[i] = wait(d).Nanoseconds()
		}
	}
	return res, err
}
