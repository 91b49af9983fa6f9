package engine

// ubatchSize is llama.cpp's default n_ubatch, which sizes the
// sliding-window cache (llama_kv_cache_iswa) and splits a batch into the
// micro-batches each placed in it at once.
const ubatchSize = 512

// swaCacheSize is llama_kv_cache_iswa's size of the sliding-window layers'
// cache for a context of nCtx positions (one sequence, swa_full off):
// the window plus a micro-batch, padded to 256, at most the whole cache.
func swaCacheSize(nCtx, nSWA int) int {
	return pad256(min(pad256(nCtx), nSWA+ubatchSize))
}

func pad256(n int) int { return (n + 255) &^ 255 }

// swaCells mirrors the cells of llama.cpp b10587's KV cache for the
// sliding-window layers of one sequence: which position each cell holds,
// and where the next micro-batch goes (llama_kv_cache::find_slot and
// apply_ubatch). Once the window has moved on, new positions overwrite
// cells out of it, so a position's cell is not its index; attention runs
// over the cells in cell order, which decides the order of the softmax
// sum and the vec_dot lanes, so this must place them as llama.cpp does to
// give the same bits.
type swaCells struct {
	pos  []int32 // the position in each cell; -1: empty
	head int
	used int
	nSWA int
	buf  []int // place's result, reused by the next place
}

func newSWACells(size, nSWA int) *swaCells {
	c := &swaCells{pos: make([]int32, size), nSWA: nSWA}
	c.reset()
	return c
}

// reset empties every cell (llama_kv_cache::clear).
func (c *swaCells) reset() {
	for i := range c.pos {
		c.pos[i] = -1
	}
	c.head, c.used = 0, 0
}

// maxPos is the sequence's last position in the cache (-1: none).
func (c *swaCells) maxPos() int32 {
	m := int32(-1)
	for _, p := range c.pos {
		m = max(m, p)
	}
	return m
}

// minPos is its first position (-1: none).
func (c *swaCells) minPos() int32 {
	m := int32(-1)
	for _, p := range c.pos {
		if p >= 0 && (m < 0 || p < m) {
			m = p
		}
	}
	return m
}

// usedEnd is one past the last occupied cell (cells.used_max_p1).
func (c *swaCells) usedEnd() int {
	for i := len(c.pos) - 1; i >= 0; i-- {
		if c.pos[i] >= 0 {
			return i + 1
		}
	}
	return 0
}

// visible reports whether the token at position p attends to cell i
// (llama.cpp's KQ mask: occupied, not in the future, inside the window).
func (c *swaCells) visible(i int, p int32) bool {
	q := c.pos[i]
	return q >= 0 && q <= p && p-q < int32(c.nSWA)
}

// place finds the cells of n new positions pos0.. (find_slot with cont
// false) and stores them there (apply_ubatch): cells are empty ones or
// ones whose position the window has left for the first new position,
// searched from the head; overwriting a position purges every older one.
// ok is false when the cache has no room (llama.cpp fails the decode).
// cells is valid until the next place.
func (c *swaCells) place(pos0, n int) (cells []int, ok bool) {
	size := len(c.pos)
	if n > size {
		return nil, false
	}
	head := c.head
	if head > c.used+2*n {
		head = 0
	}
	next := c.maxPos() + 1
	tested := 0
	cells = c.buf[:0]
	defer func() { c.buf = cells[:0] }()
	for len(cells) < n {
		if head+1 > size {
			tested += size - head
			head = 0
			continue
		}
		i := head
		head++
		tested++
		if q := c.pos[i]; q < 0 || next-q >= int32(c.nSWA) {
			cells = append(cells, i)
		}
		if len(cells) == n {
			break
		}
		if tested >= size {
			return nil, false
		}
	}
	rmMax := int32(-1)
	for t, i := range cells {
		if q := c.pos[i]; q >= 0 {
			rmMax = max(rmMax, q)
			c.used--
		}
		c.pos[i] = int32(pos0 + t)
		c.used++
	}
	if rmMax >= 0 {
		if lo := c.minPos(); lo >= 0 && lo <= rmMax {
			c.remove(lo, rmMax+1)
		}
	}
	c.head = cells[len(cells)-1] + 1
	return cells, true
}

// remove empties the cells of positions [p0, p1) and moves the head back
// to the first one freed (llama_kv_cache::seq_rm).
func (c *swaCells) remove(p0, p1 int32) {
	first := -1
	for i, q := range c.pos {
		if q >= p0 && q < p1 {
			c.pos[i] = -1
			c.used--
			if first < 0 {
				first = i
			}
		}
	}
	if first >= 0 && first < c.head {
		c.head = first
	}
}
