package ggml

import "github.com/evalrun/evalrun/engine/cmath"

// TanhInPlace sets x[i] = cmath.Tanhf(x[i]): with AVX-512 16 lanes at a
// time (tanhfAVX512, every branch of Tanhf computed in every lane and
// blended, bit-identical, NaN payloads included), otherwise element by
// element.
func TanhInPlace(x []float32) {
	if tanhFast != nil && len(x) > 0 {
		tanhFast(x)
		return
	}
	tanhGeneric(x)
}

func tanhGeneric(x []float32) {
	for i, v := range x {
		x[i] = cmath.Tanhf(v)
	}
}
