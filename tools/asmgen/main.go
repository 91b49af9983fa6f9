// Command asmgen generates evalrun's amd64 kernels with avo, one set at a
// time (`make asm` runs them all):
//
//	go run . -set ggml -out ../../engine/ggml/kernels_amd64.s -stubs ../../engine/ggml/kernels_amd64_stubs.go -pkg ggml
//	go run . -set avx2 -out ../../engine/ggml/kernels_avx2_amd64.s -stubs ../../engine/ggml/kernels_avx2_amd64_stubs.go -pkg ggml
//	go run . -set npusim -out ../../plugins/rknn/npu/sim/kernels_amd64.s -stubs ../../plugins/rknn/npu/sim/kernels_amd64_stubs.go -pkg sim
//
// The generated files are committed; building evalrun never runs this
// program.
//
// Every kernel reproduces a generic Go function of its package bit for bit
// (same element-to-lane assignment, same rounding of every operation, no
// fused multiply-add where the generic code rounds twice); the packages'
// tests compare them on random data.
package main

import (
	"flag"
	"log"

	. "github.com/mmcloughlin/avo/build"
)

var set = flag.String("set", "ggml", "kernel set: ggml, avx2 or npusim")

func main() {
	flag.Parse()
	ConstraintExpr("amd64")
	// Each set emits only the tables its kernels read (genConstants for
	// ggml, genNPUConstants for npusim).
	switch *set {
	case "ggml":
		genConstants()
		genGGML()
	case "npusim":
		genNPUSim()
	case "avx2":
		genAVX2()
	default:
		log.Fatalf("unknown -set %q (ggml, avx2 or npusim)", *set)
	}
	Generate()
}

func genGGML() {
	for _, t := range exactTypes() {
		genMatVecExact(t)
		genDequant(t)
	}
	for rows := 1; rows <= 4; rows++ {
		genGemmExact(rows)
	}
	genOpsConstants()
	genScoreRows(false)
	genScoreRows(true)
	genLaneFMA(false)
	genLaneFMA(true)
	genScoreRowsQ8_0()
	genLaneFMAQ8_0()
	genReduceLanes(64)
	genAddZero()
	genReduceLanes(16)
	genSoftmax()
	genSwiglu()
	genRope()
	genGGMLNumerics()
	genTanhConstants()
	genTanh()
	genGegluF32()
	genGegluTable()
}
