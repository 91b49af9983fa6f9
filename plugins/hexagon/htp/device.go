package htp

import (
	"fmt"
	"sort"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/evalrun/evalrun/engine"
	"github.com/evalrun/evalrun/engine/ggml"
	"github.com/evalrun/evalrun/plugins/internal/faults"
)

// Config configures a simulated HTP attached to a loaded model.
type Config struct {
	// Sessions is the number of HTP sessions (devices, HTP0..HTPn-1) the
	// layers are split across: contiguous runs of layers, layer il on
	// session il·Sessions/NLayer; result_output on the last one.
	Sessions int
	// Faults are injected into the device's matmuls, one device run each
	// (nil: none).
	Faults *faults.Injector
	// Layer runs every op of a layer on its session (ops: layer), not only
	// the matmuls.
	Layer bool
}

// Device is the simulated HTP: it claims every weight matmul whose type it
// takes and hands the others to the CPU.
type Device struct {
	cpu      engine.MatMuler
	kern     ggml.Kernels
	parallel func(n, align int, fn func(lo, hi int)) // the model's threads
	weights  map[*engine.Weight]*weight
	sessions []*Session
	faults   *faults.Injector
	acts     sync.Pool // *ggml.GGMLActivations
	scratch  sync.Pool // *[]byte: ggml blocks of one row chunk
	ops      []engine.MatMulOp
	layer    bool
	// layerSession is each layer's session.
	layerSession []*Session
}

// weight is a matrix in the HTP layout, owned by one session.
type weight struct {
	typ      ggml.Type
	k, n     int
	rowBytes int
	data     []byte // HTP layout
	session  *Session
}

// Session is one simulated HTP session and what ran on it.
type Session struct {
	Name   string
	Layers []int // the layers it owns (-1: the output head)
	counts sync.Map
}

// Count is how many times an op kind ran on a session.
type Count struct {
	Op string
	N  int64
}

func (s *Session) add(op string, n int64) {
	c, _ := s.counts.LoadOrStore(op, new(atomic.Int64))
	c.(*atomic.Int64).Add(n)
}

// Counts lists the op kinds that ran on the session, by name.
func (s *Session) Counts() []Count {
	var out []Count
	s.counts.Range(func(k, v any) bool {
		out = append(out, Count{k.(string), v.(*atomic.Int64).Load()})
		return true
	})
	sort.Slice(out, func(i, j int) bool { return out[i].Op < out[j].Op })
	return out
}

// chunkRows is how many weight rows one worker decodes from the HTP layout
// at a time (a VTCM tile): a multiple of 16 for the engine's row kernels.
const chunkRows = 64

// New repacks every supported weight of m into the HTP layout, on its
// session. evict, if set, releases the file's copy of a weight the device
// now holds.
func New(m *engine.Model, cfg Config, evict func([]byte)) (*Device, error) {
	nLayer := m.Config.NLayer
	if cfg.Sessions < 1 || cfg.Sessions > nLayer {
		return nil, fmt.Errorf("sessions %d: want 1..%d (one session per layer at most; the model has %d)", cfg.Sessions, nLayer, nLayer)
	}
	d := &Device{cpu: m.CPUMatMul(), kern: m.Kernels(), parallel: m.Parallel, weights: map[*engine.Weight]*weight{}, faults: cfg.Faults}
	d.acts.New = func() any { return new(ggml.GGMLActivations) }
	for i := range cfg.Sessions {
		d.sessions = append(d.sessions, &Session{Name: fmt.Sprintf("HTP%d", i)})
	}
	sessionOf := func(layer int) *Session {
		if layer < 0 {
			return d.sessions[len(d.sessions)-1]
		}
		return d.sessions[layer*cfg.Sessions/nLayer]
	}
	d.layer = cfg.Layer
	for il := range nLayer {
		s := sessionOf(il)
		s.Layers = append(s.Layers, il)
		d.layerSession = append(d.layerSession, s)
	}
	last := d.sessions[len(d.sessions)-1]
	last.Layers = append(last.Layers, -1)
	d.ops = m.MatMulOps(1)
	for _, op := range d.ops {
		w := op.Weight
		if !Supported(w.Type) || d.weights[w] != nil {
			continue
		}
		hw := &weight{typ: w.Type, k: w.K, n: w.N, rowBytes: w.RowBytes(), data: make([]byte, len(w.Data)), session: sessionOf(op.Layer)}
		if err := Repack(w.Type, w.K, w.Data, hw.data); err != nil {
			return nil, fmt.Errorf("%s: %w", w.Name, err)
		}
		if evict != nil {
			evict(w.Data)
		}
		d.weights[w] = hw
	}
	return d, nil
}

// Sessions lists the device's sessions.
func (d *Device) Sessions() []*Session { return d.sessions }

// Claims reports whether op runs on the HTP, and on which session.
func (d *Device) Claims(op *engine.MatMulOp) (*Session, bool) {
	w := d.weights[op.Weight]
	if w == nil {
		return nil, false
	}
	return w.session, true
}

// MatMul implements engine.MatMuler: out = x·Wᵀ with the activations
// quantized on the device to the weight's dot type (Q8_0 blocks of 32 for
// Q4_0, Q8_0 and MXFP4, as ggml's quantize_row_q8_0; binary16 for F16; none
// for F32), integer (or float) block dots and fp32 accumulation, the
// weights decoded from the HTP layout a tile of rows at a time.
func (d *Device) MatMul(op *engine.MatMulOp, x, out []float32) error {
	w := d.weights[op.Weight]
	if w == nil {
		return d.cpu.MatMul(op, x, out)
	}
	T, K, N := op.T, op.K, op.N
	if K != w.k || N != w.n || len(x) < T*K || len(out) < T*N {
		return fmt.Errorf("htp: matmul %s: shape %d×%d×%d against a %d×%d weight, buffers %d and %d", op.Name, T, K, N, w.k, w.n, len(x), len(out))
	}
	if T == 0 {
		return nil
	}
	faultRun := d.faults.Begin()
	w.session.add("MUL_MAT", 1)
	a := d.acts.Get().(*ggml.GGMLActivations)
	defer d.acts.Put(a)
	if err := d.kern.PrepareGGML(w.typ, x[:T*K], T, a); err != nil {
		return fmt.Errorf("htp: matmul %s: activations: %w", op.Name, err)
	}
	kern := ggml.GGMLKernelFor(w.typ, T, K, chunkRows)
	chunks := (N + chunkRows - 1) / chunkRows
	run := func(n int, fn func(lo, hi int)) { d.parallel(n, 1, fn) }
	if T*N*K < 1<<15 {
		run = func(n int, fn func(lo, hi int)) { fn(0, n) }
	}
	run(chunks, func(lo, hi int) {
		buf := d.tile(chunkRows * w.rowBytes)
		defer d.scratch.Put(buf)
		for c := lo; c < hi; c++ {
			r0, r1 := c*chunkRows, min((c+1)*chunkRows, N)
			src := w.data[r0*w.rowBytes : r1*w.rowBytes]
			tile := (*buf)[:len(src)]
			for r := 0; r < len(src); r += w.rowBytes {
				unpackRow(w.typ, K, src[r:r+w.rowBytes], tile[r:r+w.rowBytes])
			}
			d.kern.MatMulGGML(kern, w.typ, tile, r1-r0, a, out[r0:], N)
		}
	})
	faultRun.CorruptFloat32(out[:T*N])
	return nil
}

func (d *Device) tile(n int) *[]byte {
	if p, ok := d.scratch.Get().(*[]byte); ok && cap(*p) >= n {
		*p = (*p)[:n]
		return p
	}
	b := make([]byte, n)
	return &b
}

// Summary is the one-line plan: how many matmuls on the HTP and each
// session's layers and matmuls (per forward pass).
func (d *Device) Summary() string {
	on := 0
	for _, op := range d.ops {
		if d.weights[op.Weight] != nil {
			on++
		}
	}
	var parts []string
	for _, s := range d.sessions {
		mm := 0
		for _, op := range d.ops {
			if w := d.weights[op.Weight]; w != nil && w.session == s {
				mm++
			}
		}
		parts = append(parts, fmt.Sprintf("%s: %s, %d MUL_MAT", s.Name, layerRange(s.Layers), mm))
	}
	what := "matmuls"
	if d.layer {
		what = "matmuls and their layers' ops"
	}
	return fmt.Sprintf("%d of %d %s on the HTP, %d session(s) (%s)", on, len(d.ops), what, len(d.sessions), strings.Join(parts, "; "))
}

// layerRange formats a session's layers: "layers 0-2", "layers 3-4 + output".
func layerRange(layers []int) string {
	var l []int
	out := false
	for _, il := range layers {
		if il < 0 {
			out = true
		} else {
			l = append(l, il)
		}
	}
	s := "no layers"
	switch {
	case len(l) == 1:
		s = fmt.Sprintf("layer %d", l[0])
	case len(l) > 1:
		s = fmt.Sprintf("layers %d-%d", l[0], l[len(l)-1])
	}
	if out {
		s += " + output"
	}
	return s
}

// Close releases the device. Its threads are the model's (a second pool's
// spinning workers would compete with the model's for the same cores).
func (d *Device) Close() error { return nil }
