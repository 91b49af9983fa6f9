// The avo generator of evalrun's amd64 kernels (engine/ggml, the simulated
// NPU). A module of its own so that evalrun does not depend on avo: `make asm` regenerates the committed
// .s files; building evalrun needs nothing from here.
module github.com/evalrun/evalrun/tools/asmgen

go 1.26

require github.com/mmcloughlin/avo v0.6.0

require (
	golang.org/x/mod v0.23.0 // indirect
	golang.org/x/sync v0.11.0 // indirect
	golang.org/x/tools v0.30.0 // indirect
)
