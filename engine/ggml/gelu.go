package ggml

import (
	"sync"

	"github.com/evalrun/evalrun/engine/cmath"
)

// ggml's GELU constants (ggml-cpu/vec.h).
const (
	geluCoefA    = float32(0.044715)
	sqrt2OverPi  = float32(0.79788456080286535587989211986876)
	geluTableMax = float32(10) // beyond ±10 ggml skips the table
)

// GeluF32 is ggml_gelu_f32, the tanh approximation, rounded as gcc
// compiles it for ggml-cpu (1 + a·x·x contracted into one fused
// multiply-add; tanhf from the C library).
func GeluF32(x float32) float32 {
	inner := FMA32(float32(geluCoefA*x), x, 1)
	t := cmath.Tanhf(float32(float32(sqrt2OverPi*x) * inner))
	return float32(float32(0.5)*x) * (1 + t)
}

// geluTable is ggml_table_gelu_f16: GeluF32 of every fp16 value, rounded
// to fp16, which ggml-cpu's GELU and GEGLU read (GGML_GELU_FP16).
var geluTable = sync.OnceValue(func() *[1 << 16]uint16 {
	var t [1 << 16]uint16
	for i := range t {
		t[i] = F32ToF16(GeluF32(F16ToF32(uint16(i))))
	}
	return &t
})

// GeluTable returns ggml's fp16 GELU table (for tests against libggml's).
func GeluTable() *[1 << 16]uint16 { return geluTable() }

// Geglu is ggml_vec_geglu_f32 with GGML_GELU_FP16: dst = gelu(gate)·up,
// gelu read from the fp16 table of the gate rounded to fp16; 0 at or below
// -10 and the gate itself at or above 10.
func Geglu(dst, gate, up []float32) {
	t := geluTable()
	up = up[:len(gate)]
	dst = dst[:len(gate)]
	// The conversions in bulk (F32sToF16's SIMD path rounds as F32ToF16
	// does), the table read in between; dst may be gate.
	var half [256]uint16
	var gelu [256]float32
	for lo := 0; lo < len(gate); lo += len(half) {
		g := gate[lo:min(lo+len(half), len(gate))]
		h := half[:len(g)]
		F32sToF16(h, g)
		done := 0
		if gegluTableFast != nil {
			// The table read, selection and product of whole chunks of
			// 16 in one pass (gelu of every fp16 value as float32).
			done = len(g) &^ 15
			gegluTableFast(dst[lo:lo+done], g[:done], up[lo:lo+done], h[:done], geluTableF32())
		}
		for i := done; i < len(h); i++ {
			h[i] = t[h[i]]
		}
		F16sToF32(gelu[done:len(g)], h[done:])
		for i := done; i < len(g); i++ {
			x := g[i]
			switch {
			case x <= -geluTableMax:
				dst[lo+i] = 0
			case x >= geluTableMax:
				dst[lo+i] = x * up[lo+i]
			default:
				dst[lo+i] = gelu[i] * up[lo+i]
			}
		}
	}
}

// geluTableF32 is geluTable's values as float32 (F16sToF32's bits, as
// Geglu's scalar path converts them), for gegluTableFast's gather.
var geluTableF32 = sync.OnceValue(func() *[1 << 16]float32 {
	var f [1 << 16]float32
	F16sToF32(f[:], geluTable()[:])
	return &f
})

// SoftCap is gemma's soft cap as llama.cpp's graph computes it: ggml_scale
// by 1/cap, TANH, ggml_scale by cap, element by element (the tanh over a
// chunk at a time: TanhInPlace).
func SoftCap(x []float32, cap float32) {
	inv := 1 / cap
	const chunk = 1024
	for lo := 0; lo < len(x); lo += chunk {
		c := x[lo:min(lo+chunk, len(x))]
		for i, v := range c {
			c[i] = v * inv
		}
		TanhInPlace(c)
		for i, v := range c {
			c[i] = v * cap
		}
	}
}

// GegluF32 is ggml_vec_geglu_f32 without GGML_GELU_FP16: dst = gelu(gate)·up
// with GELU in f32 (the engine's exact numerics): GeluF32 of every element,
// its tanh taken over a chunk at a time (TanhInPlace); dst may be gate.
func GegluF32(dst, gate, up []float32) {
	up = up[:len(gate)]
	dst = dst[:len(gate)]
	if gegluF32Fast != nil {
		gegluF32Fast(dst, gate, up)
		return
	}
	var buf [256]float32
	for lo := 0; lo < len(gate); lo += len(buf) {
		g := gate[lo:min(lo+len(buf), len(gate))]
		t := buf[:len(g)]
		for i, x := range g { // GeluF32's tanh argument
			inner := FMA32(float32(geluCoefA*x), x, 1)
			t[i] = float32(float32(sqrt2OverPi*x) * inner)
		}
		TanhInPlace(t)
		for i, x := range g { // gate[lo+i] read before dst[lo+i] is written
			gelu := float32(float32(float32(0.5)*x) * (1 + t[i]))
			dst[lo+i] = gelu * up[lo+i]
		}
	}
}
