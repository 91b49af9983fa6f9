package plan

import (
	"github.com/evalrun/evalrun/pipeline/kldbase"
	"github.com/evalrun/evalrun/pipeline/spec"
)

// Chunk is one n_ctx window of a score stream, as llama-perplexity
// evaluates it: the original tokens (the targets) and the first scored
// position.
type Chunk struct {
	Dataset string
	Index   int     // chunk index within its dataset, from 0
	Tokens  []int32 // the original tokens, n_ctx of them
	BOS     int32   // token written over position 0, or -1 to keep it
}

// First is the first scored position, n_ctx/2.
func (c Chunk) First() int { return len(c.Tokens) / 2 }

// Rows is the number of scored positions: First .. n_ctx-2.
func (c Chunk) Rows() int { return kldbase.PerChunk(len(c.Tokens)) }

// Input is what the backends evaluate: the chunk without its last token (its
// logits row predicts nothing) and with BOS written over position 0, as
// llama-perplexity does when the vocabulary adds BOS.
func (c Chunk) Input() []int32 {
	in := append([]int32(nil), c.Tokens[:len(c.Tokens)-1]...)
	if c.BOS >= 0 {
		in[0] = c.BOS
	}
	return in
}

// Split cuts a token stream into chunks of nCtx tokens; a shorter tail is
// not scored, as llama-perplexity leaves it. nCtx below 1 gives none.
func Split(dataset string, stream []int32, nCtx int, bos int32) []Chunk {
	if nCtx < 1 {
		return nil
	}
	var out []Chunk
	for i := 0; i+nCtx <= len(stream); i += nCtx {
		out = append(out, Chunk{Dataset: dataset, Index: i / nCtx, Tokens: stream[i : i+nCtx], BOS: bos})
	}
	return out
}

// Chunks lists the score datasets' chunks in plan order.
func (p *Plan) Chunks() []Chunk {
	var out []Chunk
	for _, d := range p.Datasets {
		if d.Mode == spec.ModeScore {
			out = append(out, Split(d.Name, d.Stream, d.NCtx, p.BOS)...)
		}
	}
	return out
}
