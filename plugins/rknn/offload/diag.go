package offload

import (
	"fmt"
	"math"
	"sort"
	"strings"

	"github.com/evalrun/evalrun/backend"
	"github.com/evalrun/evalrun/engine"
)

// opAcc accumulates one op's shadow comparison over its calls.
type opAcc struct {
	calls, elements, nonFinite int64
	errSq, refSq, outSq, dot   float64
	maxAbs                     float64
}

func (a *opAcc) add(out, ref []float32) {
	a.calls++
	for i, v := range out {
		o, r := float64(v), float64(ref[i])
		if math.IsNaN(o) || math.IsInf(o, 0) {
			a.nonFinite++
			continue
		}
		d := o - r
		a.elements++
		a.errSq += d * d
		a.refSq += r * r
		a.outSq += o * o
		a.dot += o * r
		a.maxAbs = max(a.maxAbs, math.Abs(d))
	}
}

func (a *opAcc) result(name string) backend.OpError {
	e := backend.OpError{Op: name, Calls: a.calls, Elements: a.elements, MaxAbs: a.maxAbs, NonFinite: a.nonFinite, Cosine: 1}
	switch {
	case a.refSq > 0:
		e.NMSE = a.errSq / a.refSq
	case a.errSq > 0:
		e.NMSE = math.Inf(1)
	}
	if a.outSq > 0 && a.refSq > 0 {
		e.Cosine = a.dot / math.Sqrt(a.outSq*a.refSq)
	} else if a.outSq != a.refSq {
		e.Cosine = 0
	}
	return e
}

// kernelKey is one kernel: an op name at one shape.
type kernelKey struct {
	name    string
	t, k, n int
}

// diag is the offload's bookkeeping for Diagnostics: device calls per
// kernel, and in shadow mode each op's error against the CPU path.
type diag struct {
	calls   map[kernelKey]int64
	ops     map[string]*opAcc
	opOrder []string // first call order: the model's order
}

// shadow computes op on the CPU path from the same input and adds the
// comparison with the device's output.
func (o *MatMuler) shadow(op *engine.MatMulOp, x, out []float32) error {
	ref := make([]float32, op.T*op.N)
	if err := o.cpu.MatMul(op, x, ref); err != nil {
		return fmt.Errorf("shadow %s on the CPU: %w", op.Name, err)
	}
	o.diagMu.Lock()
	defer o.diagMu.Unlock()
	a := o.diag.ops[op.Name]
	if a == nil {
		a = &opAcc{}
		o.diag.ops[op.Name] = a
		o.diag.opOrder = append(o.diag.opOrder, op.Name)
	}
	a.add(out[:op.T*op.N], ref)
	return nil
}

func (o *MatMuler) countKernel(op *engine.MatMulOp) {
	o.diagMu.Lock()
	o.diag.calls[kernelKey{op.Name, op.T, op.K, op.N}]++
	o.diagMu.Unlock()
}

// Diagnostics reports the device calls per kernel since New (every entry
// of a kernel list, in list order, with 0 for those that never ran; in auto
// mode every kernel that ran, by name and T) and, in shadow mode, every
// offloaded op's error against the CPU path, in the model's order.
func (o *MatMuler) Diagnostics(listName string) *backend.Diagnostics {
	o.diagMu.Lock()
	defer o.diagMu.Unlock()
	d := &backend.Diagnostics{Shadow: o.cfg.Shadow, KernelList: listName}
	if l := o.cfg.Kernels; l != nil {
		for _, p := range l.Pairs {
			d.Kernels = append(d.Kernels, backend.KernelUse{Name: p.Name, Shape: p.Shape(), Listed: true,
				Calls: o.diag.calls[kernelKey{p.Name, p.T(), p.K(), p.N()}]})
		}
	} else {
		keys := make([]kernelKey, 0, len(o.diag.calls))
		for k := range o.diag.calls {
			keys = append(keys, k)
		}
		sort.Slice(keys, func(i, j int) bool {
			if keys[i].name != keys[j].name {
				return keys[i].name < keys[j].name
			}
			return keys[i].t < keys[j].t
		})
		for _, k := range keys {
			d.Kernels = append(d.Kernels, backend.KernelUse{Name: k.name, Shape: fmt.Sprintf("%d×%d×%d", k.t, k.k, k.n), Calls: o.diag.calls[k]})
		}
	}
	for _, name := range o.diag.opOrder {
		d.Ops = append(d.Ops, o.diag.ops[name].result(name))
	}
	return d
}

// ResetDiagnostics forgets the calls so far: the plugin counts from the end
// of its warm-up, so that a kernel Load ran once is not reported as used.
func (o *MatMuler) ResetDiagnostics() {
	o.diagMu.Lock()
	o.diag = diag{calls: map[kernelKey]int64{}, ops: map[string]*opAcc{}}
	o.diagMu.Unlock()
}

// CheckCPUOps returns an error naming the first of names that is neither an
// op nor a weight of ops.
func CheckCPUOps(names []string, ops []engine.MatMulOp) error {
	known := map[string]bool{}
	for _, op := range ops {
		known[op.Name] = true
		if op.Weight != nil {
			known[op.Weight.Name] = true
			known[strings.TrimSuffix(op.Weight.Name, ".weight")] = true
		}
	}
	for _, n := range names {
		if known[n] {
			continue
		}
		example := ""
		if len(ops) > 0 && ops[0].Weight != nil {
			example = fmt.Sprintf(" (names like %s or %s)", ops[0].Name, strings.TrimSuffix(ops[0].Weight.Name, ".weight"))
		}
		return fmt.Errorf("%q is neither a matmul nor a weight of the model%s", n, example)
	}
	return nil
}
