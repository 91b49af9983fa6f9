package tokenizer

import (
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
	"unicode"
)

// split pre-tokenizes text with a named pre-tokenizer and returns the
// words as plain text (byte-level encoding undone).
func split(t *testing.T, pre, text string) []string {
	t.Helper()
	p, ok := preTokenizers[pre]
	if !ok {
		t.Fatalf("no pre-tokenizer %q", pre)
	}
	var out []string
	for _, w := range p.words(text) {
		out = append(out, string(decodeByteLevel(w)))
	}
	return out
}

// Expected splits derived by hand from the regexes in llama-vocab.cpp.
func TestPreTokenizerSplits(t *testing.T) {
	for _, c := range []struct {
		pre, text string
		want      []string
	}{
		// contractions: gpt-2 is case-sensitive, llama3/qwen2 are not
		{"gpt-2", "I'm don't they're we've he'll she'd it's", []string{"I", "'m", " don", "'t", " they", "'re", " we", "'ve", " he", "'ll", " she", "'d", " it", "'s"}},
		{"gpt-2", "DON'T", []string{"DON", "'", "T"}},
		{"llama-bpe", "DON'T", []string{"DON", "'T"}},
		{"qwen2", "WE'RE", []string{"WE", "'RE"}},
		{"llama-bpe", "it's", []string{"it", "'s"}},
		// digits: any run (gpt-2), groups of up to 3 (llama3), single digits (qwen2, smollm)
		{"gpt-2", "12345", []string{"12345"}},
		{"gpt-2", "a 12345", []string{"a", " 12345"}},
		{"llama-bpe", "12345", []string{"123", "45"}},
		{"llama-bpe", "1234567", []string{"123", "456", "7"}},
		{"llama-bpe", "a 12345", []string{"a", " ", "123", "45"}},
		{"qwen2", "12345", []string{"1", "2", "3", "4", "5"}},
		{"qwen2", "abc123def", []string{"abc", "1", "2", "3", "def"}},
		{"llama-bpe", "abc123def", []string{"abc", "123", "def"}},
		{"smollm", "a 12 b", []string{"a", " ", "1", "2", " b"}},
		// whitespace runs: \s+(?!\S) leaves the last space to the next word
		{"gpt-2", "a   b", []string{"a", "  ", " b"}},
		{"llama-bpe", "a   b", []string{"a", "  ", " b"}},
		{"qwen2", "a   b", []string{"a", "  ", " b"}},
		{"gpt-2", "a  ", []string{"a", "  "}},
		{"llama-bpe", "a  ", []string{"a", "  "}},
		{"gpt-2", "a\tb", []string{"a", "\t", "b"}},
		{"llama-bpe", "a\tb", []string{"a", "\tb"}}, // [^\r\n\p{L}\p{N}]?\p{L}+
		// newlines: \s*[\r\n]+ keeps whitespace runs up to the last newline together (llama3)
		{"llama-bpe", "a\n\nb", []string{"a", "\n\n", "b"}},
		{"gpt-2", "a\n\nb", []string{"a", "\n", "\n", "b"}},
		{"llama-bpe", "a \n b", []string{"a", " \n", " b"}},
		{"qwen2", "a \n b", []string{"a", " \n", " b"}},
		{"llama-bpe", "\r\nx\r\n", []string{"\r\n", "x", "\r\n"}},
		// punctuation
		{"gpt-2", "Hello, world!!", []string{"Hello", ",", " world", "!!"}},
		{"llama-bpe", "Hello, world!!", []string{"Hello", ",", " world", "!!"}},
		{"gpt-2", "(hello)", []string{"(", "hello", ")"}},
		{"llama-bpe", "(hello)", []string{"(hello", ")"}},
		{"llama-bpe", "x...\n\ny", []string{"x", "...\n\n", "y"}},
		{"gpt-2", "x...\n\ny", []string{"x", "...", "\n", "\n", "y"}},
		// Unicode letters, CJK, emoji, no-break space
		{"gpt-2", "héllo wörld", []string{"héllo", " wörld"}},
		{"llama-bpe", "héllo wörld", []string{"héllo", " wörld"}},
		{"qwen2", "日本語のテキスト 中文", []string{"日本語のテキスト", " 中文"}},
		{"gpt-2", "hi 😀😀!", []string{"hi", " 😀😀!"}},
		{"llama-bpe", "hi 😀😀!", []string{"hi", " 😀😀!"}},
		{"llama-bpe", "a\u00a0b", []string{"a", "\u00a0b"}},
		{"gpt-2", "a\u00a0b", []string{"a", "\u00a0", "b"}},
		{"qwen2", "x\u3000\u3000y", []string{"x", "\u3000", "\u3000y"}},
		// default: punctuation runs, gpt-2 regex, digit runs, then triples of ASCII digits
		{"default", "a+b=c, 1234!", []string{"a", "+", "b", "=", "c", ",", " ", "123", "4", "!"}},
		// falcon: the default's punctuation runs with the backtick, gpt-2, ASCII digit triples
		{"falcon", "!`", []string{"!`"}},
		{"default", "!`", []string{"!", "`"}},
		{"falcon", "12345 678", []string{"123", "45", " ", "678"}},
		{"falcon", "a+b=c, 1234!", []string{"a", "+", "b", "=", "c", ",", " ", "123", "4", "!"}},
		// deepseek-llm: newlines alone, \s?letters (a literal list of scripts, no CJK), \s?punctuation
		// (ASCII letters included), trailing whitespace, CJK runs, digit runs
		{"deepseek-llm", "Hello world\n", []string{"Hello", " world", "\n"}},
		{"deepseek-llm", "a1234 b", []string{"a", "1234", " b"}},
		{"deepseek-llm", "ab!? ", []string{"ab", "!?", " "}},
		{"deepseek-llm", "日本  ", []string{"日本", "  "}},
		{"deepseek-llm", "a\u3000b\r\n", []string{"a", "\u3000b", "\r", "\n"}},
		// U+3000 is in the punctuation class, but std::wregex sees it as \v
		{"deepseek-llm", "!\u3000?", []string{"!", "\u3000?"}},
		// the CJK rule's U+0800-U+4E00 covers U+3002 and kana
		{"deepseek-llm", "x。\u3000。", []string{"x", "。", "\u3000", "。"}},
		{"deepseek-llm", "Ωµ ΣΑ 가나다 ٣٤", []string{"Ωµ", " ΣΑ", " ", "가나다", " ", "٣٤"}},
		// deepseek-coder: newlines alone, \s?\p{L}+, \s?\p{P}+, CJK runs, single digits
		{"deepseek-coder", "a1 b,c 23", []string{"a", "1", " b", ",", "c", " ", "2", "3"}},
		{"deepseek-coder", "$x \n\ny", []string{"$", "x", " ", "\n", "\n", "y"}},
		{"deepseek-coder", "日本語 テスト", []string{"日本語", " ", "テスト"}},
		// a CJK Extension I ideograph (Unicode 15.1) is a letter to llama.cpp
		{"deepseek-coder", "a\U0002EBF0 \U0002EBF1", []string{"a\U0002EBF0", " \U0002EBF1"}},
		{"", "", nil},
	} {
		pre := c.pre
		if pre == "" {
			pre = "default"
		}
		if got := split(t, pre, c.text); !slices.Equal(got, c.want) {
			t.Errorf("%s %q: split %q, want %q", c.pre, c.text, got, c.want)
		}
	}
}

// handSplitters are all hand-written splitters with the regex each stands for.
func handSplitters() []struct {
	expr   string
	custom splitFunc
} {
	list := []struct {
		expr   string
		custom splitFunc
	}{{gpt2Regex, splitGPT2}, {llama3Regex, splitLlama3}, {llama3RegexCI, splitLlama3}, {qwen2Regex, splitQwen2}}
	for expr, split := range classSplitters {
		list = append(list, struct {
			expr   string
			custom splitFunc
		}{expr, split})
	}
	slices.SortFunc(list[4:], func(a, b struct {
		expr   string
		custom splitFunc
	}) int {
		return strings.Compare(a.expr, b.expr)
	})
	return list
}

// splitterAlphabet mixes what the regexes tell apart: ASCII classes, the
// contractions, digits of several scripts, letters inside and outside the
// deepseek ranges, CJK and Hangul, non-ASCII whitespace and punctuation,
// marks, and code points Unicode 15.1 added (llama.cpp knows them, Go 15.0
// does not).
var splitterAlphabet = []string{
	"a", "Z", "é", "日", "ß", "s", "t", "re", "ve", "ll", "d", "m", "S", "T", "RE", "LL",
	"0", "7", "٣", "Ⅻ", "½", "１",
	" ", " ", " ", "\t", "\n", "\r", "\u00a0", "\u3000", "\u2028", "\v", "\u0085", "\x1c",
	"'", "'", ",", "!", "(", "—", "😀", "$", "+", "`", "~", "^", "|", "<", "_", "\x00", "\x1f", "\u0301", "\u200b",
	"µ", "ƻ", "Ω", "Ω", "K", "ｚ", "Ａ", "𐐀", "𞤀", "ǅ", "ʔ", "ー", "ㄱ", "가", "퟿", "ࠀ", "龥", "龦", "\U0002EBF0", "\u2FFC", "\u31EF",
	"！", "／", "：", "～", "‘", "‟", "。", "、", "«", "¿", "\ufffd", "\xff",
}

func randomSplitterText(rng *rand.Rand) string {
	var sb strings.Builder
	for range rng.IntN(14) {
		sb.WriteString(splitterAlphabet[rng.IntN(len(splitterAlphabet))])
	}
	return sb.String()
}

// The hand-written splitters must agree with the regex they stand for, run
// the way llama.cpp runs general regexes (regexp2 on collapsed text), also
// when they refine earlier pieces.
func TestCustomSplittersMatchRegex(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	n := 3000
	if testing.Short() {
		n = 300
	}
	for _, c := range handSplitters() {
		re := regexSplitter(c.expr)
		for range n {
			s := randomSplitterText(rng)
			cpts := cptsFromUTF8(s)
			if len(cpts) == 0 {
				continue // both give nothing; llama.cpp then keeps no pieces either
			}
			offsets := []int{len(cpts)}
			if got, want := c.custom(cpts, offsets), re(cpts, offsets); !slices.Equal(got, want) {
				t.Fatalf("%q on %q: custom %v, regex %v", c.expr, s, got, want)
			}
			// on pieces cut at random
			offsets = randomPieces(rng, len(cpts))
			if got, want := c.custom(cpts, offsets), re(cpts, offsets); !slices.Equal(got, want) {
				t.Fatalf("%q on %q in pieces %v: custom %v, regex %v", c.expr, s, offsets, got, want)
			}
		}
	}
}

func randomPieces(rng *rand.Rand, n int) []int {
	var offsets []int
	for n > 0 {
		k := 1 + rng.IntN(n)
		offsets = append(offsets, k)
		n -= k
	}
	return offsets
}

// The category table is llama.cpp's (Unicode 15.1). Where Go's unicode
// package assigns both a category, they must agree; the code points
// Unicode 15.1 added must be in it.
func TestCategoryTable(t *testing.T) {
	goCategory := func(c rune) ucat {
		switch {
		case unicode.IsLetter(c):
			return catLetter
		case unicode.IsNumber(c):
			return catNumber
		case unicode.IsPunct(c):
			return catPunct
		case unicode.IsMark(c):
			return catMark
		case unicode.IsSymbol(c):
			return catSymbol
		}
		return catOther
	}
	differ := 0
	for c := rune(0); c <= unicode.MaxRune; c++ {
		ours, gos := categoryOf(c), goCategory(c)
		if ours != gos {
			differ++
			if ours != catOther && gos != catOther {
				t.Fatalf("%U: category %d, Go's unicode %d", c, ours, gos)
			}
		}
		if isWhitespace(c) != unicode.Is(unicode.White_Space, c) {
			t.Errorf("%U: isWhitespace %v", c, isWhitespace(c))
		}
	}
	t.Logf("%d code points assigned only in one of llama.cpp's tables and Go's unicode %s", differ, unicode.Version)
	for c, want := range map[rune]ucat{
		'a': catLetter, '7': catNumber, '!': catPunct, '$': catSymbol, '`': catSymbol, ' ': catOther, 0x301: catMark,
		0x2EBF0: catLetter, 0x2EE5D: catLetter, 0x2EE5E: catOther, 0x2FFC: catSymbol, 0x31EF: catSymbol,
		-1: catOther, 0x110000: catOther,
	} {
		if got := categoryOf(c); got != want {
			t.Errorf("categoryOf(%U) = %d, want %d", c, got, want)
		}
	}
}

func TestCollapseRegex(t *testing.T) {
	for in, want := range map[string]string{
		`\p{N}`:                    "[\u00d10-9]",
		`[^\r\n\p{L}\p{N}]?\p{L}+`: "[^\\r\\n\u00d2A-Za-z\u00d10-9]?[\u00d2A-Za-z]+",
		`[\p{P}\$\+<=>\^~\|]+`:     "[\u00d3!-#%-*,-/:-;?-@\\[-\\]_\\{\\}\\$\\+<=>\\^~\\|]+",
		`[0-9][0-9][0-9]`:          `[0-9][0-9][0-9]`,
		`\s+(?!\S)`:                `\s+(?!\S)`,
		`\p{Lu}\p{M}`:              "[\u00d2A-Za-z][\u00d4]",
		`x\p{Zs}`:                  `x\p{Zs}`, // not a category llama.cpp collapses
		`\p{S}+`:                   "[\u00d5\\$\\+<->^`\\|\\~]+",
	} {
		if got := collapseRegex(in); got != want {
			t.Errorf("collapseRegex(%q) = %q, want %q", in, got, want)
		}
	}
}

func TestCptsFromUTF8(t *testing.T) {
	for in, want := range map[string][]rune{
		"aé日😀":             {'a', 'é', '日', '😀'},
		"\xff":             {0xFFFD},
		"\xc3":             {0xFFFD},                         // truncated
		"\xc3A":            {0xFFFD, 'A'},                    // bad continuation
		"\x80x":            {0xFFFD, 'x'},                    // stray continuation
		"\xc0\x80":         {0},                              // overlong NUL is accepted, as in llama.cpp
		"\xed\xa0\x80":     {0xD800},                         // so is a surrogate
		"\xf5\x80\x80\x80": {0xFFFD, 0xFFFD, 0xFFFD, 0xFFFD}, // beyond U+10FFFF
	} {
		if got := cptsFromUTF8(in); !slices.Equal(got, want) {
			t.Errorf("cptsFromUTF8(%q) = %U, want %U", in, got, want)
		}
	}
	// appendCpt inverts it for every accepted code point, surrogates included.
	for _, c := range []rune{0, 0x7F, 0x80, 0x7FF, 0x800, 0xD800, 0xFFFF, 0x10000, 0x10FFFF} {
		if got := cptsFromUTF8(string(appendCpt(nil, c))); !slices.Equal(got, []rune{c}) {
			t.Errorf("round trip of %U: %U", c, got)
		}
	}
}

// FuzzSplitters cross-checks every hand-written splitter against regexp2
// on arbitrary text: go test -run '^$' -fuzz FuzzSplitters
func FuzzSplitters(f *testing.F) {
	for _, s := range []string{"", "Hello, world!", "I'M 12345 a  b\n\n", "\u00a0x\u3000 \t'Ll", "😀 日本\r\n",
		"3.14 ！Ａｂ 가나 \U0002EBF0 µΩ \n \t", "$x+=`y`~ 1234567 ‘q’。 ", "\u0085\u2028 a \x1c"} {
		f.Add(s)
	}
	splitters := handSplitters()
	regexes := make([]splitFunc, len(splitters))
	for i, c := range splitters {
		regexes[i] = regexSplitter(c.expr)
	}
	f.Fuzz(func(t *testing.T, s string) {
		cpts := cptsFromUTF8(s)
		// regexp2 takes quadratic time on long whitespace runs (\s+$,
		// \s+(?!\S)); nothing in the splitters depends on length.
		if len(cpts) == 0 || len(cpts) > 1000 {
			return
		}
		offsets := []int{len(cpts)}
		for i, c := range splitters {
			if got, want := c.custom(cpts, offsets), regexes[i](cpts, offsets); !slices.Equal(got, want) {
				t.Fatalf("%q on %q: custom %v, regex %v", c.expr, s, got, want)
			}
		}
	})
}
