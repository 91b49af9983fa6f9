package plan

import (
	"cmp"
	"slices"

	"github.com/evalrun/evalrun/backend"
	"github.com/evalrun/evalrun/pipeline/kldbase"
	"github.com/evalrun/evalrun/pipeline/spec"
)

// Batch is one kind of Eval call a run makes: Tokens fed at once, the last
// Outputs of them with logits (the last layer's FFN and the output head
// only run on those).
type Batch struct{ Tokens, Outputs int }

// Batches lists the distinct Eval calls a run of the plan makes: score
// chunks (n_ctx−1 tokens, logits from n_ctx/2), prompt prefills (logits for
// the last token) and generate steps, and the bench's prompt chunks and
// single tokens. A plugin splits a call into the forward passes it decodes
// at once; a kernel list written for those names exactly the matmul shapes
// the run executes (evalrun kernels --spec hands these to the rknn plugin).
func (p *Plan) Batches() ([]Batch, error) {
	var out []Batch
	add := func(b Batch) {
		if b.Tokens > 0 && !slices.Contains(out, b) {
			out = append(out, b)
		}
	}
	// split is an Eval of n tokens with logits from row from.
	split := func(n, from int) { add(Batch{n, n - from}) }
	nCtxs := map[int]bool{}
	if path := p.Spec.Reference.KLDBase; path != "" {
		b, err := kldbase.Open(path)
		if err != nil {
			return nil, err
		}
		nCtxs[b.NCtx()] = b.NChunk() > 0
		b.Close()
	}
	for _, d := range p.Datasets {
		switch d.Mode {
		case spec.ModeScore:
			if len(d.Stream) >= d.NCtx {
				nCtxs[d.NCtx] = true
			}
		case spec.ModeGenerate:
			for _, pr := range d.Prompts {
				split(len(pr.Tokens), len(pr.Tokens)-1)
				if pr.MaxNew > 1 {
					add(Batch{1, 1})
				}
			}
		}
	}
	for n, any := range nCtxs {
		if any {
			ch := Chunk{Tokens: make([]int32, n)}
			split(len(ch.Input()), ch.First())
		}
	}
	if b := p.Spec.Bench; b.Enabled {
		req := backend.BenchRequest{NPrompt: b.NPrompt}
		for done := 0; done < b.NPrompt; done += req.Batch() {
			chunk := min(b.NPrompt-done, req.Batch())
			add(Batch{chunk, 1})
		}
		if b.NGen > 0 {
			add(Batch{1, 1})
		}
	}
	slices.SortFunc(out, func(a, b Batch) int { return cmp.Or(a.Tokens-b.Tokens, a.Outputs-b.Outputs) })
	return out, nil
}
