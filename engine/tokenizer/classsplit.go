package tokenizer

import (
	"cmp"
	"fmt"
	"slices"
	"strings"
)

// The regexes of the default, starcoder, deepseek-llm, deepseek-coder and
// falcon pre-tokenizers that llama.cpp runs through std::regex (it has no
// custom splitter for them), exactly as llm_tokenizer_bpe lists them. Each
// matches runs of one character class; classSplitters holds a hand-written
// equivalent of each, which FuzzSplitters checks against regexp2 running
// the regex the way llama.cpp runs it (regexSplitter).
const (
	punctRegex        = `[\p{P}\$\+<=>\^~\|]+`
	falconPunctRegex  = "[\\p{P}\\$\\+<=>\\^~\\|`]+" // the default one plus the backtick
	numbersRegex      = `\p{N}+`
	numberRegex       = `\p{N}`
	digitTriplesRegex = `[0-9][0-9][0-9]`
	newlineRegex      = "[\r\n]"
	letterWordRegex   = `\s?\p{L}+`
	punctWordRegex    = `\s?\p{P}+`
	cjkRegex          = `[一-龥ࠀ-一가-퟿]+`
	// deepseek-llm's letters: Latin, Greek, Cyrillic, Armenian, Georgian,
	// Cherokee, Glagolitic, Coptic, Deseret, Osage, Old Hungarian, Warang
	// Citi, Adlam... as literal ranges (no \p{L}: CJK goes to its own rule).
	deepseekLetterRegex = `\s?[A-Za-zµÀ-ÖØ-öø-ƺƼ-ƿǄ-ʓʕ-ʯͰ-ͳͶͷͻ-ͽͿΆΈ-ΊΌΎ-ΡΣ-ϵϷ-ҁҊ-ԯԱ-ՖႠ-ჅᎠ-Ᏽᏸ-ᏽᲐ-ᲺᲽ-Ჿᴀ-ᴫᵫ-ᵷᵹ-ᶚḀ-ἕἘ-Ἕἠ-ὅὈ-Ὅὐ-ὗὙὛὝὟ-ώᾀ-ᾴᾶ-ᾼιῂ-ῄῆ-ῌῐ-ΐῖ-Ίῠ-Ῥῲ-ῴῶ-ῼℂℇℊ-ℓℕℙ-ℝℤΩℨK-ℭℯ-ℴℹℼ-ℿⅅ-ⅉⅎↃↄⰀ-ⱻⱾ-ⳤⳫ-ⳮⳲⳳꙀ-ꙭꚀ-ꚛꜢ-ꝯꝱ-ꞇꞋ-ꞎꭰ-ꮿﬀ-ﬆﬓ-ﬗＡ-Ｚａ-ｚ𐐀-𐑏𐒰-𐓓𐓘-𐓻𐲀-𐲲𐳀-𐳲𑢠-𑣟𞤀-𞥃]+`
	deepseekPunctRegex  = `\s?[!-/:-~！-／：-～‘-‟　-。]+`
	trailingSpaceRegex  = `\s+$`
)

var classSplitters = map[string]splitFunc{
	punctRegex:          classSplitter(collapsedClass(catPunct, "$+<=>^~|"), true, false),
	falconPunctRegex:    classSplitter(collapsedClass(catPunct, "$+<=>^~|`"), true, false),
	numbersRegex:        classSplitter(collapsedClass(catNumber, ""), true, false),
	numberRegex:         classSplitter(collapsedClass(catNumber, ""), false, false),
	newlineRegex:        classSplitter(func(c rune) bool { return c == '\r' || c == '\n' }, false, false),
	letterWordRegex:     classSplitter(collapsedClass(catLetter, ""), true, true),
	punctWordRegex:      classSplitter(collapsedClass(catPunct, ""), true, true),
	cjkRegex:            classSplitter(wideClass(cjkRegex), true, false),
	deepseekLetterRegex: classSplitter(wideClass(deepseekLetterRegex), true, true),
	deepseekPunctRegex:  classSplitter(wideClass(deepseekPunctRegex), true, true),
	digitTriplesRegex:   splitDigitTriples,
	trailingSpaceRegex:  splitTrailingSpace,
	numberTriplesRegex:  classRunsSplitter(collapsedClass(catNumber, ""), 3),
}

// collapsedClass is membership in [\p{Cat}extra] as llama.cpp matches it on
// the collapsed text: the category of the code point (ASCII included, where
// the k_ucat_map ranges are exactly the Unicode categories), whitespace
// never, plus the ASCII characters in extra.
func collapsedClass(cat ucat, extra string) func(rune) bool {
	var ascii [128]bool
	for c := range rune(128) {
		ascii[c] = !isWhitespace(c) && categoryOf(c) == cat || strings.ContainsRune(extra, c)
	}
	return func(c rune) bool {
		if c >= 0 && c < 128 {
			return ascii[c]
		}
		return !isWhitespace(c) && categoryOf(c) == cat
	}
}

// wideClass is membership in the one bracket expression of expr, a list of
// literal characters and ranges, as std::wregex matches it: on code point
// values, after non-ASCII whitespace became \v.
func wideClass(expr string) func(rune) bool {
	spans := parseLiteralClass(expr)
	return func(c rune) bool {
		c = wideCpt(c)
		// the last span starting at or before c
		k, found := slices.BinarySearchFunc(spans, c, func(s runeSpan, c rune) int { return cmp.Compare(s.lo, c) })
		if !found {
			k--
		}
		return k >= 0 && c <= spans[k].hi
	}
}

type runeSpan struct{ lo, hi rune }

// parseLiteralClass returns the characters of expr's bracket expression as
// sorted, disjoint spans; it accepts only literal characters and a-b ranges
// (all the deepseek classes use).
func parseLiteralClass(expr string) []runeSpan {
	i, j := strings.IndexByte(expr, '['), strings.LastIndexByte(expr, ']')
	if i < 0 || j < i {
		panic(fmt.Sprintf("tokenizer: no bracket expression in %q", expr))
	}
	var spans []runeSpan
	class := []rune(expr[i+1 : j])
	for k := 0; k < len(class); k++ {
		s := runeSpan{class[k], class[k]}
		if s.lo == '\\' || s.lo == '[' || s.lo == ']' || s.lo == '^' && k == 0 {
			panic(fmt.Sprintf("tokenizer: %q: only literal characters and ranges are supported", expr))
		}
		if k+2 < len(class) && class[k+1] == '-' {
			s.hi = class[k+2]
			k += 2
		}
		if s.hi < s.lo {
			panic(fmt.Sprintf("tokenizer: %q: range %q-%q out of order", expr, s.lo, s.hi))
		}
		spans = append(spans, s)
	}
	slices.SortFunc(spans, func(a, b runeSpan) int { return cmp.Compare(a.lo, b.lo) })
	merged := spans[:0]
	for _, s := range spans {
		if n := len(merged); n > 0 && s.lo <= merged[n-1].hi+1 {
			merged[n-1].hi = max(merged[n-1].hi, s.hi)
			continue
		}
		merged = append(merged, s)
	}
	return merged
}

// matchSplitter splits each piece at the matches of a regex searched left
// to right, as std::regex_iterator does: match returns the length of the
// match that starts at pos within [pos, end) (0: none starts there).
// Matches and the gaps between them become pieces.
func matchSplitter(match func(cpts []rune, pos, end int) int) splitFunc {
	return func(cpts []rune, offsets []int) []int {
		out := make([]int, 0, len(offsets))
		start := 0
		for _, off := range offsets {
			end := start + off
			prev := start
			for pos := start; pos < end; {
				n := match(cpts, pos, end)
				if n == 0 {
					pos++
					continue
				}
				if pos > prev {
					out = append(out, pos-prev)
				}
				out = append(out, n)
				pos += n
				prev = pos
			}
			if end > prev {
				out = append(out, end-prev)
			}
			start = end
		}
		return out
	}
}

// classSplitter splits each piece like a regex matching one class, searched
// left to right: [X] (many false: one code point per match), [X]+, or with
// optSpace \s?[X]+.
func classSplitter(in func(rune) bool, many, optSpace bool) splitFunc {
	return matchSplitter(func(cpts []rune, pos, end int) int {
		from := pos
		switch {
		case in(cpts[pos]):
			pos++
		case optSpace && pos+1 < end && isWhitespace(cpts[pos]) && in(cpts[pos+1]):
			pos += 2
		default:
			return 0
		}
		for many && pos < end && in(cpts[pos]) {
			pos++
		}
		return pos - from
	})
}

// splitDigitTriples is [0-9][0-9][0-9]: every three ASCII digits in a row,
// left to right, become a piece.
var splitDigitTriples = matchSplitter(func(cpts []rune, pos, end int) int {
	isDigit := func(c rune) bool { return c >= '0' && c <= '9' }
	if pos+3 <= end && isDigit(cpts[pos]) && isDigit(cpts[pos+1]) && isDigit(cpts[pos+2]) {
		return 3
	}
	return 0
})

// splitTrailingSpace is \s+$: the whitespace that ends a piece becomes a
// piece of its own ($ is the end of the piece, which is all std::regex sees).
func splitTrailingSpace(cpts []rune, offsets []int) []int {
	out := make([]int, 0, len(offsets)+1)
	start := 0
	for _, off := range offsets {
		end := start + off
		ws := end
		for ws > start && isWhitespace(cpts[ws-1]) {
			ws--
		}
		if ws > start {
			out = append(out, ws-start)
		}
		if end > ws {
			out = append(out, end-ws)
		}
		start = end
	}
	return out
}

// classRunsSplitter is [X]{1,max}: runs of the class cut every max code
// points, left to right (\p{N}{1,3}).
func classRunsSplitter(in func(rune) bool, maxRun int) splitFunc {
	return matchSplitter(func(cpts []rune, pos, end int) int {
		n := 0
		for pos+n < end && n < maxRun && in(cpts[pos+n]) {
			n++
		}
		return n
	})
}

// splitNewlines is unicode_regex_split_custom_newlines, [^\n]+|[\n]+:
// alternating runs of newlines and of everything else.
func splitNewlines(cpts []rune, offsets []int) []int {
	out := make([]int, 0, len(offsets))
	start := 0
	for _, off := range offsets {
		end := start + off
		for pos := start; pos < end; {
			nl := cpts[pos] == '\n'
			from := pos
			for pos < end && (cpts[pos] == '\n') == nl {
				pos++
			}
			out = append(out, pos-from)
		}
		start = end
	}
	return out
}

// splitAFMoEDigits is unicode_regex_split_custom_afmoe, which llama.cpp
// runs for \p{AFMoE_digits} (afmoe) and \d{1,3}(?=(?:\d{3})*\b) (tiny_aya):
// each run of \p{N} is cut into groups of three from the right. Unlike a
// regex split, the text before a run is not a piece of its own: it goes
// with the run's first group; only the text after the last run is.
func splitAFMoEDigits(cpts []rune, offsets []int) []int {
	out := make([]int, 0, len(offsets))
	start := 0
	for _, off := range offsets {
		end := start + off
		prev := start
		add := func(to int) {
			if to > prev {
				out = append(out, to-prev)
			}
			prev = to
		}
		for pos := start; pos < end; {
			if flagsOf(cpts[pos])&fNumber == 0 {
				pos++
				continue
			}
			from := pos
			for pos < end && flagsOf(cpts[pos])&fNumber != 0 {
				pos++
			}
			cur := from
			if r := (pos - from) % 3; r > 0 {
				cur += r
				add(cur)
			}
			for cur < pos {
				cur += 3
				add(cur)
			}
		}
		add(end)
		start = end
	}
	return out
}
