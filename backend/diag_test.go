package backend_test

import (
	"context"
	"reflect"
	"slices"
	"testing"

	"github.com/evalrun/evalrun/backend"
	"github.com/evalrun/evalrun/backend/backendtest"
)

// diagFake adds the optional parts to the fake: Diagnostics, and hidden
// states (row index i gets {i, i+0.5}) for the rows asked for.
type diagFake struct {
	*backendtest.Fake
	d *backend.Diagnostics
}

func (f diagFake) Diagnostics(context.Context) (*backend.Diagnostics, error) { return f.d, nil }

func (f diagFake) Eval(ctx context.Context, req backend.EvalRequest, emit func(backend.Logits) error) error {
	return f.Fake.Eval(ctx, req, func(l backend.Logits) error {
		if slices.Contains(req.HiddenRows, l.Index) {
			l.Hidden = []float32{float32(l.Index), float32(l.Index) + 0.5}
		}
		return emit(l)
	})
}

func TestDiagnosticsAndHiddenStatesCrossTheBoundary(t *testing.T) {
	want := &backend.Diagnostics{Shadow: true, KernelList: "k.json",
		Ops:     []backend.OpError{{Op: "ffn_out-0", Calls: 3, Elements: 192, NMSE: 8.5e-4, Cosine: 0.9995, MaxAbs: 0.12, NonFinite: 1}},
		Kernels: []backend.KernelUse{{Name: "ffn_up-0", Shape: "128×64×172", Listed: true}, {Name: "ffn_up-0", Shape: "1×64×172", Listed: true, Calls: 7}}}
	c := serveInProcess(t, diagFake{&backendtest.Fake{}, want})
	ctx := context.Background()
	if _, err := c.Load(ctx, backend.LoadRequest{ModelPath: "m"}); err != nil {
		t.Fatal(err)
	}
	got, err := c.Diagnostics(ctx)
	if err != nil || !reflect.DeepEqual(got, want) {
		t.Fatalf("Diagnostics = %+v, %v; want %+v", got, err, want)
	}
	hidden := map[int][]float32{}
	err = c.Eval(ctx, backend.EvalRequest{Session: "s", Tokens: []int32{1, 2, 3, 4}, LogitsFrom: 1, HiddenRows: []int{1, 3}}, func(l backend.Logits) error {
		if l.Hidden != nil {
			hidden[l.Index] = l.Hidden
		}
		return nil
	})
	if err != nil || len(hidden) != 2 || !slices.Equal(hidden[1], []float32{1, 1.5}) || !slices.Equal(hidden[3], []float32{3, 3.5}) {
		t.Errorf("hidden states %v, %v", hidden, err)
	}

	// A plugin without Diagnostics: nil, no error.
	plain := serveInProcess(t, &backendtest.Fake{})
	if _, err := plain.Load(ctx, backend.LoadRequest{ModelPath: "m"}); err != nil {
		t.Fatal(err)
	}
	if d, err := plain.Diagnostics(ctx); d != nil || err != nil {
		t.Errorf("plugin without diagnostics: %+v, %v", d, err)
	}
}
