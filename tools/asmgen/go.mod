// The avo generator of engine/ggml's amd64 kernels. A module of its own so
// that evalrun does not depend on avo: `make asm` regenerates the committed
// .s files; building evalrun needs nothing from here.
module github.com/evalrun/evalrun/engine/ggml/_asm

go 1.26

require github.com/mmcloughlin/avo v0.5.0

require (
	golang.org/x/mod v0.6.0 // indirect
	golang.org/x/sys v0.1.0 // indirect
	golang.org/x/tools v0.2.0 // indirect
)
