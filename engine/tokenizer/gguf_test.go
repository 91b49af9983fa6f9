package tokenizer

import (
	"bytes"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/evalrun/evalrun/engine/gguf"
)

// memGGUF writes the key/values to an in-memory GGUF file and parses it.
func memGGUF(t *testing.T, kvs map[string]any) *gguf.File {
	t.Helper()
	w := gguf.NewWriter()
	keys := make([]string, 0, len(kvs))
	for k := range kvs {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	for _, k := range keys {
		if err := w.AddKV(k, kvs[k]); err != nil {
			t.Fatal(err)
		}
	}
	var buf bytes.Buffer
	if _, err := w.WriteTo(&buf); err != nil {
		t.Fatal(err)
	}
	f, err := gguf.Parse(buf.Bytes(), "mem.gguf")
	if err != nil {
		t.Fatal(err)
	}
	return f
}

func gpt2KVs() map[string]any {
	v := byteLevelVocab("gpt-2", []string{"h i"}, []string{"<|endoftext|>"}, []int32{TypeControl})
	return map[string]any{
		keyModel:  "gpt2",
		keyPre:    "gpt-2",
		keyTokens: v.Tokens,
		keyTypes:  v.Types,
		keyMerges: v.Merges,
		keyBOS:    uint32(257),
		keyEOS:    uint32(257),
	}
}

func TestFromGGUFGPT2(t *testing.T) {
	tok, err := FromGGUF(memGGUF(t, gpt2KVs()))
	if err != nil {
		t.Fatal(err)
	}
	if tok.Model() != "gpt2" || tok.Pre() != "gpt-2" || tok.BOS() != 257 || tok.AddBOS() || tok.UNK() != None {
		t.Errorf("Model=%q Pre=%q BOS=%d AddBOS=%v UNK=%d", tok.Model(), tok.Pre(), tok.BOS(), tok.AddBOS(), tok.UNK())
	}
	if got := tok.Encode("hi hi", true); !slices.Equal(got, []int32{256, ' ', 256}) {
		t.Errorf("Encode = %v", got) // "hi", then "Ġ" + "hi" (no "Ġ hi" merge)
	}
	if !tok.IsEOG(257) {
		t.Errorf("<|endoftext|> should end generation")
	}

	// The defaults follow the pre-tokenizer; add_bos_token overrides them.
	kvs := gpt2KVs()
	kvs[keyPre] = "llama-bpe"
	if tok, err = FromGGUF(memGGUF(t, kvs)); err != nil || !tok.AddBOS() {
		t.Fatalf("llama-bpe: AddBOS=%v err=%v", tok != nil && tok.AddBOS(), err)
	}
	if got := tok.Encode("hi", true); !slices.Equal(got, []int32{257, 256}) {
		t.Errorf("llama-bpe Encode(hi, true) = %v", got)
	}
	kvs[keyAddBOS] = false
	if tok, err = FromGGUF(memGGUF(t, kvs)); err != nil || tok.AddBOS() {
		t.Fatalf("add_bos_token=false: AddBOS=%v err=%v", tok != nil && tok.AddBOS(), err)
	}
}

func TestFromGGUFSPMDefaults(t *testing.T) {
	kvs := map[string]any{
		keyModel:  "llama",
		keyTokens: []string{"<unk>", "<s>", "</s>", "▁a", "▁"},
		keyScores: []int32{0, 0, 0, -1, -2}, // llama.cpp accepts integer scores
		keyTypes:  []int32{TypeUnknown, TypeControl, TypeControl, TypeNormal, TypeNormal},
		keyPAD:    uint32(0xFFFFFFFF), // out of range: ignored, as llama.cpp does
		keyEOT:    int32(-1),
	}
	tok, err := FromGGUF(memGGUF(t, kvs))
	if err != nil {
		t.Fatal(err)
	}
	if tok.BOS() != 1 || tok.EOS() != 2 || tok.UNK() != 0 || tok.PAD() != None || tok.EOT() != None {
		t.Errorf("BOS=%d EOS=%d UNK=%d PAD=%d EOT=%d", tok.BOS(), tok.EOS(), tok.UNK(), tok.PAD(), tok.EOT())
	}
	if !tok.AddBOS() || !tok.AddSpacePrefix() || tok.AddEOS() {
		t.Errorf("AddBOS=%v AddSpacePrefix=%v AddEOS=%v", tok.AddBOS(), tok.AddSpacePrefix(), tok.AddEOS())
	}
	if got := tok.Encode("a", true); !slices.Equal(got, []int32{1, 3}) {
		t.Errorf("Encode(a, true) = %v", got)
	}
	kvs[keyAddSpacePfx] = false
	kvs[keyAddEOS] = true
	if tok, err = FromGGUF(memGGUF(t, kvs)); err != nil {
		t.Fatal(err)
	}
	if got := tok.Encode(" a", true); !slices.Equal(got, []int32{1, 3, 2}) {
		t.Errorf("no space prefix, add_eos: Encode(\" a\", true) = %v", got)
	}
}

func TestFromGGUFErrors(t *testing.T) {
	for _, c := range []struct {
		name   string
		modify func(kvs map[string]any)
		want   string
	}{
		{"no model", func(kvs map[string]any) { delete(kvs, keyModel) }, "mem.gguf: tokenizer.ggml.model: missing"},
		{"bert", func(kvs map[string]any) { kvs[keyModel] = "bert" }, `mem.gguf: tokenizer.ggml.model: unsupported tokenizer model "bert"`},
		{"model type", func(kvs map[string]any) { kvs[keyModel] = uint32(2) }, "mem.gguf: tokenizer.ggml.model: found u32, want a string"},
		{"unknown pre", func(kvs map[string]any) { kvs[keyPre] = "gpt2" }, `mem.gguf: tokenizer.ggml.pre: unknown pre-tokenizer type "gpt2"`},
		{"no tokens", func(kvs map[string]any) { delete(kvs, keyTokens) }, "mem.gguf: tokenizer.ggml.tokens: missing"},
		{"token type", func(kvs map[string]any) { kvs[keyTokens] = []int32{1, 2} }, "tokenizer.ggml.tokens: found an array of i32, want an array of strings"},
		{"no merges", func(kvs map[string]any) { delete(kvs, keyMerges) }, "tokenizer.ggml.merges: missing (required for model \"gpt2\")"},
		{"scores type", func(kvs map[string]any) { kvs[keyScores] = []string{"x"} }, "tokenizer.ggml.scores: found an array of string"},
		{"short types", func(kvs map[string]any) { kvs[keyTypes] = []int32{1} }, "tokenizer.ggml.token_type: 1 entries for 258 tokens"},
		{"bos type", func(kvs map[string]any) { kvs[keyBOS] = "one" }, "tokenizer.ggml.bos_token_id: found string, want an integer token id"},
		{"add_bos type", func(kvs map[string]any) { kvs[keyAddBOS] = uint8(1) }, "tokenizer.ggml.add_bos_token: found u8, want a bool"},
		{"add_bos no bos", func(kvs map[string]any) {
			kvs[keyAddBOS] = true
			kvs[keyTokens] = kvs[keyTokens].([]string)[:11]
			kvs[keyTypes] = kvs[keyTypes].([]int32)[:11]
			delete(kvs, keyBOS)
		}, "add_bos_token is true, but tokenizer.ggml.bos_token_id is not set"},
	} {
		kvs := gpt2KVs()
		c.modify(kvs)
		_, err := FromGGUF(memGGUF(t, kvs))
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: err = %v, want it to contain %q", c.name, err, c.want)
		}
	}
}

// All bundled models share the stories260K vocabulary.
func TestBundledModelsTokenizeAlike(t *testing.T) {
	paths, err := filepath.Glob("../../models/stories260K*.gguf") // the bundled ones; make bench-vs-llamacpp writes others beside them
	if err != nil || len(paths) == 0 {
		t.Fatalf("no bundled models: %v", err)
	}
	ref := storiesTokenizer(t)
	text := "Once upon a time, a little girl named Lily found a shiny 🐶 in the park."
	want := ref.Encode(text, true)
	for _, p := range paths {
		f, err := gguf.Open(p)
		if err != nil {
			t.Fatal(err)
		}
		tok, err := FromGGUF(f)
		f.Close()
		if err != nil {
			t.Fatal(err)
		}
		if got := tok.Encode(text, true); !slices.Equal(got, want) {
			t.Errorf("%s: Encode = %v, want %v", p, got, want)
		}
	}
}
