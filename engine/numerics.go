package engine

import (
	"fmt"
	"strings"
)

// Numerics selects how weight matmuls round their inputs.
type Numerics int

const (
	// Exact multiplies the weights (dequantized from the file type) with
	// float32 activations, accumulating in float32.
	Exact Numerics = iota
	// GGML reproduces llama.cpp's CPU backend: activations are first
	// converted to the weight type's vec_dot_type (F16 for F16 weights, Q8_0
	// blocks for Q4_0/Q8_0, ...) and multiplied with ggml's vec_dot kernels.
	GGML
)

func (n Numerics) String() string {
	switch n {
	case Exact:
		return "exact"
	case GGML:
		return "ggml"
	}
	return fmt.Sprintf("numerics(%d)", int(n))
}

// ParseNumerics maps "exact" or "ggml" (any case) to its Numerics.
func ParseNumerics(s string) (Numerics, error) {
	switch strings.ToLower(strings.TrimSpace(s)) {
	case "exact":
		return Exact, nil
	case "ggml":
		return GGML, nil
	}
	return 0, fmt.Errorf("unknown numerics %q (want exact or ggml)", s)
}
