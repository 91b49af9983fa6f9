package tokenizer

import (
	"bufio"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"os"
	"slices"
	"sync"
	"testing"

	"github.com/evalrun/evalrun/engine/gguf"
)

const (
	storiesModel  = "../../models/stories260K.gguf"
	storiesGolden = "../../testdata/llamacpp/tokenizer/stories260K.tokenize.jsonl"
)

var stories = sync.OnceValues(func() (*Tokenizer, error) {
	f, err := gguf.Open(storiesModel)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return FromGGUF(f)
})

func storiesTokenizer(t testing.TB) *Tokenizer {
	t.Helper()
	tok, err := stories()
	if err != nil {
		t.Fatal(err)
	}
	return tok
}

// goldenCase is one line of the llama.cpp tokenizer goldens.
type goldenCase struct {
	Text                     string   `json:"text"`
	AddSpecial               bool     `json:"add_special"`
	ParseSpecial             bool     `json:"parse_special"`
	IDs                      []int32  `json:"ids"`
	DetokenizedHex           string   `json:"detokenized_hex"`
	DetokenizedRemoveSpecial *string  `json:"detokenized_remove_special"`
	PiecesHex                []string `json:"pieces_hex"`
}

func loadGolden(t *testing.T) []goldenCase {
	t.Helper()
	f, err := os.Open(storiesGolden)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var cases []goldenCase
	sc := bufio.NewScanner(f)
	sc.Buffer(nil, 1<<20)
	for line := 1; sc.Scan(); line++ {
		var c goldenCase
		if err := json.Unmarshal(sc.Bytes(), &c); err != nil {
			t.Fatalf("%s:%d: %v", storiesGolden, line, err)
		}
		cases = append(cases, c)
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return cases
}

func mustHex(t *testing.T, s string) []byte {
	t.Helper()
	b, err := hex.DecodeString(s)
	if err != nil {
		t.Fatalf("bad hex %q: %v", s, err)
	}
	return b
}

// TestGoldenStories260K checks every llama.cpp golden line: token ids,
// detokenization with and without remove_special, and every piece.
func TestGoldenStories260K(t *testing.T) {
	tok := storiesTokenizer(t)
	cases := loadGolden(t)
	if len(cases) != 84 {
		t.Fatalf("%d golden lines, want 84", len(cases))
	}
	matched := 0
	for i, c := range cases {
		ok := true
		if c.ParseSpecial {
			t.Fatalf("line %d: parse_special=true is not in the golden set", i+1)
		}
		if got := tok.Encode(c.Text, c.AddSpecial); !slices.Equal(got, c.IDs) {
			t.Errorf("line %d: Encode(%q, %v) = %v, want %v", i+1, c.Text, c.AddSpecial, got, c.IDs)
			ok = false
		}
		want := mustHex(t, c.DetokenizedHex)
		if got := tok.Decode(c.IDs, false); got != string(want) {
			t.Errorf("line %d: Decode(%v, false) = %q, want %q", i+1, c.IDs, got, want)
			ok = false
		}
		if c.DetokenizedRemoveSpecial == nil {
			t.Fatalf("line %d: detokenized_remove_special is null", i+1)
		}
		if got := tok.Decode(c.IDs, true); got != *c.DetokenizedRemoveSpecial {
			t.Errorf("line %d: Decode(%v, true) = %q, want %q", i+1, c.IDs, got, *c.DetokenizedRemoveSpecial)
			ok = false
		}
		if len(c.PiecesHex) != len(c.IDs) {
			t.Fatalf("line %d: %d pieces for %d ids", i+1, len(c.PiecesHex), len(c.IDs))
		}
		for j, id := range c.IDs {
			if got, want := tok.Piece(id), mustHex(t, c.PiecesHex[j]); string(got) != string(want) {
				t.Errorf("line %d: Piece(%d) = %q, want %q", i+1, id, got, want)
				ok = false
			}
		}
		if ok {
			matched++
		}
	}
	t.Logf("llama.cpp goldens: %d of %d lines match (ids, detokenized, detokenized_remove_special, pieces)", matched, len(cases))
}

// TestGoldenPerplexityText checks the 6 KB story text against the tokens
// llama-perplexity stored in its KL-divergence base file (the text's first
// n_chunk*n_ctx tokens, BOS included) and testdata/llamacpp/README.md's total of 3137.
func TestGoldenPerplexityText(t *testing.T) {
	tok := storiesTokenizer(t)
	text, err := os.ReadFile("../../testdata/llamacpp/perplexity/kld-text.txt")
	if err != nil {
		t.Fatal(err)
	}
	base, err := os.ReadFile("../../testdata/llamacpp/perplexity/stories260K-F32.default.c128.kld")
	if err != nil {
		t.Fatal(err)
	}
	if len(base) < 20 || string(base[:8]) != "_logits_" {
		t.Fatalf("kld base: bad header")
	}
	nCtx := int(binary.LittleEndian.Uint32(base[8:]))
	nChunk := int(int32(binary.LittleEndian.Uint32(base[16:])))
	n := nCtx * nChunk
	if n <= 0 || len(base) < 20+4*n {
		t.Fatalf("kld base: n_ctx %d, n_chunk %d, %d bytes", nCtx, nChunk, len(base))
	}
	want := make([]int32, n)
	for i := range want {
		want[i] = int32(binary.LittleEndian.Uint32(base[20+4*i:]))
	}
	got := tok.Encode(string(text), true)
	if len(got) != 3137 {
		t.Errorf("%d tokens, want 3137", len(got))
	}
	if len(got) < n {
		t.Fatalf("%d tokens, fewer than the %d in the base file", len(got), n)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Fatalf("token %d = %d, llama-perplexity has %d (of %d compared)", i, got[i], want[i], n)
		}
	}
	if d := tok.Decode(got, true); d != " "+string(text) {
		t.Errorf("Decode(Encode(text, true), true) differs from \" \" + text")
	}
}
