// Package sim is a software RK3588 NPU behind the npu.Driver interface: it
// validates like the device, reads A and B from the buffers in the layout the
// caller wrote (docs rknn-npu.md §5) and computes C with the documented
// numerics (§4, §8), so an offload bug fails in CI as it would on a board.
//
// Float numerics (types 1 and 4): fp16 inputs decoded exactly, products exact
// in float32 (fp16×fp16 has at most 22 significant bits), and
//
//	acc := float32(0)
//	for each K block of 32, in K order:
//	    s := float32(0)
//	    for k in the block, in K order: s = s + a[k]*b[k]   // float32
//	    acc = acc + s                                        // float32
//
// then C = acc (fp32) or fp16(acc) rounded to nearest even. Integer types are
// exact; int4×int4 saturates to int16; int8→int8 applies the per-layer quant
// params (see quantize).
package sim

import (
	"fmt"
	"runtime"
	"sync"

	"github.com/evalrun/evalrun/plugins/internal/faults"
	"github.com/evalrun/evalrun/plugins/rknn/npu"
)

// Options configure a simulated device.
type Options struct {
	// Faults, if set, are injected into the runs (the rknn plugin's option
	// faults): every context run, each core of a matmul, is one device run.
	Faults *faults.Injector
	// Threads splits each run's output columns over goroutines; results are
	// identical for any value. 0 means 1 (one NPU core per context).
	Threads int
	// Parallel, if set, runs a run's independent output ranges (multiples
	// of align) on the host's threads, e.g. the engine's worker pool: no
	// goroutines started and woken per run. Nil splits over Threads
	// goroutines. Every output is computed by one call in a fixed order
	// either way, so results do not change.
	Parallel func(n, align int, fn func(lo, hi int))
	// Small, if set, says which runs (or one RunCores call's runs
	// together) compute on the calling goroutine, given their
	// multiply-adds (M·K·N) and B bytes; nil hands every run to
	// Parallel/Threads. A few microseconds of work cost more to hand over
	// than they save, and on a shared machine a worker preempted mid-range
	// holds the whole call up (engine.Small, which the rknn plugin sets).
	Small func(macs, bBytes int) bool

	// The readings of what the RKNN documents leave open (docs/npu-plugins.md,
	// "Simulator and offload assumptions"); the zero values are ours.
	//
	// Int4Wrap: an int4×int4 sum beyond int16 wraps modulo 2^16 instead of
	// saturating.
	Int4Wrap bool
	// FP16Ideal accumulates fp16 products in float64 in K order and rounds
	// once, instead of the fp32 blocks of 32 (the doc's "ideal" mode, for
	// A/B comparison).
	FP16Ideal bool
	// Int4BHighFirst: in an int4 B of native layout, element 2i sits in the
	// high nibble and 2i+1 in the low one (the demo's own B-native helper),
	// instead of low first as everywhere else.
	Int4BHighFirst bool
}

// Driver is a simulated RK3588 NPU.
type Driver struct {
	opts   Options
	workMu sync.Mutex
	work   []*workspace // free decode buffers: as many as runs ever overlapped
	count  npu.Counters
}

var _ npu.Driver = (*Driver)(nil)

// New returns a simulated device.
func New(opts Options) *Driver {
	if opts.Threads <= 0 {
		opts.Threads = 1
	}
	opts.Threads = min(opts.Threads, runtime.GOMAXPROCS(0)*4)
	return &Driver{opts: opts}
}

// Name identifies the driver in reports.
func (d *Driver) Name() string { return "sim-rk3588" }

// Stats returns the counters of completed runs.
func (d *Driver) Stats() npu.Stats {
	return d.count.Stats()
}

func rkErr(fn string, code int, format string, args ...any) error {
	return &npu.Error{Func: fn, Code: code, Msg: fmt.Sprintf(format, args...)}
}

// nAlign is the N alignment of each supported type (elements).
func nAlign(t npu.MatmulType) int {
	switch t {
	case npu.Float16MMFloat16ToFloat32, npu.Float16MMFloat16ToFloat16:
		return 16
	case npu.Int8MMInt8ToInt32, npu.Int8MMInt8ToInt8:
		return 32
	case npu.Int4MMInt4ToInt16:
		return 64
	}
	return 0
}

// Validate applies the RK3588 create rules (docs rknn-npu.md §1, §2).
func Validate(info *npu.MatmulInfo) error {
	const fn = "rknn_matmul_create"
	if info == nil {
		return rkErr(fn, npu.ErrParamInvalid, "nil matmul info")
	}
	align := nAlign(info.Type)
	if align == 0 {
		return rkErr(fn, npu.ErrParamInvalid, "matmul type %d (%s) not supported on RK3588 (supported: 1, 2, 3, 4, 10)", info.Type, info.Type)
	}
	if info.M <= 0 || info.K <= 0 || info.N <= 0 {
		return rkErr(fn, npu.ErrParamInvalid, "M, K, N must be > 0, got M=%d K=%d N=%d", info.M, info.K, info.N)
	}
	if info.K%npu.KAlign != 0 {
		return rkErr(fn, npu.ErrParamInvalid, "K=%d must be a multiple of %d", info.K, npu.KAlign)
	}
	if info.K > npu.MaxK {
		return rkErr(fn, npu.ErrParamInvalid, "K=%d exceeds the RK3588 limit K <= %d", info.K, npu.MaxK)
	}
	if int(info.N)%align != 0 {
		return rkErr(fn, npu.ErrParamInvalid, "N=%d must be a multiple of %d for %s", info.N, align, info.Type)
	}
	if info.BLayout < npu.LayoutNorm || info.BLayout > npu.LayoutTPNorm {
		return rkErr(fn, npu.ErrParamInvalid, "B_layout=%d invalid (0 norm, 1 native, 2 tp_norm)", info.BLayout)
	}
	if info.ACLayout != npu.LayoutNorm && info.ACLayout != npu.LayoutNative {
		return rkErr(fn, npu.ErrParamInvalid, "AC_layout=%d invalid (0 norm, 1 native)", info.ACLayout)
	}
	if info.BQuantType != npu.QuantPerLayerSym && info.BQuantType != npu.QuantPerLayerAsym {
		return rkErr(fn, npu.ErrParamInvalid, "B_quant_type=%d unsupported: per-channel/per-group need a hybrid type, not on the RK3588 profile (use 0 or 1)", info.BQuantType)
	}
	if info.ACQuantType != npu.QuantPerLayerSym && info.ACQuantType != npu.QuantPerLayerAsym {
		return rkErr(fn, npu.ErrParamInvalid, "AC_quant_type=%d invalid: A and C are per-layer only (0 or 1)", info.ACQuantType)
	}
	return nil
}

// Create validates info like the RK3588 and returns a context with its io
// attributes.
func (d *Driver) Create(info *npu.MatmulInfo) (npu.Context, npu.IOAttr, error) {
	if err := Validate(info); err != nil {
		return nil, npu.IOAttr{}, err
	}
	attrs, err := npu.Attrs(info)
	if err != nil {
		return nil, npu.IOAttr{}, rkErr("rknn_matmul_create", npu.ErrParamInvalid, "%v", err)
	}
	if err := d.opts.Faults.CheckOutput(faults.Element{Bits: attrs.C.Type.Bits(), Float: attrs.C.Type.IsFloat()}); err != nil {
		return nil, npu.IOAttr{}, rkErr("rknn_matmul_create", npu.ErrParamInvalid, "%v (C is %s)", err, attrs.C.Type)
	}
	c := &Context{
		drv:   d,
		info:  *info,
		attrs: attrs,
		quant: defaultQuant(),
	}
	return c, attrs, nil
}

// getWork lends a run its decode buffers. They belong to the device, not
// to a context: memory grows with the runs in flight (at most a matmul's
// cores), not with the number of contexts, which the offload keeps per
// weight and token count.
func (d *Driver) getWork() *workspace {
	d.workMu.Lock()
	defer d.workMu.Unlock()
	if n := len(d.work); n > 0 {
		w := d.work[n-1]
		d.work = d.work[:n-1]
		return w
	}
	return &workspace{}
}

func (d *Driver) putWork(w *workspace) {
	d.workMu.Lock()
	d.work = append(d.work, w)
	d.workMu.Unlock()
}
