package tokenizer

import "math"

// candidate is a possible merge of the symbol at left with the one after
// it, of total byte size size. key orders candidates: the priority in the
// high 32 bits, the left index in the low 32 bits, so that the smallest key
// is the pair llama.cpp's priority queue would pop (best priority, then
// leftmost).
type candidate struct {
	key  uint64
	size int32
}

func (c candidate) left() int { return int(uint32(c.key)) }

// spmKey ranks by score, highest first (llm_bigram_spm::comparator).
func spmKey(score float32, left int) uint64 {
	if score == 0 {
		score = 0 // -0 and +0 compare equal in C++: same key
	}
	bits := math.Float32bits(score)
	if bits&0x80000000 != 0 {
		bits = ^bits
	} else {
		bits |= 0x80000000
	}
	// bits now increases with the score; invert so the best score is smallest.
	return uint64(^bits)<<32 | uint64(uint32(left))
}

// bpeKey ranks by merge rank, lowest first (llm_bigram_bpe::comparator).
func bpeKey(rank int32, left int) uint64 {
	return uint64(uint32(rank))<<32 | uint64(uint32(left))
}

// mergeQueue is a binary min-heap of candidates by key.
type mergeQueue []candidate

func (q *mergeQueue) push(c candidate) {
	h := append(*q, c)
	i := len(h) - 1
	for i > 0 {
		p := (i - 1) / 2
		if h[p].key <= c.key {
			break
		}
		h[i] = h[p]
		i = p
	}
	h[i] = c
	*q = h
}

func (q *mergeQueue) pop() candidate {
	h := *q
	top := h[0]
	last := h[len(h)-1]
	h = h[:len(h)-1]
	if n := len(h); n > 0 {
		i := 0
		for {
			c := 2*i + 1
			if c >= n {
				break
			}
			if r := c + 1; r < n && h[r].key < h[c].key {
				c = r
			}
			if last.key <= h[c].key {
				break
			}
			h[i] = h[c]
			i = c
		}
		h[i] = last
	}
	*q = h
	return top
}
