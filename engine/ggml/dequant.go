package ggml

import (
	"encoding/binary"
	"fmt"
	"math"
)

// Block byte layouts (ggml-common.h). All multi-byte fields are little-endian.
const (
	qk   = 32  // elements per block of the legacy quants
	qkK  = 256 // elements per K-quant super-block
	qk8K = 292 // bytes per Q8_K block
)

// blockDecoder dequantizes one block of b (TypeSize bytes) into y (BlockSize values).
type blockDecoder func(b []byte, y []float32)

// decoders holds the block dequantizers of the quantized types. Each one
// computes every value with exactly the float32 operations documented on it,
// so the fused DotRow kernels can reproduce them bit for bit.
var decoders = map[Type]blockDecoder{
	Q4_0:  decodeQ4_0,
	Q4_1:  decodeQ4_1,
	Q5_0:  decodeQ5_0,
	Q5_1:  decodeQ5_1,
	Q8_0:  decodeQ8_0,
	Q4_K:  decodeQ4_K,
	Q5_K:  decodeQ5_K,
	Q6_K:  decodeQ6_K,
	Q8_K:  decodeQ8_K,
	MXFP4: decodeMXFP4,
}

// Supported reports whether Dequantize and DotRow handle the type.
func Supported(t Type) bool {
	switch t {
	case F32, F16, BF16:
		return true
	}
	_, ok := decoders[t]
	return ok
}

// checkRow validates that src holds exactly n elements of type t.
func checkRow(t Type, src []byte, n int) error {
	if !Supported(t) {
		return fmt.Errorf("unsupported tensor type %s", t)
	}
	want, err := RowBytes(t, n)
	if err != nil {
		return err
	}
	if len(src) != want {
		return fmt.Errorf("%s: %d bytes for %d elements, want %d", t, len(src), n, want)
	}
	return nil
}

// Dequantize converts len(dst) elements of type t from src to float32.
// len(src) must be exactly RowBytes(t, len(dst)).
func Dequantize(t Type, src []byte, dst []float32) error {
	if err := checkRow(t, src, len(dst)); err != nil {
		return err
	}
	switch t {
	case F32:
		for i := range dst {
			dst[i] = math.Float32frombits(binary.LittleEndian.Uint32(src[4*i:]))
		}
	case F16:
		for i := range dst {
			dst[i] = f16Table[binary.LittleEndian.Uint16(src[2*i:])]
		}
	case BF16:
		for i := range dst {
			dst[i] = BF16ToF32(binary.LittleEndian.Uint16(src[2*i:]))
		}
	default:
		dec, bs, ts := decoders[t], t.BlockSize(), t.TypeSize()
		for i := 0; i < len(dst)/bs; i++ {
			dec(src[i*ts:(i+1)*ts], dst[i*bs:(i+1)*bs])
		}
	}
	return nil
}

func f16At(b []byte, off int) float32 { return f16Table[binary.LittleEndian.Uint16(b[off:])] }

// decodeQ4_0: y = float32(q-8) * d.
func decodeQ4_0(b []byte, y []float32) {
	d := f16At(b, 0)
	qs := b[2:18]
	y = y[:32]
	for j := 0; j < 16; j++ {
		y[j] = float32(int(qs[j]&0xF)-8) * d
		y[j+16] = float32(int(qs[j]>>4)-8) * d
	}
}

// decodeQ4_1: y = float32(q*d) + m (two roundings, never fused).
func decodeQ4_1(b []byte, y []float32) {
	d, m := f16At(b, 0), f16At(b, 2)
	qs := b[4:20]
	y = y[:32]
	for j := 0; j < 16; j++ {
		y[j] = float32(float32(qs[j]&0xF)*d) + m
		y[j+16] = float32(float32(qs[j]>>4)*d) + m
	}
}

// decodeQ5_0: the fifth bit of element j is bit j of qh; y = float32(q-16) * d.
func decodeQ5_0(b []byte, y []float32) {
	d := f16At(b, 0)
	qh := binary.LittleEndian.Uint32(b[2:])
	qs := b[6:22]
	y = y[:32]
	for j := 0; j < 16; j++ {
		lo := int(qs[j]&0xF) | int(qh>>j&1)<<4
		hi := int(qs[j]>>4) | int(qh>>(j+16)&1)<<4
		y[j] = float32(lo-16) * d
		y[j+16] = float32(hi-16) * d
	}
}

// decodeQ5_1: y = float32(q*d) + m.
func decodeQ5_1(b []byte, y []float32) {
	d, m := f16At(b, 0), f16At(b, 2)
	qh := binary.LittleEndian.Uint32(b[4:])
	qs := b[8:24]
	y = y[:32]
	for j := 0; j < 16; j++ {
		lo := int(qs[j]&0xF) | int(qh>>j&1)<<4
		hi := int(qs[j]>>4) | int(qh>>(j+16)&1)<<4
		y[j] = float32(float32(lo)*d) + m
		y[j+16] = float32(float32(hi)*d) + m
	}
}

// decodeQ8_0: y = float32(q) * d.
func decodeQ8_0(b []byte, y []float32) {
	d := f16At(b, 0)
	qs := b[2:34]
	y = y[:32]
	for j := range y {
		y[j] = float32(int8(qs[j])) * d
	}
}

// scaleMinK4 unpacks the 6-bit scale and min of sub-block j from the 12 packed
// bytes of a Q4_K/Q5_K block (ggml get_scale_min_k4).
func scaleMinK4(j int, q []byte) (sc, m uint8) {
	if j < 4 {
		return q[j] & 63, q[j+4] & 63
	}
	return q[j+4]&0xF | (q[j-4]>>6)<<4, q[j+4]>>4 | (q[j]>>6)<<4
}

// decodeQ4_K: per 32-element sub-block s with (sc, m) = scaleMinK4(s):
// y = float32(float32(d*sc) * q) - float32(dmin*m).
func decodeQ4_K(b []byte, y []float32) {
	d, dmin := f16At(b, 0), f16At(b, 2)
	scales := b[4:16]
	q := b[16:144]
	y = y[:256]
	for c := 0; c < 4; c++ {
		sc1, m1 := scaleMinK4(2*c, scales)
		sc2, m2 := scaleMinK4(2*c+1, scales)
		d1, mn1 := float32(d*float32(sc1)), float32(dmin*float32(m1))
		d2, mn2 := float32(d*float32(sc2)), float32(dmin*float32(m2))
		qc, yc := q[32*c:32*c+32], y[64*c:64*c+64]
		for l := 0; l < 32; l++ {
			yc[l] = float32(d1*float32(qc[l]&0xF)) - mn1
			yc[l+32] = float32(d2*float32(qc[l]>>4)) - mn2
		}
	}
}

// decodeQ5_K: as Q4_K with a fifth bit from qh (bit 2c for the low half of
// chunk c, bit 2c+1 for the high half).
func decodeQ5_K(b []byte, y []float32) {
	d, dmin := f16At(b, 0), f16At(b, 2)
	scales := b[4:16]
	qh := b[16:48]
	q := b[48:176]
	y = y[:256]
	for c := 0; c < 4; c++ {
		sc1, m1 := scaleMinK4(2*c, scales)
		sc2, m2 := scaleMinK4(2*c+1, scales)
		d1, mn1 := float32(d*float32(sc1)), float32(dmin*float32(m1))
		d2, mn2 := float32(d*float32(sc2)), float32(dmin*float32(m2))
		u1, u2 := byte(1)<<(2*c), byte(2)<<(2*c)
		qc, yc := q[32*c:32*c+32], y[64*c:64*c+64]
		for l := 0; l < 32; l++ {
			lo, hi := qc[l]&0xF, qc[l]>>4
			if qh[l]&u1 != 0 {
				lo += 16
			}
			if qh[l]&u2 != 0 {
				hi += 16
			}
			yc[l] = float32(d1*float32(lo)) - mn1
			yc[l+32] = float32(d2*float32(hi)) - mn2
		}
	}
}

// decodeQ6_K: y = float32(d*sc) * (q-32) with signed 8-bit scales per 16 elements.
func decodeQ6_K(b []byte, y []float32) {
	d := f16At(b, 208)
	y = y[:256]
	for h := 0; h < 2; h++ {
		ql := b[64*h : 64*h+64]
		qh := b[128+32*h : 128+32*h+32]
		sc := b[192+8*h : 192+8*h+8]
		yh := y[128*h : 128*h+128]
		for l := 0; l < 32; l++ {
			is := l / 16
			q1 := int(ql[l]&0xF|(qh[l]>>0&3)<<4) - 32
			q2 := int(ql[l+32]&0xF|(qh[l]>>2&3)<<4) - 32
			q3 := int(ql[l]>>4|(qh[l]>>4&3)<<4) - 32
			q4 := int(ql[l+32]>>4|(qh[l]>>6&3)<<4) - 32
			yh[l] = float32(d*float32(int8(sc[is]))) * float32(q1)
			yh[l+32] = float32(d*float32(int8(sc[is+2]))) * float32(q2)
			yh[l+64] = float32(d*float32(int8(sc[is+4]))) * float32(q3)
			yh[l+96] = float32(d*float32(int8(sc[is+6]))) * float32(q4)
		}
	}
}

// decodeQ8_K: f32 scale, y = d * q (bsums unused).
func decodeQ8_K(b []byte, y []float32) {
	d := math.Float32frombits(binary.LittleEndian.Uint32(b))
	qs := b[4:260]
	y = y[:256]
	for j := range y {
		y[j] = d * float32(int8(qs[j]))
	}
}
