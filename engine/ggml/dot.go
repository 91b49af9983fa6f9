package ggml

import (
	"encoding/binary"
	"fmt"
	"math"
	"unsafe"
)

// Exact numerics. DotF32 fixes one accumulation order: element j is added to
// lane j%8 (in increasing j), each product rounded to float32 before the add,
// and the eight lanes are reduced as ((l0+l1)+(l2+l3))+((l4+l5)+(l6+l7)).
// DotRow dequantizes on the fly and follows the same order, so
// DotRow(t, w, x) == DotF32(Dequantize(t, w), x) bit for bit.

// reduce8 is the fixed final reduction of the eight lanes.
func reduce8(s *[8]float32) float32 {
	return ((s[0] + s[1]) + (s[2] + s[3])) + ((s[4] + s[5]) + (s[6] + s[7]))
}

// accumulate adds w[j]*x[j] to lane j%8 for len(w) (a multiple of 8) elements.
func accumulate(s *[8]float32, w, x []float32) {
	x = x[:len(w)]
	s0, s1, s2, s3, s4, s5, s6, s7 := s[0], s[1], s[2], s[3], s[4], s[5], s[6], s[7]
	for i := 0; i+8 <= len(w); i += 8 {
		ww := (*[8]float32)(w[i : i+8])
		xx := (*[8]float32)(x[i : i+8])
		s0 += float32(ww[0] * xx[0])
		s1 += float32(ww[1] * xx[1])
		s2 += float32(ww[2] * xx[2])
		s3 += float32(ww[3] * xx[3])
		s4 += float32(ww[4] * xx[4])
		s5 += float32(ww[5] * xx[5])
		s6 += float32(ww[6] * xx[6])
		s7 += float32(ww[7] * xx[7])
	}
	s[0], s[1], s[2], s[3], s[4], s[5], s[6], s[7] = s0, s1, s2, s3, s4, s5, s6, s7
}

func dotF32(a, b []float32) float32 {
	if len(a) != len(b) {
		panic(fmt.Sprintf("ggml.DotF32: lengths %d and %d differ", len(a), len(b)))
	}
	var s [8]float32
	body := len(a) &^ 7
	accumulate(&s, a[:body], b[:body])
	for j := body; j < len(a); j++ {
		s[j-body] += float32(a[j] * b[j])
	}
	return reduce8(&s)
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
	var s [8]float32
	var buf [qkK]float32
	for i := 0; i < n/bs; i++ {
		dec(w[i*ts:(i+1)*ts], buf[:bs])
		accumulate(&s, buf[:bs], x[i*bs:(i+1)*bs])
	}
	return reduce8(&s)
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

// tail adds the last len(x)%8 products to lanes 0.. and reduces.
func tailReduce(s *[8]float32, w func(j int) float32, x []float32, from int) float32 {
	for j := from; j < len(x); j++ {
		s[j-from] += float32(w(j) * x[j])
	}
	return reduce8(s)
}

func dotRowF32(w []byte, x []float32) float32 {
	if littleEndian && len(x) > 0 {
		// The stored row already is float32: view it without copying.
		return dotF32(unsafe.Slice((*float32)(unsafe.Pointer(&w[0])), len(x)), x)
	}
	var s [8]float32
	var buf [8]float32
	body := len(x) &^ 7
	for i := 0; i < body; i += 8 {
		for l := range buf {
			buf[l] = math.Float32frombits(binary.LittleEndian.Uint32(w[4*(i+l):]))
		}
		accumulate(&s, buf[:], x[i:i+8])
	}
	return tailReduce(&s, func(j int) float32 {
		return math.Float32frombits(binary.LittleEndian.Uint32(w[4*j:]))
	}, x, body)
}

// littleEndian reports whether the host stores float32 as GGUF does.
var littleEndian = binary.NativeEndian.Uint16([]byte{1, 0}) == 1

func dotRowF16(w []byte, x []float32) float32 {
	var s [8]float32
	s0, s1, s2, s3, s4, s5, s6, s7 := s[0], s[1], s[2], s[3], s[4], s[5], s[6], s[7]
	body := len(x) &^ 7
	w = w[:2*len(x)]
	tab := f16Table
	for i := 0; i < body; i += 8 {
		ww := w[2*i : 2*i+16 : 2*i+16]
		xx := x[i : i+8 : i+8]
		s0 += float32(tab[uint16(ww[0])|uint16(ww[1])<<8] * xx[0])
		s1 += float32(tab[uint16(ww[2])|uint16(ww[3])<<8] * xx[1])
		s2 += float32(tab[uint16(ww[4])|uint16(ww[5])<<8] * xx[2])
		s3 += float32(tab[uint16(ww[6])|uint16(ww[7])<<8] * xx[3])
		s4 += float32(tab[uint16(ww[8])|uint16(ww[9])<<8] * xx[4])
		s5 += float32(tab[uint16(ww[10])|uint16(ww[11])<<8] * xx[5])
		s6 += float32(tab[uint16(ww[12])|uint16(ww[13])<<8] * xx[6])
		s7 += float32(tab[uint16(ww[14])|uint16(ww[15])<<8] * xx[7])
	}
	s = [8]float32{s0, s1, s2, s3, s4, s5, s6, s7}
	return tailReduce(&s, func(j int) float32 {
		return tab[binary.LittleEndian.Uint16(w[2*j:])]
	}, x, body)
}

func dotRowBF16(w []byte, x []float32) float32 {
	var s [8]float32
	var buf [8]float32
	body := len(x) &^ 7
	for i := 0; i < body; i += 8 {
		for l := range buf {
			buf[l] = BF16ToF32(binary.LittleEndian.Uint16(w[2*(i+l):]))
		}
		accumulate(&s, buf[:], x[i:i+8])
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
	var s0, s1, s2, s3, s4, s5, s6, s7 float32
	for ib := 0; ib < len(x)/32; ib++ {
		blk := w[34*ib : 34*ib+34 : 34*ib+34]
		d := f16Table[uint16(blk[0])|uint16(blk[1])<<8]
		qs := blk[2:34:34]
		xb := x[32*ib : 32*ib+32 : 32*ib+32]
		for g := 0; g < 32; g += 8 {
			q := (*[8]byte)(qs[g : g+8])
			xx := (*[8]float32)(xb[g : g+8])
			s0 += float32(float32(i8f[q[0]]*d) * xx[0])
			s1 += float32(float32(i8f[q[1]]*d) * xx[1])
			s2 += float32(float32(i8f[q[2]]*d) * xx[2])
			s3 += float32(float32(i8f[q[3]]*d) * xx[3])
			s4 += float32(float32(i8f[q[4]]*d) * xx[4])
			s5 += float32(float32(i8f[q[5]]*d) * xx[5])
			s6 += float32(float32(i8f[q[6]]*d) * xx[6])
			s7 += float32(float32(i8f[q[7]]*d) * xx[7])
		}
	}
	s := [8]float32{s0, s1, s2, s3, s4, s5, s6, s7}
	return reduce8(&s)
}

// dotRowQ4_0 fuses decodeQ4_0. Lane l of a block receives, in element order,
// the low nibbles of qs[l] and qs[l+8] (elements l, l+8), then their high
// nibbles (elements l+16, l+24).
func dotRowQ4_0(w []byte, x []float32) float32 {
	var s0, s1, s2, s3, s4, s5, s6, s7 float32
	for ib := 0; ib < len(x)/32; ib++ {
		blk := w[18*ib : 18*ib+18 : 18*ib+18]
		d := f16Table[uint16(blk[0])|uint16(blk[1])<<8]
		qs := blk[2:18:18]
		xb := x[32*ib : 32*ib+32 : 32*ib+32]
		for g := 0; g < 4; g++ {
			q := qs[8*(g&1) : 8*(g&1)+8 : 8*(g&1)+8]
			shift := 4 * uint(g>>1)
			xx := xb[8*g : 8*g+8 : 8*g+8]
			s0 += float32(float32(float32(int(q[0]>>shift&0xF)-8)*d) * xx[0])
			s1 += float32(float32(float32(int(q[1]>>shift&0xF)-8)*d) * xx[1])
			s2 += float32(float32(float32(int(q[2]>>shift&0xF)-8)*d) * xx[2])
			s3 += float32(float32(float32(int(q[3]>>shift&0xF)-8)*d) * xx[3])
			s4 += float32(float32(float32(int(q[4]>>shift&0xF)-8)*d) * xx[4])
			s5 += float32(float32(float32(int(q[5]>>shift&0xF)-8)*d) * xx[5])
			s6 += float32(float32(float32(int(q[6]>>shift&0xF)-8)*d) * xx[6])
			s7 += float32(float32(float32(int(q[7]>>shift&0xF)-8)*d) * xx[7])
		}
	}
	s := [8]float32{s0, s1, s2, s3, s4, s5, s6, s7}
	return reduce8(&s)
}
