// Package opscheck is test-backend-ops for the NPU: every kernel shape of a
// list runs through the offload code path on random inputs and is compared
// with a float64 reference of the unquantized inputs (NMSE, threshold 5e-4
// as for MUL_MAT; 4e-2 for int4, see MaxNMSEFor), and timed.
package opscheck

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math"
	"math/rand/v2"
	"time"

	"github.com/evalrun/evalrun/engine"
	"github.com/evalrun/evalrun/engine/ggml"
	"github.com/evalrun/evalrun/plugins/rknn/kernels"
	"github.com/evalrun/evalrun/plugins/rknn/npu"
	"github.com/evalrun/evalrun/plugins/rknn/npu/sim"
	"github.com/evalrun/evalrun/plugins/rknn/offload"
)

// MaxNMSE is test-backend-ops' threshold for MUL_MAT, the limit for fp16
// and int8 (whose quantization noise on inputs uniform in [-1, 1] is about
// 1/(2·127²) ≈ 3e-5).
const MaxNMSE = 5e-4

// MaxNMSEInt4 is the limit for int4: quantizing both inputs to ±7 steps of
// amax/7 alone gives an NMSE of about 1/(2·7²) ≈ 1.0e-2 on uniform inputs
// (each operand's rounding noise (amax/7)²/12 against E[x²] = amax²/3), so
// 5e-4 fails every int4 kernel. The limit is 4× that noise: a layout or
// scale bug gives an NMSE near 1 or above.
const MaxNMSEInt4 = 4e-2

// MaxNMSEFor is the NMSE limit of an NPU type.
func MaxNMSEFor(t offload.Type) float64 {
	if t == offload.Int4 {
		return MaxNMSEInt4
	}
	return MaxNMSE
}

// Config is one check run.
type Config struct {
	// Kernels are the shapes to check; if nil, Model (a GGUF path) gives
	// them through kernels.ForModel with Tokens (default [1]) and Ops.
	Kernels *kernels.List
	Model   string
	Tokens  []int
	Ops     []string

	// Driver runs the kernels; nil is a fault-free simulator.
	Driver npu.Driver
	// DriverName is "sim" or "hardware", for the backend line.
	DriverName string
	Type       offload.Type
	Cores      int        // 1..3, 0 = 3
	ACLayout   npu.Layout // LayoutNative (fast path) or LayoutNorm

	// DumpDir, if set, receives every op's NPU buffers and a JSON sidecar.
	DumpDir string
	Seed    uint64
	// MinTime is how long each op is timed for (at least one run after the
	// checked one); 0 means 50 ms.
	MinTime time.Duration
}

// Result is one op's outcome.
type Result struct {
	Name    string  `json:"name"`
	T       int     `json:"m"`
	K       int     `json:"k"`
	N       int     `json:"n"`
	Type    string  `json:"type"`
	NMSE    float64 `json:"nmse"`
	MaxNMSE float64 `json:"max_nmse"` // the type's limit (MaxNMSEFor)
	MaxAbs  float64 `json:"max_abs_err"`
	Bad     int     `json:"non_finite"` // NaN or Inf outputs
	Sat     int64   `json:"saturated"`  // int4 results clamped at the int16 limit
	Runs    int     `json:"runs"`       // timed calls
	RunNS   int64   `json:"run_ns"`     // NPU run time per call
	CallNS  int64   `json:"call_ns"`    // whole offloaded call per call
	GFLOPS  float64 `json:"gflops"`     // 2·M·K·N / run time
	Pass    bool    `json:"pass"`
	Error   string  `json:"error,omitempty"`
	DumpDir string  `json:"dump_dir,omitempty"`
}

// Params is the test-backend-ops style parameter string.
func (r Result) Params() string {
	return fmt.Sprintf("name=%s,type=%s,m=%d,k=%d,n=%d", r.Name, r.Type, r.T, r.K, r.N)
}

// Report is the whole run.
type Report struct {
	Backend string   `json:"backend"` // "RKNN(sim)"
	Results []Result `json:"results"`
	Passed  int      `json:"passed"`
	OK      bool     `json:"ok"`
}

// Run checks every kernel, printing test-backend-ops style lines to out.
// An error means the check could not run (bad config, unreadable model);
// failing ops are reported in Report, not as an error.
func Run(ctx context.Context, cfg Config, out io.Writer) (Report, error) {
	list, err := cfg.kernels()
	if err != nil {
		return Report{}, err
	}
	if cfg.Cores == 0 {
		cfg.Cores = npu.MaxCores
	}
	if cfg.DriverName == "" {
		cfg.DriverName = "sim"
	}
	if cfg.Driver == nil {
		cfg.Driver = sim.New(sim.Options{})
	}
	if cfg.MinTime == 0 {
		cfg.MinTime = 50 * time.Millisecond
	}
	if cfg.ACLayout != npu.LayoutNative && cfg.ACLayout != npu.LayoutNorm {
		return Report{}, fmt.Errorf("opscheck: ac layout %v invalid", cfg.ACLayout)
	}
	rep := Report{Backend: "RKNN(" + cfg.DriverName + ")"}
	fmt.Fprintf(out, "Testing %d kernels on %s (%s, %d cores, driver %s)\n", len(list.Pairs), rep.Backend, cfg.Type, cfg.Cores, cfg.Driver.Name())
	for i, p := range list.Pairs {
		if err := ctx.Err(); err != nil {
			return rep, err
		}
		r := checkOne(cfg, i, p)
		rep.Results = append(rep.Results, r)
		status := "OK"
		if r.Pass {
			rep.Passed++
		} else {
			status = "FAIL"
		}
		fmt.Fprintf(out, "  MUL_MAT(%s): %s  (%s)\n", r.Params(), status, detail(r))
	}
	rep.OK = rep.Passed == len(rep.Results)
	fmt.Fprintf(out, "  %d/%d tests passed\n", rep.Passed, len(rep.Results))
	verdict := "OK"
	if !rep.OK {
		verdict = "FAIL"
	}
	fmt.Fprintf(out, "Backend %s: %s\n", rep.Backend, verdict)
	return rep, nil
}

func detail(r Result) string {
	if r.Error != "" {
		return r.Error
	}
	s := fmt.Sprintf("nmse %.1e", r.NMSE)
	if r.NMSE > r.MaxNMSE {
		s = fmt.Sprintf("nmse %.1e > %.1e", r.NMSE, r.MaxNMSE)
	}
	if r.Bad > 0 {
		s += fmt.Sprintf(", %d NaN/Inf outputs", r.Bad)
	}
	if r.Sat > 0 {
		s += fmt.Sprintf(", %d saturated", r.Sat)
	}
	return s + fmt.Sprintf(", %.2f GFLOPS", r.GFLOPS)
}

// kernels resolves the list to check.
func (cfg *Config) kernels() (*kernels.List, error) {
	if cfg.Kernels != nil {
		if cfg.Model != "" {
			return nil, errors.New("opscheck: give a kernel list or a model, not both")
		}
		if err := cfg.Kernels.Validate("kernel list"); err != nil {
			return nil, err
		}
		return cfg.Kernels, nil
	}
	if cfg.Model == "" {
		return nil, errors.New("opscheck: no kernel list and no model")
	}
	if err := kernels.CheckOps(cfg.Ops); err != nil {
		return nil, err
	}
	tokens := cfg.Tokens
	if len(tokens) == 0 {
		tokens = []int{1}
	}
	for _, t := range tokens {
		if t <= 0 {
			return nil, fmt.Errorf("opscheck: token count %d must be > 0", t)
		}
	}
	m, err := engine.Open(cfg.Model, engine.Options{Threads: 1})
	if err != nil {
		return nil, err
	}
	defer m.Close()
	l := kernels.ForModel(m, tokens, cfg.Ops)
	return &l, nil
}

// opData are one op's random inputs.
type opData struct {
	w   *engine.Weight // N rows of K, F32
	wf  []float32
	x   []float32 // T×K
	ref []float64 // T×N
}

func newOpData(seed uint64, index int, T, K, N int) *opData {
	rng := rand.New(rand.NewPCG(seed, uint64(index)))
	d := &opData{wf: make([]float32, N*K), x: make([]float32, T*K), ref: make([]float64, T*N)}
	uniform := func() float32 { return rng.Float32()*2 - 1 }
	for i := range d.x {
		d.x[i] = uniform()
	}
	raw := make([]byte, 4*N*K)
	for i := range d.wf {
		d.wf[i] = uniform()
		binary.LittleEndian.PutUint32(raw[4*i:], math.Float32bits(d.wf[i]))
	}
	d.w = &engine.Weight{Name: "random", Type: ggml.F32, K: K, N: N, Data: raw}
	for t := range T {
		xr := d.x[t*K : (t+1)*K]
		for n := range N {
			wr := d.wf[n*K : (n+1)*K]
			var s float64
			for k, xv := range xr {
				s += float64(xv) * float64(wr[k])
			}
			d.ref[t*N+n] = s
		}
	}
	return d
}

// checkOne runs one kernel: a checked call, then timed calls.
func checkOne(cfg Config, index int, p kernels.Pair) Result {
	r := Result{Name: p.Name, T: p.T(), K: p.K(), N: p.N(), Type: cfg.Type.String()}
	fail := func(format string, args ...any) Result {
		r.Error = fmt.Sprintf(format, args...)
		return r
	}
	list := &kernels.List{Pairs: []kernels.Pair{p}}
	op := &engine.MatMulOp{Name: p.Name, T: r.T, K: r.K, N: r.N}
	oc := offload.Config{Driver: cfg.Driver, Type: cfg.Type, Cores: cfg.Cores, ACLayout: cfg.ACLayout, Kernels: list}
	if ok, why := offload.Decide(oc, &engine.MatMulOp{Name: p.Name, T: r.T, K: r.K, N: r.N, Weight: &engine.Weight{Type: ggml.F32}}); !ok {
		return fail("not supported: %s", why)
	}
	d := newOpData(cfg.Seed, index, r.T, r.K, r.N)
	op.Weight = d.w
	// The CPU fallback must never run here: a check that silently fell
	// back would pass without touching the NPU.
	o, err := offload.New(oc, refuseCPU{})
	if err != nil {
		return fail("%v", err)
	}
	defer o.Close()
	out := make([]float32, r.T*r.N)
	if err := o.MatMul(op, d.x, out); err != nil {
		return fail("%v", err)
	}
	r.NMSE, r.MaxAbs, r.Bad = compare(out, d.ref)
	r.Sat = o.Stats().Saturated
	r.MaxNMSE = MaxNMSEFor(cfg.Type)
	r.Pass = r.Bad == 0 && r.NMSE <= r.MaxNMSE

	before := o.Stats()
	start := time.Now()
	scratch := make([]float32, len(out))
	for r.Runs == 0 || time.Since(start) < cfg.MinTime {
		if err := o.MatMul(op, d.x, scratch); err != nil {
			r.Pass = false
			return fail("timed run %d: %v", r.Runs+1, err)
		}
		r.Runs++
	}
	elapsed := time.Since(start)
	after := o.Stats()
	r.RunNS = (after.RunNS - before.RunNS) / int64(r.Runs)
	r.CallNS = elapsed.Nanoseconds() / int64(r.Runs)
	if r.RunNS > 0 {
		r.GFLOPS = 2 * float64(r.T) * float64(r.K) * float64(r.N) / float64(r.RunNS)
	}
	if cfg.DumpDir != "" {
		dir, err := dump(cfg, index, r, o, op, d)
		if err != nil {
			r.Pass = false
			return fail("dump: %v", err)
		}
		r.DumpDir = dir
	}
	return r
}

// compare returns test-backend-ops' NMSE (a = NPU, b = reference), the
// largest absolute error and the count of NaN/Inf outputs.
func compare(a []float32, b []float64) (nmse, maxAbs float64, bad int) {
	var num, den float64
	for i, v := range a {
		f := float64(v)
		if math.IsNaN(f) || math.IsInf(f, 0) {
			bad++
			continue
		}
		e := f - b[i]
		num += e * e
		den += f * f
		maxAbs = max(maxAbs, math.Abs(e))
	}
	if bad > 0 {
		return math.NaN(), maxAbs, bad
	}
	if den == 0 {
		if num == 0 {
			return 0, maxAbs, 0
		}
		return math.Inf(1), maxAbs, 0
	}
	return num / den, maxAbs, 0
}

// refuseCPU is the fallback of a check: reaching it is an error.
type refuseCPU struct{}

func (refuseCPU) MatMul(op *engine.MatMulOp, _, _ []float32) error {
	return fmt.Errorf("%s was not offloaded", op.Name)
}
