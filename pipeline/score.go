package pipeline

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/evalrun/evalrun/backend"
	"github.com/evalrun/evalrun/pipeline/digest"
	"github.com/evalrun/evalrun/pipeline/kldbase"
	"github.com/evalrun/evalrun/pipeline/metrics"
	"github.com/evalrun/evalrun/pipeline/plan"
	"github.com/evalrun/evalrun/pipeline/resultsdir"
	"github.com/evalrun/evalrun/pipeline/spec"
	"github.com/evalrun/evalrun/pipeline/stream"
	"github.com/evalrun/evalrun/pipeline/summary"
	"github.com/evalrun/evalrun/pipeline/verdict"
)

// chunkUnit is a score chunk's unit id (package resultsdir).
func chunkUnit(c plan.Chunk) string { return resultsdir.ScoreUnit(c.Dataset, c.Index) }

// scorePass evaluates every score chunk on the reference (or reads it from
// the kld_base file) and on every live candidate, comparing row by row.
func (r *runner) scorePass(ctx context.Context) {
	chunks := slices.DeleteFunc(r.scoreChunks(), func(c plan.Chunk) bool { return !r.mine(chunkUnit(c)) })
	if len(chunks) == 0 {
		return
	}
	total := 0
	for _, c := range chunks {
		total += c.Rows()
	}
	for _, c := range r.liveCands() {
		c.cmp.Planned += total
	}
	r.openKLDOutputs(chunks)
	defer r.closeKLDOutputs()

	// When two chunks' rows per backend fit in prefetchBudget, the host
	// takes a chunk's rows all in and asks for the next chunk before
	// comparing them, so the plugins compute while the host compares.
	prefetch, _ := r.prefetch()
	fed := 0
	for _, c := range chunks {
		fed += len(c.Input())
	}
	ph := r.startPhase("score", "chunks", "tokens", len(chunks), fed, r.liveBackends())
	stopped := true
	defer func() { ph.finish(stopped) }()
	var next *chunkEval
	for i, ch := range chunks {
		cur := next
		if cur == nil {
			cur = r.startChunk(ctx, ch, prefetch)
		}
		next = nil
		if ctx.Err() != nil || !r.refOK() || len(cur.cands) == 0 && (r.ref == nil || r.ref.kldOut == nil) {
			cur.abandon()
			return
		}
		if prefetch && i+1 < len(chunks) && cur.received() {
			next = r.startChunk(ctx, chunks[i+1], prefetch)
		} else if prefetch && i+1 == len(chunks) && cur.received() {
			r.startGenerate(ctx) // every backend computes the first generate step while the host compares
		}
		r.scoreOne(ctx, ch, cur)
		ph.done(len(ch.Input()))
	}
	next.abandon()
	stopped = ctx.Err() != nil
}

// prefetchBudget bounds the logits rows the host holds to prefetch: the
// chunk being compared and the next one, for every backend. 256 MiB is a
// reference and two candidates at n_ctx 128 with a 152k vocabulary
// (Qwen's; Llama 3's 128k takes 194 MB), or at n_ctx 512 with 32k.
const prefetchBudget = 256 << 20

// prefetch reports whether score chunks are small enough to buffer whole,
// and how many rows a backend then holds at most.
func (r *runner) prefetch() (ok bool, rows int) {
	for _, ch := range r.scoreChunks() {
		rows = max(rows, ch.Rows())
	}
	return 2*rows*4*r.plan.Model.NVocab*len(r.plan.Spec.Backends()) <= prefetchBudget, 2 * rows
}

// chunkEval is one chunk's Eval calls on the reference and the candidates
// alive when it started.
type chunkEval struct {
	ref     *stream.Call // nil with a kld_base reference
	fill    *cacheRows   // the reference's rows, for the cache
	cands   []*candidate
	streams []*stream.Call
}

func (r *runner) startChunk(ctx context.Context, ch plan.Chunk, whole bool) *chunkEval {
	req := backend.EvalRequest{Session: "score", Pos: 0, Tokens: ch.Input(), LogitsFrom: ch.First()}
	buffer := streamBuffer
	if whole {
		buffer = max(buffer, ch.Rows())
	}
	e := &chunkEval{cands: r.liveCands()}
	if r.ref != nil {
		e.ref, e.fill = r.startRef(ctx, req, ch.Rows(), buffer)
	}
	for _, c := range e.cands {
		e.streams = append(e.streams, c.rb.startEval(ctx, req, buffer))
	}
	return e
}

// received waits until every call has sent all its rows (or ended), within
// the eval timeout; false if one has not.
func (e *chunkEval) received() bool {
	for _, s := range append(e.streams, e.ref) {
		if !s.Received() {
			return false
		}
	}
	return true
}

func (e *chunkEval) abandon() {
	if e == nil {
		return
	}
	for _, s := range append(e.streams, e.ref) {
		s.Abandon()
	}
}

// scoreChunks lists the chunks to score: from the kld_base file when it is
// the reference, else from the score datasets.
func (r *runner) scoreChunks() []plan.Chunk {
	if r.base != nil {
		return plan.Split("kld_base", r.base.Tokens(), r.base.NCtx(), r.plan.BOS)
	}
	return r.plan.Chunks()
}

func (r *runner) scoreOne(ctx context.Context, ch plan.Chunk, e *chunkEval) {
	what := fmt.Sprintf("eval %s chunk %d", ch.Dataset, ch.Index+1)
	refStream, cands, streams := e.ref, e.cands, e.streams
	per := make([]*verdict.Comparison, len(cands))
	input := ch.Input()
	newHasher := func() *digest.Hasher {
		h := digest.NewHasher(ch.First())
		h.Tokens(input)
		return h
	}
	refDigest, digests := newHasher(), make([]*digest.Hasher, len(cands))
	for i, c := range cands {
		per[i], digests[i] = &verdict.Comparison{}, newHasher()
		if !c.rb.ok() { // it stopped while this chunk was prefetched
			streams[i].Abandon()
			streams[i] = nil
		}
	}
	defer r.unitDone(chunkUnit(ch), cands, per)
	var ref metrics.RefRow
	var baseRow []float32
	if r.base != nil {
		baseRow = make([]float32, r.base.NVocab())
	}
	for k := range ch.Rows() {
		tok := ch.Tokens[ch.First()+k+1]
		var refRow []float32
		if refStream != nil {
			row, err := refStream.Next()
			if err != nil {
				r.ref.fail(ctx, what, err)
				break
			}
			refRow = row
			e.fill.add(row)
			refDigest.Row(row)
			ref.Set(row)
			r.writeOut(r.ref, row)
		} else if err := r.base.Record(ch.Index, k, baseRow); err != nil {
			r.problem("reading the kld_base reference: %v", err)
			break
		}
		var wg sync.WaitGroup // the candidates compare at once, each into its own unit
		for i, c := range cands {
			if streams[i] == nil {
				continue
			}
			wg.Go(func() {
				row, err := streams[i].Next()
				if err == nil {
					digests[i].Row(row)
					r.writeOut(c.rb, row)
					t := time.Now()
					if refRow != nil {
						err = per[i].AddLive(row, &ref, tok, ch.First()+k)
					} else {
						err = per[i].AddBase(row, baseRow, tok, ch.First()+k)
					}
					r.compared(t)
					c.rb.rows.Release(row)
				}
				if err != nil {
					c.rb.fail(ctx, fmt.Sprintf("%s position %d", what, ch.First()+k), err)
					streams[i].Abandon()
					streams[i] = nil
				}
			})
		}
		wg.Wait()
		if refRow != nil {
			r.ref.rows.Release(refRow)
		}
	}
	if refStream != nil {
		if err := refStream.Finish(ch.Rows()); err != nil {
			r.ref.fail(ctx, what, err)
		}
		r.store(e.fill, ch.Rows())
		if !r.ref.ok() {
			for _, s := range streams {
				s.Abandon()
			}
			return
		}
		r.addPrompt(r.ref, summary.PromptResult{Backend: r.ref.Name, Reference: true, Dataset: ch.Dataset, ID: chunkID(ch), Mode: string(spec.ModeScore), Tokens: ch.Rows()}, refDigest)
	}
	for i, c := range cands {
		if streams[i] == nil {
			continue
		}
		if err := streams[i].Finish(ch.Rows()); err != nil {
			c.rb.fail(ctx, what, err)
		}
		r.addPrompt(c.rb, per[i].Prompt(c.rb.Name, ch.Dataset, chunkID(ch), spec.ModeScore, r.base == nil), digests[i])
	}
	r.round(append(streams, refStream)...)
}

// chunkID names a score chunk in prompts.jsonl: chunk-1, chunk-2, ...
func chunkID(ch plan.Chunk) string { return fmt.Sprintf("chunk-%d", ch.Index+1) }

// openKLDOutputs creates the kld_base files requested with output.kld_base
// (plan.New checked that they can be written). The token stream in their
// header is the one scored, so llama-perplexity --kl-divergence can read
// them back.
func (r *runner) openKLDOutputs(chunks []plan.Chunk) {
	toks := make([]int32, 0, len(chunks)*len(chunks[0].Tokens))
	for _, c := range chunks {
		toks = append(toks, c.Tokens...)
	}
	for _, rb := range r.backends() {
		if path := rb.Output.KLDBase; path != "" && rb.ok() {
			var err error
			if rb.kldOut, err = kldbase.Create(path, len(chunks[0].Tokens), r.plan.Model.NVocab, toks); err != nil {
				r.problem("%s: output.kld_base not written: %v", rb.Name, err)
			}
		}
	}
}

// writeOut appends a row to a backend's kld_base output; a write error
// drops the file and is reported in the verdict.
func (r *runner) writeOut(rb *runBackend, row []float32) {
	if rb.kldOut == nil {
		return
	}
	if err := rb.kldOut.WriteRecord(row); err != nil {
		r.problem("%s: output.kld_base not written: %v", rb.Name, err)
		rb.kldOut.Abort()
		rb.kldOut = nil
	}
}

// problem records a run-level failure: the verdict is an error.
func (r *runner) problem(format string, args ...any) {
	msg := fmt.Sprintf(format, args...)
	r.log.Error(msg)
	r.mu.Lock()
	r.problems = append(r.problems, msg)
	r.mu.Unlock()
}

// closeKLDOutputs commits complete files; an incomplete one (its backend
// stopped part way) is not a valid base file and is discarded with a note.
func (r *runner) closeKLDOutputs() {
	for _, rb := range r.backends() {
		switch {
		case rb.kldOut == nil:
		case !rb.ok():
			rb.kldOut.Abort()
			r.log.Warn("kld_base output discarded: the backend did not score every chunk", "backend", rb.Name)
		default:
			if err := rb.kldOut.Close(); err != nil {
				r.problem("%s: output.kld_base not written: %v", rb.Name, err)
			}
		}
		rb.kldOut = nil
	}
}
