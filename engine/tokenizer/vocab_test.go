package tokenizer

import (
	"bytes"
	"compress/gzip"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"unicode/utf8"

	"github.com/evalrun/evalrun/engine/gguf"
)

// vocabDir holds llama.cpp's tokenizer test suites (see its README): each
// ggml-vocab-NAME.gguf.gz with NAME.gguf.inp (texts) and .gguf.out (ids).
const vocabDir = "testdata/vocab"

// vocabSuites are every suite in vocabDir; a missing file fails the test.
var vocabSuites = []string{
	"gpt-2", "phi-3", "starcoder", "mpt", "refact",
	"deepseek-llm", "deepseek-coder", "falcon", "llama-bpe", "qwen2",
}

// vocabCase is one test of a suite: the text and llama.cpp's ids for it.
type vocabCase struct {
	text string
	ids  []int32
}

// readVocabCases parses a suite the way llama.cpp's test-tokenizer-0 does:
// the .inp texts are separated by "\n__ggml_vocab_test__\n" (text after the
// last separator is one more test), the .out has one line of
// space-separated ids per test.
func readVocabCases(inp, out []byte, name string) ([]vocabCase, error) {
	const sep = "\n__ggml_vocab_test__\n"
	var texts []string
	for raw := string(inp); raw != ""; {
		i := strings.Index(raw, sep)
		if i < 0 {
			texts = append(texts, raw)
			break
		}
		texts = append(texts, raw[:i])
		raw = raw[i+len(sep):]
	}
	lines := strings.Split(string(out), "\n")
	if n := len(lines); n > 0 && lines[n-1] == "" {
		lines = lines[:n-1] // getline: a final newline ends the last line
	}
	if len(texts) != len(lines) {
		return nil, fmt.Errorf("%s: %d texts in .inp, %d lines in .out", name, len(texts), len(lines))
	}
	cases := make([]vocabCase, len(texts))
	for i, line := range lines {
		cases[i].text = texts[i]
		for _, f := range strings.Fields(line) {
			id, err := strconv.ParseInt(f, 10, 32)
			if err != nil {
				return nil, fmt.Errorf("%s.out:%d: %v", name, i+1, err)
			}
			cases[i].ids = append(cases[i].ids, int32(id))
		}
	}
	return cases, nil
}

// vocabs caches the tokenizers loadVocab built (they are immutable).
var vocabs sync.Map

// loadVocab decompresses a suite's vocabulary in memory.
func loadVocab(t testing.TB, name string) *Tokenizer {
	t.Helper()
	if tok, ok := vocabs.Load(name); ok {
		return tok.(*Tokenizer)
	}
	base := filepath.Join(vocabDir, "ggml-vocab-"+name+".gguf")
	gz, err := os.ReadFile(base + ".gz")
	if err != nil {
		t.Fatal(err)
	}
	zr, err := gzip.NewReader(bytes.NewReader(gz))
	if err != nil {
		t.Fatalf("%s.gz: %v", base, err)
	}
	data, err := io.ReadAll(zr)
	if err != nil {
		t.Fatalf("%s.gz: %v", base, err)
	}
	f, err := gguf.Parse(data, base)
	if err != nil {
		t.Fatal(err)
	}
	tok, err := FromGGUF(f)
	if err != nil {
		t.Fatal(err)
	}
	vocabs.Store(name, tok)
	return tok
}

// loadVocabCases reads base.inp and base.out.
func loadVocabCases(t testing.TB, base string) []vocabCase {
	t.Helper()
	inp, err := os.ReadFile(base + ".inp")
	if err != nil {
		t.Fatal(err)
	}
	out, err := os.ReadFile(base + ".out")
	if err != nil {
		t.Fatal(err)
	}
	cases, err := readVocabCases(inp, out, base)
	if err != nil {
		t.Fatal(err)
	}
	return cases
}

// TestVocabSuites runs llama.cpp's test-tokenizer-0 suites: every text,
// tokenized without BOS/EOS and without parsing special tokens, must give
// exactly the ids llama.cpp gives.
func TestVocabSuites(t *testing.T) {
	for _, name := range vocabSuites {
		t.Run(name, func(t *testing.T) {
			tok := loadVocab(t, name)
			cases := loadVocabCases(t, filepath.Join(vocabDir, "ggml-vocab-"+name+".gguf"))
			if len(cases) < 40 {
				t.Fatalf("only %d tests in the suite", len(cases))
			}
			checkVocabCases(t, name, tok, cases)
		})
	}
}

// TestVocabRandom runs random texts (gen_random.py: every script class the
// pre-tokenizers tell apart, random code points, invalid UTF-8) whose ids
// llama.cpp b10587's llama-tokenize wrote, in the same format.
func TestVocabRandom(t *testing.T) {
	for _, name := range vocabSuites {
		t.Run(name, func(t *testing.T) {
			tok := loadVocab(t, name)
			cases := loadVocabCases(t, filepath.Join(vocabDir, "ggml-vocab-"+name+".random"))
			if len(cases) < 150 {
				t.Fatalf("only %d tests in the suite", len(cases))
			}
			checkVocabCases(t, name, tok, cases)
		})
	}
}

// checkVocabCases reports the first failing text in full and the number
// of tests passed.
func checkVocabCases(t *testing.T, name string, tok *Tokenizer, cases []vocabCase) {
	t.Helper()
	passed := 0
	for i, c := range cases {
		got := tok.Encode(c.text, false)
		if slices.Equal(got, c.ids) {
			passed++
			continue
		}
		if passed == i { // the first failure
			d := firstDiff(got, c.ids)
			t.Errorf("test %d: Encode(%q)\n got  %v\n want %v\n first difference at token %d: got %s, want %s",
				i+1, c.text, got, c.ids, d, tokenAt(tok, got, d), tokenAt(tok, c.ids, d))
		}
	}
	t.Logf("%s: %d/%d tests passed", name, passed, len(cases))
	if passed != len(cases) {
		t.Errorf("%s: %d of %d tests failed", name, len(cases)-passed, len(cases))
	}
}

func firstDiff(a, b []int32) int {
	n := min(len(a), len(b))
	for i := range n {
		if a[i] != b[i] {
			return i
		}
	}
	return n
}

func tokenAt(tok *Tokenizer, ids []int32, i int) string {
	if i >= len(ids) {
		return "(end)"
	}
	return fmt.Sprintf("%d %q", ids[i], tok.Token(ids[i]))
}

func TestReadVocabCases(t *testing.T) {
	inp := "a\n__ggml_vocab_test__\n\n__ggml_vocab_test__\n b\n\n__ggml_vocab_test__\nlast"
	out := " 1 2\n\n 3 4\n 5\n"
	cases, err := readVocabCases([]byte(inp), []byte(out), "x")
	if err != nil {
		t.Fatal(err)
	}
	want := []vocabCase{{"a", []int32{1, 2}}, {"", nil}, {" b\n", []int32{3, 4}}, {"last", []int32{5}}}
	if len(cases) != len(want) {
		t.Fatalf("%d cases, want %d", len(cases), len(want))
	}
	for i := range want {
		if cases[i].text != want[i].text || !slices.Equal(cases[i].ids, want[i].ids) {
			t.Errorf("case %d = %q %v, want %q %v", i, cases[i].text, cases[i].ids, want[i].text, want[i].ids)
		}
	}
	if _, err := readVocabCases([]byte(inp), []byte(" 1\n"), "x"); err == nil {
		t.Error("4 texts with 1 line of ids: no error")
	}
	if _, err := readVocabCases([]byte("a"), []byte(" 1 x\n"), "x"); err == nil {
		t.Error("non-numeric id: no error")
	}
}

// FuzzEncodeVocabs encodes arbitrary text with the pre-tokenizers that are
// not llama.cpp custom splitters plus qwen2: every id must be a vocabulary
// id, and those that keep tokenization spaces must decode valid UTF-8 back
// to the text: go test -run '^$' -fuzz FuzzEncodeVocabs
func FuzzEncodeVocabs(f *testing.F) {
	names := []string{"deepseek-llm", "deepseek-coder", "falcon", "qwen2"}
	toks := make([]*Tokenizer, len(names))
	for i, name := range names {
		toks[i] = loadVocab(f, name)
		for _, c := range loadVocabCases(f, filepath.Join(vocabDir, "ggml-vocab-"+name+".random")) {
			f.Add(c.text)
		}
	}
	f.Fuzz(func(t *testing.T, s string) {
		for i, tok := range toks {
			ids := tok.Encode(s, false)
			for _, id := range ids {
				if id < 0 || int(id) >= tok.VocabSize() {
					t.Fatalf("%s: Encode(%q) produced id %d", names[i], s, id)
				}
			}
			if !tok.cleanSpaces && utf8.ValidString(s) {
				if got := tok.Decode(ids, false); got != s {
					t.Fatalf("%s: Decode(Encode(%q)) = %q", names[i], s, got)
				}
			}
		}
	})
}
