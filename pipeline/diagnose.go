package pipeline

import (
	"context"
	"errors"
	"fmt"

	"github.com/evalrun/evalrun/backend"
	"github.com/evalrun/evalrun/pipeline/diag"
)

// diagnose runs after the passes (so the kernel accounting covers the
// whole run, bench included): it asks every live candidate for its device
// diagnostics and, for one in shadow mode, compares its residual stream
// after each layer with the reference's on the first score chunk.
func (r *runner) diagnose(ctx context.Context) {
	var refHidden [][]float32 // computed once for every shadow candidate
	for _, c := range r.liveCands() {
		d, ok := c.rb.be.(backend.Diagnoser)
		if !ok || ctx.Err() != nil {
			continue
		}
		callCtx, cancel := context.WithTimeout(ctx, c.rb.timeouts.Eval)
		res, err := d.Diagnostics(callCtx)
		cancel()
		if err != nil {
			if errors.Is(err, backend.ErrCrashed) {
				c.rb.fail(ctx, "diagnostics", err)
			} else {
				r.log.Warn("diagnostics failed", "backend", c.rb.Name, "error", err)
			}
			continue
		}
		if c.diag = diag.New(res); c.diag == nil || !c.diag.Shadow {
			continue
		}
		drift, err := r.layerDrift(ctx, c.rb, &refHidden)
		if err != nil {
			c.diag.Warnings = append(c.diag.Warnings, "per-layer drift: "+err.Error())
			continue
		}
		c.diag.LayerDrift = drift
	}
}

// layerDrift evaluates the first score chunk once more on the reference
// (cached in *refHidden) and on rb with hidden states for a few scored
// positions, and compares them layer by layer.
func (r *runner) layerDrift(ctx context.Context, rb *runBackend, refHidden *[][]float32) (*diag.LayerDrift, error) {
	chunks := r.scoreChunks()
	if r.ref == nil || !r.ref.ok() || r.base != nil || len(chunks) == 0 {
		return nil, errors.New("needs a reference plugin and a score dataset")
	}
	ch := chunks[0]
	in := ch.Input()
	pos := diag.Positions(ch.First(), len(in)-1, 8)
	req := backend.EvalRequest{Session: "diag-layers", Pos: 0, Tokens: in, LogitsFrom: pos[0], HiddenRows: pos}
	if *refHidden == nil {
		h, err := r.ref.hidden(ctx, req)
		if err != nil {
			return nil, fmt.Errorf("reference: %w", err)
		}
		*refHidden = h
	}
	cand, err := rb.hidden(ctx, req)
	if err != nil {
		return nil, err
	}
	layers, grows, err := diag.CompareLayers(*refHidden, cand, rb.nLayer)
	if err != nil {
		return nil, err
	}
	return &diag.LayerDrift{Dataset: ch.Dataset, Chunk: ch.Index + 1, Positions: pos, Layers: layers, Grows: grows}, nil
}

// hidden runs req and returns the hidden states of its HiddenRows in order.
func (rb *runBackend) hidden(ctx context.Context, req backend.EvalRequest) ([][]float32, error) {
	callCtx, cancel := context.WithTimeout(ctx, rb.timeouts.Eval)
	defer cancel()
	byIndex := map[int][]float32{}
	err := rb.be.Eval(callCtx, req, func(l backend.Logits) error {
		if l.Hidden != nil {
			byIndex[l.Index] = append([]float32(nil), l.Hidden...)
		}
		return nil
	})
	if err != nil {
		if errors.Is(err, backend.ErrCrashed) {
			rb.fail(ctx, "eval (hidden states)", err)
		}
		return nil, timedOut(callCtx, rb.timeouts.Eval, err)
	}
	out := make([][]float32, len(req.HiddenRows))
	for i, row := range req.HiddenRows {
		if out[i] = byIndex[row]; out[i] == nil {
			return nil, fmt.Errorf("%s sent no hidden states for row %d (does its plugin support hidden_rows?)", rb.Name, row)
		}
	}
	return out, nil
}
