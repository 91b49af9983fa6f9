package engine

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"strings"
	"unsafe"

	"github.com/evalrun/evalrun/engine/ggml"
)

// KVType is how the KV cache stores keys or values.
type KVType string

// The KV cache types: llama.cpp's (-ctk/-ctv f32, f16, q8_0) and MNN-LLM's
// (key int8 asymmetric, value fp8).
const (
	KVF32      KVType = "f32"       // float32, the default
	KVF16      KVType = "f16"       // binary16, round to nearest even
	KVQ8_0     KVType = "q8_0"      // ggml Q8_0 blocks of 32 along a position's K (or V) row, as llama.cpp stores them (head-major when a head is whole blocks)
	KVInt8Asym KVType = "int8_asym" // per position and head: uint8 q, x = min + q·scale, scale = (max-min)/255 (keys only)
	KVFP8E4M3  KVType = "fp8_e4m3"  // OCP FP8 E4M3 (max 448, no infinities), per element, saturating (values only)
	KVFP8E5M2  KVType = "fp8_e5m2"  // OCP FP8 E5M2 (max 57344), per element, saturating (values only)
)

// ErrKVCache marks errors of the KV cache's types (the option kv_cache):
// a type the model's rows cannot be stored in.
var ErrKVCache = errors.New("kv_cache")

// KVCache chooses the types of the cache's keys and values ("" = f32).
type KVCache struct {
	Key, Value KVType
}

var (
	keyTypes   = []KVType{KVF32, KVF16, KVQ8_0, KVInt8Asym}
	valueTypes = []KVType{KVF32, KVF16, KVQ8_0, KVFP8E4M3, KVFP8E5M2}
)

func oneOf(t KVType, list []KVType) bool {
	for _, l := range list {
		if t == l {
			return true
		}
	}
	return false
}

func names(list []KVType) string {
	s := make([]string, len(list))
	for i, t := range list {
		s[i] = string(t)
	}
	return strings.Join(s, ", ")
}

// Validate checks the types; errors name the field ("key", "value").
func (c KVCache) Validate() error {
	if c.Key != "" && !oneOf(c.Key, keyTypes) {
		return fmt.Errorf("key: %q unknown (want %s)", c.Key, names(keyTypes))
	}
	if c.Value != "" && !oneOf(c.Value, valueTypes) {
		return fmt.Errorf("value: %q unknown (want %s)", c.Value, names(valueTypes))
	}
	return nil
}

// String is "key/value", e.g. "int8_asym/fp8_e4m3".
func (c KVCache) String() string { return string(c.orF32().Key) + "/" + string(c.orF32().Value) }

func (c KVCache) orF32() KVCache {
	if c.Key == "" {
		c.Key = KVF32
	}
	if c.Value == "" {
		c.Value = KVF32
	}
	return c
}

// kvCodec stores one position's K or V row (NHeadKV heads of HeadDim
// values) in a cache type.
type kvCodec struct {
	rowBytes int // a position's row of all heads
	// headBytes > 0: the cache holds each head's rows apart, head-major
	// (head h's row for cell p at (h*capacity+p)*headBytes, as the f32
	// cache holds floats), which attention reads in place: binary16
	// (ggml.ScoreRowsF16), or with q8 Q8_0 blocks (ggml.ScoreRowsQ8_0).
	// 0: one encoded row per cell, which attention decodes.
	headBytes int
	q8        bool
	encode    func(dst []byte, x []float32)
	decode    func(src []byte, y []float32)
}

// store writes one cell's row of heads×d values into a cache of capacity
// cells: each head's encoded row in its place for a head-major cache, else
// the encoded row at the cell.
func (kc *kvCodec) store(cache []byte, capacity, cell, d int, row []float32) {
	hb := kc.headBytes
	if hb == 0 {
		kc.encode(cache[cell*kc.rowBytes:(cell+1)*kc.rowBytes], row)
		return
	}
	for h := 0; h*d < len(row); h++ {
		dst := (h*capacity + cell) * hb
		kc.encode(cache[dst:dst+hb], row[h*d:(h+1)*d])
	}
}

// newKVCodec returns the codec of t for rows of heads×d values; nil for f32
// (the cache keeps float32, head-major).
func newKVCodec(t KVType, heads, d int) (*kvCodec, error) {
	n := heads * d
	switch t {
	case "", KVF32:
		return nil, nil
	case KVF16:
		kc := &kvCodec{rowBytes: 2 * n,
			encode: func(dst []byte, x []float32) {
				if hostLittleEndian {
					ggml.F32sToF16(u16View(dst), x)
					return
				}
				for i, v := range x {
					binary.LittleEndian.PutUint16(dst[2*i:], ggml.F32ToF16(v))
				}
			},
			decode: func(src []byte, y []float32) {
				if hostLittleEndian {
					ggml.F16sToF32(y, u16View(src))
					return
				}
				for i := range y {
					y[i] = ggml.F16ToF32(binary.LittleEndian.Uint16(src[2*i:]))
				}
			},
		}
		if hostLittleEndian { // the kernels read native halves
			kc.headBytes = 2 * d
		}
		return kc, nil
	case KVQ8_0:
		rb, err := ggml.RowBytes(ggml.Q8_0, n)
		if err != nil {
			return nil, fmt.Errorf("q8_0: a position's row of %d values (%d heads × %d) is not whole blocks of 32", n, heads, d)
		}
		kc := &kvCodec{rowBytes: rb, q8: true,
			encode: func(dst []byte, x []float32) { _ = ggml.QuantizeActivations(ggml.Q8_0, x, dst) },
			decode: func(src []byte, y []float32) { _ = ggml.Dequantize(ggml.Q8_0, src, y) },
		}
		// Blocks are quantized one by one, so when a head is whole blocks
		// its blocks are the same encoded apart: keep them head-major and
		// read them in place. Heads of fewer values share blocks: one row
		// per cell, decoded.
		if d%32 == 0 {
			kc.headBytes = rb / heads
		}
		return kc, nil
	case KVInt8Asym:
		return &kvCodec{rowBytes: heads * (d + 8),
			encode: func(dst []byte, x []float32) {
				for h := range heads {
					encodeInt8Asym(dst[h*(d+8):(h+1)*(d+8)], x[h*d:(h+1)*d])
				}
			},
			decode: func(src []byte, y []float32) {
				for h := range heads {
					decodeInt8Asym(src[h*(d+8):(h+1)*(d+8)], y[h*d:(h+1)*d])
				}
			},
		}, nil
	case KVFP8E4M3, KVFP8E5M2:
		f := fp8E4M3
		if t == KVFP8E5M2 {
			f = fp8E5M2
		}
		return &kvCodec{rowBytes: n,
			encode: func(dst []byte, x []float32) {
				for i, v := range x {
					dst[i] = f.encode(v)
				}
			},
			decode: func(src []byte, y []float32) {
				for i, b := range src[:len(y)] {
					y[i] = f.table[b]
				}
			},
		}, nil
	}
	return nil, fmt.Errorf("unknown KV cache type %q", t)
}

// u16View views bytes as uint16s (little-endian hosts only).
func u16View(b []byte) []uint16 {
	if len(b) < 2 {
		return nil
	}
	return unsafe.Slice((*uint16)(unsafe.Pointer(&b[0])), len(b)/2)
}

// encodeInt8Asym is MNN-LLM's asymmetric int8 key quantization for one
// head: scale = (max-min)/255, q = round((x-min)/scale) in 0..255 (half away
// from zero), stored as D bytes then scale and min as float32.
func encodeInt8Asym(dst []byte, x []float32) {
	lo, hi := float32(math.Inf(1)), float32(math.Inf(-1))
	for _, v := range x {
		lo, hi = min(lo, v), max(hi, v)
	}
	scale := (hi - lo) / 255
	d := len(x)
	for i, v := range x {
		q := float32(0)
		if scale > 0 {
			q = float32(math.Round(float64((v - lo) / scale)))
		}
		dst[i] = byte(max(0, min(255, q)))
	}
	binary.LittleEndian.PutUint32(dst[d:], math.Float32bits(scale))
	binary.LittleEndian.PutUint32(dst[d+4:], math.Float32bits(lo))
}

func decodeInt8Asym(src []byte, y []float32) {
	d := len(y)
	scale := math.Float32frombits(binary.LittleEndian.Uint32(src[d:]))
	lo := math.Float32frombits(binary.LittleEndian.Uint32(src[d+4:]))
	for i := range y {
		y[i] = float32(float32(src[i])*scale) + lo
	}
}

// fp8Format is an OCP 8-bit float: 1 sign, exp exponent and man mantissa
// bits.
type fp8Format struct {
	exp, man, bias int
	maxBits        uint8 // the largest finite magnitude's code
	table          [256]float32
}

var (
	// E4M3 ("fn": no infinities, S.1111.111 is NaN), max 448.
	fp8E4M3 = newFP8(4, 3, 0x7E, func(e, m int) (float32, bool) {
		if e == 15 && m == 7 {
			return float32(math.NaN()), true
		}
		return 0, false
	})
	// E5M2 (IEEE-like: exponent 31 is Inf or NaN), max 57344.
	fp8E5M2 = newFP8(5, 2, 0x7B, func(e, m int) (float32, bool) {
		switch {
		case e == 31 && m == 0:
			return float32(math.Inf(1)), true
		case e == 31:
			return float32(math.NaN()), true
		}
		return 0, false
	})
)

func newFP8(exp, man int, maxBits uint8, special func(e, m int) (float32, bool)) *fp8Format {
	f := &fp8Format{exp: exp, man: man, bias: 1<<(exp-1) - 1, maxBits: maxBits}
	for c := range 256 {
		e, m := c>>man&(1<<exp-1), c&(1<<man-1)
		v, ok := special(e, m)
		if !ok {
			if e == 0 {
				v = float32(math.Ldexp(float64(m), 1-f.bias-man))
			} else {
				v = float32(math.Ldexp(float64(m|1<<man), e-f.bias-man))
			}
		}
		if c&0x80 != 0 {
			v = -v
		}
		f.table[c] = v
	}
	return f
}

// encode rounds x to the nearest value of the format (ties to even),
// saturating to the largest finite magnitude; NaN stays NaN.
func (f *fp8Format) encode(x float32) uint8 {
	var sign uint8
	if math.Signbit(float64(x)) {
		sign = 0x80
	}
	a := math.Abs(float64(x))
	switch {
	case math.IsNaN(a):
		return sign | 0x7F
	case a == 0:
		return sign
	case a >= float64(f.table[f.maxBits]):
		return sign | f.maxBits
	}
	e := max(int(math.Floor(math.Log2(a))), 1-f.bias)
	m := math.RoundToEven(math.Ldexp(a, f.man-e))
	if m >= float64(int(1)<<(f.man+1)) { // rounded up to the next binade
		e, m = e+1, m/2
	}
	if m < float64(int(1)<<f.man) { // subnormal
		return sign | uint8(m)
	}
	code := uint8(e+f.bias)<<f.man | uint8(int(m)-1<<f.man)
	if code > f.maxBits {
		return sign | f.maxBits
	}
	return sign | code
}
