package runcompare

import (
	"github.com/evalrun/evalrun/pipeline/resultsdir"
	"github.com/evalrun/evalrun/pipeline/summary"
)

// Verdicts on a backend's logits.
const (
	BitIdentical  = "bit-identical"
	Changed       = "changed"
	NotComparable = "not comparable"
)

// LogitsChange says whether a backend returned the same logits bits in
// both runs and, if not, where they first changed.
type LogitsChange struct {
	Verdict string `json:"verdict"`
	// First is the first chunk or prompt (in the new run's order) whose
	// logits differ, with the first differing position when both runs have
	// per-row hashes for it.
	First *Position `json:"first_changed,omitempty"`
	// ChangedPrompts of ComparedPrompts chunks and prompts differ.
	ChangedPrompts  int `json:"changed_prompts"`
	ComparedPrompts int `json:"compared_prompts"`
	// TokensChanged: some chunk or prompt was fed different tokens (the
	// dataset, tokenizer or the reference's greedy tokens changed).
	TokensChanged bool   `json:"tokens_changed,omitempty"`
	Note          string `json:"note,omitempty"`
}

// Position names where logits changed: the dataset, the chunk or prompt
// id, and the token position in it (row Row of the hashed rows).
type Position struct {
	Dataset  string `json:"dataset"`
	ID       string `json:"id"`
	Position *int   `json:"position,omitempty"`
	Row      *int   `json:"row,omitempty"`
}

func compareLogits(base, new *resultsdir.Run, bb, nb summary.BackendSummary) LogitsChange {
	bd, nd := bb.Digest, nb.Digest
	if bd == nil || nd == nil {
		return LogitsChange{Verdict: NotComparable, Note: "no logits digest in " + which(bd == nil, nd == nil)}
	}
	c := LogitsChange{Verdict: Changed}
	if *bd == *nd {
		c.Verdict = BitIdentical
	}
	c.TokensChanged = bd.TokensSHA256 != nd.TokensSHA256
	bp, np := base.Prompts[bb.Name], new.Prompts[nb.Name]
	if bp == nil || np == nil {
		if c.Verdict == Changed {
			c.Note = "no per-chunk digests (prompts.jsonl) in " + which(bp == nil, np == nil) + ": the first change cannot be located"
		}
		return c
	}
	byKey := make(map[string]resultsdir.PromptDigest, len(bp))
	for _, p := range bp {
		byKey[p.Dataset+"\x00"+p.ID] = p
	}
	for _, p := range np {
		q, ok := byKey[p.Dataset+"\x00"+p.ID]
		if !ok {
			continue
		}
		c.ComparedPrompts++
		if p.TokensSHA256 != q.TokensSHA256 {
			c.TokensChanged = true
		}
		if p.LogitsSHA256 == q.LogitsSHA256 {
			continue
		}
		c.ChangedPrompts++
		if c.First == nil {
			c.First = &Position{Dataset: p.Dataset, ID: p.ID}
			if row := p.FirstDiff(q.PromptDigest); row >= 0 && p.Rows() > 0 && q.Rows() > 0 {
				pos := p.LogitsFrom + row
				c.First.Row, c.First.Position = &row, &pos
			}
		}
	}
	return c
}

func which(base, new bool) string {
	switch {
	case base && new:
		return "either run"
	case base:
		return "the baseline"
	}
	return "the new run"
}
