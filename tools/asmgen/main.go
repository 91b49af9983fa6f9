// Command _asm generates engine/ggml's amd64 kernels with avo:
//
//	cd engine/ggml/_asm && go run . -out ../kernels_amd64.s -stubs ../kernels_amd64_stubs.go -pkg ggml
//
// (`make asm` runs it). The generated files are committed; building evalrun
// never runs this program.
//
// Every kernel reproduces a generic Go function of package ggml bit for bit
// (same element-to-lane assignment, same rounding of every operation, no
// fused multiply-add where the generic code rounds twice); the package's
// tests compare them on random data.
package main

import (
	. "github.com/mmcloughlin/avo/build"
)

func main() {
	ConstraintExpr("amd64")
	genConstants()
	for _, t := range exactTypes() {
		genMatVecExact(t)
		genDequant(t)
	}
	genGemmExact()
	genOpsConstants()
	genScoreRows()
	genLaneFMA()
	genReduceLanes(64)
	genReduceLanes(16)
	genSoftmax()
	genSwiglu()
	Generate()
}
