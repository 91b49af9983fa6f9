package diag

import (
	"bytes"
	"fmt"
	"math"
	"slices"
	"strings"
	"testing"

	"github.com/evalrun/evalrun/backend"
	"github.com/evalrun/evalrun/pipeline/summary"
)

func TestPositions(t *testing.T) {
	for _, c := range []struct {
		first, last, n int
		want           []int
	}{
		{64, 126, 8, []int{64, 72, 81, 90, 99, 108, 117, 126}},
		{5, 7, 8, []int{5, 6, 7}},
		{3, 3, 8, []int{3}},
		{0, 10, 1, []int{10}},
		{4, 3, 8, nil},
	} {
		if got := Positions(c.first, c.last, c.n); !slices.Equal(got, c.want) {
			t.Errorf("Positions(%d, %d, %d) = %v, want %v", c.first, c.last, c.n, got, c.want)
		}
	}
}

// TestCompareLayers: per layer over all positions; the error grows most
// where its NMSE rises most.
func TestCompareLayers(t *testing.T) {
	// 3 layers of 2 values, 2 positions. Layer 0 exact, layer 1 off by
	// 0.1 in one value, layer 2 off by 0.3 in every value.
	ref := [][]float32{{1, 0, 1, 1, 2, 2}, {0, 1, 1, 1, 2, 2}}
	cand := [][]float32{{1, 0, 1.1, 1, 2.3, 2.3}, {0, 1, 1, 1, 2.3, 2.3}}
	layers, grows, err := CompareLayers(ref, cand, 3)
	if err != nil {
		t.Fatal(err)
	}
	near := func(a, b float64) bool { return math.Abs(a-b) <= 1e-6*math.Abs(b) }
	if layers[0].NMSE != 0 || layers[0].Cosine != 1 || layers[0].MaxAbs != 0 {
		t.Errorf("layer 0 %+v", layers[0])
	}
	// layer 1: Σd² = 0.01, Σref² = 4; layer 2: Σd² = 4·0.09, Σref² = 16.
	if !near(layers[1].NMSE, 0.01/4) || !near(layers[2].NMSE, 0.36/16) || !near(layers[2].Growth, (0.36/16)/(0.01/4)) || !near(layers[2].MaxAbs, 0.3) {
		t.Errorf("layers %+v", layers)
	}
	if grows != 2 {
		t.Errorf("grows most at %d, want 2", grows)
	}
	if _, _, err := CompareLayers(ref, cand[:1], 3); err == nil {
		t.Error("position counts differ: no error")
	}
	if _, _, err := CompareLayers(ref, cand, 4); err == nil {
		t.Error("6 values are not 4 layers: no error")
	}
}

func TestReportFromDiagnostics(t *testing.T) {
	d := &backend.Diagnostics{Shadow: true, KernelList: "k.json",
		Ops:     []backend.OpError{{Op: "Qcur-0", NMSE: 1e-5}, {Op: "ffn_out-0", NMSE: 8e-4}, {Op: "Vcur-0", NMSE: 1e-9, NonFinite: 2}, {Op: "Kcur-0", NMSE: 1e-5}},
		Kernels: []backend.KernelUse{{Name: "ffn_up-0", Shape: "128×64×172", Listed: true}, {Name: "ffn_up-0", Shape: "1×64×172", Listed: true, Calls: 9}}}
	r := New(d)
	var order []string
	for _, o := range r.Ops {
		order = append(order, o.Op)
	}
	if !slices.Equal(order, []string{"Vcur-0", "ffn_out-0", "Qcur-0", "Kcur-0"}) {
		t.Errorf("ranked %v: non-finite first, then worst NMSE, ties in model order", order)
	}
	k := r.Kernels
	if k.Listed != 2 || k.Ran != 1 || k.Calls != 9 || !slices.Equal(k.NeverRan, []string{"ffn_up-0 128×64×172"}) {
		t.Errorf("kernels %+v", k)
	}
	if len(r.Warnings) != 1 || !strings.Contains(r.Warnings[0], "1 of 2 listed kernels never ran on the device: ffn_up-0 128×64×172") {
		t.Errorf("warnings %q", r.Warnings)
	}
	if p := OffloadProblem(r); !strings.Contains(p, "never ran") {
		t.Errorf("require_offload problem %q", p)
	}
	var b bytes.Buffer
	WriteText(&b, "npu-int8", r, "report.md")
	out := b.String()
	for _, want := range []string{"per-op error against the CPU path", "WARNING: 1 of 2 listed kernels never ran", "2 listed, 1 ran, 1 never ran; 9 NPU calls"} {
		if !strings.Contains(out, want) {
			t.Errorf("text lacks %q:\n%s", want, out)
		}
	}
	if strings.Index(out, "ffn_out-0") > strings.Index(out, "Qcur-0") {
		t.Errorf("table not ranked:\n%s", out)
	}
	b.Reset()
	WriteHTML(&b, r)
	if !strings.Contains(b.String(), "<tr><td>2</td><td>ffn_out-0</td>") || !strings.Contains(b.String(), "<p>WARNING: 1 of 2") {
		t.Errorf("html:\n%s", b.String())
	}
	b.Reset()
	WriteMarkdown(&b, r)
	if !strings.Contains(b.String(), "| 2 | ffn_out-0 | 0 | 8.000e-04 |") || !strings.Contains(b.String(), "**Warning:** 1 of 2") {
		t.Errorf("markdown:\n%s", b.String())
	}

	all := New(&backend.Diagnostics{KernelList: "auto", Kernels: []backend.KernelUse{{Name: "Qcur-0", Shape: "1×64×64", Calls: 4}}})
	if OffloadProblem(all) != "" || len(all.Warnings) != 0 {
		t.Errorf("auto with calls: %q %q", OffloadProblem(all), all.Warnings)
	}
	none := New(&backend.Diagnostics{KernelList: "auto"})
	if OffloadProblem(none) != "no matmul ran on the device" || len(none.Warnings) != 1 {
		t.Errorf("auto without calls: %q %q", OffloadProblem(none), none.Warnings)
	}
	var nilReport *Report
	if New(nil) != nil || !strings.Contains(OffloadProblem(nilReport), "no kernel accounting") {
		t.Error("a plugin without diagnostics")
	}
}

// evalrun run prints the worst WorstOps ops and the drift in a line, and
// says where the rest is; the report files have every op and layer.
func TestWriteTextIsShort(t *testing.T) {
	var ops []backend.OpError
	for i := range 9 {
		ops = append(ops, backend.OpError{Op: fmt.Sprintf("op-%d", i), NMSE: float64(i + 1)})
	}
	r := New(&backend.Diagnostics{Shadow: true, Ops: ops})
	r.LayerDrift = &summary.LayerDrift{Dataset: "d", Chunk: 1, Positions: []int{3}, Grows: 2,
		Layers: []summary.LayerError{{Layer: 0, NMSE: 1e-4}, {Layer: 1, NMSE: 2e-4, Growth: 2}, {Layer: 2, NMSE: 1e-3, Growth: 5}}}
	var b bytes.Buffer
	WriteText(&b, "npu", r, "report.md")
	out := b.String()
	for _, want := range []string{"the 5 worst of 9 ops", "     5  op-4 ", "the other 4 ops: report.md",
		"NMSE 1.000e-04 at layer 0, 1.000e-03 at layer 2; the error grows most at layer 2 (×5.00); every layer: report.md"} {
		if !strings.Contains(out, want) {
			t.Errorf("lacks %q:\n%s", want, out)
		}
	}
	if strings.Contains(out, "op-3 ") || strings.Count(out, "\n") > 14 {
		t.Errorf("not short:\n%s", out)
	}
	b.Reset()
	WriteMarkdown(&b, r)
	if !strings.Contains(b.String(), "| 9 | op-0 |") || !strings.Contains(b.String(), "| 2 | 1.000e-03 |") {
		t.Errorf("report.md lacks an op or a layer:\n%s", b.String())
	}
}
