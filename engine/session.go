package engine

import (
	"fmt"
	"math"
	"slices"

	"github.com/evalrun/evalrun/engine/ggml"
)

// Session is one sequence: its KV cache and position. A Session is not safe
// for concurrent use; several sessions may share a Model.
type Session struct {
	m    *Model
	nCtx int
	pos  int
	// Per layer K and V for positions [0, pos), F32 like llama.cpp's plain
	// configuration, head-major: head h's row for position p is at
	// (h*capacity + p)*HeadDim, so attention streams one head's keys and
	// values sequentially (in position-major rows a head's keys are HeadDim
	// floats out of every kvDim: short strided runs, latency-bound once the
	// weights evict the cache).
	k, v     [][]float32
	capacity int // positions the cache holds (layers without a sliding window)
	// swa places the sliding-window layers' positions in their cache of
	// swaCacheSize cells (with SWAFull, the whole context's) as llama.cpp does
	// (swa.go); nil: no such layers. Their K and V are in k, v (or kq, vq) too,
	// one row per cell.
	swa *swaCells
	// A quantized side (Model.kc, Model.vc) keeps its rows in kq or vq
	// instead: an f16 side, and a q8_0 side whose heads are whole blocks,
	// head-major as k and v (attention reads them in place), the others
	// position-major, one codec row per position, which attention reads
	// dequantized into kf or vf (head-major, as k and v).
	kq, vq [][]byte
	kf, vf []float32
	// layerHook sees the residual stream after each layer (SetLayerHook).
	layerHook func(il int, rows []int, x []float32)
	// buf holds Decode's activations, reused by the next Decode.
	buf arena
	// rope holds the (cos, sin) row of every position decoded so far
	// (RopeDim values each): it depends on the position alone, and a row
	// costs RopeDim calls of cosf and sinf. ropeSWA holds the
	// sliding-window layers' rows (their own base).
	rope, ropeSWA []float32
	// ropeP is the RoPE of the layers without a window: the model's, or
	// Phi-3's long factors for a context beyond the original one.
	ropeP *ropeParams
	// cellBuf holds a Decode's cells of the layers without a window.
	cellBuf []int
}

// SetLayerHook makes Decode call hook after every layer il with its output,
// the residual stream: row r of x (NEmbd values) is batch index rows[r].
// The last layer keeps only the rows whose logits are wanted, as llama.cpp
// does. x is only valid during the call. nil removes the hook. Diagnostics
// use it to find the layer where a device's error grows.
func (s *Session) SetLayerHook(hook func(il int, rows []int, x []float32)) { s.layerHook = hook }

// NewSession starts an empty sequence of at most nCtx positions (<= 0: the
// model's training context).
func (m *Model) NewSession(nCtx int) *Session {
	if nCtx <= 0 {
		nCtx = m.Config.NCtxTrain
	}
	n := m.Config.NLayer
	s := &Session{m: m, nCtx: nCtx, ropeP: &m.rope}
	if (m.ropeLong != nil || m.ropeShort != nil) && pad256(nCtx) > m.Config.RopeOrigCtx {
		s.ropeP = &m.ropeLongP // llama_model::get_rope_factors: n_ctx_seq > n_ctx_orig_yarn
	}
	if m.Config.NSWA > 0 {
		size := swaCacheSize(nCtx, m.Config.NSWA)
		if m.swaFull {
			size = pad256(nCtx)
		}
		s.swa = newSWACells(size, m.Config.NSWA)
	}
	if m.kc == nil {
		s.k = make([][]float32, n)
	} else {
		s.kq = make([][]byte, n)
	}
	if m.vc == nil {
		s.v = make([][]float32, n)
	} else {
		s.vq = make([][]byte, n)
	}
	return s
}

// Pos is the number of tokens in the sequence: the next token's position.
func (s *Session) Pos() int { return s.pos }

// NCtx is the maximum number of positions.
func (s *Session) NCtx() int { return s.nCtx }

// Reset empties the sequence.
func (s *Session) Reset() {
	s.pos = 0
	if s.swa != nil {
		s.swa.reset()
	}
}

// Truncate drops every position >= pos, so decoding continues at pos.
// Positions beyond the current length are ignored; negative means 0. A
// sliding-window cache keeps only the window's cells: positions it has
// already overwritten stay gone, as in llama.cpp.
func (s *Session) Truncate(pos int) {
	s.pos = min(s.pos, max(pos, 0))
	if s.swa != nil {
		s.swa.remove(int32(s.pos), 1<<31-1)
	}
}

// Decode appends tokens at positions Pos()..Pos()+len(tokens)-1 in one
// forward pass (one llama_decode) and calls emit, in order, with the logits
// of every row i for which want(i) (want nil = every row). The logits slice
// is only valid during the call. On success the position advances even if
// emit returns an error. A model with sliding windows decodes a batch of
// more than 512 tokens as llama_decode does, in micro-batches of 512; an
// error stops it after the micro-batches already decoded.
func (s *Session) Decode(tokens []int32, want func(i int) bool, emit func(i int, logits []float32) error) error {
	c := s.m.Config
	T := len(tokens)
	if T == 0 {
		return nil
	}
	if s.pos+T > s.nCtx {
		return fmt.Errorf("decode: %d tokens at position %d exceed the context of %d positions", T, s.pos, s.nCtx)
	}
	for i, id := range tokens {
		if id < 0 || int(id) >= c.NVocab {
			return fmt.Errorf("decode: token %d (batch index %d) out of range [0, %d)", id, i, c.NVocab)
		}
	}
	if s.swa != nil && T > ubatchSize {
		// llama_decode splits a batch into micro-batches, and the
		// sliding-window cache places each in turn.
		for lo := 0; lo < T; lo += ubatchSize {
			hi := min(lo+ubatchSize, T)
			sub := func(i int) bool { return want == nil || want(lo+i) }
			if err := s.decode(tokens[lo:hi], sub, func(i int, l []float32) error { return emit(lo+i, l) }); err != nil {
				return err
			}
		}
		return nil
	}
	return s.decode(tokens, want, emit)
}

// decode runs one micro-batch (Decode checked the tokens and the context).
func (s *Session) decode(tokens []int32, want func(i int) bool, emit func(i int, logits []float32) error) error {
	m, c := s.m, s.m.Config
	T := len(tokens)
	var outRows []int
	for i := range T {
		if want == nil || want(i) {
			outRows = append(outRows, i)
		}
	}
	f := forward{s: s, T: T, pos0: s.pos}
	if s.swa != nil {
		var ok bool
		if f.swaCells, ok = s.swa.place(s.pos, T); !ok {
			return fmt.Errorf("decode: no room for %d tokens in the sliding-window cache of %d cells", T, len(s.swa.pos))
		}
	}
	s.reserve(s.pos + T)
	s.buf.reset()

	E := c.NEmbd
	x := s.buf.alloc(T * E)
	for i, id := range tokens {
		if err := ggml.Dequantize(m.tokEmbd.Type, m.tokEmbd.Row(int(id)), x[i*E:(i+1)*E]); err != nil {
			return fmt.Errorf("decode: %s row %d: %w", m.tokEmbd.Name, id, err)
		}
	}
	if c.EmbedScale != 0 {
		scale(x, c.EmbedScale) // ggml_scale of inp_embd
	}
	f.init()
	var err error
	var all []int
	for il := range m.layers {
		mark := s.buf.mark()
		if x, err = f.layer(il, x, outRows); err != nil {
			return err
		}
		if il < len(m.layers)-1 {
			// x is still the buffer above the mark; the last layer may
			// return rows of its own.
			s.buf.release(mark)
		}
		if s.layerHook != nil {
			rows := outRows
			if len(x) == T*E {
				if all == nil {
					all = make([]int, T)
					for i := range all {
						all[i] = i
					}
				}
				rows = all
			}
			s.layerHook(il, rows, x)
		}
	}
	R := len(outRows)
	if R == 0 {
		s.pos += T
		return nil
	}
	xn := s.buf.alloc(R * E)
	for r := range R {
		rmsNorm(xn[r*E:(r+1)*E], x[r*E:(r+1)*E], m.outputNorm, c.RMSEps)
	}
	op := m.outputOp(R)
	logits := s.buf.alloc(R * op.N)
	if err := m.mm.MatMul(&op, xn, logits); err != nil {
		return err
	}
	addBias(cpuOps{kern: m.kern}, logits, m.outputBias)
	if c.LogitScale != 0 {
		scale(logits, 1/c.LogitScale)
	}
	if c.FinalSoftcap != 0 {
		ggml.SoftCap(logits, c.FinalSoftcap)
	}
	s.pos += T
	for r, i := range outRows {
		if err := emit(i, logits[r*op.N:(r+1)*op.N]); err != nil {
			return err
		}
	}
	return nil
}

// layerCap is the number of cells layer il's cache has room for.
func (s *Session) layerCap(il int) int {
	if s.swa != nil && s.m.Config.SWALayer(il) {
		return len(s.swa.pos)
	}
	return s.capacity
}

// reserve grows the KV cache of the layers without a window to hold n
// positions; a sliding-window layer's cache has its fixed size from the
// start.
func (s *Session) reserve(n int) {
	c := s.m.Config
	D := c.HeadDim
	if s.swa != nil {
		for il := range c.NLayer {
			if !c.SWALayer(il) || s.hasCache(il) {
				continue
			}
			size := len(s.swa.pos)
			if s.k != nil {
				s.k[il] = make([]float32, c.NHeadKV*size*D)
			} else {
				s.kq[il] = make([]byte, size*s.m.kc.rowBytes)
			}
			if s.v != nil {
				s.v[il] = make([]float32, c.NHeadKV*size*D)
			} else {
				s.vq[il] = make([]byte, size*s.m.vc.rowBytes)
			}
		}
	}
	if n <= s.capacity {
		return
	}
	capacity := min(max(n, 2*s.capacity, 64), s.nCtx)
	grow := func(old []float32) []float32 {
		buf := make([]float32, c.NHeadKV*capacity*D)
		for h := range c.NHeadKV {
			copy(buf[h*capacity*D:], old[h*s.capacity*D:(h*s.capacity+s.pos)*D])
		}
		return buf
	}
	growQ := func(old []byte, kc *kvCodec) []byte {
		buf := make([]byte, capacity*kc.rowBytes)
		if hb := kc.headBytes; hb > 0 { // head-major
			for h := range c.NHeadKV {
				copy(buf[h*capacity*hb:], old[h*s.capacity*hb:(h*s.capacity+s.pos)*hb])
			}
			return buf
		}
		copy(buf, old[:s.pos*kc.rowBytes])
		return buf
	}
	for il := range c.NLayer {
		if s.swa != nil && c.SWALayer(il) {
			continue
		}
		if s.k != nil {
			s.k[il] = grow(s.k[il])
		} else {
			s.kq[il] = growQ(s.kq[il], s.m.kc)
		}
		if s.v != nil {
			s.v[il] = grow(s.v[il])
		} else {
			s.vq[il] = growQ(s.vq[il], s.m.vc)
		}
	}
	s.capacity = capacity
}

func (s *Session) hasCache(il int) bool {
	if s.k != nil {
		return s.k[il] != nil
	}
	return s.kq[il] != nil
}

// storeKV writes T rows of K and V (position-major, kvDim floats each) into
// layer il's cache, row t at cell cells[t]: head-major floats, halves or
// Q8_0 blocks, or one codec row per cell for the other quantized sides.
func (s *Session) storeKV(il int, cells []int, k, v []float32) {
	c := s.m.Config
	D, kvDim := c.HeadDim, c.NHeadKV*c.HeadDim
	capacity := s.layerCap(il)
	for t := range len(k) / kvDim {
		cell := cells[t]
		if s.k == nil || s.v == nil {
			if kc := s.m.kc; kc != nil {
				kc.store(s.kq[il], capacity, cell, D, k[t*kvDim:(t+1)*kvDim])
			}
			if vc := s.m.vc; vc != nil {
				vc.store(s.vq[il], capacity, cell, D, v[t*kvDim:(t+1)*kvDim])
			}
		}
		for h := range c.NHeadKV {
			dst := (h*capacity + cell) * D
			if s.k != nil {
				copy(s.k[il][dst:dst+D], k[t*kvDim+h*D:])
			}
			if s.v != nil {
				copy(s.v[il][dst:dst+D], v[t*kvDim+h*D:])
			}
		}
	}
}

// kvRows are a layer's keys (or values) for attention, head-major, head
// apart: float32 (the f32 cache itself, or a quantized side decoded into
// the session's scratch), or in place an f16 side's binary16 rows or a
// q8_0 side's rows of Q8_0 blocks (rb bytes each; head is in bytes then).
type kvRows struct {
	f32  []float32
	f16  []uint16
	q8   []byte
	rb   int
	head int
}

// scores sets p[j] = the dot product of q with the row of cell lo+j of KV
// head g, for j < len(p) (every cell's dot is computed alone, so a range
// gives the bits the whole row gives).
func (r kvRows) scores(kern ggml.Kernels, g, D, lo int, q, p []float32) {
	switch {
	case r.f16 != nil:
		ggml.ScoreRowsF16(kern, r.f16[g*r.head+lo*D:g*r.head+(lo+len(p))*D], D, q, p)
	case r.q8 != nil:
		ggml.ScoreRowsQ8_0(kern, r.q8[g*r.head+lo*r.rb:g*r.head+(lo+len(p))*r.rb], r.rb, q, p)
	default:
		kern.ScoreRows(r.f32[g*r.head+lo*D:g*r.head+(lo+len(p))*D], D, q, p)
	}
}

// weighted sets out = Σ_j p[j]·(the row of cell j of KV head g).
func (r kvRows) weighted(kern ggml.Kernels, g, D int, p []float32, lanes int, out []float32) {
	switch {
	case r.f16 != nil:
		ggml.WeightedColumnsF16(kern, r.f16[g*r.head:g*r.head+len(p)*D], D, p, lanes, out)
	case r.q8 != nil:
		ggml.WeightedColumnsQ8_0(kern, r.q8[g*r.head:g*r.head+len(p)*r.rb], r.rb, p, lanes, out)
	default:
		kern.WeightedColumns(r.f32[g*r.head:g*r.head+len(p)*D], D, p, lanes, out)
	}
}

// cached returns layer il's keys and values for cells [0, n).
func (s *Session) cached(il, n int) (k, v kvRows) {
	return s.side(il, n, s.k, s.kq, s.m.kc, &s.kf), s.side(il, n, s.v, s.vq, s.m.vc, &s.vf)
}

// side is one side of layer il's cache for attention: the f32 cache, the
// f16 halves or q8_0 blocks in place, or the other formats decoded into
// *scratch.
func (s *Session) side(il, n int, f32 [][]float32, q [][]byte, kc *kvCodec, scratch *[]float32) kvRows {
	D := s.m.Config.HeadDim
	switch {
	case f32 != nil:
		return kvRows{f32: f32[il], head: s.layerCap(il) * D}
	case kc.headBytes > 0 && kc.q8:
		return kvRows{q8: q[il], rb: kc.headBytes, head: s.layerCap(il) * kc.headBytes}
	case kc.headBytes > 0:
		return kvRows{f16: u16View(q[il]), head: s.layerCap(il) * D}
	}
	*scratch = s.dequantize(*scratch, q[il], kc, n)
	return kvRows{f32: *scratch, head: n * D}
}

// dequantize decodes cells [0, n) of a quantized side into buf,
// head-major with n cells per head.
func (s *Session) dequantize(buf []float32, rows []byte, kc *kvCodec, n int) []float32 {
	c := s.m.Config
	D, kvDim := c.HeadDim, c.NHeadKV*c.HeadDim
	if cap(buf) < n*kvDim+kvDim {
		buf = make([]float32, n*kvDim+kvDim)
	}
	buf = buf[:n*kvDim+kvDim]
	row := buf[n*kvDim:] // one cell, position-major
	for p := range n {
		kc.decode(rows[p*kc.rowBytes:(p+1)*kc.rowBytes], row)
		for h := range c.NHeadKV {
			copy(buf[(h*n+p)*D:(h*n+p+1)*D], row[h*D:(h+1)*D])
		}
	}
	return buf
}

// forward holds the per-batch state of one Decode.
type forward struct {
	s    *Session
	T    int
	pos0 int
	rope []float32 // T rows of RopeDim (cos, sin) values
	// ropeSWA: the sliding-window layers' rows; swaCells: the cells of
	// this batch's positions in their cache.
	ropeSWA  []float32
	swaCells []int
	// swaRuns: each row's window in the sliding-window cache
	// (visibleRuns), made by the batch's first such layer: every one reads
	// the same cells.
	swaRuns [][]cellRun
	cells   []int // the cells of the other layers: pos0..pos0+T-1
}

// seqCells returns the cells pos0..pos0+T-1 of the layers without a window
// (cell = position), in a buffer the session reuses.
func (s *Session) seqCells(pos0, T int) []int {
	s.cellBuf = slices.Grow(s.cellBuf[:0], T)[:T]
	for t := range s.cellBuf {
		s.cellBuf[t] = pos0 + t
	}
	return s.cellBuf
}

func (f *forward) init() {
	s := f.s
	f.rope = s.ropeRows(&s.rope, s.ropeP, f.pos0, f.T)
	if s.swa != nil {
		f.ropeSWA = s.ropeRows(&s.ropeSWA, &s.m.ropeSWA, f.pos0, f.T)
	}
	f.cells = s.seqCells(f.pos0, f.T)
}

// ropeRows returns the (cos, sin) rows of positions [pos0, pos0+T) from
// the cache *rows, computing those not cached yet with p.
func (s *Session) ropeRows(rows *[]float32, p *ropeParams, pos0, T int) []float32 {
	d := s.m.Config.RopeDim // at least 2: the config refuses 0 at load
	if have := len(*rows) / d; have < pos0+T {
		*rows = slices.Grow(*rows, (pos0+T-have)*d)[:(pos0+T)*d]
		for q := have; q < pos0+T; q++ {
			p.cache((*rows)[q*d:(q+1)*d], q)
		}
	}
	return (*rows)[pos0*d : (pos0+T)*d]
}

// matmul runs one op of the layer's list (the list MatMulOps reports).
func (f *forward) matmul(op *MatMulOp, x []float32) ([]float32, error) {
	out := f.s.buf.alloc(op.T * op.N)
	if err := f.s.m.mm.MatMul(op, x, out); err != nil {
		return nil, err
	}
	return out, nil
}

// matmuls runs ops that read the same x, in this order: on the CPU as one
// job (one hand-over to the pool's workers), on a device one by one.
func (f *forward) matmuls(x []float32, ops ...*MatMulOp) ([][]float32, error) {
	outs := make([][]float32, len(ops))
	for i, op := range ops {
		outs[i] = f.s.buf.alloc(op.T * op.N)
	}
	if cpu, ok := f.s.m.mm.(sharedMatMuler); ok {
		return outs, cpu.MatMulShared(ops, x, outs)
	}
	for i, op := range ops {
		if err := f.s.m.mm.MatMul(op, x, outs[i]); err != nil {
			return nil, err
		}
	}
	return outs, nil
}

// splitRows copies columns [lo, lo+n) of every row of x (rows of width
// values) into a buffer of their own: Q, K and V of a fused QKV output,
// gate and up of a fused FFN (ggml's views of the fused result).
func (f *forward) splitRows(x []float32, width, lo, n int) []float32 {
	rows := len(x) / width
	out := f.s.buf.alloc(rows * n)
	for r := range rows {
		copy(out[r*n:(r+1)*n], x[r*width+lo:r*width+lo+n])
	}
	return out
}

// qkv runs the layer's Q, K and V matmuls, fused or not, with their biases.
func (f *forward) qkv(l *layer, ops *[nLayerOps]MatMulOp, xn []float32, lops LayerOps) (q, k, v []float32, err error) {
	c := f.s.m.Config
	if l.wqkv == nil {
		qvk, err := f.matmuls(xn, &ops[opQ], &ops[opV], &ops[opK])
		if err != nil {
			return nil, nil, nil, err
		}
		q, v, k = qvk[0], qvk[1], qvk[2]
		addBias(lops, q, l.bq)
		addBias(lops, k, l.bk)
		addBias(lops, v, l.bv)
		return q, k, v, nil
	}
	fused, err := f.matmul(&ops[opQKV], xn)
	if err != nil {
		return nil, nil, nil, err
	}
	addBias(lops, fused, l.bqkv)
	qDim, kvDim := c.NHead*c.HeadDim, c.NHeadKV*c.HeadDim
	width := qDim + 2*kvDim
	return f.splitRows(fused, width, 0, qDim), f.splitRows(fused, width, qDim, kvDim), f.splitRows(fused, width, qDim+kvDim, kvDim), nil
}

// layer runs transformer block il on x (f.rows rows) and returns its output.
// In the last layer only outRows continue after attention, as llama.cpp does
// with inp_out_ids.
func (f *forward) layer(il int, x []float32, outRows []int) ([]float32, error) {
	m, c := f.s.m, f.s.m.Config
	l := &m.layers[il]
	E, T := c.NEmbd, f.T
	ops := m.layerOps(il, T, len(outRows))
	lops := m.opsFor(il)

	xn := f.s.buf.alloc(T * E)
	f.rows(lops, T, E, func(lo, hi int) {
		normRows(lops, xn[lo*E:hi*E], x[lo*E:hi*E], l.attnNorm, c.RMSEps)
	})
	q, k, v, err := f.qkv(l, &ops, xn, lops)
	if err != nil {
		return nil, err
	}
	swa := f.s.swa != nil && c.SWALayer(il)
	rope, cells := f.rope, f.cells
	if swa {
		rope, cells = f.ropeSWA, f.swaCells
	}
	D := c.HeadDim
	f.rows(lops, T, (c.NHead+c.NHeadKV)*D, func(lo, hi int) {
		for t := lo; t < hi; t++ {
			qt, kt := q[t*c.NHead*D:(t+1)*c.NHead*D], k[t*c.NHeadKV*D:(t+1)*c.NHeadKV*D]
			if l.qNorm != nil { // per head: rows of D
				normRows(lops, qt, qt, l.qNorm, c.RMSEps)
				normRows(lops, kt, kt, l.kNorm, c.RMSEps)
			}
			cs := rope[t*c.RopeDim : (t+1)*c.RopeDim]
			for h := range c.NHead {
				lops.Rope(qt[h*D:], cs, c.RopeDim, c.RopeNeox)
			}
			for h := range c.NHeadKV {
				lops.Rope(kt[h*D:], cs, c.RopeDim, c.RopeNeox)
			}
		}
	})
	if c.QScale != 0 {
		scale(q, c.QScale) // ggml_scale of Qcur; the softmax scale is then 1
	}
	f.s.storeKV(il, cells, k, v)

	att := f.attention(il, q, lops, swa)
	ao, err := f.matmul(&ops[opAttnOut], att)
	if err != nil {
		return nil, err
	}
	addBias(lops, ao, l.bo)
	rows := T
	if il == len(m.layers)-1 && len(outRows) < T {
		ao, x = f.gatherRows(ao, outRows, E), f.gatherRows(x, outRows, E)
		rows = len(outRows)
		if rows == 0 {
			return x, nil
		}
	}
	f.residual(x, ao, l.postAttnNorm, rows, lops) // ffn_inp
	xn = xn[:rows*E]
	f.rows(lops, rows, E, func(lo, hi int) {
		normRows(lops, xn[lo*E:hi*E], x[lo*E:hi*E], l.ffnNorm, c.RMSEps)
	})
	act, err := f.ffnActivation(l, &ops, xn, rows, lops)
	if err != nil {
		return nil, err
	}
	down, err := f.matmul(&ops[opFFNDown], act)
	if err != nil {
		return nil, err
	}
	addBias(lops, down, l.bDown)
	f.residual(x, down, l.postFFNNorm, rows, lops) // l_out
	return x, nil
}

// residual adds a block's output y to the residual stream x, row by row:
// after its post norm (gemma, glm4) or its residual scale (minicpm) where
// the architecture has one.
func (f *forward) residual(x, y, postNorm []float32, rows int, lops LayerOps) {
	c := f.s.m.Config
	E := c.NEmbd
	f.rows(lops, rows, E, func(lo, hi int) {
		if postNorm != nil {
			normRows(lops, y[lo*E:hi*E], y[lo*E:hi*E], postNorm, c.RMSEps)
		}
		for r := lo; r < hi; r++ {
			yr := y[r*E : (r+1)*E]
			if c.ResidualScale != 0 {
				scale(yr, c.ResidualScale)
			}
			lops.Add(x[r*E:(r+1)*E], yr)
		}
	})
}

// rowParallelMin is the least number of values (rows × width) a row-wise
// op splits over the pool: below it the hand-over costs more than it saves.
// A variable, so that the thread-count tests can put every op on the pool.
var rowParallelMin = 1 << 14

// rows runs fn over the rows [0, n) of a row-wise op (norms, RoPE,
// residual adds), n rows of width values: for a batch on the CPU's ops
// split over the pool, so prefill does not leave the other threads idle
// between matmuls (every row is computed by one thread, as before). A
// device's ops keep counters of their own and run in order.
func (f *forward) rows(lops LayerOps, n, width int, fn func(lo, hi int)) {
	if _, cpu := lops.(cpuOps); cpu && n > 1 && n*width >= rowParallelMin {
		f.s.m.pool.Run(n, fn)
		return
	}
	fn(0, n)
}

// ffnActivation runs the FFN's gate and up matmuls (or the fused one) and
// returns the gated activation, rows of n_ff values: SwiGLU, or GEGLU for
// gemma.
func (f *forward) ffnActivation(l *layer, ops *[nLayerOps]MatMulOp, xn []float32, rows int, lops LayerOps) ([]float32, error) {
	c := f.s.m.Config
	F := c.NFF
	var gate, up []float32
	if l.wGate == nil {
		fused, err := f.matmul(&ops[opFFNUp], xn)
		if err != nil {
			return nil, err
		}
		// ggml_swiglu of the fused rows: the first half is the gate.
		gate, up = f.splitRows(fused, 2*F, 0, F), f.splitRows(fused, 2*F, F, F)
	} else {
		gateUp, err := f.matmuls(xn, &ops[opFFNGate], &ops[opFFNUp])
		if err != nil {
			return nil, err
		}
		gate, up = gateUp[0], gateUp[1]
		addBias(lops, up, l.bUp)
		addBias(lops, gate, l.bGate)
	}
	activate := func(lo, hi int) {
		for r := lo; r < hi; r++ {
			g, u := gate[r*F:(r+1)*F], up[r*F:(r+1)*F]
			if archs[c.Arch].gelu {
				lops.Geglu(g, g, u)
			} else {
				lops.Swiglu(g, g, u)
			}
		}
	}
	f.rows(lops, rows, F, activate)
	return gate, nil
}

// attention computes softmax(q·Kᵀ·scale + mask)·V for every row and head
// against the cache, split over heads (one head is computed by one thread,
// so the result does not depend on the thread count). Without a window a
// row attends to the cells of positions 0..its own (cell = position); a
// sliding-window layer attends to every cell of its cache in cell order,
// the ones outside the row's window masked, as llama.cpp's KQ mask does.
func (f *forward) attention(il int, q []float32, lops LayerOps, swa bool) []float32 {
	c := f.s.m.Config
	T, D := f.T, c.HeadDim
	group := c.NHead / c.NHeadKV
	scale := c.KQScale
	if c.QScale != 0 {
		scale = 1
	}
	n0 := f.pos0 + T
	if swa {
		n0 = f.s.swa.usedEnd()
	}
	K, V := f.s.cached(il, n0)
	out := f.s.buf.alloc(T * c.NHead * D)
	scores := f.s.buf.alloc(c.NHead * n0) // one row of probabilities per head
	// kq is a vec_dot_f32 (its src1, the permuted Q, is not contiguous);
	// kqv is tinyBLAS for batches of >= 2 rows, else vec_dot_f32 over the
	// KV cells (zero probability past the sequence).
	lanes := 64
	if T >= 2 && D%4 == 0 {
		lanes = 16
	}
	kern := f.s.m.kern
	negInf := float32(math.Inf(-1))
	if swa && f.swaRuns == nil {
		f.swaRuns = f.visibleRuns(n0)
	}
	runs := f.swaRuns
	work := func(lo, hi int) {
		for h := lo; h < hi; h++ {
			p := scores[h*n0 : (h+1)*n0]
			g := h / group
			for t := range T {
				qh := q[(t*c.NHead+h)*D : (t*c.NHead+h+1)*D]
				n := f.pos0 + t + 1 // causal: positions 0..pos0+t
				if !swa {
					K.scores(kern, g, D, 0, qh, p[:n])
					if c.AttnSoftcap != 0 {
						ggml.SoftCap(p[:n], c.AttnSoftcap)
					}
				} else {
					// Every cell, the masked ones -inf as the KQ mask makes
					// them; only the row's window is computed.
					n = n0
					for j := range p[:n] {
						p[j] = negInf
					}
					for _, r := range runs[t] {
						K.scores(kern, g, D, r.lo, qh, p[r.lo:r.hi])
						if c.AttnSoftcap != 0 {
							ggml.SoftCap(p[r.lo:r.hi], c.AttnSoftcap)
						}
					}
				}
				lops.Softmax(p[:n], scale)
				V.weighted(kern, g, D, p[:n], lanes, out[(t*c.NHead+h)*D:(t*c.NHead+h+1)*D])
			}
		}
	}
	// Reads K and V at n0 positions of every KV head (float32), both
	// products over n0 positions of every head.
	if Small(2*c.NHead*T*n0*D, 2*c.NHeadKV*n0*D*4) {
		work(0, c.NHead)
	} else {
		f.s.m.pool.Run(c.NHead, work)
	}
	return out
}

// cellRun is a range [lo, hi) of cache cells.
type cellRun struct{ lo, hi int }

// visibleRuns returns, for every row t of the batch, the runs of cells
// [0, n) of a sliding-window layer's cache that the row's position attends
// to (its window, in cell order): one run, or two where the ring wraps.
func (f *forward) visibleRuns(n int) [][]cellRun {
	rows := make([][]cellRun, f.T)
	for t := range f.T {
		pos := int32(f.pos0 + t)
		var runs []cellRun
		for j := 0; j < n; {
			if !f.s.swa.visible(j, pos) {
				j++
				continue
			}
			lo := j
			for j < n && f.s.swa.visible(j, pos) {
				j++
			}
			runs = append(runs, cellRun{lo, j})
		}
		rows[t] = runs
	}
	return rows
}

// addBias adds b to every row of x (ggml's broadcasting ADD); nil adds
// nothing.
func addBias(lops LayerOps, x, b []float32) {
	if b == nil {
		return
	}
	for i := 0; i < len(x); i += len(b) {
		lops.Add(x[i:i+len(b)], b)
	}
}

// gatherRows returns the listed rows of x (rows of n values).
func (f *forward) gatherRows(x []float32, rows []int, n int) []float32 {
	out := f.s.buf.alloc(len(rows) * n)
	for r, i := range rows {
		copy(out[r*n:(r+1)*n], x[i*n:(i+1)*n])
	}
	return out
}

// arena hands out a Decode's float buffers from one block that the next
// Decode reuses, so a decode step allocates (and clears) nothing and gives
// the garbage collector no reason to run (it takes one of the decode
// threads' cores while it marks). Contents are undefined; every caller
// overwrites its buffer.
type arena struct {
	block []float32
	off   int // the first float not handed out
	high  int // the most handed out at once since the last reset
}

// arenaMax bounds the block a session keeps between Decodes (floats, 64
// MiB: a 512-token batch of a 1B model's layer fits, so a prefill allocates
// and clears nothing either; with 4 MiB a 128-token batch of a 768-wide
// model spent 14 % of its time clearing fresh buffers and collecting
// them). What does not fit (all-row logits of a big vocabulary, which
// Decode allocates last) is allocated per call.
const arenaMax = 1 << 24

// reset starts a Decode: every buffer is free again, and the block grows to
// what the last Decode held at most (up to arenaMax).
func (a *arena) reset() {
	if want := min(a.high, arenaMax); want > len(a.block) {
		a.block = make([]float32, want)
	}
	a.off, a.high = 0, 0
}

// alloc returns n floats, from the block while it has room.
func (a *arena) alloc(n int) []float32 {
	end := a.off + n
	a.high = max(a.high, end)
	var b []float32
	if end <= len(a.block) {
		b = a.block[a.off:end:end]
	} else {
		b = make([]float32, n)
	}
	a.off = end
	return b
}

// mark and release free everything handed out after mark.
func (a *arena) mark() int     { return a.off }
func (a *arena) release(m int) { a.off = m }
