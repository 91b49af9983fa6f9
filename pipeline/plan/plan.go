// Package plan is the second stage of a run (spec → plan → run): a spec
// resolved against its model, with every prompt tokenized once on the host
// and every check a backend would otherwise only fail at Load. It also says
// what the run will feed the backends: the score chunks (Chunk) and the
// distinct forward passes (Batches).
package plan

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"

	"github.com/evalrun/evalrun/backend"
	"github.com/evalrun/evalrun/engine/gguf"
	"github.com/evalrun/evalrun/engine/tokenizer"
	"github.com/evalrun/evalrun/internal/atomicfile"
	"github.com/evalrun/evalrun/internal/exitcode"
	"github.com/evalrun/evalrun/internal/filehash"
	"github.com/evalrun/evalrun/pipeline/dataset"
	"github.com/evalrun/evalrun/pipeline/kldbase"
	"github.com/evalrun/evalrun/pipeline/spec"
	"github.com/evalrun/evalrun/pipeline/summary"
)

// Plan is a spec resolved against its model: the model's facts, every prompt
// tokenized once on the host so that all backends see the same ids, and
// every check a backend would otherwise only fail at Load.
type Plan struct {
	Spec      *spec.Spec
	Model     summary.ModelSummary
	NCtxTrain int   // the model's context_length: no pass feeds more
	BOS       int32 // written over position 0 of every score chunk; -1 if the vocabulary adds no BOS
	Datasets  []Dataset
	// VocabDigest is backend.VocabDigest of the tokenizer the host tokenizes
	// with; every plugin checks its model's vocabulary against it at Load.
	VocabDigest string
}

// Dataset is one tokenized prompt set.
type Dataset struct {
	spec.Dataset
	SHA256  string // of the file, for the record
	Records int
	Cut     bool // evalrun run --limit left records out (Spec.LimitRecords)
	Tokens  int
	Stream  []int32  // score: every record's tokens (each with BOS), concatenated
	Prompts []Prompt // generate
}

// Prompt is one generate record: the reference continues Tokens greedily
// for MaxNew tokens.
type Prompt struct {
	Dataset, ID string
	Tokens      []int32
	MaxNew      int
}

// New checks the model (sha256, hyperparameters and tensors, special
// token ids, that every backend's model override has its vocabulary),
// tokenizes every dataset once and checks every size against the model's
// context. Every error is an *exitcode.InputError; a cancelled ctx returns its error.
func New(ctx context.Context, s *spec.Spec) (*Plan, error) {
	p := &Plan{Spec: s, BOS: -1}
	tok, err := p.openModel(ctx)
	if err != nil {
		return nil, err
	}
	p.VocabDigest = backend.VocabDigest(tok.VocabSize(), func(id int) string { return tok.Token(int32(id)) })
	if tok.AddBOS() {
		p.BOS = tok.BOS()
	}
	backendCtx := map[string]int{} // a backend's own model's context_length, by key
	for _, b := range s.Backends() {
		if b.Model != s.Model.Path {
			n, err := checkSameVocab(s, tok, b)
			if err != nil {
				return nil, err
			}
			backendCtx[b.Key] = n
		}
	}
	for i, d := range s.Datasets {
		if d.Mode == spec.ModeScore && d.NCtx > p.NCtxTrain {
			return nil, &exitcode.InputError{Err: s.Err(fmt.Sprintf("datasets[%d].n_ctx", i), "%d exceeds the model's context_length %d", d.NCtx, p.NCtxTrain)}
		}
		dp := Dataset{Dataset: d}
		if err := p.tokenize(ctx, tok, &dp); err != nil {
			return nil, err
		}
		p.Datasets = append(p.Datasets, dp)
	}
	if b := s.Bench; b.Enabled && b.NPrompt+b.NGen > p.NCtxTrain {
		return nil, &exitcode.InputError{Err: s.Err("bench.n_prompt", "n_prompt %d + n_gen %d exceed the model's context_length %d", b.NPrompt, b.NGen, p.NCtxTrain)}
	}
	if need := p.longestPass(); need > 0 {
		for _, b := range s.Backends() {
			if n, ok := backendCtx[b.Key]; ok && n < need {
				return nil, &exitcode.InputError{Err: s.Err(b.Key+".model", "%s: context_length %d, but the run feeds %d positions", b.Model, n, need)}
			}
		}
	}
	return p, p.checkOutputs()
}

// openModel reads the model's facts and tokenizer. Whether the model can be
// computed is each plugin's to say (Validate, before any plugin loads):
// the engine's plugins check it with the engine, the llamacpp plugin
// computes any architecture libllama loads.
func (p *Plan) openModel(ctx context.Context) (*tokenizer.Tokenizer, error) {
	path := p.Spec.Model.Path
	sum, err := filehash.SHA256(ctx, path)
	if err != nil {
		return nil, inputOr(ctx, err, "model: %v", err)
	}
	if want := p.Spec.Model.SHA256; want != "" && sum != want {
		return nil, &exitcode.InputError{Err: p.Spec.Err("model.sha256", "%s has sha256 %s", path, sum)}
	}
	f, err := gguf.Open(path)
	if err != nil {
		return nil, &exitcode.InputError{Err: err}
	}
	defer f.Close()
	arch, nCtxTrain, err := f.ArchContext()
	if err != nil {
		return nil, &exitcode.InputError{Err: fmt.Errorf("model %w", err)}
	}
	tok, err := tokenizer.FromGGUF(f)
	if err != nil {
		return nil, exitcode.Input("model %s: %v", path, err)
	}
	n := tok.VocabSize()
	if err := checkSpecialIDs(f, n); err != nil {
		return nil, exitcode.Input("model %s: %v", path, err)
	}
	p.Model = summary.ModelSummary{Path: path, SHA256: sum, Arch: arch, NParams: int64(f.NParams()), NVocab: n, SizeBytes: f.Size}
	p.NCtxTrain = nCtxTrain
	return tok, nil
}

// checkSpecialIDs refuses a BOS or EOS id outside a vocabulary of n tokens
// (a uint32 that reads as the tokenizer's -1, "none", is still out of range).
func checkSpecialIDs(f *gguf.File, n int) error {
	for _, key := range []string{"bos_token_id", "eos_token_id"} {
		if id, ok := f.Uint("tokenizer.ggml." + key); ok && id >= uint64(n) {
			return fmt.Errorf("tokenizer.ggml.%s %d is outside the vocabulary of %d tokens", key, id, n)
		}
	}
	return nil
}

// inputOr is an exitcode.InputError, or ctx's error when the run was interrupted.
func inputOr(ctx context.Context, err error, format string, args ...any) error {
	if ctx.Err() != nil && errors.Is(err, ctx.Err()) {
		return err
	}
	return exitcode.Input(format, args...)
}

// checkSameVocab refuses a backend model override whose vocabulary differs
// from the reference model's: logits of different vocabularies cannot be
// compared position by position. (Its plugin checks the rest at Validate.)
func checkSameVocab(s *spec.Spec, tok *tokenizer.Tokenizer, b spec.Backend) (nCtxTrain int, err error) {
	bad := func(format string, args ...any) error {
		return &exitcode.InputError{Err: s.Err(b.Key+".model", "%s: "+format, append([]any{b.Model}, args...)...)}
	}
	f, err := gguf.Open(b.Model)
	if err != nil {
		return 0, &exitcode.InputError{Err: s.Err(b.Key+".model", "%v", err)}
	}
	defer f.Close()
	_, nCtxTrain, err = f.ArchContext()
	if err != nil {
		return 0, bad("%v", err)
	}
	toks, _ := f.Strings("tokenizer.ggml.tokens")
	if len(toks) != tok.VocabSize() {
		return 0, bad("%d vocabulary entries, the reference model has %d: vocabularies must be identical", len(toks), tok.VocabSize())
	}
	for i := range toks {
		if toks[i] != tok.Token(int32(i)) {
			return 0, bad("vocabulary entry %d is %q, the reference model's is %q: vocabularies must be identical", i, toks[i], tok.Token(int32(i)))
		}
	}
	// The same checks as the reference model's: a backend's own file is
	// no less trusted input.
	if err := checkSpecialIDs(f, len(toks)); err != nil {
		return 0, bad("%v", err)
	}
	return nCtxTrain, nil
}

// tokenize reads a prompt set and tokenizes it with the reference model's
// tokenizer (add_special = true: BOS as llama.cpp adds it).
func (p *Plan) tokenize(ctx context.Context, tok *tokenizer.Tokenizer, d *Dataset) (err error) {
	if d.SHA256, err = filehash.SHA256(ctx, d.Path); err != nil {
		return inputOr(ctx, err, "dataset %s: %v", d.Name, err)
	}
	r, err := dataset.Open(d.Path)
	if err != nil {
		return &exitcode.InputError{Err: err}
	}
	defer r.Close()
	nVocab := int32(tok.VocabSize())
	for d.Limit <= 0 || d.Records < d.Limit {
		if err := ctx.Err(); err != nil {
			return err
		}
		rec, err := r.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return &exitcode.InputError{Err: err}
		}
		ids := rec.Tokens
		if ids == nil {
			ids = tok.Encode(rec.Text, true)
		}
		for _, id := range ids {
			if id < 0 || id >= nVocab {
				return exitcode.Input("%s:%d: token %d is outside the vocabulary (0..%d)", d.Path, rec.Line, id, nVocab-1)
			}
		}
		d.Records++
		d.Tokens += len(ids)
		switch d.Mode {
		case spec.ModeScore:
			d.Stream = append(d.Stream, ids...)
		case spec.ModeGenerate:
			if len(ids) == 0 {
				return exitcode.Input("%s:%d: record %q has no tokens to generate from", d.Path, rec.Line, rec.ID)
			}
			if len(ids)+d.MaxNewTokens > p.NCtxTrain {
				return exitcode.Input("%s:%d: record %q: %d prompt tokens + max_new_tokens %d exceed the model's context_length %d", d.Path, rec.Line, rec.ID, len(ids), d.MaxNewTokens, p.NCtxTrain)
			}
			d.Prompts = append(d.Prompts, Prompt{Dataset: d.Name, ID: rec.ID, Tokens: ids, MaxNew: d.MaxNewTokens})
		}
	}
	if d.Records == 0 {
		return exitcode.Input("dataset %s (%s): no records", d.Name, d.Path)
	}
	if d.RunLimited && d.Records == d.Limit {
		_, err := r.Next() // a record more, or a bad line: either way the set goes on
		d.Cut = !errors.Is(err, io.EOF)
	}
	if d.Mode == spec.ModeScore && len(d.Stream) < d.NCtx {
		in := ""
		if d.Cut {
			in = fmt.Sprintf(" in the records --limit %d keeps", d.Limit)
		}
		return exitcode.Input("dataset %s (%s): %d tokens%s, fewer than n_ctx %d: nothing to score", d.Name, d.Path, len(d.Stream), in, d.NCtx)
	}
	return nil
}

// Limited is the n of evalrun run --limit n when it left records of a
// dataset out (the results are then not the spec's full results); 0 when
// every dataset ran as the spec says.
func (p *Plan) Limited() int {
	for _, d := range p.Datasets {
		if d.Cut {
			return d.Limit
		}
	}
	return 0
}

// checkOutputs refuses output.kld_base files that cannot be written, and
// asks for the one score dataset a kld-base file can hold.
func (p *Plan) checkOutputs() error {
	nScore := 0
	for _, d := range p.Datasets {
		if d.Mode == spec.ModeScore {
			nScore++
		}
	}
	for _, b := range p.Spec.Backends() {
		if b.Output.KLDBase == "" {
			continue
		}
		key := b.Key + ".output.kld_base"
		if p.Spec.Reference.KLDBase == "" && nScore != 1 {
			return &exitcode.InputError{Err: p.Spec.Err(key, "needs exactly one score dataset (a kld-base file holds one token stream with one n_ctx), the spec has %d", nScore)}
		}
		f, err := atomicfile.Create(b.Output.KLDBase)
		if err != nil {
			return &exitcode.InputError{Err: p.Spec.Err(key, "cannot write %s: %v", b.Output.KLDBase, strings.TrimPrefix(err.Error(), b.Output.KLDBase+": "))}
		}
		f.Abort()
	}
	return nil
}

// longestPass is the most positions one pass of the plan feeds a backend:
// a score chunk, a prompt and its continuation, a bench test.
func (p *Plan) longestPass() int {
	n := 0
	for _, d := range p.Datasets {
		n = max(n, d.NCtx)
		for _, g := range d.Prompts {
			n = max(n, len(g.Tokens)+g.MaxNew)
		}
	}
	if b := p.Spec.Bench; b.Enabled {
		n = max(n, b.NPrompt+b.NGen)
	}
	return n
}

// MaxContext is the longest sequence any pass of the plan feeds a backend,
// raised to 512 and capped at the model's context_length (the runner raises
// it to a kld_base reference's n_ctx): the n_ctx every Load asks for.
func (p *Plan) MaxContext() int {
	n := p.longestPass()
	if p.Spec.Bench.Enabled {
		n = max(n, p.Spec.Bench.NPrompt+p.Spec.Bench.NGen+1)
	}
	return min(max(n, 512), p.NCtxTrain)
}

// Summary is the dataset's record in summary.json.
func (d Dataset) Summary() summary.DatasetSummary {
	s := summary.DatasetSummary{Name: d.Name, Path: d.Path, SHA256: d.SHA256, Mode: string(d.Mode), Records: d.Records, Tokens: d.Tokens}
	if d.Mode == spec.ModeScore {
		s.NCtx = d.NCtx
		s.Chunks = len(d.Stream) / d.NCtx
		s.Scored = s.Chunks * kldbase.PerChunk(d.NCtx)
	}
	return s
}
