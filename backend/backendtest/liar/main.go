// Command liar is a plugin for the host's tests that lies in one way the
// contract allows, chosen by $TEST_EVALRUN_LIE: it is the CPU plugin (the
// engine) with its Load, Eval or Bench answers bent, or with processes it
// leaves behind. The host must label each lie, keep the other backends'
// results and leave nothing running (cmd/evalrun's TestLyingPlugins).
package main

import (
	"context"
	"math"
	"os"
	"os/exec"
	"strconv"
	"syscall"
	"time"

	"github.com/evalrun/evalrun/backend"
	"github.com/evalrun/evalrun/plugins/enginebackend"
)

type liar struct {
	*enginebackend.Backend
	lie string
}

func main() {
	log := backend.NewPluginLogger("liar")
	be := enginebackend.New(enginebackend.Config{Name: "liar", Version: "test", Device: "cpu",
		Options: enginebackend.NoOptions(), Logger: log})
	backend.Serve(&liar{Backend: be, lie: os.Getenv("TEST_EVALRUN_LIE")}, backend.WithLogger(log))
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

func (l *liar) Load(ctx context.Context, req backend.LoadRequest) (backend.LoadResult, error) {
	res, err := l.Backend.Load(ctx, req)
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
	case "bench-slower-5":
		// A plugin 5 % slower: each repetition takes 5 % longer (it sleeps
		// that long), and says so.
		for i, ns := range res.SamplesNS {
			extra := ns / 20
			time.Sleep(time.Duration(extra))
			res.SamplesNS[i] = ns + extra
		}
	}
	return res, err
}
