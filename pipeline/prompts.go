package pipeline

import (
	"bufio"
	"encoding/json"
	"path/filepath"

	"github.com/evalrun/evalrun/internal/atomicfile"
	"github.com/evalrun/evalrun/pipeline/digest"
	"github.com/evalrun/evalrun/pipeline/spec"
)

// PromptResult is one line of prompts.jsonl: one backend on one prompt (a
// generate record) or one score chunk. The reference has lines too
// (Reference true), with its digest and no comparison.
type PromptResult struct {
	Backend         string   `json:"backend"`
	Reference       bool     `json:"reference,omitempty"`
	Dataset         string   `json:"dataset"`
	ID              string   `json:"id"`
	Mode            string   `json:"mode"`
	Tokens          int      `json:"tokens"`
	KLDMean         *float64 `json:"kld_mean"`
	KLDMax          *float64 `json:"kld_max"`
	SameTopP        *float64 `json:"same_top_p"`
	PPL             *float64 `json:"ppl"`
	PPLBase         *float64 `json:"ppl_base"`
	NMSE            *float64 `json:"nmse,omitempty"`
	CosineMin       *float64 `json:"cosine_min,omitempty"`
	MaxAbsDiff      *float64 `json:"max_abs_diff,omitempty"`
	NaNCount        int64    `json:"nan_count"`
	InfCount        int64    `json:"inf_count"`
	GreedyMatch     *bool    `json:"greedy_match,omitempty"`
	FirstDivergence *int     `json:"first_divergence,omitempty"`
	ReferenceTokens []int32  `json:"reference_tokens,omitempty"`
	GeneratedTokens []int32  `json:"generated_tokens,omitempty"`
	// The exact digests of the logits rows the backend returned and of the
	// tokens it was fed (package digest).
	*digest.Prompt
}

func promptFromComparison(backendName, ds, id string, mode spec.Mode, c *comparison, liveRef bool) PromptResult {
	a := c.accuracy(liveRef)
	p := PromptResult{
		Backend: backendName, Dataset: ds, ID: id, Mode: string(mode), Tokens: a.Tokens,
		KLDMean: a.KLDMean, KLDMax: a.KLDMax, SameTopP: a.SameTopP, PPL: a.PPL, PPLBase: a.PPLBase,
		NMSE: a.NMSE, CosineMin: a.CosineMin, MaxAbsDiff: a.MaxAbsDiff, NaNCount: a.NaNCount, InfCount: a.InfCount,
	}
	if c.genPrompts == 1 {
		m := c.genMatches == 1
		d := int(c.firstDivSum)
		p.GreedyMatch, p.FirstDivergence = &m, &d
	}
	return p
}

// promptLog streams prompts.jsonl to a temporary file as results arrive (the
// run's memory does not grow with the dataset) and moves it into place at
// the end (package atomicfile). The units file carries the same lines, per
// unit, for a resume or a merge.
type promptLog struct {
	f   *atomicfile.File
	w   *bufio.Writer
	err error
}

func newPromptLog(dir string) (*promptLog, error) {
	f, err := atomicfile.Create(filepath.Join(dir, "prompts.jsonl"))
	if err != nil {
		return nil, err
	}
	return &promptLog{f: f, w: bufio.NewWriter(f)}, nil
}

// commit flushes the file and moves it into place.
func (l *promptLog) commit() error {
	if l == nil {
		return nil
	}
	if l.err == nil {
		l.err = l.w.Flush()
	}
	if l.err != nil {
		l.f.Abort()
		return l.err
	}
	return l.f.Commit()
}

// addLine writes a line.
func (l *promptLog) addLine(line []byte) {
	if l != nil && l.err == nil {
		if _, l.err = l.w.Write(line); l.err == nil {
			l.err = l.w.WriteByte('\n')
		}
	}
}

func (l *promptLog) abort() {
	if l != nil {
		l.f.Abort()
	}
}

// addPrompt writes a prompts.jsonl line for rb, with the digest of what it
// returned, keeps it for the unit's record and folds that digest into rb's
// run digest.
func (r *runner) addPrompt(rb *runBackend, p PromptResult, h *digest.Hasher) {
	d := h.Sum()
	p.Prompt = &d
	rb.digest.Add(p.Dataset, p.ID, d)
	line, err := json.Marshal(p)
	if err != nil {
		r.problem("prompts.jsonl: %s %s/%s not written: %v", p.Backend, p.Dataset, p.ID, err)
		return
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	r.promptLog.addLine(line)
	r.unitsOut.Prompt(line)
}
