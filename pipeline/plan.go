package pipeline

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"slices"

	"github.com/evalrun/evalrun/engine/gguf"
	"github.com/evalrun/evalrun/engine/tokenizer"
	"github.com/evalrun/evalrun/pipeline/dataset"
)

// Dataset modes.
const (
	ModeScore    = "score"
	ModeGenerate = "generate"
)

// Plan is a spec resolved against the model: every path absolute, every
// prompt tokenized once on the host so that all backends see the same ids.
type Plan struct {
	Name       string
	SpecPath   string
	SpecDir    string
	OutputDir  string
	Formats    []string
	PluginDir  string
	Model      ModelSummary
	BOS        int32 // written over position 0 of every score chunk; -1 if the vocabulary adds no BOS
	Datasets   []DatasetPlan
	Reference  BackendPlan
	Candidates []BackendPlan
	Bench      BenchPlan
	Timeouts   timeouts

	// VocabDigest is backend.VocabDigest of the tokenizer the host tokenizes
	// with; every plugin checks its model's vocabulary against it at Load.
	VocabDigest string
}

// BackendPlan is one backend of the plan.
type BackendPlan struct {
	Name       string
	Plugin     string
	Threads    int
	Model      string
	Options    map[string]any
	KLDBase    string // reference only: read reference logits from this file
	KLDBaseOut string // write this backend's score logits here
	Gates      []Gate
}

// BenchPlan are the throughput settings.
type BenchPlan struct {
	Enabled       bool
	NPrompt, NGen int
	Reps          int
	Warmup        bool
}

// DatasetPlan is one tokenized prompt set.
type DatasetPlan struct {
	Name    string
	Path    string
	Mode    string
	NCtx    int
	MaxNew  int
	Records int
	Tokens  int
	Stream  []int32 // score: every record's tokens (each with BOS), concatenated
	Prompts []genPrompt
}

func (d DatasetPlan) summary() DatasetSummary {
	s := DatasetSummary{Name: d.Name, Path: d.Path, Mode: d.Mode, Records: d.Records, Tokens: d.Tokens}
	if d.Mode == ModeScore {
		s.NCtx = d.NCtx
		s.Chunks = len(d.Stream) / d.NCtx
		s.Scored = s.Chunks * (d.NCtx - 1 - d.NCtx/2)
	}
	return s
}

// maxContext is the longest sequence any pass feeds a backend.
func (p *Plan) maxContext() int {
	n := 0
	for _, d := range p.Datasets {
		switch d.Mode {
		case ModeScore:
			n = max(n, d.NCtx)
		case ModeGenerate:
			for _, g := range d.Prompts {
				n = max(n, len(g.tokens)+g.maxNew)
			}
		}
	}
	if p.Bench.Enabled {
		n = max(n, p.Bench.NPrompt+p.Bench.NGen+1)
	}
	return max(n, 512)
}

// PluginDirs lists where plugins are looked up, the CLI's choice first.
func (p *Plan) PluginDirs(override string) []string {
	var dirs []string
	if override != "" {
		dirs = append(dirs, override)
	}
	if p.PluginDir != "" {
		dirs = append(dirs, p.PluginDir)
	}
	return dirs
}

// hostModel is what the host itself reads from the reference model file.
type hostModel struct {
	summary ModelSummary
	tok     *tokenizer.Tokenizer
	tokens  []string
}

// FileSHA256 is the hex sha256 of a file, streamed.
func FileSHA256(path string) (string, error) {
	f, err := os.Open(path)
	if err != nil {
		return "", err
	}
	defer f.Close()
	h := sha256.New()
	if _, err := io.Copy(h, f); err != nil {
		return "", err
	}
	return hex.EncodeToString(h.Sum(nil)), nil
}

// openHostModel reads the model's metadata and tokenizer, checking its sha256
// when the spec gives one.
func openHostModel(path, wantSHA string) (*hostModel, error) {
	sum, err := FileSHA256(path)
	if err != nil {
		return nil, inputErr("model: %v", err)
	}
	if wantSHA != "" && !equalHex(sum, wantSHA) {
		return nil, inputErr("model %s: sha256 is %s, the spec expects %s", path, sum, wantSHA)
	}
	f, err := gguf.Open(path)
	if err != nil {
		return nil, &InputError{err}
	}
	defer f.Close()
	tok, err := tokenizer.FromGGUF(f)
	if err != nil {
		return nil, inputErr("model %s: %v", path, err)
	}
	arch, _ := f.String("general.architecture")
	var nParams int64
	for _, t := range f.Tensors {
		n := int64(1)
		for _, d := range t.Dims {
			n *= int64(d)
		}
		nParams += n
	}
	st, err := os.Stat(path)
	if err != nil {
		return nil, inputErr("model: %v", err)
	}
	vocab, _ := f.Strings("tokenizer.ggml.tokens")
	return &hostModel{
		summary: ModelSummary{Path: path, SHA256: sum, Arch: arch, NParams: nParams, NVocab: tok.VocabSize(), SizeBytes: st.Size()},
		tok:     tok,
		tokens:  slices.Clone(vocab),
	}, nil
}

func equalHex(a, b string) bool {
	if len(a) != len(b) {
		return false
	}
	for i := 0; i < len(a); i++ {
		x, y := a[i]|0x20, b[i]|0x20
		if x != y {
			return false
		}
	}
	return true
}

// checkSameVocab refuses a backend model override whose vocabulary differs
// from the reference model's: logits of different vocabularies cannot be
// compared position by position.
func checkSameVocab(ref *hostModel, backendName, path string) error {
	f, err := gguf.Open(path)
	if err != nil {
		return &InputError{fmt.Errorf("backend %s: %w", backendName, err)}
	}
	defer f.Close()
	toks, _ := f.Strings("tokenizer.ggml.tokens")
	if len(toks) != len(ref.tokens) {
		return inputErr("backend %s: model %s has %d vocabulary entries, the reference model has %d: vocabularies must be identical", backendName, path, len(toks), len(ref.tokens))
	}
	for i := range toks {
		if toks[i] != ref.tokens[i] {
			return inputErr("backend %s: model %s: vocabulary entry %d is %q, the reference model's is %q: vocabularies must be identical", backendName, path, i, toks[i], ref.tokens[i])
		}
	}
	return nil
}

// tokenizeDataset reads a prompt set and tokenizes it with the reference
// model's tokenizer (add_special = true: BOS as llama.cpp adds it).
func tokenizeDataset(hm *hostModel, d *DatasetPlan, limit int) error {
	r, err := dataset.Open(d.Path)
	if err != nil {
		return &InputError{err}
	}
	defer r.Close()
	nVocab := int32(hm.summary.NVocab)
	for limit <= 0 || d.Records < limit {
		rec, err := r.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return &InputError{err}
		}
		ids := rec.Tokens
		if ids == nil {
			ids = hm.tok.Encode(rec.Text, true)
		}
		for _, id := range ids {
			if id < 0 || id >= nVocab {
				return inputErr("%s:%d: token %d is outside the vocabulary (0..%d)", d.Path, rec.Line, id, nVocab-1)
			}
		}
		d.Records++
		d.Tokens += len(ids)
		switch d.Mode {
		case ModeScore:
			d.Stream = append(d.Stream, ids...)
		case ModeGenerate:
			if len(ids) == 0 {
				return inputErr("%s:%d: record %q has no tokens to generate from", d.Path, rec.Line, rec.ID)
			}
			d.Prompts = append(d.Prompts, genPrompt{dataset: d.Name, id: rec.ID, tokens: ids, maxNew: d.MaxNew})
		}
	}
	if d.Records == 0 {
		return inputErr("dataset %s (%s): no records", d.Name, d.Path)
	}
	if d.Mode == ModeScore && len(d.Stream) < d.NCtx {
		return inputErr("dataset %s (%s): %d tokens, fewer than n_ctx %d: nothing to score", d.Name, d.Path, len(d.Stream), d.NCtx)
	}
	return nil
}
