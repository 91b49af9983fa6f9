package pipeline

import (
	"context"
	"fmt"

	"github.com/evalrun/evalrun/backend"
	"github.com/evalrun/evalrun/pipeline/kldbase"
)

// scoreChunk is one n_ctx window of a score stream, as llama-perplexity
// evaluates it: the original tokens (targets) and the first scored position.
type scoreChunk struct {
	dataset string
	index   int     // chunk index within its dataset
	tokens  []int32 // original tokens, len n_ctx
	first   int     // n_ctx/2
	bos     int32   // token written over position 0, or -1 to keep it
}

// input is what the backends evaluate: the chunk without its last token (its
// logits row predicts nothing) and with BOS written over position 0, as
// llama-perplexity does when the vocabulary adds BOS.
func (c scoreChunk) input() []int32 {
	in := make([]int32, len(c.tokens)-1)
	copy(in, c.tokens)
	if c.bos >= 0 {
		in[0] = c.bos
	}
	return in
}

// rows is the number of scored positions: first .. n_ctx-2.
func (c scoreChunk) rows() int { return len(c.tokens) - 1 - c.first }

// scorePass evaluates every score chunk on the reference (or reads it from
// the kld_base file) and on every live candidate, comparing row by row.
func (r *runner) scorePass(ctx context.Context) error {
	chunks := r.scoreChunks()
	if len(chunks) == 0 {
		return nil
	}
	total := 0
	for _, c := range chunks {
		total += c.rows()
	}
	for _, c := range r.liveCands() {
		c.cmp.planned += total
	}
	if err := r.openKLDOutputs(chunks); err != nil {
		return err
	}
	defer r.closeKLDOutputs()

	progress := newProgress(r.opt.Stderr, "score", len(chunks))
	for i, ch := range chunks {
		if ctx.Err() != nil {
			return ctx.Err()
		}
		if !r.refOK() {
			return fmt.Errorf("the reference stopped")
		}
		cands := r.liveCands()
		if len(cands) == 0 && r.refOut == nil {
			return nil
		}
		r.scoreOne(ctx, ch, cands)
		progress.step(i+1, fmt.Sprintf("%s chunk %d", ch.dataset, ch.index+1))
	}
	return nil
}

// scoreChunks lists the chunks to score: from the kld_base file when it is
// the reference, else from the score datasets.
func (r *runner) scoreChunks() []scoreChunk {
	var out []scoreChunk
	if r.base != nil {
		toks := r.base.Tokens()
		n := r.base.NCtx()
		for i := 0; i < r.base.NChunk(); i++ {
			out = append(out, scoreChunk{dataset: "kld_base", index: i, tokens: toks[i*n : (i+1)*n], first: n / 2, bos: r.plan.BOS})
		}
		return out
	}
	for _, d := range r.plan.Datasets {
		if d.Mode != ModeScore {
			continue
		}
		for i := 0; i+d.NCtx <= len(d.Stream); i += d.NCtx {
			out = append(out, scoreChunk{dataset: d.Name, index: i / d.NCtx, tokens: d.Stream[i : i+d.NCtx], first: d.NCtx / 2, bos: r.plan.BOS})
		}
	}
	return out
}

func (r *runner) scoreOne(ctx context.Context, ch scoreChunk, cands []*candidate) {
	in := ch.input()
	req := backend.EvalRequest{Session: "score", Pos: 0, Tokens: in, LogitsFrom: ch.first}
	var refStream *evalStream
	if r.ref != nil {
		refStream = r.ref.startEval(ctx, req)
	}
	streams := make([]*evalStream, len(cands))
	for i, c := range cands {
		streams[i] = c.rb.startEval(ctx, req)
	}
	per := make([]*comparison, len(cands))
	for i := range per {
		per[i] = newComparison()
	}

	var baseRow []float32
	if r.base != nil {
		baseRow = make([]float32, r.base.NVocab())
	}
	rows := ch.rows()
	for k := 0; k < rows; k++ {
		tok := ch.tokens[ch.first+k+1]
		var ref []float32
		if refStream != nil {
			row, err := refStream.next()
			if err != nil {
				r.ref.fail(fmt.Sprintf("eval %s chunk %d", ch.dataset, ch.index+1), err)
				break
			}
			ref = row
			r.writeRefOut(ref)
		} else {
			if err := r.base.Record(ch.index, k, baseRow); err != nil {
				r.log.Error("reading kld_base", "error", err)
				break
			}
		}
		for i, c := range cands {
			if streams[i] == nil {
				continue
			}
			row, err := streams[i].next()
			if err != nil {
				c.rb.fail(fmt.Sprintf("eval %s chunk %d position %d", ch.dataset, ch.index+1, ch.first+k), err)
				streams[i].abandon()
				streams[i] = nil
				continue
			}
			if c.outFile != nil {
				if err := c.outFile.WriteRecord(row); err != nil {
					r.log.Error("writing kld_base output", "backend", c.rb.name, "error", err)
					c.outFile.Abort()
					c.outFile = nil
				}
			}
			if ref != nil {
				c.cmp.addLive(row, ref, tok)
				per[i].addLive(row, ref, tok)
			} else {
				c.cmp.addBase(row, baseRow, tok)
				per[i].addBase(row, baseRow, tok)
			}
		}
	}
	if refStream != nil {
		if err := refStream.finish(); err != nil && r.ref.ok() {
			r.ref.fail(fmt.Sprintf("eval %s chunk %d", ch.dataset, ch.index+1), err)
		}
		if !r.ref.ok() {
			for _, s := range streams {
				if s != nil {
					s.abandon()
				}
			}
			return
		}
	}
	for i, c := range cands {
		if streams[i] == nil {
			continue
		}
		if err := streams[i].finish(); err != nil {
			c.rb.fail(fmt.Sprintf("eval %s chunk %d", ch.dataset, ch.index+1), err)
		}
		r.addPrompt(promptFromComparison(c.rb.name, ch.dataset, fmt.Sprintf("chunk-%d", ch.index+1), "score", per[i], r.base == nil))
	}
}

// openKLDOutputs creates the kld_base files requested with output.kld_base.
// The token stream in their header is the one scored, so llama-perplexity
// --kl-divergence can read them back.
func (r *runner) openKLDOutputs(chunks []scoreChunk) error {
	toks := make([]int32, 0, len(chunks)*len(chunks[0].tokens))
	for _, c := range chunks {
		toks = append(toks, c.tokens...)
	}
	nCtx := len(chunks[0].tokens)
	create := func(path string) (*kldbase.Writer, error) {
		w, err := kldbase.Create(path, nCtx, r.plan.Model.NVocab, toks)
		if err != nil {
			return nil, fmt.Errorf("output kld_base %s: %w", path, err)
		}
		return w, nil
	}
	if r.plan.Reference.KLDBaseOut != "" && r.ref != nil {
		w, err := create(r.plan.Reference.KLDBaseOut)
		if err != nil {
			return err
		}
		r.refOut = w
	}
	for _, c := range r.liveCands() {
		if c.kldOut == "" {
			continue
		}
		w, err := create(c.kldOut)
		if err != nil {
			return err
		}
		c.outFile = w
	}
	return nil
}

func (r *runner) writeRefOut(row []float32) {
	if r.refOut == nil {
		return
	}
	if err := r.refOut.WriteRecord(row); err != nil {
		r.log.Error("writing kld_base output", "backend", r.plan.Reference.Name, "error", err)
		r.refOut.Abort()
		r.refOut = nil
	}
}

// closeKLDOutputs commits complete files; an incomplete one (its backend
// stopped part way) is not a valid base file and is discarded with a note.
func (r *runner) closeKLDOutputs() {
	finish := func(name string, w *kldbase.Writer, complete bool) {
		if w == nil {
			return
		}
		if !complete {
			w.Abort()
			r.log.Warn("kld_base output discarded: the backend did not score every chunk", "backend", name)
			return
		}
		if err := w.Close(); err != nil {
			r.log.Error("writing kld_base output", "backend", name, "error", err)
		}
	}
	if r.refOut != nil {
		finish(r.plan.Reference.Name, r.refOut, r.ref.ok())
		r.refOut = nil
	}
	for _, c := range r.cands {
		finish(c.rb.name, c.outFile, c.rb.ok())
		c.outFile = nil
	}
}
