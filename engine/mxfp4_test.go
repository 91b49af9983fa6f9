package engine

import (
	"testing"

	"github.com/evalrun/evalrun/engine/ggml"
)

// mxfp4Model rewrites the F32 model with every matrix whose rows are whole
// MXFP4 blocks quantized to MXFP4 (quantize_row_mxfp4_ref).
func mxfp4Model(t *testing.T) string {
	t.Helper()
	return rewriteModel(t, modelPath("F32"), nil, func(name string, typ *ggml.Type, dims *[]uint64, data *[]byte) bool {
		if len(*dims) != 2 || (*dims)[0]%32 != 0 {
			return true
		}
		n := int((*dims)[0] * (*dims)[1])
		x := make([]float32, n)
		if err := ggml.Dequantize(*typ, *data, x); err != nil {
			t.Fatal(err)
		}
		rb, _ := ggml.RowBytes(ggml.MXFP4, n)
		q := make([]byte, rb)
		if err := ggml.Quantize(ggml.MXFP4, x, q); err != nil {
			t.Fatal(err)
		}
		*typ, *data = ggml.MXFP4, q
		return true
	})
}

// TestMXFP4Model: an MXFP4 model loads and computes in both numerics, close
// to the F32 model it was quantized from (4-bit weights: KLD of a few
// percent, the top token mostly kept), and the two numerics differ only by
// the activations' Q8_0 rounding.
func TestMXFP4Model(t *testing.T) {
	path := mxfp4Model(t)
	ids := p3Tokens(t)[:64] // the arm64 tests run this under qemu
	ref := decodeAll(t, openModel(t, modelPath("F32"), Exact, 2), ids)
	var exact [][]float32
	for _, numerics := range []Numerics{Exact, GGML} {
		got := decodeAll(t, openModel(t, path, numerics, 2), ids)
		var d diffStats
		for i := range got {
			d.add(i, ref[i], got[i])
		}
		t.Logf("%s: mean KLD %.4g vs F32, top-1 differs at %d of %d rows", numerics, d.meanKLD(), len(d.argmaxMismatch), d.rows)
		if d.meanKLD() > 0.5 || len(d.argmaxMismatch) > d.rows/2 {
			t.Errorf("%s: MXFP4 logits far from F32: mean KLD %g, top-1 differs at %v", numerics, d.meanKLD(), d.argmaxMismatch)
		}
		if numerics == Exact {
			exact = got
			continue
		}
		var e diffStats
		for i := range got {
			e.add(i, exact[i], got[i])
		}
		if e.maxAbs == 0 || e.meanKLD() > 0.01 {
			t.Errorf("ggml vs exact numerics on MXFP4: max |Δ| %g, mean KLD %g (want a small nonzero difference)", e.maxAbs, e.meanKLD())
		}
	}
}
