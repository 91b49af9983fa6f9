package tokenizer

import (
	"slices"
	"strings"
	"testing"
)

// The flags llama_vocab::impl::load sets per tokenizer.ggml.pre name
// (clean_spaces is true for BPE unless cleared; ignore_merges and add_bos
// are false unless set; glm4/chatglm-bpe clear the default BOS id).
func TestPreTokenizerFlags(t *testing.T) {
	type flags struct{ ignoreMerges, cleanSpaces, addBOS, noBOS bool }
	for name, want := range map[string]flags{
		"glm4": {cleanSpaces: true, noBOS: true}, "chatglm-bpe": {cleanSpaces: true, noBOS: true},
		"gpt-4o": {}, "llama4": {}, "kanana2": {}, "talkie": {}, "minimax-m2": {},
		"minicpm5":    {ignoreMerges: true, cleanSpaces: true},
		"deepseek-v3": {}, "hunyuan-dense": {}, "joyai-llm": {}, "hunyuan": {}, "solar-open": {}, "grok-2": {},
		"youtu": {ignoreMerges: true}, "jais-2": {cleanSpaces: true}, "qwen35": {},
		"poro-chat": {}, "bloom": {cleanSpaces: true}, "gpt3-finnish": {cleanSpaces: true}, "viking": {},
		"tekken": {ignoreMerges: true, addBOS: true}, "chameleon": {addBOS: true},
		"granite-embed-multi-97m": {ignoreMerges: true}, "tiny_aya": {}, "cohere2moe": {}, "superbpe": {},
		"bailingmoe": {}, "bailingmoe2": {}, "llada-moe": {}, "seed-coder": {}, "afmoe": {}, "laguna": {},
		"exaone-moe": {cleanSpaces: true}, "exaone4": {cleanSpaces: true}, "exaone": {cleanSpaces: true},
		"jina-v1-en": {cleanSpaces: true}, "jina-v2-code": {cleanSpaces: true}, "roberta-bpe": {cleanSpaces: true},
		"smollm": {}, "olmo": {cleanSpaces: true}, "refact": {cleanSpaces: true}, "granite-docling": {},
		"deepseek-llm": {}, "deepseek-coder": {}, "falcon": {cleanSpaces: true},
	} {
		p, ok := preTokenizers[name]
		if !ok {
			t.Errorf("%s: not supported", name)
			continue
		}
		if got := (flags{p.ignoreMerges, p.cleanSpaces, p.addBOS, p.noBOS}); got != want {
			t.Errorf("%s: flags %+v, want %+v", name, got, want)
		}
	}
	for _, name := range []string{"kimi-k2", "gemma4", "granite-embed-multi-311m", "sarvam-moe", "whitespace"} {
		if _, err := New(byteLevelVocab(name, nil, nil, nil)); err == nil || !strings.Contains(err.Error(), "unknown pre-tokenizer") {
			t.Errorf("%s: New error %v, want unknown pre-tokenizer", name, err)
		}
	}
}

// GLM-4 (glm4, chatglm-bpe): the LLaMA-3 regex (llama.cpp's custom
// splitter), BOS unset unless the file sets it, no ignore_merges.
func TestGLM4(t *testing.T) {
	v := DefaultVocab("gpt2", "glm4")
	if v.BOS != None || v.AddBOS || v.EOS != 11 {
		t.Errorf("DefaultVocab(gpt2, glm4): BOS=%d AddBOS=%v EOS=%d, want BOS unset, no add_bos, EOS 11", v.BOS, v.AddBOS, v.EOS)
	}
	if got, want := split(t, "glm4", "I'M 12345 a\n\nb"), []string{"I", "'M", " ", "123", "45", " a", "\n\n", "b"}; !slices.Equal(got, want) {
		t.Errorf("glm4 split %q, want %q", got, want)
	}
	// The GGUF's bos_token_id still applies.
	kvs := gpt2KVs()
	kvs[keyPre] = "chatglm-bpe"
	delete(kvs, keyBOS)
	tok, err := FromGGUF(memGGUF(t, kvs))
	if err != nil {
		t.Fatal(err)
	}
	if tok.BOS() != None || tok.AddBOS() {
		t.Errorf("chatglm-bpe without bos_token_id: BOS=%d AddBOS=%v", tok.BOS(), tok.AddBOS())
	}
	kvs[keyBOS] = uint32(257)
	if tok, err = FromGGUF(memGGUF(t, kvs)); err != nil || tok.BOS() != 257 {
		t.Fatalf("chatglm-bpe with bos_token_id: BOS=%v err=%v", tok, err)
	}
	// Without ignore_merges a word that is a token is still merged pair by pair.
	bv := byteLevelVocab("glm4", []string{"h i"}, []string{"hello"}, nil)
	tok = mustNew(t, bv)
	if got := tok.Encode("hello", false); slices.Contains(got, ids(t, tok, "hello")[0]) {
		t.Errorf("glm4 Encode(hello) = %v: took the whole word without merges", got)
	}
}

// Expected splits worked out from the regexes of llm_tokenizer_bpe (and
// checked against llama.cpp's own unicode_regex_split, like every text in
// testdata/pretokenize).
func TestNewPreTokenizerSplits(t *testing.T) {
	for _, c := range []struct {
		pre, text string
		want      []string
	}{
		// gpt-4o: [^\r\n\p{L}\p{N}]?[upper]*[lower]+('s..)?|[^\r\n\p{L}\p{N}]?[upper]+[lower]*('s..)?|\p{N}{1,3}|...
		// camel case splits; a contraction stays with its word
		{"gpt-4o", "I'M fine HelloWorld", []string{"I'M", " fine", " Hello", "World"}},
		// on the collapsed text every non-ASCII letter is "upper" and "lower" at
		// once: É is taken alone by [upper]*[lower]+ with an empty [upper]*
		{"gpt-4o", "ÉCOLE école", []string{"É", "COLE", " école"}},
		{"gpt-4o", "a 1234567 b", []string{"a", " ", "123", "456", "7", " b"}},
		{"gpt-4o", "x\u0301y cafe\u0301!", []string{"x", "\u0301y", " cafe", "\u0301!"}},
		{"gpt-4o", "path/to\n\n", []string{"path", "/to", "\n\n"}},
		// minicpm5: \p{N}{1,3} first, then the LLaMA-3 regex with \p{N}+
		{"minicpm5", "ab12345cd 7", []string{"ab", "123", "45", "cd", " ", "7"}},
		// qwen35: marks join letters ([\p{L}\p{M}]+), digits one by one
		{"qwen35", "x\u0301y cafe\u0301!", []string{"x\u0301y", " cafe\u0301", "!"}},
		{"qwen35", "ab12cd", []string{"ab", "1", "2", "cd"}},
		// tiny_aya: digits in threes from the right (llama.cpp's AFMoE splitter)
		{"tiny_aya", "a 1234567 b", []string{"a", " ", "1", "234", "567", " b"}},
		{"afmoe", "ab12345cd 7", []string{"ab", "12", "345", "cd", " ", "7"}},
		// laguna: runs of newlines first, then Qwen2
		{"laguna", "a\n\nb c", []string{"a", "\n\n", "b", " c"}},
		// bloom: ` ?[^(\s|.,!?…。，、।۔،)]+`; what lies between two matches is one piece
		{"bloom", "Hi, (you) there.", []string{"Hi", ", (", "you", ")", " there", "."}},
		// superbpe: \p{N}+, then an empty match before every group of three
		// digits that ends the run: llama.cpp keeps the empty words
		{"superbpe", "1234567", []string{"1", "", "234", "", "567"}},
		// chameleon: each regex splits the pieces of the previous ones further,
		// so a sentinel does not stay whole (digits and punctuation alone)
		{"chameleon", "<sentinel:12>IMGIMGABZ 42!", []string{"<", "sentinel", ":", "1", "2", ">", "IMGIMGABZ", " ", "4", "2", "!"}},
		// deepseek-v3: digit triples, CJK/kana runs, then the main regex
		{"deepseek-v3", "日本語テスト 1234 (ab)", []string{"日本語テスト", " ", "123", "4", " (", "ab", ")"}},
	} {
		if got := split(t, c.pre, c.text); !slices.Equal(got, c.want) {
			t.Errorf("%s %q: split %q, want %q", c.pre, c.text, got, c.want)
		}
	}
}

// Phi-3 (general.name containing "phi3" or "phi-3"): llama.cpp gives every
// special token RSTRIP, also </s>, and takes it from <unk>, <s> and
// <|endoftext|>: the whitespace after them is dropped when tokenizing.
func TestPhi3RStrip(t *testing.T) {
	tok := loadVocab(t, "phi-3") // general.name "Phi3"
	for _, s := range []string{"<|user|>", "<|end|>", "<|assistant|>", "</s>"} {
		if id, ok := tok.ID(s); !ok || tok.attrs[id]&attrRStrip == 0 {
			t.Errorf("%s: no RSTRIP", s)
		}
	}
	for _, s := range []string{"<unk>", "<s>", "<|endoftext|>"} {
		if id, ok := tok.ID(s); !ok || tok.attrs[id]&attrRStrip != 0 {
			t.Errorf("%s: RSTRIP", s)
		}
	}
	chat := tok.Tokenize("<|user|>\n Hello<|end|>\n<|assistant|>", true, true)
	if want := tok.Tokenize("<|user|>Hello<|end|><|assistant|>", true, true); !slices.Equal(chat, want) {
		t.Errorf("whitespace after RSTRIP tokens kept: %v, want %v", chat, want)
	}
	// The whitespace before them stays; after <s> it stays too.
	if a, b := tok.Tokenize("a <|end|>", false, true), tok.Tokenize("a<|end|>", false, true); slices.Equal(a, b) {
		t.Errorf("whitespace before <|end|> dropped: %v", a)
	}
	if a, b := tok.Tokenize("<s> a", false, true), tok.Tokenize("<s>a", false, true); slices.Equal(a, b) {
		t.Errorf("whitespace after <s> dropped: %v", a)
	}
	// Another name: no stripping.
	v := spmVocab([]string{"▁", "a", "▁a", "<|end|>"}, []float32{-1, -1, -0.5, 0}, map[string]int32{"<|end|>": TypeControl})
	v.Name = "Llama"
	other := mustNew(t, v)
	if a, b := other.Tokenize("<|end|> a", false, true), other.Tokenize("<|end|>a", false, true); slices.Equal(a, b) {
		t.Errorf("non-Phi-3: whitespace after <|end|> dropped")
	}
	// llama.cpp fails to load a Phi-3 vocabulary without <|endoftext|>.
	v.Name = "Phi-3-mini"
	if _, err := New(v); err == nil {
		t.Errorf("Phi-3 without <|endoftext|>: no error")
	}
}

// jina-v2-es/de/code (and nomic-bert-moe, jina-bert-v3 architectures):
// <mask> gets LSTRIP; modern-bert models' [MASK] too.
func TestMaskLStrip(t *testing.T) {
	for _, c := range []struct{ pre, name, arch, mask string }{
		{"jina-v2-es", "", "", "<mask>"}, {"gpt-2", "", "jina-bert-v3", "<mask>"}, {"gpt-2", "ModernBERT-base modern-bert", "", "[MASK]"},
	} {
		v := byteLevelVocab(c.pre, nil, []string{c.mask}, []int32{TypeUserDefined})
		v.Name, v.Architecture = c.name, c.arch
		tok := mustNew(t, v)
		mask := ids(t, tok, c.mask)[0]
		got := tok.Encode("a \t"+c.mask+" b", false)
		want := slices.Concat(ids(t, tok, "a"), []int32{mask}, ids(t, tok, "Ġ", "b"))
		if !slices.Equal(got, want) {
			t.Errorf("%+v: Encode = %v, want %v", c, got, want)
		}
	}
	tok := mustNew(t, byteLevelVocab("gpt-2", nil, []string{"<mask>"}, []int32{TypeUserDefined}))
	if got := tok.Encode("a <mask>", false); !slices.Equal(got, ids(t, tok, "a", "Ġ", "<mask>")) {
		t.Errorf("gpt-2: <mask> stripped the space before it: %v", got)
	}
}

// Gemma 2/3 are SPM ("llama") vocabularies whose converter writes
// add_space_prefix=false; <end_of_turn> is found as end of turn by its
// text, <start_of_turn> is a control token like any other.
func TestGemmaStyleSPM(t *testing.T) {
	v := spmVocab([]string{"▁", "u", "s", "e", "r", "us", "er", "user", "\n", "h", "i", "hi", "▁hi", "<start_of_turn>", "<end_of_turn>"},
		[]float32{-1, -5, -5, -5, -5, -3, -3, -1, -1, -5, -5, -2, -1, 0, 0},
		map[string]int32{"<start_of_turn>": TypeControl, "<end_of_turn>": TypeControl})
	v.Tokens[1], v.Tokens[2], v.Tokens[0] = "<bos>", "<eos>", "<pad>" // Gemma: 0 <pad>, 1 <eos>, 2 <bos>, 3 <unk>
	v.Tokens = append(v.Tokens, "<unk>")
	v.Scores = append(v.Scores, 0)
	v.Types = append(v.Types, TypeUnknown)
	v.Types[0] = TypeControl
	v.BOS, v.EOS, v.UNK, v.PAD = 2, 1, int32(len(v.Tokens)-1), 0
	v.AddSpacePrefix = false
	tok := mustNew(t, v)
	sot, eot := ids(t, tok, "<start_of_turn>")[0], ids(t, tok, "<end_of_turn>")[0]
	if tok.EOT() != eot || !tok.IsEOG(eot) || !tok.IsEOG(1) || tok.IsEOG(sot) {
		t.Errorf("EOT=%d IsEOG(eot)=%v IsEOG(eos)=%v IsEOG(sot)=%v", tok.EOT(), tok.IsEOG(eot), tok.IsEOG(1), tok.IsEOG(sot))
	}
	got := tok.Tokenize("<start_of_turn>user\nhi<end_of_turn>", true, true)
	want := slices.Concat([]int32{2, sot}, ids(t, tok, "user", "\n", "hi"), []int32{eot})
	if !slices.Equal(got, want) {
		t.Errorf("Tokenize = %v, want %v (no space prefix after special tokens)", got, want)
	}
	if got := tok.Encode("hi", false); !slices.Equal(got, ids(t, tok, "hi")) {
		t.Errorf("Encode(hi) = %v: space prefix added", got)
	}
}
