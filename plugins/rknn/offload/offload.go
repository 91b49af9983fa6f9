// Package offload runs the model's weight matmuls on the RK3588 NPU through
// an npu.Driver (the simulator or librknnrt), the way the llama.cpp RKNN
// backend does: B (the weight) converted once to the NPU type in the native
// layout, N split over up to three cores in multiples of 32, one matmul
// context per (M, core), activations converted per call. Matmuls it does not
// claim go to the CPU matmul it wraps.
package offload

import (
	"errors"
	"fmt"
	"math"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/evalrun/evalrun/engine"
	"github.com/evalrun/evalrun/engine/ggml"
	"github.com/evalrun/evalrun/plugins/rknn/kernels"
	"github.com/evalrun/evalrun/plugins/rknn/npu"
)

// Config selects the device and how matmuls are offloaded.
type Config struct {
	Driver npu.Driver
	Type   Type
	// Cores is how many NPU cores share each matmul's N (1..3).
	Cores int
	// ACLayout is the layout of A and C: npu.LayoutNative (the fast path)
	// or npu.LayoutNorm. B is always native.
	ACLayout npu.Layout
	// Kernels limits offloading to the listed (name, T, K, N); nil offloads
	// every weight matmul at any T ("auto").
	Kernels *kernels.List
	// MaxMs bounds how many token counts (M) keep contexts per weight in
	// auto mode; the least recently used is destroyed beyond it. 0 means 8.
	MaxMs int
	// Evict, if set, is called with a weight's data once it is on the
	// device, so that the process keeps one copy of it (gguf.File.Evict).
	Evict func(data []byte)
	// Shadow also computes every offloaded call on the CPU matmul from the
	// same input and accumulates the difference per op (Diagnostics). The
	// model goes on with the device's output.
	Shadow bool
	// Int4BHighFirst writes an int4 B (native layout) with element 2i in
	// the high nibble of each byte, the other reading of the RKNN demo; the
	// default is low first, as for every other int4 buffer.
	Int4BHighFirst bool
	// CPUOps are ops kept on the CPU whatever the kernel list says, by op
	// name ("ffn_out-3") or weight name ("blk.3.ffn_down.weight", or
	// without ".weight").
	CPUOps map[string]bool
	// Parallel, if set, runs fn over [0, n) in ranges (bounds multiples of
	// align) on the host's threads, e.g. engine.Model.Parallel: a prefill's
	// C is gathered back by several threads. Nil gathers on the caller's;
	// Attach sets the model's.
	Parallel func(n, align int, fn func(lo, hi int))
}

func (c *Config) check() error {
	if c.Driver == nil {
		return errors.New("offload: no NPU driver")
	}
	if c.Type < FP16 || c.Type > Int4 {
		return fmt.Errorf("offload: type %d invalid", c.Type)
	}
	if c.Cores < 1 || c.Cores > npu.MaxCores {
		return fmt.Errorf("offload: cores %d outside 1..%d", c.Cores, npu.MaxCores)
	}
	if c.ACLayout != npu.LayoutNative && c.ACLayout != npu.LayoutNorm {
		return fmt.Errorf("offload: ac_layout %v invalid (native or norm)", c.ACLayout)
	}
	if c.MaxMs <= 0 {
		c.MaxMs = 8
	}
	return nil
}

// Decide says whether cfg offloads op, and if not, why. It needs no device.
func Decide(cfg Config, op *engine.MatMulOp) (bool, string) {
	switch w := op.Weight; {
	case w == nil:
		return false, "no weight"
	case !ggml.Supported(w.Type):
		return false, fmt.Sprintf("weight type %s cannot be converted", w.Type)
	case op.K > npu.MaxK:
		return false, fmt.Sprintf("K=%d > %d, the RK3588 limit (K splitting not implemented)", op.K, npu.MaxK)
	case cfg.Kernels != nil && !cfg.Kernels.Match(op.Name, op.T, op.K, op.N):
		return false, "not in the kernel list"
	case cfg.CPUOps[op.Name] || cfg.CPUOps[w.Name] || cfg.CPUOps[strings.TrimSuffix(w.Name, ".weight")]:
		return false, "cpu_ops"
	}
	return true, ""
}

// MatMuler is the offloading engine.MatMuler. MatMul may be called from
// several goroutines; calls on the same weight and T are serialized.
type MatMuler struct {
	cfg Config
	cpu engine.MatMuler

	mu      sync.Mutex
	weights map[*engine.Weight]*weightB
	failed  map[*engine.Weight]string // weights that could not be converted
	clock   int64                     // LRU clock for kernels

	statsMu sync.Mutex
	stats   Stats

	diagMu sync.Mutex
	diag   diag
}

// Stats are cumulative counters of the offload.
type Stats struct {
	NPUCalls, CPUCalls int64
	// NPURuns counts rknn_matmul_run calls (one per core per call).
	NPURuns int64
	// ConvertNS (activations to the NPU type and layout), RunNS (the core
	// runs, wall clock) and GatherNS (C back to float rows) add up the NPU
	// calls' time.
	ConvertNS, RunNS, GatherNS int64
	// Saturated counts int4 results at the int16 limit: the NPU clamps
	// there, so these outputs may be wrong (large K with correlated inputs).
	Saturated int64
	// Contexts is the number of live matmul contexts.
	Contexts int
}

// New returns an offloading matmul that falls back to cpu.
func New(cfg Config, cpu engine.MatMuler) (*MatMuler, error) {
	if err := cfg.check(); err != nil {
		return nil, err
	}
	if cpu == nil {
		return nil, errors.New("offload: no CPU matmul to fall back to")
	}
	return &MatMuler{cfg: cfg, cpu: cpu, weights: map[*engine.Weight]*weightB{}, failed: map[*engine.Weight]string{},
		diag: diag{calls: map[kernelKey]int64{}, ops: map[string]*opAcc{}}}, nil
}

// Config returns the configuration in effect.
func (o *MatMuler) Config() Config { return o.cfg }

// Stats returns the counters so far.
func (o *MatMuler) Stats() Stats {
	o.statsMu.Lock()
	s := o.stats
	o.statsMu.Unlock()
	o.mu.Lock()
	for _, w := range o.weights {
		for _, k := range w.kernels {
			s.Contexts += len(k.cores)
		}
	}
	o.mu.Unlock()
	return s
}

// decide is Decide plus conversion failures seen so far.
func (o *MatMuler) decide(op *engine.MatMulOp) (bool, string) {
	if ok, why := Decide(o.cfg, op); !ok {
		return false, why
	}
	o.mu.Lock()
	why, bad := o.failed[op.Weight]
	o.mu.Unlock()
	if bad {
		return false, why
	}
	return true, ""
}

// MatMul implements engine.MatMuler.
func (o *MatMuler) MatMul(op *engine.MatMulOp, x, out []float32) error {
	return o.MatMulShared([]*engine.MatMulOp{op}, x, [][]float32{out})
}

// MatMulShared computes ops that read the same activations x (Q, K and V;
// gate and up), outs[i] receiving ops[i]'s, as MatMul computes each: the
// offloaded ones have their activations converted once and their cores
// run as one device call (one RunCores: on the simulator one hand-over to
// the host's threads instead of one per op); the others go to the CPU.
// The kernels are locked in the order of ops: concurrent callers sharing
// weights must give them in one order (the engine does).
func (o *MatMuler) MatMulShared(ops []*engine.MatMulOp, x []float32, outs [][]float32) error {
	var cpu, group, alone []int // indexes into ops
	var ks, aloneKs []*kernel
	for i, op := range ops {
		k, err := o.prepareOp(op, x, outs[i])
		switch {
		case err != nil:
			return err
		case k == nil && op.T > 0: // not offloaded, or not convertible
			cpu = append(cpu, i)
		case k == nil:
		case len(ks) > 0 && (op.T != ops[group[0]].T || op.K != ops[group[0]].K) || slices.Contains(ks, k):
			// Not in one device call with the others (a tied weight,
			// another input shape): on its own.
			alone, aloneKs = append(alone, i), append(aloneKs, k)
		default:
			group, ks = append(group, i), append(ks, k)
		}
	}
	if len(ks) > 0 {
		groupOps, groupOuts := pick(ops, outs, group)
		if err := o.run(ks, groupOps, x, groupOuts); err != nil {
			return err
		}
	}
	for j, i := range alone {
		if err := o.run(aloneKs[j:j+1], ops[i:i+1], x, outs[i:i+1]); err != nil {
			return err
		}
	}
	// Counted and compared in the model's order, as one op at a time.
	npuOps := append(group, alone...)
	slices.Sort(npuOps)
	for _, i := range npuOps {
		o.countKernel(ops[i])
		if o.cfg.Shadow {
			if err := o.shadow(ops[i], x, outs[i]); err != nil {
				return err
			}
		}
	}
	return o.cpuMatMuls(ops, cpu, x, outs)
}

// sharedMatMuler is the engine CPU matmul's MatMulShared.
type sharedMatMuler interface {
	MatMulShared(ops []*engine.MatMulOp, x []float32, outs [][]float32) error
}

// cpuMatMuls computes ops[i] for i in idx on the CPU, together if the CPU
// matmul shares activations.
func (o *MatMuler) cpuMatMuls(ops []*engine.MatMulOp, idx []int, x []float32, outs [][]float32) error {
	if len(idx) == 0 {
		return nil
	}
	o.count(func(s *Stats) { s.CPUCalls += int64(len(idx)) })
	sub, subOuts := pick(ops, outs, idx)
	if c, ok := o.cpu.(sharedMatMuler); ok {
		return c.MatMulShared(sub, x, subOuts)
	}
	for j, op := range sub {
		if err := o.cpu.MatMul(op, x, subOuts[j]); err != nil {
			return err
		}
	}
	return nil
}

// pick returns the ops and outputs of indexes idx.
func pick(ops []*engine.MatMulOp, outs [][]float32, idx []int) ([]*engine.MatMulOp, [][]float32) {
	subOps, subOuts := make([]*engine.MatMulOp, len(idx)), make([][]float32, len(idx))
	for j, i := range idx {
		subOps[j], subOuts[j] = ops[i], outs[i]
	}
	return subOps, subOuts
}

// prepareOp checks op and returns its kernel; nil if op is not offloaded
// (or its weight cannot be converted) or has no rows.
func (o *MatMuler) prepareOp(op *engine.MatMulOp, x, out []float32) (*kernel, error) {
	if ok, _ := o.decide(op); !ok {
		return nil, nil
	}
	w := op.Weight
	if w.K != op.K || w.N != op.N {
		return nil, fmt.Errorf("npu matmul %s: op shape K=%d N=%d but weight %s is K=%d N=%d", op.Name, op.K, op.N, w.Name, w.K, w.N)
	}
	if len(x) < op.T*op.K || len(out) < op.T*op.N {
		return nil, fmt.Errorf("npu matmul %s: buffers too small: x %d < %d or out %d < %d", op.Name, len(x), op.T*op.K, len(out), op.T*op.N)
	}
	if op.T == 0 {
		return nil, nil
	}
	k, err := o.kernel(op)
	if err != nil {
		var conv *convertError
		if errors.As(err, &conv) { // the weight stays on the CPU from now on
			return nil, nil
		}
		return nil, fmt.Errorf("npu matmul %s (%d×%d×%d): %w", op.Name, op.T, op.K, op.N, err)
	}
	return k, nil
}

func (o *MatMuler) count(f func(*Stats)) {
	o.statsMu.Lock()
	f(&o.stats)
	o.statsMu.Unlock()
}

// convertError marks a weight the NPU type cannot represent.
type convertError struct{ msg string }

func (e *convertError) Error() string { return e.msg }

// weightB is one weight converted for the NPU: per core, its slice of the
// output channels as B in native layout.
type weightB struct {
	w       *engine.Weight
	kp      int // K padded to 32
	slices  []slice
	kernels map[int]*kernel // by M
}

type slice struct {
	core   int
	lo, hi int // output channels [lo, hi) of the weight
	np     int // hi-lo padded to the type's N alignment
	// B (Kp×np) in native layout: one device buffer, bound to the contexts
	// of every M, owned by a context of its own that lives as long as the
	// converted weight.
	owner  npu.Context
	b      npu.Mem
	scale  []float32 // int types: per-output-channel scale, len hi-lo
	bInfo  npu.MatmulInfo
	bAttrs npu.TensorAttr
}

// release frees the slice's B buffer and its owner context.
func (s *slice) release() {
	if s.owner == nil {
		return
	}
	if s.b != nil {
		s.owner.DestroyMem(s.b)
	}
	s.owner.Destroy()
	s.owner, s.b = nil, nil
}

// kernel is the set of contexts that run one weight at one M.
type kernel struct {
	mu      sync.Mutex
	w       *weightB
	m       int
	lastUse int64
	a       []byte    // A packed once per call, copied to every core
	aScale  []float32 // int types: per-row activation scale
	q       []int8    // int types: quantized activations, M×K
	cores   []coreCtx
}

type coreCtx struct {
	s              *slice
	mask           npu.CoreMask
	info           npu.MatmulInfo
	attrs          npu.IOAttr
	ctx            npu.Context
	aMem, bMem, cM npu.Mem
	ci             []int32 // integer C before dequantization
}

// coreMask is the mask of core i (0..2).
func coreMask(i int) npu.CoreMask { return npu.Core0 << i }

// kernel returns the contexts for op's weight at M = op.T, converting the
// weight and creating contexts on first use.
func (o *MatMuler) kernel(op *engine.MatMulOp) (*kernel, error) {
	o.mu.Lock()
	defer o.mu.Unlock()
	wb := o.weights[op.Weight]
	if wb == nil {
		var err error
		if wb, err = o.convert(op.Weight); err != nil {
			var conv *convertError
			if errors.As(err, &conv) {
				o.failed[op.Weight] = conv.msg
			}
			return nil, err
		}
		o.weights[op.Weight] = wb
		if o.cfg.Evict != nil {
			o.cfg.Evict(op.Weight.Data)
		}
	}
	o.clock++
	if k := wb.kernels[op.T]; k != nil {
		k.lastUse = o.clock
		return k, nil
	}
	if o.cfg.Kernels == nil && len(wb.kernels) >= o.cfg.MaxMs {
		o.evictLRU(wb)
	}
	k, err := o.newKernel(wb, op.T)
	if err != nil {
		return nil, err
	}
	k.lastUse = o.clock
	wb.kernels[op.T] = k
	return k, nil
}

func (o *MatMuler) evictLRU(wb *weightB) {
	var old *kernel
	for _, k := range wb.kernels {
		if old == nil || k.lastUse < old.lastUse {
			old = k
		}
	}
	old.mu.Lock() // wait for a call still using it
	delete(wb.kernels, old.m)
	old.destroy()
	old.mu.Unlock()
}

// convert turns a weight into per-core B slices (the warm-up's heavy part).
func (o *MatMuler) convert(w *engine.Weight) (*weightB, error) {
	t := o.cfg.Type
	K := w.K
	rb, err := ggml.RowBytes(w.Type, K)
	if err != nil {
		return nil, &convertError{fmt.Sprintf("weight %s: %v", w.Name, err)}
	}
	if len(w.Data) != rb*w.N {
		return nil, fmt.Errorf("weight %s has %d bytes, want %d (%d rows of %d %s)", w.Name, len(w.Data), rb*w.N, w.N, K, w.Type)
	}
	wb := &weightB{w: w, kp: roundUp(K, npu.KAlign), kernels: map[int]*kernel{}}
	ok := false
	defer func() {
		if !ok {
			wb.release()
		}
	}()
	for _, r := range SplitN(w.N, o.cfg.Cores) {
		core, rows := r.Core, r.Hi-r.Lo
		wb.slices = append(wb.slices, slice{core: core, lo: r.Lo, hi: r.Hi, np: roundUp(rows, t.NAlign())})
		s := &wb.slices[len(wb.slices)-1]
		s.bInfo = npu.MatmulInfo{M: 1, K: int32(wb.kp), N: int32(s.np), Type: t.MatmulType(), BLayout: npu.LayoutNative, ACLayout: o.cfg.ACLayout}
		owner, attrs, err := o.cfg.Driver.Create(&s.bInfo)
		if err != nil {
			return nil, fmt.Errorf("weight %s: core %d: %w", w.Name, core, err)
		}
		s.owner, s.bAttrs = owner, attrs.B
		if s.b, err = owner.CreateMem(int(attrs.B.Size)); err != nil {
			return nil, fmt.Errorf("weight %s: core %d: B: %w", w.Name, core, err)
		}
		if t != FP16 {
			s.scale = make([]float32, rows)
		}
		if err := o.packSlice(w, rb, r.Lo, rows, s); err != nil {
			return nil, err
		}
		if t == Int4 && o.cfg.Int4BHighFirst {
			for i, v := range s.b.Bytes() { // even elements in the high nibble
				s.b.Bytes()[i] = v<<4 | v>>4
			}
		}
	}
	ok = true
	return wb, nil
}

// convertBlock is how many weight rows are dequantized at a time: the
// temporaries stay small (a 128k-vocabulary output weight would need
// hundreds of MB at once) and in cache.
const convertBlock = 64

// packSlice dequantizes rows [lo, lo+rows) of w a block at a time and packs
// them into the slice's B in the NPU type (int types: symmetric per-row
// quantization, scales into s.scale).
func (o *MatMuler) packSlice(w *engine.Weight, rb, lo, rows int, s *slice) error {
	t, K := o.cfg.Type, w.K
	dst := s.b.Bytes()
	clear(dst) // the padding rows and columns; device memory is not zeroed
	f := make([]float32, min(convertBlock, rows)*K)
	var q []int8
	if t != FP16 {
		q = make([]int8, len(f))
	}
	for n0 := 0; n0 < rows; n0 += convertBlock {
		nb := min(convertBlock, rows-n0)
		fb := f[:nb*K]
		if err := ggml.Dequantize(w.Type, w.Data[(lo+n0)*rb:(lo+n0+nb)*rb], fb); err != nil {
			return &convertError{fmt.Sprintf("weight %s: %v", w.Name, err)}
		}
		var err error
		if t == FP16 {
			err = npu.PackBTRows(&s.bInfo, fb, n0, nb, K, dst)
		} else {
			qb := q[:nb*K]
			for n := range nb {
				sc, ok := ggml.QuantizeSymmetric(fb[n*K:(n+1)*K], t.qmax(), qb[n*K:(n+1)*K])
				if !ok {
					return &convertError{fmt.Sprintf("weight %s row %d: NaN or Inf has no %s value", w.Name, lo+n0+n, t)}
				}
				s.scale[n0+n] = sc
			}
			err = npu.PackBTRows(&s.bInfo, qb, n0, nb, K, dst)
		}
		if err != nil {
			return fmt.Errorf("weight %s: %w", w.Name, err)
		}
	}
	return nil
}

// release frees the weight's contexts and device buffers.
func (wb *weightB) release() {
	for m, k := range wb.kernels {
		k.mu.Lock()
		k.destroy()
		k.mu.Unlock()
		delete(wb.kernels, m)
	}
	for i := range wb.slices {
		wb.slices[i].release()
	}
}

// newKernel creates one context per core slice for M rows: core mask, A and
// C memories, and the slice's B buffer bound to it.
func (o *MatMuler) newKernel(wb *weightB, M int) (k *kernel, err error) {
	k = &kernel{w: wb, m: M}
	defer func() {
		if err != nil {
			k.destroy()
		}
	}()
	for i := range wb.slices {
		s := &wb.slices[i]
		info := s.bInfo
		info.M = int32(M)
		ctx, attrs, err := o.cfg.Driver.Create(&info)
		if err != nil {
			return nil, fmt.Errorf("core %d: %w", s.core, err)
		}
		// mask is the mask the context runs with: a single-core offload
		// sets none and lets the runtime choose (RKNN_NPU_CORE_AUTO).
		c := coreCtx{s: s, mask: npu.CoreAuto, info: info, attrs: attrs, ctx: ctx}
		k.cores = append(k.cores, c)
		cc := &k.cores[len(k.cores)-1]
		if attrs.B.Size != s.bAttrs.Size {
			return nil, fmt.Errorf("core %d: driver's B size %d at M=%d != %d bytes at M=1", s.core, attrs.B.Size, M, s.bAttrs.Size)
		}
		if o.cfg.Cores > 1 {
			cc.mask = coreMask(s.core)
			if err := ctx.SetCoreMask(cc.mask); err != nil {
				return nil, fmt.Errorf("core %d: %w", s.core, err)
			}
		}
		for _, m := range []struct {
			mem  *npu.Mem
			attr *npu.TensorAttr
		}{{&cc.aMem, &cc.attrs.A}, {&cc.cM, &cc.attrs.C}} {
			if *m.mem, err = ctx.CreateMem(int(m.attr.Size)); err != nil {
				return nil, fmt.Errorf("core %d: %s: %w", s.core, m.attr.Name, err)
			}
			if err := ctx.SetIOMem(*m.mem, m.attr); err != nil {
				return nil, fmt.Errorf("core %d: %w", s.core, err)
			}
		}
		cc.bMem = s.b
		if err := ctx.SetIOMem(s.b, &cc.attrs.B); err != nil {
			return nil, fmt.Errorf("core %d: %w", s.core, err)
		}
		if o.cfg.Type != FP16 {
			cc.ci = make([]int32, M*(s.hi-s.lo))
		}
	}
	k.a = make([]byte, k.cores[0].attrs.A.Size)
	if o.cfg.Type != FP16 {
		k.q = make([]int8, M*wb.w.K)
		k.aScale = make([]float32, M)
	}
	return k, nil
}

// destroy frees the contexts and memories (errors are moot: it is gone).
func (k *kernel) destroy() {
	for _, c := range k.cores {
		for _, m := range []npu.Mem{c.aMem, c.cM} { // B belongs to the weight
			if m != nil {
				c.ctx.DestroyMem(m)
			}
		}
		c.ctx.Destroy()
	}
	k.cores = nil
}

// run computes outs[i] = x·Wᵢᵀ on the NPU for ops[i], all of one T and K,
// on their kernels ks: the activations converted once, every kernel's cores
// run together (one device call).
func (o *MatMuler) run(ks []*kernel, ops []*engine.MatMulOp, x []float32, outs [][]float32) error {
	for _, k := range ks {
		k.mu.Lock()
		defer k.mu.Unlock()
	}
	fail := func(i int, err error) error {
		op := ops[i]
		return fmt.Errorf("npu matmul %s (%d×%d×%d): %w", op.Name, op.T, op.K, op.N, err)
	}
	for i, k := range ks {
		if k.cores == nil {
			return fail(i, errors.New("kernel was destroyed"))
		}
	}
	M, K := ops[0].T, ops[0].K
	t0 := time.Now()
	first := ks[0]
	if err := o.convertA(first, x[:M*K], M, K); err != nil {
		return fail(0, err)
	}
	n := 0
	for _, k := range ks {
		n += len(k.cores)
	}
	ctxs := make([]npu.Context, 0, n)
	for i, k := range ks {
		if len(k.a) != len(first.a) {
			return fail(i, fmt.Errorf("A is %d bytes, %d for %s", len(k.a), len(first.a), ops[0].Name))
		}
		if k != first {
			copy(k.aScale, first.aScale) // gathered with, and reported by Buffers
		}
		for c := range k.cores {
			ctxs = append(ctxs, k.cores[c].ctx)
		}
	}
	o.eachCore(ks, M, func(_ int, k *kernel, c int) { copy(k.cores[c].aMem.Bytes(), first.a) })
	t1 := time.Now()
	var errs []error
	if r, ok := o.cfg.Driver.(npu.CoreRunner); ok && len(ctxs) > 1 {
		errs = r.RunCores(ctxs)
	} else if errs = make([]error, len(ctxs)); len(ctxs) == 1 {
		for j, c := range ctxs {
			errs[j] = c.Run()
		}
	} else {
		var wg sync.WaitGroup
		for j, c := range ctxs {
			wg.Go(func() { errs[j] = c.Run() })
		}
		wg.Wait()
	}
	t2 := time.Now()
	j := 0 // errs follow ctxs: kernel by kernel, core by core
	for i, k := range ks {
		for c := range k.cores {
			if err := errs[j]; err != nil {
				return fail(i, fmt.Errorf("core %d: %w", k.cores[c].s.core, err))
			}
			j++
		}
	}
	saturated, i, err := o.gatherAll(ks, ops, M, outs)
	if err != nil {
		return fail(i, err)
	}
	t3 := time.Now()
	o.count(func(s *Stats) {
		s.NPUCalls += int64(len(ks))
		s.NPURuns += int64(len(ctxs))
		s.ConvertNS += t1.Sub(t0).Nanoseconds()
		s.RunNS += t2.Sub(t1).Nanoseconds()
		s.GatherNS += t3.Sub(t2).Nanoseconds()
		s.Saturated += saturated
	})
	return nil
}

// convertA writes the activations into k.a in A's type and layout: fp16
// rounded to nearest even, or int8/int4 with a per-row scale.
func (o *MatMuler) convertA(k *kernel, x []float32, M, K int) error {
	info := &k.cores[0].info
	clear(k.a) // the rows' ranges write only their own atoms
	var mu sync.Mutex
	var err error
	errRow := M
	o.parallelRows(M, M, func(lo, hi int) {
		if e := o.convertRows(k, info, x, lo, hi, K); e != nil {
			mu.Lock()
			if lo < errRow { // the first range's error, whichever thread failed first
				err, errRow = e, lo
			}
			mu.Unlock()
		}
	})
	return err
}

// convertRows converts the rows [lo, hi) of the activations into k.a.
func (o *MatMuler) convertRows(k *kernel, info *npu.MatmulInfo, x []float32, lo, hi, K int) error {
	if o.cfg.Type == FP16 {
		return npu.PackARows(info, x[lo*K:hi*K], lo, hi-lo, K, k.a)
	}
	qmax := o.cfg.Type.qmax()
	for m := lo; m < hi; m++ {
		q := k.q[m*K : (m+1)*K]
		sc, ok := ggml.QuantizeSymmetric(x[m*K:(m+1)*K], qmax, q)
		if !ok {
			clear(q) // the row's outputs become NaN through its scale
		}
		k.aScale[m] = sc
	}
	return npu.PackARows(info, k.q[lo*K:hi*K], lo, hi-lo, K, k.a)
}

// gatherAll gathers every core's C of a device call into its op's output
// (each core writes its own columns), spread over the host's threads from
// parallelGatherRows rows up: on one thread a prefill's gather is a
// noticeable share of the call (measured: docs/design-notes.md). It
// returns the saturated results, or the first error with the index of its
// op.
func (o *MatMuler) gatherAll(ks []*kernel, ops []*engine.MatMulOp, M int, outs [][]float32) (saturated int64, op int, err error) {
	var mu sync.Mutex
	errCore := 0
	o.eachCore(ks, M, func(i int, k *kernel, c int) {
		n, e := o.gather(&k.cores[c], k.aScale, M, ops[i].N, outs[i])
		mu.Lock()
		defer mu.Unlock()
		saturated += n
		if e != nil && (err == nil || i < op || i == op && c < errCore) { // the first core's, whatever the order
			op, errCore, err = i, c, e
		}
	})
	return saturated, op, err
}

// eachCore calls fn for every core c of every kernel ks[i], spread over
// Config.Parallel when there is one and M has rows enough.
func (o *MatMuler) eachCore(ks []*kernel, M int, fn func(i int, k *kernel, c int)) {
	type core struct{ i, c int }
	var cores []core
	for i, k := range ks {
		for c := range k.cores {
			cores = append(cores, core{i, c})
		}
	}
	o.parallelRows(M, len(cores), func(lo, hi int) {
		for _, x := range cores[lo:hi] {
			fn(x.i, ks[x.i], x.c)
		}
	})
}

// parallelRows runs fn over [0, n) on Config.Parallel from
// parallelGatherRows rows of activations up, else on the caller's thread.
func (o *MatMuler) parallelRows(M, n int, fn func(lo, hi int)) {
	if o.cfg.Parallel != nil && M >= parallelGatherRows && n > 1 {
		o.cfg.Parallel(n, 1, fn)
		return
	}
	fn(0, n)
}

// parallelGatherRows is the fewest rows of a call whose host work (A
// converted and copied to the cores, C gathered back) is handed to
// Config.Parallel: a decode step's one row takes microseconds, less than a
// hand-over to other threads.
const parallelGatherRows = 8

// gather reads one core's C, drops the N padding and writes its columns of
// out, dequantizing integer results with the row and channel scales. It
// returns how many int16 results sit at the saturation limit.
func (o *MatMuler) gather(c *coreCtx, aScale []float32, M, N int, out []float32) (saturated int64, err error) {
	s := c.s
	w := s.hi - s.lo
	if o.cfg.Type == FP16 {
		return 0, npu.UnpackCStrided(&c.info, c.cM.Bytes(), out[s.lo:], M, w, N)
	}
	if err := npu.UnpackC(&c.info, c.cM.Bytes(), c.ci, M, w); err != nil {
		return 0, err
	}
	for m := range M {
		row := out[m*N+s.lo : m*N+s.hi]
		ci := c.ci[m*w : (m+1)*w]
		sa := aScale[m]
		for j, v := range ci {
			row[j] = float32(v) * sa * s.scale[j]
			if o.cfg.Type == Int4 && (v >= math.MaxInt16 || v <= math.MinInt16) {
				saturated++
			}
		}
	}
	return saturated, nil
}

// Close destroys every context.
func (o *MatMuler) Close() error {
	o.mu.Lock()
	defer o.mu.Unlock()
	for w, wb := range o.weights {
		wb.release()
		delete(o.weights, w)
	}
	return nil
}

// CoreBuffers is one core's context of an offloaded matmul as the device
// sees it after the last call, for dumps.
type CoreBuffers struct {
	Core    int
	Lo, Hi  int // output channels of the weight
	Mask    npu.CoreMask
	Info    npu.MatmulInfo
	Attrs   npu.IOAttr
	A, B, C []byte    // copies of the bound memories, in the device layouts
	BScale  []float32 // int types: per-output-channel scales of [Lo, Hi)
}

// Buffers returns copies of the contexts' memories for weight w at M = T,
// and the per-row activation scales of the last call (int types); ok is
// false if no such contexts exist.
func (o *MatMuler) Buffers(w *engine.Weight, T int) (cores []CoreBuffers, aScale []float32, ok bool) {
	o.mu.Lock()
	wb := o.weights[w]
	var k *kernel
	if wb != nil {
		k = wb.kernels[T]
	}
	o.mu.Unlock()
	if k == nil {
		return nil, nil, false
	}
	k.mu.Lock()
	defer k.mu.Unlock()
	for _, c := range k.cores {
		cores = append(cores, CoreBuffers{
			Core: c.s.core, Lo: c.s.lo, Hi: c.s.hi, Mask: c.mask, Info: c.info, Attrs: c.attrs,
			A: slices.Clone(c.aMem.Bytes()), B: slices.Clone(c.bMem.Bytes()), C: slices.Clone(c.cM.Bytes()),
			BScale: slices.Clone(c.s.scale),
		})
	}
	return cores, slices.Clone(k.aScale), true
}
