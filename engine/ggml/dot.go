package ggml

import (
	"encoding/binary"
	"fmt"
	"math"
	"unsafe"
)

// Exact numerics. DotF32 fixes one accumulation order, the natural one of
// 512-bit SIMD: element j is added to lane j%16 (in increasing j), each
// product rounded to float32 before the add, and the sixteen lanes are
// reduced as Reduce16 does (halves folded 8, 4, then (q0+q2)+(q1+q3)).
// DotRow dequantizes on the fly and follows the same order, so
// DotRow(t, w, x) == DotF32(Dequantize(t, w), x) bit for bit.

// lanes is the exact mode's accumulator: one float32 per lane.
type lanes [16]float32

// reduce8 is the fixed reduction of eight lanes used by the 8-lane ggml
// float vec_dots of vecdot.go.
func reduce8(s *[8]float32) float32 {
	return ((s[0] + s[1]) + (s[2] + s[3])) + ((s[4] + s[5]) + (s[6] + s[7]))
}

// accumulate adds w[j]*x[j] to lane j%16 for len(w) (a multiple of 16)
// elements.
func accumulate(s *lanes, w, x []float32) {
	x = x[:len(w)]
	for i := 0; i+16 <= len(w); i += 16 {
		ww := (*[16]float32)(w[i : i+16])
		xx := (*[16]float32)(x[i : i+16])
		for l := range 16 {
			s[l] += float32(ww[l] * xx[l])
		}
	}
}

func dotF32(a, b []float32) float32 {
	if len(a) != len(b) {
		panic(fmt.Sprintf("ggml.DotF32: lengths %d and %d differ", len(a), len(b)))
	}
	var s lanes
	body := len(a) &^ 15
	accumulate(&s, a[:body], b[:body])
	for j := body; j < len(a); j++ {
		s[j-body] += float32(a[j] * b[j])
	}
	return Reduce16((*[16]float32)(&s))
}

// dotRow is the generic DotRow: fused kernels for the hot types, a per-block
// dequantize-then-accumulate path (same decoders as Dequantize) for the rest.
func dotRow(t Type, w []byte, x []float32) float32 {
	n := len(x)
	if err := checkRowFast(t, w, n); err != nil {
		panic("ggml.DotRow: " + err.Error())
	}
	switch t {
	case F32:
		return dotRowF32(w, x)
	case F16:
		return dotRowF16(w, x)
	case BF16:
		return dotRowBF16(w, x)
	case Q8_0:
		return dotRowQ8_0(w, x)
	case Q4_0:
		return dotRowQ4_0(w, x)
	}
	dec, bs, ts := decoders[t], t.BlockSize(), t.TypeSize()
	var s lanes
	var buf [qkK]float32
	for i := 0; i < n/bs; i++ {
		dec(w[i*ts:(i+1)*ts], buf[:bs])
		accumulate(&s, buf[:bs], x[i*bs:(i+1)*bs])
	}
	return Reduce16((*[16]float32)(&s))
}

// checkRowFast validates the row geometry without map lookups for the common
// types (DotRow runs once per output element).
func checkRowFast(t Type, w []byte, n int) error {
	var want, rem int
	switch t {
	case F32:
		want = 4 * n
	case F16, BF16:
		want = 2 * n
	case Q8_0:
		want, rem = n/32*34, n%32
	case Q4_0:
		want, rem = n/32*18, n%32
	default:
		return checkRow(t, w, n)
	}
	if rem != 0 || len(w) != want {
		return fmt.Errorf("%s: %d bytes do not hold a row of %d elements", t, len(w), n)
	}
	return nil
}

// tailReduce adds the last len(x)%16 products (from) to lanes 0.. and
// reduces.
func tailReduce(s *lanes, w func(j int) float32, x []float32, from int) float32 {
	for j := from; j < len(x); j++ {
		s[j-from] += float32(w(j) * x[j])
	}
	return Reduce16((*[16]float32)(s))
}

func dotRowF32(w []byte, x []float32) float32 {
	if littleEndian && len(x) > 0 {
		// The stored row already is float32: view it without copying.
		return dotF32(unsafe.Slice((*float32)(unsafe.Pointer(&w[0])), len(x)), x)
	}
	var s lanes
	var buf [16]float32
	body := len(x) &^ 15
	for i := 0; i < body; i += 16 {
		for l := range buf {
			buf[l] = math.Float32frombits(binary.LittleEndian.Uint32(w[4*(i+l):]))
		}
		accumulate(&s, buf[:], x[i:i+16])
	}
	return tailReduce(&s, func(j int) float32 {
		return math.Float32frombits(binary.LittleEndian.Uint32(w[4*j:]))
	}, x, body)
}

// littleEndian reports whether the host stores float32 as GGUF does.
var littleEndian = binary.NativeEndian.Uint16([]byte{1, 0}) == 1

func dotRowF16(w []byte, x []float32) float32 {
	var s lanes
	body := len(x) &^ 15
	w = w[:2*len(x)]
	tab := f16Table
	for i := 0; i < body; i += 16 {
		ww := w[2*i : 2*i+32 : 2*i+32]
		xx := (*[16]float32)(x[i : i+16])
		for l := range 16 {
			s[l] += float32(tab[uint16(ww[2*l])|uint16(ww[2*l+1])<<8] * xx[l])
		}
	}
	return tailReduce(&s, func(j int) float32 {
		return tab[binary.LittleEndian.Uint16(w[2*j:])]
	}, x, body)
}

func dotRowBF16(w []byte, x []float32) float32 {
	var s lanes
	var buf [16]float32
	body := len(x) &^ 15
	for i := 0; i < body; i += 16 {
		for l := range buf {
			buf[l] = BF16ToF32(binary.LittleEndian.Uint16(w[2*(i+l):]))
		}
		accumulate(&s, buf[:], x[i:i+16])
	}
	return tailReduce(&s, func(j int) float32 {
		return BF16ToF32(binary.LittleEndian.Uint16(w[2*j:]))
	}, x, body)
}

// i8f maps a byte to the float32 of its int8 value (exact; cheaper than cvtsi2ss).
var i8f = func() (t [256]float32) {
	for i := range t {
		t[i] = float32(int8(i))
	}
	return t
}()

// dotRowQ8_0 fuses decodeQ8_0: w = float32(q)*d, then lane accumulation.
func dotRowQ8_0(w []byte, x []float32) float32 {
	var s lanes
	for ib := 0; ib < len(x)/32; ib++ {
		blk := w[34*ib : 34*ib+34 : 34*ib+34]
		d := f16Table[uint16(blk[0])|uint16(blk[1])<<8]
		qs := blk[2:34:34]
		xb := x[32*ib : 32*ib+32 : 32*ib+32]
		for j := range 32 {
			s[j&15] += float32(float32(i8f[qs[j]]*d) * xb[j])
		}
	}
	return Reduce16((*[16]float32)(&s))
}

// dotRowQ4_0 fuses decodeQ4_0: elements 0..15 of a block are the low
// nibbles of qs (lanes 0..15), elements 16..31 the high ones (lanes 0..15
// again).
func dotRowQ4_0(w []byte, x []float32) float32 {
	var s lanes
	for ib := 0; ib < len(x)/32; ib++ {
		blk := w[18*ib : 18*ib+18 : 18*ib+18]
		d := f16Table[uint16(blk[0])|uint16(blk[1])<<8]
		qs := blk[2:18:18]
		xb := x[32*ib : 32*ib+32 : 32*ib+32]
		for l := range 16 {
			s[l] += float32(float32(float32(int(qs[l]&0xF)-8)*d) * xb[l])
		}
		for l := range 16 {
			s[l] += float32(float32(float32(int(qs[l]>>4)-8)*d) * xb[16+l])
		}
	}
	return Reduce16((*[16]float32)(&s))
}
