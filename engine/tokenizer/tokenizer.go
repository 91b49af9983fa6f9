// Package tokenizer turns text into token ids and back exactly as llama.cpp
// does for the vocabularies stored in GGUF files: SentencePiece-style "llama"
// vocabularies (score-driven merges with <0xXX> byte fallback) and byte-level
// BPE "gpt2" vocabularies (ranked merges after a regex pre-tokenizer).
//
// The reference is llama.cpp's src/llama-vocab.cpp and src/unicode.cpp;
// where llama.cpp and Hugging Face disagree, this package follows llama.cpp.
package tokenizer

import (
	"cmp"
	"fmt"
	"slices"
	"strings"
)

// Token types as stored in tokenizer.ggml.token_type (llama_token_type).
const (
	TypeUndefined   int32 = 0
	TypeNormal      int32 = 1
	TypeUnknown     int32 = 2
	TypeControl     int32 = 3
	TypeUserDefined int32 = 4
	TypeUnused      int32 = 5
	TypeByte        int32 = 6
)

// attr mirrors llama_token_attr; a token may carry several bits (llama.cpp
// adds CONTROL to end-of-turn tokens that were stored as NORMAL).
type attr uint16

const (
	attrUnknown attr = 1 << iota
	attrUnused
	attrNormal
	attrControl
	attrUserDefined
	attrByte
	attrLStrip // tokenizing drops the whitespace before the token
	attrRStrip // tokenizing drops the whitespace after the token
)

func attrFromType(t int32) attr {
	switch t {
	case TypeUnknown:
		return attrUnknown
	case TypeUnused:
		return attrUnused
	case TypeNormal:
		return attrNormal
	case TypeControl:
		return attrControl
	case TypeUserDefined:
		return attrUserDefined
	case TypeByte:
		return attrByte
	}
	return 0 // undefined: decodes to nothing, like llama.cpp
}

// None marks an unset special token id.
const None int32 = -1

// Vocab is a vocabulary as plain data, the tokenizer.ggml.* metadata of a
// GGUF file. Special ids are final values (None = not set); DefaultVocab
// gives llama.cpp's defaults for a model type.
type Vocab struct {
	Model  string // tokenizer.ggml.model: "llama" (SPM) or "gpt2" (byte-level BPE)
	Pre    string // tokenizer.ggml.pre: pre-tokenizer name, gpt2 only ("" = "default")
	Tokens []string
	Scores []float32 // nil = all 0
	Types  []int32   // nil = all TypeNormal
	Merges []string  // gpt2 only: "left right", rank = index

	BOS, EOS, UNK, PAD, EOT, EOM int32

	AddBOS, AddEOS, AddSpacePrefix bool

	// general.name and general.architecture: llama.cpp sets per-token
	// attributes by them (Phi-3's right-stripping special tokens, the
	// left-stripping mask token of some embedding models).
	Name, Architecture string
}

// DefaultVocab returns llama.cpp's defaults for a model/pre-tokenizer pair
// (llama_vocab::impl::load): the special ids and flags used when the GGUF
// file does not set them. Tokens, scores, types and merges are left empty.
func DefaultVocab(model, pre string) Vocab {
	v := Vocab{Model: model, Pre: pre, BOS: None, EOS: None, UNK: None, PAD: None, EOT: None, EOM: None}
	switch model {
	case "llama":
		v.BOS, v.EOS, v.UNK = 1, 2, 0
		v.AddBOS, v.AddSpacePrefix = true, true
	case "gpt2":
		v.BOS, v.EOS = 11, 11
		if p, ok := preTokenizers[pre]; ok {
			v.AddBOS = p.addBOS
			if p.noBOS {
				v.BOS = None
			}
		}
	}
	return v
}

type modelKind int

const (
	kindSPM modelKind = iota
	kindBPE
)

// Tokenizer encodes and decodes text for one vocabulary. It is immutable
// and safe for concurrent use.
type Tokenizer struct {
	model, pre string
	kind       modelKind

	tokens []string
	scores []float32
	attrs  []attr
	ids    map[string]int32

	bos, eos, unk, pad, eot, eom int32
	addBOS, addEOS, addSpace     bool
	eog                          map[int32]bool

	// special holds the CONTROL, USER_DEFINED and UNKNOWN tokens, longest
	// text first: the order in which text is searched for them.
	special     []int32
	pieces      [][]byte // llama_token_to_piece(id, lstrip=0, special=false)
	maxTokenLen int      // longest token text in bytes

	// SPM
	byteTokens [256]int32 // <0xXX> (or the 1-byte token) per byte, None if absent

	// BPE
	ranks        map[mergePair]int32
	splitter     *preTokenizer
	ignoreMerges bool
	cleanSpaces  bool
}

type mergePair struct{ left, right string }

// New builds a tokenizer from plain vocabulary data. Errors name the field
// and, for per-token problems, the token index.
func New(v Vocab) (*Tokenizer, error) {
	t := &Tokenizer{
		model: v.Model, pre: v.Pre,
		bos: v.BOS, eos: v.EOS, unk: v.UNK, pad: v.PAD, eot: v.EOT, eom: v.EOM,
		addBOS: v.AddBOS, addEOS: v.AddEOS, addSpace: v.AddSpacePrefix,
	}
	switch v.Model {
	case "llama":
		t.kind = kindSPM
	case "gpt2":
		t.kind = kindBPE
		pre := v.Pre
		if pre == "" {
			pre = "default" // llama.cpp warns and falls back to the default regexes
		}
		p, ok := preTokenizers[pre]
		if !ok {
			return nil, fmt.Errorf("tokenizer.ggml.pre: unknown pre-tokenizer type %q", v.Pre)
		}
		t.splitter = p
		t.ignoreMerges = p.ignoreMerges
		t.cleanSpaces = p.cleanSpaces
		if v.Merges == nil {
			return nil, fmt.Errorf("tokenizer.ggml.merges: missing (required for model %q)", v.Model)
		}
	case "":
		return nil, fmt.Errorf("tokenizer.ggml.model: missing")
	default:
		return nil, fmt.Errorf("tokenizer.ggml.model: unsupported tokenizer model %q (supported: llama, gpt2)", v.Model)
	}

	n := len(v.Tokens)
	if n == 0 {
		return nil, fmt.Errorf("tokenizer.ggml.tokens: empty vocabulary")
	}
	if n > 1<<31-1 {
		return nil, fmt.Errorf("tokenizer.ggml.tokens: %d tokens exceed int32 ids", n)
	}
	if v.Scores != nil && len(v.Scores) < n {
		return nil, fmt.Errorf("tokenizer.ggml.scores: %d entries for %d tokens", len(v.Scores), n)
	}
	if v.Types != nil && len(v.Types) < n {
		return nil, fmt.Errorf("tokenizer.ggml.token_type: %d entries for %d tokens", len(v.Types), n)
	}

	t.tokens = make([]string, n)
	t.scores = make([]float32, n)
	t.attrs = make([]attr, n)
	t.ids = make(map[string]int32, n)
	for i, s := range v.Tokens {
		if s == "" {
			s = fmt.Sprintf("[EMPTY_%d]", i) // as llama.cpp: keeps the id reachable and unique
		}
		if prev, dup := t.ids[s]; dup {
			return nil, fmt.Errorf("tokenizer.ggml.tokens[%d]: duplicate token %q (also id %d)", i, s, prev)
		}
		t.ids[s] = int32(i)
		t.tokens[i] = s
		t.maxTokenLen = max(t.maxTokenLen, len(s))
		if v.Scores != nil {
			t.scores[i] = v.Scores[i]
		}
		t.attrs[i] = attrNormal
		if v.Types != nil {
			t.attrs[i] = attrFromType(v.Types[i])
		}
	}

	for _, f := range []struct {
		name string
		id   int32
	}{{"bos_token_id", t.bos}, {"eos_token_id", t.eos}, {"unknown_token_id", t.unk},
		{"padding_token_id", t.pad}, {"eot_token_id", t.eot}, {"eom_token_id", t.eom}} {
		if f.id < None || int(f.id) >= n {
			return nil, fmt.Errorf("tokenizer.ggml.%s: id %d outside the vocabulary of %d tokens", f.name, f.id, n)
		}
	}
	if t.addBOS && t.bos == None {
		return nil, fmt.Errorf("tokenizer.ggml.add_bos_token is true, but tokenizer.ggml.bos_token_id is not set")
	}
	if t.addEOS && t.eos == None {
		return nil, fmt.Errorf("tokenizer.ggml.add_eos_token is true, but tokenizer.ggml.eos_token_id is not set")
	}

	if t.kind == kindBPE {
		t.ranks = make(map[mergePair]int32, len(v.Merges))
		for i, m := range v.Merges {
			// llama.cpp splits at the first space after the first byte; a
			// line without one becomes the pair ("", ""), which never matches.
			var p mergePair
			if len(m) > 1 {
				if j := strings.IndexByte(m[1:], ' '); j >= 0 {
					p = mergePair{m[:j+1], m[j+2:]}
				}
			}
			if _, seen := t.ranks[p]; !seen { // first rank wins, like unordered_map::emplace
				t.ranks[p] = int32(i)
			}
		}
	} else {
		for b := range 256 {
			t.byteTokens[b] = None
			if id, ok := t.ids[fmt.Sprintf("<0x%02X>", b)]; ok {
				t.byteTokens[b] = id
			} else if id, ok := t.ids[string([]byte{byte(b)})]; ok {
				t.byteTokens[b] = id
			}
		}
	}

	t.detectSpecial()

	for id, a := range t.attrs {
		if a&(attrControl|attrUserDefined|attrUnknown) != 0 {
			t.special = append(t.special, int32(id))
		}
	}
	// Longest first; llama.cpp's std::sort leaves equal lengths in an
	// unspecified order, we break ties by id to stay deterministic.
	slices.SortStableFunc(t.special, func(a, b int32) int {
		return cmp.Compare(len(t.tokens[b]), len(t.tokens[a]))
	})
	if err := t.setStripAttrs(v); err != nil {
		return nil, err
	}

	t.pieces = make([][]byte, n)
	for id := range t.tokens {
		t.pieces[id] = t.computePiece(int32(id))
	}
	return t, nil
}

// Token texts that llama.cpp recognises as special although the converter
// did not always mark them (llama_vocab::impl::load, "auto-detect").
var (
	eotTexts = []string{"<|eot_id|>", "<|im_end|>", "<|end|>", "<end_of_turn>", "<|endoftext|>",
		"<|end_of_text|>", "<EOT>", "_<EOT>", "[EOT]", "<｜end▁of▁sentence｜>", "<end_of_utterance>"}
	eomTexts    = []string{"<|eom_id|>"}
	fimPreTexts = []string{"<|fim_prefix|>", "<fim-prefix>", "<fim_prefix>", "<｜fim▁begin｜>", "<PRE>", "▁<PRE>", "<|code_prefix|>", "<|prefix|>"}
	fimSufTexts = []string{"<|fim_suffix|>", "<fim-suffix>", "<fim_suffix>", "<｜fim▁hole｜>", "<SUF>", "▁<SUF>", "<|code_suffix|>", "<|suffix|>"}
	fimMidTexts = []string{"<|fim_middle|>", "<fim-middle>", "<fim_middle>", "<｜fim▁end｜>", "<MID>", "▁<MID>", "<|code_middle|>", "<|middle|>"}
	fimPadTexts = []string{"<|fim_pad|>", "<fim-pad>", "<fim_pad>", "<PAD>", "[PAD]"}
	fimRepTexts = []string{"<|fim_repo|>", "<|repo_name|>", "<fim-repo>", "<REPO>", "<reponame>"}
	fimSepTexts = []string{"<|file_sep|>"}
	eogTexts    = []string{"<|eot_id|>", "<|im_end|>", "<|end|>", "<|return|>", "<|call|>", "<|flush|>",
		"<|calls|>", "<end_of_turn>", "<|endoftext|>", "</s>", "<|eom_id|>", "<EOT>", "_<EOT>", "[EOT]",
		"[EOS]", "<|end_of_text|>", "<end_of_utterance>", "<eos>", "<turn|>", "<|tool_response>",
		"<｜end▁of▁sentence｜>", "[e~["}
	alwaysRenderTexts = []string{"<|channel|>", "<|message|>", "<|start|>", "<|constrain|>"}
)

// detectSpecial reproduces llama.cpp's text-based detection of end-of-turn,
// fill-in-the-middle and end-of-generation tokens, which also marks them
// CONTROL, and builds the end-of-generation set.
func (t *Tokenizer) detectSpecial() {
	// llama.cpp walks an unordered_map; when several texts match we take the
	// lowest id so the result does not depend on hash order.
	find := func(texts []string) int32 {
		best := None
		for _, s := range texts {
			if id, ok := t.ids[s]; ok && (best == None || id < best) {
				best = id
			}
		}
		return best
	}
	markControl := func(id int32) {
		if id != None {
			t.attrs[id] |= attrControl
		}
	}
	if t.eot == None {
		t.eot = find(eotTexts)
		markControl(t.eot)
	}
	if t.eom == None {
		t.eom = find(eomTexts)
		markControl(t.eom)
	}
	fimPad, fimRep, fimSep := find(fimPadTexts), find(fimRepTexts), find(fimSepTexts)
	for _, id := range []int32{find(fimPreTexts), find(fimSufTexts), find(fimMidTexts), fimPad, fimRep, fimSep} {
		markControl(id)
	}

	t.eog = map[int32]bool{}
	for _, id := range []int32{fimPad, fimRep, fimSep} {
		if id != None {
			t.eog[id] = true
		}
	}
	for _, s := range eogTexts {
		if id, ok := t.ids[s]; ok {
			t.eog[id] = true
			markControl(id)
		}
	}
	for _, s := range alwaysRenderTexts { // gpt-oss: rendered, never EOG-controlled
		if id, ok := t.ids[s]; ok {
			t.attrs[id] = attrUserDefined
		}
	}
	for _, id := range []int32{t.eos, t.eot, t.eom} {
		if id != None {
			t.eog[id] = true
		}
	}

	// o200k_harmony / solar-open: "<|end|>" ends a message, not generation.
	has := func(s string) bool { id, ok := t.ids[s]; return ok && t.eog[id] }
	if end, ok := t.ids["<|end|>"]; ok && t.eog[end] &&
		((has("<|return|>") && (has("<|call|>") || has("<|calls|>"))) || ((has("<|call|>") || has("<|calls|>")) && has("<|flush|>"))) {
		delete(t.eog, end)
		t.attrs[end] = attrUserDefined
	}
	// gemma4 / paddleocr: "</s>" is ordinary text there.
	if s, ok := t.ids["</s>"]; ok && t.eog[s] && has("<|tool_response>") {
		delete(t.eog, s)
		t.attrs[s] = attrNormal
	}
}

// setStripAttrs is the end of llama_vocab::impl::load ("handle per token
// attributes"): the whitespace-stripping attributes llama.cpp gives tokens
// by tokenizer, model or architecture name.
func (t *Tokenizer) setStripAttrs(v Vocab) error {
	name := asciiLowerString(v.Name) // std::tolower, byte by byte
	containsAny := func(s string, subs ...string) bool {
		for _, sub := range subs {
			if strings.Contains(s, sub) {
				return true
			}
		}
		return false
	}
	set := func(text string, a attr, on bool) error {
		id, ok := t.ids[text]
		if !ok { // token_to_id.at throws: llama.cpp fails to load the model
			return fmt.Errorf("tokenizer.ggml.tokens: no token %q, which llama.cpp requires for general.name %q", text, v.Name)
		}
		if on {
			t.attrs[id] |= a
		} else {
			t.attrs[id] &^= a
		}
		return nil
	}
	switch {
	case containsAny(v.Pre, "jina-v2-de", "jina-v2-es", "jina-v2-code") ||
		containsAny(v.Architecture, "nomic-bert-moe", "jina-bert-v3"):
		if _, ok := t.ids["<mask>"]; ok { // llama.cpp only warns when it is missing
			return set("<mask>", attrLStrip, true)
		}
	case containsAny(name, "phi-3", "phi3"):
		for _, id := range t.special {
			t.attrs[id] |= attrRStrip
		}
		if err := set("</s>", attrRStrip, true); err != nil {
			return err
		}
		for _, s := range []string{"<unk>", "<s>", "<|endoftext|>"} {
			if err := set(s, attrRStrip, false); err != nil {
				return err
			}
		}
	case containsAny(name, "modern-bert"):
		if _, ok := t.ids["[MASK]"]; ok {
			return set("[MASK]", attrLStrip, true)
		}
	}
	return nil
}

func asciiLowerString(s string) string {
	b := []byte(s)
	for i, c := range b {
		if c >= 'A' && c <= 'Z' {
			b[i] = c + ('a' - 'A')
		}
	}
	return string(b)
}

// Model is tokenizer.ggml.model ("llama" or "gpt2").
func (t *Tokenizer) Model() string { return t.model }

// Pre is tokenizer.ggml.pre ("" for SPM vocabularies).
func (t *Tokenizer) Pre() string { return t.pre }

// VocabSize is the number of tokens.
func (t *Tokenizer) VocabSize() int { return len(t.tokens) }

// BOS is the beginning-of-sequence id, or None.
func (t *Tokenizer) BOS() int32 { return t.bos }

// EOS is the end-of-sequence id, or None.
func (t *Tokenizer) EOS() int32 { return t.eos }

// EOT is the end-of-turn id, or None.
func (t *Tokenizer) EOT() int32 { return t.eot }

// UNK is the unknown-token id, or None.
func (t *Tokenizer) UNK() int32 { return t.unk }

// PAD is the padding id, or None.
func (t *Tokenizer) PAD() int32 { return t.pad }

// AddBOS reports whether Encode(text, true) prepends BOS.
func (t *Tokenizer) AddBOS() bool { return t.addBOS }

// AddEOS reports whether Encode(text, true) appends EOS.
func (t *Tokenizer) AddEOS() bool { return t.addEOS }

// AddSpacePrefix reports whether a space is prepended to the text (SPM).
func (t *Tokenizer) AddSpacePrefix() bool { return t.addSpace }

// IsEOG reports whether id ends generation (EOS, EOT, EOM and the
// end-of-turn tokens llama.cpp recognises by their text).
func (t *Tokenizer) IsEOG(id int32) bool { return t.eog[id] }

// IsControl reports whether id is a control token (decoded as nothing).
func (t *Tokenizer) IsControl(id int32) bool {
	return t.valid(id) && t.attrs[id]&attrControl != 0
}

// Token is the raw vocabulary text of id ("" if id is out of range).
func (t *Tokenizer) Token(id int32) string {
	if !t.valid(id) {
		return ""
	}
	return t.tokens[id]
}

// Score is the vocabulary score of id (0 if out of range).
func (t *Tokenizer) Score(id int32) float32 {
	if !t.valid(id) {
		return 0
	}
	return t.scores[id]
}

// ID looks up a token by its raw vocabulary text.
func (t *Tokenizer) ID(text string) (int32, bool) {
	id, ok := t.ids[text]
	return id, ok
}

func (t *Tokenizer) valid(id int32) bool { return id >= 0 && int(id) < len(t.tokens) }
