// Package kldbase reads and writes llama-perplexity's base-logit file, the
// file --kl-divergence-base writes and --kl-divergence reads (layout in
// docs: llamacpp-reference.md §1.2). All values are little-endian:
//
//	0   "_logits_"  (8 bytes, no NUL)
//	8   int32 n_ctx, int32 n_vocab, int32 n_chunk
//	20  int32 tokens[n_ctx·n_chunk]      (before the BOS overwrite)
//	    then per chunk, per scored position k = 0 … n_ctx−2−n_ctx/2, a record
//	    of nv = 2·((n_vocab+1)/2)+4 uint16: float32 scale, float32
//	    min_log_prob, uint16 q[n_vocab] (+1 pad slot if n_vocab is odd).
//
// Record k of a chunk holds the log-probabilities at position First()+k,
// predicting token tokens[chunk·n_ctx + First() + k + 1]; log p_i = scale·q_i
// + min_log_prob. Files can be tens of GiB, so both the Reader and the
// Writer hold one record at a time (memory O(n_vocab) plus the tokens).
package kldbase

import (
	"encoding/binary"
	"math"

	"github.com/evalrun/evalrun/engine/gguf"
)

// Magic opens every base-logit file.
const Magic = "_logits_"

// HeaderSize is the size of the fixed header before the tokens.
const HeaderSize = 20

// RecordWords is the number of uint16 words of one record for n_vocab
// (llama.cpp's nv): 4 for the two float32, n_vocab rounded up to even.
func RecordWords(nVocab int) int { return 2*((nVocab+1)/2) + 4 }

// RecordBytes is the byte size of one record for n_vocab.
func RecordBytes(nVocab int) int { return 2 * RecordWords(nVocab) }

// PerChunk is the number of scored positions (records) of a chunk of n_ctx
// tokens: n_ctx − 1 − n_ctx/2.
func PerChunk(nCtx int) int { return nCtx - 1 - nCtx/2 }

// FileSize is the exact size of a base file:
// 20 + 4·n_ctx·n_chunk + 2·nv·(n_ctx−1−n_ctx/2)·n_chunk. ok is false if the
// size does not fit in an int64 (or an argument is negative).
func FileSize(nCtx, nVocab, nChunk int) (size int64, ok bool) {
	if nCtx < 0 || nVocab < 0 || nChunk < 0 {
		return 0, false
	}
	tok, ok1 := mulInt64(int64(nCtx)*4, int64(nChunk))
	rec, ok2 := mulInt64(int64(RecordBytes(nVocab))*int64(max(PerChunk(nCtx), 0)), int64(nChunk))
	if !ok1 || !ok2 || tok > math.MaxInt64-HeaderSize-rec {
		return 0, false
	}
	return HeaderSize + tok + rec, true
}

func mulInt64(a, b int64) (int64, bool) {
	if a == 0 || b == 0 {
		return 0, true
	}
	p := a * b
	if a < 0 || b < 0 || p/b != a || p < 0 {
		return 0, false
	}
	return p, true
}

// Record is one scored position: the quantized log-probabilities of the
// whole vocabulary.
type Record struct {
	Scale      float32
	MinLogProb float32
	Q          []uint16 // n_vocab entries
}

// Decode writes the log-probabilities scale·q_i + min_log_prob into dst
// (len(dst) ≥ len(Q)), in float32 without fusing the multiply-add, as
// llama-perplexity computes them.
func (r *Record) Decode(dst []float32) {
	for i, q := range r.Q {
		dst[i] = float32(r.Scale*float32(q)) + r.MinLogProb
	}
}

// Encode quantizes one row of logits into rec the way llama-perplexity's
// log_softmax does when writing a base file, and returns that function's
// NLL of token tok (float arithmetic, as llama.cpp uses for the perplexity it
// prints in that mode):
//
//	M = max l; mn = max(min l, M − 16); lse = (float)log(Σ expf(l_i − M))
//	min_log_prob = mn − M − lse; scale = (M − mn)/65535
//	q_i = l_i > mn ? nearest_int((l_i − mn)·(1/scale)) : 0  (all 0 if scale == 0)
//
// rec.Q is resized to len(logits). tok must index logits.
func Encode(logits []float32, tok int32, rec *Record) (nll float64) {
	maxLogit, minLogit := logits[0], logits[0]
	for _, l := range logits[1:] {
		maxLogit = max(maxLogit, l)
		minLogit = min(minLogit, l)
	}
	minLogit = max(minLogit, maxLogit-16)
	var sumExp float64
	for _, l := range logits {
		sumExp += float64(float32(math.Exp(float64(l - maxLogit))))
	}
	logSumExp := float32(math.Log(sumExp))
	rec.MinLogProb = (minLogit - maxLogit) - logSumExp
	rec.Scale = (maxLogit - minLogit) / 65535
	rec.Q = resize(rec.Q, len(logits))
	if rec.Scale != 0 {
		invScale := 1 / rec.Scale
		for i, l := range logits {
			if l > minLogit {
				rec.Q[i] = uint16(nearestInt(float32(invScale * (l - minLogit))))
			} else {
				rec.Q[i] = 0
			}
		}
	} else {
		clear(rec.Q)
	}
	return float64((maxLogit + logSumExp) - logits[tok])
}

// nearestInt is ggml's nearest_int: adding 1.5·2²³ leaves the integer part,
// rounded to nearest even, in the low mantissa bits (valid for |x| < 2²²).
func nearestInt(x float32) int32 {
	v := x + 12582912
	return int32(math.Float32bits(v)&0x007fffff) - 0x00400000
}

func resize(s []uint16, n int) []uint16 {
	if cap(s) < n {
		return make([]uint16, n)
	}
	return s[:n]
}

// MarshalRecord writes rec as the nv-word record of the file format into
// dst (len(dst) ≥ RecordBytes(len(rec.Q))); the pad slot of an odd n_vocab
// is written as 0.
func MarshalRecord(rec *Record, dst []byte) {
	binary.LittleEndian.PutUint32(dst[0:], math.Float32bits(rec.Scale))
	binary.LittleEndian.PutUint32(dst[4:], math.Float32bits(rec.MinLogProb))
	for i, q := range rec.Q {
		binary.LittleEndian.PutUint16(dst[8+2*i:], q)
	}
	if len(rec.Q)%2 == 1 {
		binary.LittleEndian.PutUint16(dst[8+2*len(rec.Q):], 0)
	}
}

// UnmarshalRecord reads a record of nVocab entries from src
// (len(src) ≥ RecordBytes(nVocab)) into rec, resizing rec.Q.
func UnmarshalRecord(src []byte, nVocab int, rec *Record) {
	rec.Scale = math.Float32frombits(binary.LittleEndian.Uint32(src[0:]))
	rec.MinLogProb = math.Float32frombits(binary.LittleEndian.Uint32(src[4:]))
	rec.Q = resize(rec.Q, nVocab)
	for i := range rec.Q {
		rec.Q[i] = binary.LittleEndian.Uint16(src[8+2*i:])
	}
}

// FormatError describes a malformed base file: FILE: FIELD at byte OFFSET:
// MSG, as GGUF's.
type FormatError = gguf.FormatError
