package ggml

import (
	"fmt"
	"math/rand/v2"
	"testing"
)

// TestNEONSelection: the NEON set is chosen from the CPU's features: none
// without AdvSIMD, and without SDOT one whose ggml integer dots run the
// generic code (and are still bit-identical: checked here on every
// machine, since qemu and the RK3588 have SDOT).
func TestNEONSelection(t *testing.T) {
	if sets := neonSets(arm64Features{DotProd: true}); len(sets) != 0 {
		t.Fatalf("no AdvSIMD: %v", sets)
	}
	for _, dot := range []bool{false, true} {
		sets := neonSets(arm64Features{ASIMD: true, DotProd: dot})
		if len(sets) != 1 || sets[0].Name() != "neon" || sets[0].(neonKernels).dot != dot {
			t.Fatalf("AdvSIMD, dotprod %v: %v", dot, sets)
		}
		k := sets[0]
		rng := rand.New(rand.NewPCG(51, 52))
		for _, typ := range []Type{Q8_0, Q4_0} {
			const K, N, T = 96, 20, 3
			w := matrix(t, rng, typ, K, N)
			var a GGMLActivations
			if err := k.PrepareGGML(typ, ggmlActivations(rng, T, K), T, &a); err != nil {
				t.Fatal(err)
			}
			for _, kind := range []GGMLKernel{GGMLQ8_0AVX, GGMLQ4_0AVX, GGMLQ4_0x8} {
				if (kind == GGMLQ8_0AVX) != (typ == Q8_0) {
					continue
				}
				want, got := make([]float32, T*N), make([]float32, T*N)
				Generic.MatMulGGML(kind, typ, w, N, &a, want, N)
				k.MatMulGGML(kind, typ, w, N, &a, got, N)
				expectSame(t, fmt.Sprintf("dotprod %v %s kernel %d", dot, typ, kind), want, got)
			}
		}
	}
	if f := hostFeatures(); !f.ASIMD {
		t.Logf("this CPU has no AdvSIMD: generic only")
	}
}
