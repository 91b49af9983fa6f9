package tokenizer

import (
	"slices"
	"strings"
	"sync"
	"testing"
)

// byteLevelVocab is a synthetic GPT-2 style vocabulary: ids 0..255 are the
// byte symbols (id = byte value), then one token per merge result in merge
// order, then extra tokens.
func byteLevelVocab(pre string, merges []string, extra []string, extraTypes []int32) Vocab {
	v := DefaultVocab("gpt2", pre)
	for b := range 256 {
		v.Tokens = append(v.Tokens, byteStrs[b])
	}
	for _, m := range merges {
		v.Tokens = append(v.Tokens, strings.Replace(m, " ", "", 1))
	}
	v.Tokens = append(v.Tokens, extra...)
	v.Types = make([]int32, len(v.Tokens))
	for i := range v.Types {
		v.Types[i] = TypeNormal
	}
	copy(v.Types[len(v.Types)-len(extraTypes):], extraTypes)
	v.Merges = append([]string{}, merges...) // non-nil: present but possibly empty
	return v
}

func mustNew(t *testing.T, v Vocab) *Tokenizer {
	t.Helper()
	tok, err := New(v)
	if err != nil {
		t.Fatal(err)
	}
	return tok
}

// ids turns token texts (in byte-level form) into ids of tok.
func ids(t *testing.T, tok *Tokenizer, texts ...string) []int32 {
	t.Helper()
	out := make([]int32, len(texts))
	for i, s := range texts {
		id, ok := tok.ID(s)
		if !ok {
			t.Fatalf("token %q not in vocabulary", s)
		}
		out[i] = id
	}
	return out
}

func TestByteLevelMap(t *testing.T) {
	// GPT-2's bytes_to_unicode: printable bytes map to themselves, space is
	// shifted to U+0120 "Ġ", newline to U+010A "Ċ", 0x00 to U+0100.
	for b, want := range map[byte]rune{'a': 'a', '!': '!', ' ': 'Ġ', '\n': 'Ċ', 0: 'Ā', 0xAD: 'Ń', 0xFF: 'ÿ', 0x7F: 'ġ'} {
		if got := byteRunes[b]; got != want {
			t.Errorf("byte %#x -> %q, want %q", b, got, want)
		}
	}
	seen := map[rune]bool{}
	for b := range 256 {
		if seen[byteRunes[b]] {
			t.Fatalf("byte %#x maps to a rune already used", b)
		}
		seen[byteRunes[b]] = true
	}
}

func TestBPEMerges(t *testing.T) {
	merges := []string{"h e", "l l", "he ll", "hell o", "Ġ w", "o r", "Ġw or", "l d", "Ġwor ld"}
	tok := mustNew(t, byteLevelVocab("gpt-2", merges, nil, nil))
	for _, c := range []struct {
		text string
		want []string
	}{
		{"hello world", []string{"hello", "Ġworld"}},
		{"hello", []string{"hello"}},
		// "hell" is a token but "hel" is never formed: he+ll wins over e+l.
		{"help", []string{"he", "l", "p"}},
		{"world", []string{"w", "or", "ld"}}, // no leading space: "Ġ w" cannot apply
		{"", nil},
		{"héllo", []string{"h", "Ã", "©", "ll", "o"}}, // é = C3 A9 as two byte symbols
	} {
		if got, want := tok.Encode(c.text, false), ids(t, tok, c.want...); !slices.Equal(got, want) {
			t.Errorf("Encode(%q) = %v, want %v (%q)", c.text, got, want, c.want)
		}
		if got := tok.Decode(tok.Encode(c.text, false), false); got != c.text {
			t.Errorf("Decode(Encode(%q)) = %q", c.text, got)
		}
	}
}

func TestBPERankAndPositionOrder(t *testing.T) {
	// Lowest rank merges first: "b c" (rank 0) beats "a b" (rank 1).
	tok := mustNew(t, byteLevelVocab("gpt-2", []string{"b c", "a b"}, nil, nil))
	if got, want := tok.Encode("abc", false), ids(t, tok, "a", "bc"); !slices.Equal(got, want) {
		t.Errorf("Encode(abc) = %v, want %v", got, want)
	}
	// Equal ranks: the leftmost pair merges first.
	tok = mustNew(t, byteLevelVocab("gpt-2", []string{"a a"}, nil, nil))
	if got, want := tok.Encode("aaa", false), ids(t, tok, "aa", "a"); !slices.Equal(got, want) {
		t.Errorf("Encode(aaa) = %v, want %v", got, want)
	}
	if got, want := tok.Encode("aaaaa", false), ids(t, tok, "aa", "aa", "a"); !slices.Equal(got, want) {
		t.Errorf("Encode(aaaaa) = %v, want %v", got, want)
	}
}

func TestBPEIgnoreMerges(t *testing.T) {
	// "abc" is a token reachable by no merge. llama-bpe (ignore_merges)
	// takes a word that is a token as is; gpt-2 runs the merges.
	merges := []string{"a b"}
	for _, c := range []struct {
		pre  string
		want []string
	}{{"llama-bpe", []string{"abc"}}, {"gpt-2", []string{"ab", "c"}}} {
		v := byteLevelVocab(c.pre, merges, []string{"abc"}, nil)
		v.BOS = 1 // llama-bpe adds BOS by default; any valid id will do here
		tok := mustNew(t, v)
		if got, want := tok.Encode("abc", false), ids(t, tok, c.want...); !slices.Equal(got, want) {
			t.Errorf("%s: Encode(abc) = %v, want %v", c.pre, got, want)
		}
	}
}

func TestBPEMissingMergeResult(t *testing.T) {
	// A merge whose result is not a token: llama.cpp falls back to one-byte
	// tokens for the merged symbol.
	v := byteLevelVocab("gpt-2", nil, nil, nil)
	v.Merges = []string{"x y"}
	tok := mustNew(t, v)
	if got, want := tok.Encode("xy", false), ids(t, tok, "x", "y"); !slices.Equal(got, want) {
		t.Errorf("Encode(xy) = %v, want %v", got, want)
	}
}

func TestBPEInvalidUTF8BecomesReplacementChar(t *testing.T) {
	tok := mustNew(t, byteLevelVocab("gpt-2", nil, nil, nil))
	// llama.cpp decodes the text into code points first; a stray byte is U+FFFD (EF BF BD).
	got := tok.Encode("a\xffb", false)
	if want := []int32{'a', 0xEF, 0xBF, 0xBD, 'b'}; !slices.Equal(got, want) {
		t.Errorf("Encode(a\\xffb) = %v, want %v", got, want)
	}
	if s := tok.Decode(got, false); s != "a\uFFFDb" {
		t.Errorf("Decode = %q", s)
	}
}

func TestBPESpecialTokens(t *testing.T) {
	extra := []string{"<|endoftext|>", "<tool>"}
	v := byteLevelVocab("gpt-2", []string{"Ġ w"}, extra, []int32{TypeControl, TypeUserDefined})
	tok := mustNew(t, v)
	eot, _ := tok.ID("<|endoftext|>")
	tool, _ := tok.ID("<tool>")
	if tok.EOT() != eot || !tok.IsEOG(eot) || !tok.IsControl(eot) {
		t.Errorf("<|endoftext|> (%d): EOT()=%d IsEOG=%v IsControl=%v", eot, tok.EOT(), tok.IsEOG(eot), tok.IsControl(eot))
	}
	text := "a<|endoftext|> w<tool>b"
	// parse_special=false: the control token is plain text, the user-defined one is still matched.
	want := slices.Concat(ids(t, tok, "a"), tok.Encode("<|endoftext|>", false), ids(t, tok, "Ġw"), []int32{tool}, ids(t, tok, "b"))
	if got := tok.Encode(text, false); !slices.Equal(got, want) {
		t.Errorf("Encode(%q) = %v, want %v", text, got, want)
	}
	if slices.Contains(tok.Encode(text, false), eot) {
		t.Errorf("control token matched inside text with parse_special=false")
	}
	// parse_special=true: the control token is matched too.
	want = slices.Concat(ids(t, tok, "a"), []int32{eot}, ids(t, tok, "Ġw"), []int32{tool}, ids(t, tok, "b"))
	if got := tok.Tokenize(text, false, true); !slices.Equal(got, want) {
		t.Errorf("Tokenize(%q, parseSpecial) = %v, want %v", text, got, want)
	}
	// Decoding: control tokens are dropped, user-defined ones rendered.
	if got := tok.Decode(tok.Tokenize(text, false, true), false); got != "a w<tool>b" {
		t.Errorf("Decode = %q, want %q", got, "a w<tool>b")
	}
}

func TestBPEAddSpecial(t *testing.T) {
	v := byteLevelVocab("gpt-2", nil, []string{"<s>", "</s>"}, []int32{TypeControl, TypeControl})
	v.BOS, v.EOS = 256, 257
	tok := mustNew(t, v)
	if tok.AddBOS() {
		t.Fatal("gpt-2 pre-tokenizer should not add BOS by default")
	}
	if got := tok.Encode("a", true); !slices.Equal(got, []int32{'a'}) {
		t.Errorf("gpt-2 Encode(a, true) = %v", got)
	}
	v.AddBOS, v.AddEOS = true, true
	tok = mustNew(t, v)
	if got := tok.Encode("a", true); !slices.Equal(got, []int32{256, 'a', 257}) {
		t.Errorf("Encode(a, true) with add_bos/add_eos = %v", got)
	}
	if got := tok.Decode([]int32{256, 'a', 257}, true); got != "a" {
		t.Errorf("Decode(remove_special) = %q", got)
	}

	lv := DefaultVocab("gpt2", "llama-bpe")
	if !lv.AddBOS {
		t.Errorf("llama-bpe should add BOS by default, as llama.cpp does")
	}
}

func TestCleanSpaces(t *testing.T) {
	for in, want := range map[string]string{
		"Hello , world !":   "Hello, world!",
		"a ' b":             "a'b",
		"it 's":             "it's",
		"I 'm ok":           "I'm ok",
		"they 're":          "they're",
		"we 've":            "we've",
		"don 't":            "don 't", // kept, as in llama.cpp
		"you 'll":           "you 'll",
		"":                  "",
		" .":                ".",
		"why ?":             "why?",
		"x ' ' y":           "x'' y", // the second " ' " sees the NUL the first left
		"no change here":    "no change here",
		"ends with space ":  "ends with space ",
		"quote ' at end '":  "quote'at end '",
		"two  , spaces":     "two , spaces",
		" leading ' quote ": " leading'quote ",
	} {
		if got := string(cleanSpaces([]byte(in))); got != want {
			t.Errorf("cleanSpaces(%q) = %q, want %q", in, got, want)
		}
	}
}

func TestBPEDecodeCleansSpacesPerPreTokenizer(t *testing.T) {
	// gpt-2 and falcon clean tokenization spaces on decode, qwen2 and the
	// deepseek ones do not (llama_vocab::impl::load).
	for pre, want := range map[string]string{"gpt-2": "hi, it's", "qwen2": "hi , it 's",
		"falcon": "hi, it's", "deepseek-llm": "hi , it 's", "deepseek-coder": "hi , it 's"} {
		tok := mustNew(t, byteLevelVocab(pre, nil, nil, nil))
		if got := tok.Decode(tok.Encode("hi , it 's", false), false); got != want {
			t.Errorf("%s: Decode = %q, want %q", pre, got, want)
		}
	}
}

func TestNewErrors(t *testing.T) {
	base := byteLevelVocab("gpt-2", nil, nil, nil)
	for _, c := range []struct {
		name   string
		modify func(v *Vocab)
		want   string
	}{
		{"unknown pre", func(v *Vocab) { v.Pre = "my-new-pre" }, `unknown pre-tokenizer type "my-new-pre"`},
		{"unknown model", func(v *Vocab) { v.Model = "bert" }, `unsupported tokenizer model "bert"`},
		{"no model", func(v *Vocab) { v.Model = "" }, "tokenizer.ggml.model: missing"},
		{"no merges", func(v *Vocab) { v.Merges = nil }, "tokenizer.ggml.merges: missing"},
		{"duplicate", func(v *Vocab) { v.Tokens = append(v.Tokens, v.Tokens[3]); v.Types = nil }, `tokenizer.ggml.tokens[256]: duplicate token "ă" (also id 3)`},
		{"short scores", func(v *Vocab) { v.Scores = make([]float32, 3) }, "tokenizer.ggml.scores: 3 entries for 256 tokens"},
		{"short types", func(v *Vocab) { v.Types = v.Types[:10] }, "tokenizer.ggml.token_type: 10 entries for 256 tokens"},
		{"bos range", func(v *Vocab) { v.BOS = 999 }, "tokenizer.ggml.bos_token_id: id 999 outside"},
		{"add_bos without bos", func(v *Vocab) { v.AddBOS, v.BOS = true, None }, "add_bos_token is true, but tokenizer.ggml.bos_token_id is not set"},
		{"empty", func(v *Vocab) { v.Tokens = nil; v.Types = nil }, "empty vocabulary"},
	} {
		v := base
		v.Tokens = slices.Clone(base.Tokens)
		v.Types = slices.Clone(base.Types)
		c.modify(&v)
		_, err := New(v)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: err = %v, want it to contain %q", c.name, err, c.want)
		}
	}
}

// A Tokenizer is shared by the host's goroutines: concurrent use must give
// the serial results (run with -race to check for data races too).
func TestConcurrentEncode(t *testing.T) {
	spm := storiesTokenizer(t)
	bpe := mustNew(t, byteLevelVocab("qwen2", []string{"h e", "l l"}, nil, nil))
	texts := []string{"hello world 123", "Once upon a time", "naïve café 日本", "x\n\ny  z"}
	type result struct{ spm, bpe []int32 }
	want := make([]result, len(texts))
	for i, s := range texts {
		want[i] = result{spm.Encode(s, true), bpe.Encode(s, false)}
	}
	var wg sync.WaitGroup
	errs := make(chan string, 64)
	for g := range 4 {
		wg.Go(func() {
			for k := range 50 {
				i := (g + k) % len(texts)
				if got := spm.Encode(texts[i], true); !slices.Equal(got, want[i].spm) {
					errs <- "spm " + texts[i]
				}
				if got := bpe.Encode(texts[i], false); !slices.Equal(got, want[i].bpe) {
					errs <- "bpe " + texts[i]
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for e := range errs {
		t.Errorf("concurrent Encode differs: %s", e)
	}
}
