// Package sampling picks the next token from a logits row: greedy (first
// index wins ties, as llama.cpp's greedy sampler) or a seeded chain of
// repeat penalty, top-k, top-p, min-p and temperature in llama.cpp's default
// order.
package sampling

import (
	"math"
	"math/rand/v2"
	"sort"
)

// Params are the sampling settings. Temperature ≤ 0 means greedy.
type Params struct {
	Temperature   float64
	TopK          int     // 0 = off
	TopP          float64 // 1 = off
	MinP          float64 // 0 = off
	RepeatPenalty float64 // 1 = off
	RepeatLastN   int     // how many recent tokens the penalty looks at
	Seed          uint64
}

// Defaults are llama.cpp's sampling defaults with greedy decoding.
func Defaults() Params {
	return Params{Temperature: 0, TopK: 40, TopP: 0.95, MinP: 0.05, RepeatPenalty: 1, RepeatLastN: 64, Seed: 0}
}

// Sampler carries the random state and recent tokens.
type Sampler struct {
	p      Params
	rng    *rand.Rand
	recent []int32
	cands  []cand
}

type cand struct {
	id    int32
	logit float64
	p     float64
}

// New returns a sampler; the same seed gives the same tokens.
func New(p Params) *Sampler {
	return &Sampler{p: p, rng: rand.New(rand.NewPCG(p.Seed, p.Seed^0x9e3779b97f4a7c15))}
}

// Greedy returns the first index of the largest logit; NaN never wins.
func Greedy(logits []float32) int32 {
	best := -1
	for i, v := range logits {
		if v != v {
			continue
		}
		if best < 0 || v > logits[best] {
			best = i
		}
	}
	if best < 0 {
		return 0
	}
	return int32(best)
}

// Accept records a token for the repeat penalty.
func (s *Sampler) Accept(tok int32) {
	s.recent = append(s.recent, tok)
	if n := s.p.RepeatLastN; n > 0 && len(s.recent) > n {
		s.recent = s.recent[len(s.recent)-n:]
	}
}

// Sample picks the next token from logits (not modified).
func (s *Sampler) Sample(logits []float32) int32 {
	if s.p.Temperature <= 0 && s.p.RepeatPenalty == 1 {
		return Greedy(logits)
	}
	c := s.cands[:0]
	for i, v := range logits {
		c = append(c, cand{id: int32(i), logit: float64(v)})
	}
	s.cands = c
	// Repeat penalty as llama.cpp: divide positive logits, multiply negative ones.
	if s.p.RepeatPenalty != 1 && s.p.RepeatPenalty > 0 {
		seen := map[int32]bool{}
		for _, t := range s.recent {
			if seen[t] || int(t) >= len(c) || t < 0 {
				continue
			}
			seen[t] = true
			if c[t].logit > 0 {
				c[t].logit /= s.p.RepeatPenalty
			} else {
				c[t].logit *= s.p.RepeatPenalty
			}
		}
	}
	if s.p.Temperature <= 0 {
		best := 0
		for i := range c {
			if c[i].logit > c[best].logit {
				best = i
			}
		}
		return c[best].id
	}
	sort.SliceStable(c, func(i, j int) bool { return c[i].logit > c[j].logit })
	if k := s.p.TopK; k > 0 && k < len(c) {
		c = c[:k]
	}
	softmax(c)
	if tp := s.p.TopP; tp > 0 && tp < 1 {
		cum := 0.0
		for i := range c {
			cum += c[i].p
			if cum >= tp {
				c = c[:i+1]
				break
			}
		}
	}
	if mp := s.p.MinP; mp > 0 && len(c) > 0 {
		limit := c[0].p * mp
		n := len(c)
		for i := range c {
			if c[i].p < limit {
				n = i
				break
			}
		}
		c = c[:max(n, 1)]
	}
	for i := range c {
		c[i].logit /= s.p.Temperature
	}
	softmax(c)
	r := s.rng.Float64()
	cum := 0.0
	for _, x := range c {
		cum += x.p
		if r < cum {
			return x.id
		}
	}
	return c[len(c)-1].id
}

func softmax(c []cand) {
	if len(c) == 0 {
		return
	}
	m := math.Inf(-1)
	for _, x := range c {
		m = math.Max(m, x.logit)
	}
	sum := 0.0
	for i := range c {
		c[i].p = math.Exp(c[i].logit - m)
		sum += c[i].p
	}
	for i := range c {
		c[i].p /= sum
	}
}
