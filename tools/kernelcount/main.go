// Command kernelcount runs one engine/ggml kernel N times on fixed random
// data, with the kernel set $EVALRUN_KERNELS (default: the best this CPU
// runs), for tools/qemu-insn-count.sh to count the instructions the calls
// take (those between markStart and markEnd, on the main thread).
//
//	kernelcount KERNEL N
//
// KERNEL is one of the names -list prints.
package main

import (
	"encoding/binary"
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"runtime"
	"sort"
	"strconv"

	"github.com/evalrun/evalrun/engine/ggml"
)

const dim = 768 // the rows' width and count: a 768-wide model's projections

// The data is cheap to make (a long setup slows qemu's log): values -4..4 in steps of 1/32, and for block types random quants with
// scales 2^-6..2^-3.

func randVec(rng *rand.Rand, n int) []float32 {
	x := make([]float32, n)
	for i := range x {
		x[i] = float32(int8(rng.Uint32())) / 32
	}
	return x
}

func weights(rng *rand.Rand, t ggml.Type, k, n int) []byte {
	rb, err := ggml.RowBytes(t, k)
	check(err)
	w := make([]byte, rb*n)
	for i := 0; i+8 <= len(w); i += 8 {
		binary.LittleEndian.PutUint64(w[i:], rng.Uint64())
	}
	switch t {
	case ggml.F32:
		for i := 0; i < len(w); i += 4 {
			binary.LittleEndian.PutUint32(w[i:], math.Float32bits(float32(int8(w[i]))/32))
		}
	case ggml.F16:
		for i := 0; i < len(w); i += 2 {
			binary.LittleEndian.PutUint16(w[i:], ggml.F32ToF16(float32(int8(w[i]))/32))
		}
	case ggml.Q8_0, ggml.Q4_0:
		bs := t.TypeSize()
		for i := 0; i < len(w); i += bs {
			binary.LittleEndian.PutUint16(w[i:], 0x2400+uint16(w[i+2])<<2) // 2^-6 .. 2^-3
		}
	default:
		check(fmt.Errorf("no weights of type %s", t))
	}
	return w
}

func check(err error) {
	if err != nil {
		fmt.Fprintln(os.Stderr, "kernelcount:", err)
		os.Exit(1)
	}
}

// setups returns, for each kernel name, a function that prepares its data
// and returns one call.
func setups(kern ggml.Kernels) map[string]func(rng *rand.Rand) func() {
	ggmlMM := func(t ggml.Type, rows int) func(rng *rand.Rand) func() {
		return func(rng *rand.Rand) func() {
			w := weights(rng, t, dim, dim)
			var a ggml.GGMLActivations
			check(kern.PrepareGGML(t, randVec(rng, rows*dim), rows, &a))
			out := make([]float32, rows*dim)
			kind := ggml.GGMLKernelFor(t, rows, dim, dim)
			return func() { kern.MatMulGGML(kind, t, w, dim, &a, out, dim) }
		}
	}
	matVec := func(t ggml.Type) func(rng *rand.Rand) func() {
		return func(rng *rand.Rand) func() {
			w, x, out := weights(rng, t, dim, dim), randVec(rng, dim), make([]float32, dim)
			return func() { kern.MatVec(t, w, x, out) }
		}
	}
	matMul := func(t ggml.Type, rows int) func(rng *rand.Rand) func() {
		return func(rng *rand.Rand) func() {
			w, x, out := weights(rng, t, dim, dim), randVec(rng, rows*dim), make([]float32, rows*dim)
			return func() { kern.MatMul(t, w, dim, x, rows, out, dim) }
		}
	}
	const depth, head = 512, 128 // attention: 512 cached positions of a 128-wide head
	return map[string]func(rng *rand.Rand) func(){
		"ggml-q8_0-r1":  ggmlMM(ggml.Q8_0, 1),
		"ggml-q8_0-r8":  ggmlMM(ggml.Q8_0, 8),
		"ggml-q4_0-r1":  ggmlMM(ggml.Q4_0, 1),
		"ggml-q4_0-r8":  ggmlMM(ggml.Q4_0, 8),
		"ggml-f32-r1":   ggmlMM(ggml.F32, 1),
		"ggml-f16-r1":   ggmlMM(ggml.F16, 1),
		"ggml-f16-r8":   ggmlMM(ggml.F16, 8),
		"exact-f32-r1":  matVec(ggml.F32),
		"exact-f16-r1":  matVec(ggml.F16),
		"exact-f32-r8":  matMul(ggml.F32, 8),
		"exact-q8_0-r1": matVec(ggml.Q8_0),
		"exact-q4_0-r1": matVec(ggml.Q4_0),
		"score-rows-512": func(rng *rand.Rand) func() {
			k, q, out := randVec(rng, depth*head), randVec(rng, head), make([]float32, depth)
			return func() { kern.ScoreRows(k, head, q, out) }
		},
		"score-rows-f16-512": func(rng *rand.Rand) func() {
			kf, q, out := randVec(rng, depth*head), randVec(rng, head), make([]float32, depth)
			k := make([]uint16, len(kf))
			ggml.F32sToF16(k, kf)
			return func() { ggml.ScoreRowsF16(kern, k, head, q, out) }
		},
		"weighted-columns-512": func(rng *rand.Rand) func() {
			v, p, out := randVec(rng, depth*head), randVec(rng, depth), make([]float32, head)
			return func() { kern.WeightedColumns(v, head, p, 64, out) }
		},
		"softmax-512": func(rng *rand.Rand) func() {
			p := randVec(rng, depth)
			return func() { kern.Softmax(p, 0.125) }
		},
	}
}

// markStart and markEnd bracket the calls; qemu-insn-count.sh finds their
// addresses with go tool nm.
//
//go:noinline
func markStart() {}

//go:noinline
func markEnd() {}

func main() {
	kern, err := ggml.FromEnv()
	check(err)
	all := setups(kern)
	if len(os.Args) == 2 && os.Args[1] == "-list" {
		var names []string
		for name := range all {
			names = append(names, name)
		}
		sort.Strings(names)
		for _, name := range names {
			fmt.Println(name)
		}
		return
	}
	if len(os.Args) != 3 {
		fmt.Fprintln(os.Stderr, "usage: kernelcount KERNEL N | kernelcount -list")
		os.Exit(2)
	}
	setup, ok := all[os.Args[1]]
	if !ok {
		check(fmt.Errorf("no kernel %q (-list)", os.Args[1]))
	}
	n, err := strconv.Atoi(os.Args[2])
	check(err)
	call := setup(rand.New(rand.NewPCG(1, 2)))
	runtime.LockOSThread() // the calls run on the main thread: qemu's cpu 0
	markStart()
	for range n {
		call()
	}
	markEnd()
	fmt.Fprintf(os.Stderr, "%s: %d calls of %s\n", kern.Name(), n, os.Args[1])
}
