package ggml

import (
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"unsafe"

	"github.com/ebitengine/purego"
)

// TestGeluTableIsLibggmls compares every entry of the fp16 GELU table with
// the one libggml-cpu builds at ggml_cpu_init (the llamacpp plugin's
// library, `make llamacpp`; its haswell variant runs on any x86-64 CPU
// with AVX2 and FMA and is built with FMA, like the variants libllama picks
// on AVX-512 machines). NaN inputs give NaN in both; the payload is
// not compared.
func TestGeluTableIsLibggmls(t *testing.T) {
	lib, _ := filepath.Abs(filepath.Join("..", "..", "third_party", "llamacpp", "v0.5.0", "libggml-cpu-haswell.so"))
	if _, err := os.Stat(lib); err != nil {
		t.Skipf("libggml-cpu not installed (make llamacpp): %v", err)
	}
	h, err := purego.Dlopen(lib, purego.RTLD_NOW|purego.RTLD_LOCAL)
	if err != nil {
		t.Skipf("%s does not load here: %v", lib, err)
	}
	var initCPU func()
	purego.RegisterLibFunc(&initCPU, h, "ggml_cpu_init")
	initCPU()
	sym, err := purego.Dlsym(h, "ggml_table_gelu_f16")
	if err != nil {
		t.Fatal(err)
	}
	// sym is the table's address in the library, which stays loaded.
	theirs := (*[1 << 16]uint16)(*(*unsafe.Pointer)(unsafe.Pointer(&sym)))
	ours := GeluTable()
	for i := range ours {
		x := F16ToF32(uint16(i))
		a, b := F16ToF32(ours[i]), F16ToF32(theirs[i])
		if math.IsNaN(float64(x)) {
			if !math.IsNaN(float64(a)) || !math.IsNaN(float64(b)) {
				t.Errorf("gelu(NaN %04x): ours %04x, libggml %04x", i, ours[i], theirs[i])
			}
			continue
		}
		if ours[i] != theirs[i] {
			t.Errorf("gelu(%g) (fp16 %04x): ours %04x, libggml %04x", x, i, ours[i], theirs[i])
		}
	}
}

// Geglu reads the table between -10 and 10 and follows ggml outside.
func TestGeglu(t *testing.T) {
	gate := []float32{-20, -10, -1, 0, 0.5, 9.99, 10, 30}
	up := []float32{2, 2, 2, 2, 2, 2, 2, 2}
	dst := make([]float32, len(gate))
	Geglu(dst, gate, up)
	want := []float32{0, 0, F16ToF32(F32ToF16(GeluF32(-1))) * 2, 0, F16ToF32(F32ToF16(GeluF32(0.5))) * 2,
		F16ToF32(F32ToF16(GeluF32(F16ToF32(F32ToF16(9.99))))) * 2, 20, 60}
	for i := range dst {
		if dst[i] != want[i] {
			t.Errorf("geglu(%g)·2 = %g, want %g", gate[i], dst[i], want[i])
		}
	}
	if g := GeluF32(1); math.Abs(float64(g)-0.8411920) > 1e-6 {
		t.Errorf("gelu(1) = %g, want 0.841192", g)
	}
}

// TestGegluIsTheScalarLoop: Geglu (bulk fp16 conversions around the table)
// equals ggml_vec_geglu_f32's element-by-element loop bit for bit, at the
// ±10 bounds, for NaN, infinities, subnormals and rows longer than its
// chunk, also when dst is the gate (as the engine calls it).
func TestGegluIsTheScalarLoop(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 6))
	n := 1000
	gate, up := make([]float32, n), make([]float32, n)
	special := []float32{-10, 10, -9.999999, 9.999999, float32(math.NaN()), float32(math.Inf(1)), float32(math.Inf(-1)), 1e-40, -1e-40, 0, float32(math.Copysign(0, -1)), 65504, 65520, -70000}
	for i := range gate {
		gate[i] = float32(rng.NormFloat64() * 4)
		up[i] = float32(rng.NormFloat64())
		if i < len(special) {
			gate[i], up[i] = special[i], 2 // -0·2 (the table at -10) is not 0
		}
	}
	table := GeluTable()
	want := make([]float32, n)
	for i, x := range gate {
		switch {
		case x <= -10:
			want[i] = 0
		case x >= 10:
			want[i] = x * up[i]
		default:
			want[i] = F16ToF32(table[F32ToF16(x)]) * up[i]
		}
	}
	got := make([]float32, n)
	Geglu(got, gate, up)
	inPlace := slices.Clone(gate)
	Geglu(inPlace, inPlace, up)
	for i := range want {
		if math.Float32bits(got[i]) != math.Float32bits(want[i]) || math.Float32bits(inPlace[i]) != math.Float32bits(want[i]) {
			t.Fatalf("gate %v: Geglu %v (in place %v), the scalar loop %v", gate[i], got[i], inPlace[i], want[i])
		}
	}
}
