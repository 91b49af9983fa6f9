package plan

import (
	"slices"
	"testing"

	"github.com/evalrun/evalrun/pipeline/spec"
)

// A score stream is cut as llama-perplexity cuts it: whole chunks of n_ctx
// tokens (a shorter tail is not scored), each fed without its last token
// and with BOS over its first, and scored from n_ctx/2 to n_ctx-2.
func TestChunkGeometry(t *testing.T) {
	stream := make([]int32, 300)
	for i := range stream {
		stream[i] = int32(1000 + i)
	}
	chunks := Split("d", stream, 128, 1)
	if len(chunks) != 2 {
		t.Fatalf("%d chunks of 300 tokens at n_ctx 128, want 2", len(chunks))
	}
	c := chunks[1]
	if c.Dataset != "d" || c.Index != 1 || c.Tokens[0] != 1128 || len(c.Tokens) != 128 {
		t.Fatalf("second chunk: %s %d, starts at %d, %d tokens", c.Dataset, c.Index, c.Tokens[0], len(c.Tokens))
	}
	in := c.Input()
	if len(in) != 127 || in[0] != 1 || in[1] != 1129 || in[126] != 1254 {
		t.Fatalf("input: %d tokens, %v ... %d", len(in), in[:2], in[len(in)-1])
	}
	if c.First() != 64 || c.Rows() != 63 {
		t.Fatalf("first %d rows %d, want 64 and 63", c.First(), c.Rows())
	}
	if c.Tokens[0] != 1128 {
		t.Fatal("Input wrote BOS into the stream")
	}
	if keep := Split("d", stream, 128, -1)[0].Input(); keep[0] != 1000 {
		t.Fatalf("BOS -1 must keep the first token, got %d", keep[0])
	}

	p := &Plan{BOS: 1, Datasets: []Dataset{
		{Dataset: datasetSpec("a", "score", 128), Stream: stream},
		{Dataset: datasetSpec("g", "generate", 0), Prompts: []Prompt{{Dataset: "g", ID: "x", Tokens: []int32{1, 2}, MaxNew: 4}}},
		{Dataset: datasetSpec("b", "score", 64), Stream: stream[:200]},
	}}
	var got []string
	for _, c := range p.Chunks() {
		got = append(got, c.Dataset)
	}
	if want := []string{"a", "a", "b", "b", "b"}; !slices.Equal(got, want) {
		t.Fatalf("Chunks: %v, want %v (the score datasets in order)", got, want)
	}
	if in := p.Chunks()[4].Input(); in[0] != 1 {
		t.Fatalf("Chunks did not pass the plan's BOS: input starts %d", in[0])
	}
	if n := len(Split("d", stream[:256], 128, 1)); n != 2 {
		t.Fatalf("256 tokens at n_ctx 128: %d chunks, want 2 (the last chunk ends with the stream)", n)
	}
	if Split("d", stream, 0, 1) != nil {
		t.Fatal("n_ctx 0 must give no chunks")
	}
}

func datasetSpec(name string, mode spec.Mode, nCtx int) spec.Dataset {
	return spec.Dataset{Name: name, Mode: mode, NCtx: nCtx}
}
