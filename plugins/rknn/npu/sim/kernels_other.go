//go:build !amd64

package sim

const haveKernels = false

func fp16TransposeAVX512(b []byte, kBlocks int, bt []float32) { panic("no kernels") }
func fp16Accumulate1AVX512(bt []float32, a []float32, lda int, rows int, kBlocks int, c []float32, ldc int, atom int, init bool) {
	panic("no kernels")
}
func fp16Accumulate2AVX512(bt []float32, a []float32, lda int, rows int, kBlocks int, c []float32, ldc int, atom int, init bool) {
	panic("no kernels")
}
func int8NativeAVX512(a []byte, lda int, rows int, b []byte, kBlocks int, c []int32, ldc int) {
	panic("no kernels")
}
func int4NativeAVX512(a []byte, lda int, rows int, b []byte, kBlocks int, c []int32, ldc int) {
	panic("no kernels")
}
func fp16Direct1AVX512(b []byte, kBlocks int, a []float32, lda int, c []float32, ldc int) {
	panic("no kernels")
}
func fp16Direct2AVX512(b []byte, kBlocks int, a []float32, lda int, c []float32, ldc int) {
	panic("no kernels")
}
func fp16Direct3AVX512(b []byte, kBlocks int, a []float32, lda int, c []float32, ldc int) {
	panic("no kernels")
}
func fp16Direct4AVX512(b []byte, kBlocks int, a []float32, lda int, c []float32, ldc int) {
	panic("no kernels")
}
