package pipeline

import (
	"bufio"
	"encoding/json"
	"path/filepath"

	"github.com/evalrun/evalrun/internal/atomicfile"
	"github.com/evalrun/evalrun/pipeline/digest"
	"github.com/evalrun/evalrun/pipeline/spec"
	"github.com/evalrun/evalrun/pipeline/summary"
)

func promptFromComparison(backendName, ds, id string, mode spec.Mode, c *comparison, liveRef bool) summary.PromptResult {
	a := c.accuracy(liveRef)
	p := summary.PromptResult{
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
func (r *runner) addPrompt(rb *runBackend, p summary.PromptResult, h *digest.Hasher) {
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
