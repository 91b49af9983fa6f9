package backend_test

import (
	"context"
	"testing"

	"github.com/evalrun/evalrun/backend"
	"github.com/evalrun/evalrun/backend/backendtest"
)

// BenchmarkEvalRows128k is a score chunk's rows through the plugin
// boundary (gRPC over a unix socket, in-process, without mTLS): 63 rows of
// Llama 3's 128256 logits per call, decoded into two reused host rows as
// a run's stream.Call does (package pipeline/stream).
func BenchmarkEvalRows128k(b *testing.B) {
	const vocab, rows = 128256, 63
	c := serveInProcess(b, &backendtest.Fake{})
	if _, err := c.Load(context.Background(), backend.LoadRequest{ModelPath: "m", Options: map[string]any{"vocab": vocab}}); err != nil {
		b.Fatal(err)
	}
	tokens := make([]int32, rows)
	pool := [][]float32{make([]float32, vocab), make([]float32, vocab)}
	next := 0
	b.SetBytes(4 * vocab * rows)
	for b.Loop() {
		err := c.EvalInto(context.Background(), backend.EvalRequest{Session: "s", Pos: 0, Tokens: tokens},
			func(n int) []float32 { r := pool[next%2][:n]; next++; return r },
			func(backend.Logits) error { return nil })
		if err != nil {
			b.Fatal(err)
		}
	}
}
