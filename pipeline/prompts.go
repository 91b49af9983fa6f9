package pipeline

import (
	"encoding/json"

	"github.com/evalrun/evalrun/pipeline/digest"
	"github.com/evalrun/evalrun/pipeline/summary"
)

// addPrompt writes a prompts.jsonl line for rb, with the digest of what it
// returned, keeps it for the unit's record and folds that digest into rb's
// run digest.
func (r *runner) addPrompt(rb *runBackend, p summary.PromptResult, h *digest.Hasher) {
	d := h.Sum()
	p.PromptDigest = &d
	rb.digest.Add(p.Dataset, p.ID, d)
	line, err := json.Marshal(p)
	if err != nil {
		r.problem("prompts.jsonl: %s %s/%s not written: %v", p.Backend, p.Dataset, p.ID, err)
		return
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	r.promptLog.WriteLine(line)
	r.unitsOut.Prompt(line)
}
