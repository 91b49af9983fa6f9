package tokenizer

import (
	"os"
	"slices"
	"strings"
	"testing"
	"unicode/utf8"
)

// spmVocab is a small SentencePiece vocabulary: <unk>, <s>, </s>, then the
// given tokens (all NORMAL unless typed), with the given scores.
func spmVocab(tokens []string, scores []float32, types map[string]int32) Vocab {
	v := DefaultVocab("llama", "")
	v.Tokens = append([]string{"<unk>", "<s>", "</s>"}, tokens...)
	v.Scores = append([]float32{0, 0, 0}, scores...)
	v.Types = []int32{TypeUnknown, TypeControl, TypeControl}
	for _, s := range tokens {
		ty, ok := types[s]
		if !ok {
			ty = TypeNormal
		}
		v.Types = append(v.Types, ty)
	}
	return v
}

func TestSPMTieBreaksLeftmost(t *testing.T) {
	// "ab" and "bc" score the same: the leftmost pair merges first.
	v := spmVocab([]string{"a", "b", "c", "ab", "bc"}, []float32{-10, -10, -10, -1, -1}, nil)
	v.AddSpacePrefix = false
	tok := mustNew(t, v)
	if got, want := tok.Encode("abc", false), ids(t, tok, "ab", "c"); !slices.Equal(got, want) {
		t.Errorf("equal scores: Encode(abc) = %v, want %v", got, want)
	}
	// A higher score wins regardless of position.
	v.Scores[3+4] = -0.5
	tok = mustNew(t, v)
	if got, want := tok.Encode("abc", false), ids(t, tok, "a", "bc"); !slices.Equal(got, want) {
		t.Errorf("bc scores higher: Encode(abc) = %v, want %v", got, want)
	}
}

func TestSPMByteFallback(t *testing.T) {
	v := spmVocab([]string{"▁", "a", "▁a", "<0xC3>", "<0xA9>", "<0x20>"}, []float32{-1, -1, -0.5, 0, 0, 0},
		map[string]int32{"<0xC3>": TypeByte, "<0xA9>": TypeByte, "<0x20>": TypeByte})
	tok := mustNew(t, v)
	// é = C3 A9 is no token: one byte token per byte.
	got := tok.Encode("aé", false)
	if want := ids(t, tok, "▁a", "<0xC3>", "<0xA9>"); !slices.Equal(got, want) {
		t.Errorf("Encode(aé) = %v, want %v", got, want)
	}
	if s := tok.Decode(got, false); s != "aé" {
		t.Errorf("Decode = %q, want %q", s, "aé")
	}
	if p := tok.Piece(ids(t, tok, "<0xC3>")[0]); string(p) != "\xc3" {
		t.Errorf("Piece(<0xC3>) = %q", p)
	}
	// A byte with no byte token falls back to <unk> (llama.cpp would throw).
	if got, want := tok.Encode("ж", false), ids(t, tok, "▁", "<unk>", "<unk>"); !slices.Equal(got, want) {
		t.Errorf("Encode(ж) = %v, want %v", got, want)
	}
}

func TestSPMSpecialsAndDecode(t *testing.T) {
	v := spmVocab([]string{"▁", "a", "▁a", "<tool▁x>"}, []float32{-1, -1, -0.5, 0}, map[string]int32{"<tool▁x>": TypeUserDefined})
	v.AddEOS = true
	tok := mustNew(t, v)
	tool := ids(t, tok, "<tool▁x>")[0]
	// User-defined tokens are split out of the text; the text after one gets
	// the space prefix again, as after any special token in llama.cpp.
	got := tok.Encode("a<tool▁x>a", true)
	want := slices.Concat([]int32{1}, ids(t, tok, "▁a"), []int32{tool}, ids(t, tok, "▁a"), []int32{2})
	if !slices.Equal(got, want) {
		t.Errorf("Encode = %v, want %v", got, want)
	}
	// User-defined pieces are raw (no U+2581 unescaping); BOS/EOS are empty.
	if s := tok.Decode(got, false); s != " a<tool▁x> a" {
		t.Errorf("Decode(false) = %q", s)
	}
	if s := tok.Decode(got, true); s != " a<tool▁x> a" {
		t.Errorf("Decode(true) = %q", s)
	}
	// Without BOS the leading space of the first piece goes.
	if s := tok.Decode(got[1:], false); s != "a<tool▁x> a" {
		t.Errorf("Decode without BOS = %q", s)
	}
	// Only the first token is stripped, even if it decodes to nothing.
	if s := tok.Decode([]int32{2, ids(t, tok, "▁a")[0]}, false); s != " a" {
		t.Errorf("Decode(</s> ▁a) = %q", s)
	}
	if s := tok.Decode([]int32{-1, 99, 0, 1}, false); s != "" {
		t.Errorf("Decode of invalid/control ids = %q", s)
	}
	if tok.Piece(-1) != nil || tok.Piece(int32(tok.VocabSize())) != nil {
		t.Errorf("Piece out of range should be nil")
	}
	if got := tok.Encode("", true); !slices.Equal(got, []int32{1, 2}) {
		t.Errorf("Encode(\"\", true) = %v", got)
	}
}

func TestStoriesParseSpecial(t *testing.T) {
	tok := storiesTokenizer(t)
	text := "<s> literal special text </s>"
	got := tok.Tokenize(text, false, true)
	want := slices.Concat([]int32{tok.BOS()}, tok.Encode(" literal special text ", false), []int32{tok.EOS()})
	if !slices.Equal(got, want) {
		t.Errorf("Tokenize(%q, parseSpecial) = %v, want %v", text, got, want)
	}
	if slices.Contains(tok.Encode(text, false), tok.BOS()) {
		t.Errorf("<s> matched as a token with parse_special=false")
	}
}

func TestStoriesMetadata(t *testing.T) {
	tok := storiesTokenizer(t)
	if tok.Model() != "llama" || tok.Pre() != "" || tok.VocabSize() != 512 {
		t.Errorf("Model=%q Pre=%q VocabSize=%d", tok.Model(), tok.Pre(), tok.VocabSize())
	}
	if tok.BOS() != 1 || tok.EOS() != 2 || tok.UNK() != 0 || tok.PAD() != None || tok.EOT() != None {
		t.Errorf("BOS=%d EOS=%d UNK=%d PAD=%d EOT=%d", tok.BOS(), tok.EOS(), tok.UNK(), tok.PAD(), tok.EOT())
	}
	if !tok.AddBOS() || tok.AddEOS() || !tok.AddSpacePrefix() {
		t.Errorf("AddBOS=%v AddEOS=%v AddSpacePrefix=%v", tok.AddBOS(), tok.AddEOS(), tok.AddSpacePrefix())
	}
	for id := range int32(512) {
		if want := id == 2; tok.IsEOG(id) != want {
			t.Errorf("IsEOG(%d) = %v", id, !want)
		}
	}
	if tok.Token(261) != "▁a" || tok.Score(261) != -2 || !tok.IsControl(1) || tok.IsControl(261) {
		t.Errorf("Token(261)=%q Score=%v IsControl(1)=%v", tok.Token(261), tok.Score(261), tok.IsControl(1))
	}
}

// roundTripSPM is what Decode(Encode(s, false), false) must give for an SPM
// vocabulary with add_space_prefix: the text is space-prefixed and escaped,
// cut into characters the way the tokenizer does (by lead byte), every
// U+2581 character comes back as a space, the prefix space is dropped.
func roundTripSPM(s string) string {
	if s == "" {
		return ""
	}
	e := strings.ReplaceAll(" "+s, " ", "\u2581")
	var b strings.Builder
	for i := 0; i < len(e); {
		n := min(utf8Len(e[i]), len(e)-i)
		if e[i:i+n] == "\u2581" {
			b.WriteByte(' ')
		} else {
			b.WriteString(e[i : i+n])
		}
		i += n
	}
	return b.String()[1:]
}

func FuzzEncodeDecode(f *testing.F) {
	tok, err := stories()
	if err != nil {
		f.Fatal(err)
	}
	if golden, err := os.ReadFile("../../testdata/llamacpp/tokenizer/strings.jsonl"); err == nil {
		for _, line := range strings.Split(string(golden), "\n") {
			f.Add(line) // JSON lines: quotes, escapes, braces
		}
	}
	for _, s := range []string{"", " ", "  x  ", "Hello world", "\u2581", "a\u2581 b", "\xff\xfe", "\xe2 ", "\xe2\x96",
		"<s></s><unk><0x41>", "\x00", "caf\u00e9 \U0001F600", "\r\n\t"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		ids := tok.Encode(s, false)
		for _, id := range ids {
			if id < 0 || int(id) >= tok.VocabSize() || tok.IsControl(id) {
				t.Fatalf("Encode(%q) produced id %d", s, id)
			}
		}
		got := tok.Decode(ids, false)
		if want := roundTripSPM(s); got != want {
			t.Fatalf("Decode(Encode(%q)) = %q, want %q", s, got, want)
		}
		if utf8.ValidString(s) {
			if want := strings.ReplaceAll(s, "\u2581", " "); got != want {
				t.Fatalf("valid UTF-8: Decode(Encode(%q)) = %q, want %q", s, got, want)
			}
		}
		// With BOS: the same ids after it, and remove_special keeps the prefix space.
		withBOS := tok.Encode(s, true)
		if len(withBOS) != len(ids)+1 || withBOS[0] != tok.BOS() || !slices.Equal(withBOS[1:], ids) {
			t.Fatalf("Encode(%q, true) = %v, want BOS + %v", s, withBOS, ids)
		}
		want := got
		if s != "" {
			want = " " + got
		}
		if d := tok.Decode(withBOS, true); d != want {
			t.Fatalf("Decode(Encode(%q, true), true) = %q, want %q", s, d, want)
		}
	})
}

func BenchmarkEncode(b *testing.B) {
	tok := storiesTokenizer(b)
	text, err := os.ReadFile("../../testdata/llamacpp/perplexity/kld-text.txt")
	if err != nil {
		b.Fatal(err)
	}
	s := string(text)
	b.SetBytes(int64(len(s)))
	var n int
	for b.Loop() {
		n = len(tok.Encode(s, true))
	}
	b.ReportMetric(float64(n), "tokens")
}

func BenchmarkDecode(b *testing.B) {
	tok := storiesTokenizer(b)
	text, err := os.ReadFile("../../testdata/llamacpp/perplexity/kld-text.txt")
	if err != nil {
		b.Fatal(err)
	}
	ids := tok.Encode(string(text), true)
	b.SetBytes(int64(len(text)))
	for b.Loop() {
		tok.Decode(ids, true)
	}
}

// BenchmarkPreTokenize measures the BPE pre-tokenizers on the same text:
// llama3 uses the hand-written splitter, qwen2 regexp2.
func BenchmarkPreTokenize(b *testing.B) {
	text, err := os.ReadFile("../../testdata/llamacpp/perplexity/kld-text.txt")
	if err != nil {
		b.Fatal(err)
	}
	for _, pre := range []string{"gpt-2", "llama-bpe", "qwen2", "default"} {
		b.Run(pre, func(b *testing.B) {
			p := preTokenizers[pre]
			b.SetBytes(int64(len(text)))
			for b.Loop() {
				p.words(string(text))
			}
		})
	}
}
