package tokenizer

import (
	"strings"
	"time"

	"github.com/dlclark/regexp2"
)

// The pre-tokenizer regexes, exactly as llama.cpp's llm_tokenizer_bpe lists
// them (more in classsplit.go). gpt2Regex, llama3Regex and qwen2Regex run
// through the hand-written splitters llama.cpp's unicode.cpp has for them;
// the class regexes through hand-written equivalents of the std::regex
// llama.cpp runs (classsplit.go); any other through regexp2 on llama.cpp's
// "collapsed" text (see regexSplitter).
const (
	gpt2Regex   = `'s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)`
	llama3Regex = `(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+`
	// The tokenizer.json original of llama3Regex; llama.cpp maps it to the same splitter.
	llama3RegexCI = `(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+`
	qwen2Regex    = `(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+`
)

// The regexes of the other pre-tokenizers, exactly as llm_tokenizer_bpe
// lists them (C escapes resolved). qwen35Regex runs through llama.cpp's
// custom Qwen3.5 splitter, newlineRunsRegex through its newline splitter,
// afmoeDigitsRegex and tinyAyaDigitsRegex through its AFMoE digit splitter
// (classsplit.go), numberTriplesRegex through a hand-written equivalent of
// the std::regex; the rest through regexp2 the way llama.cpp runs std::regex.
const (
	numberTriplesRegex   = `\p{N}{1,3}`
	minicpm5Regex        = `(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}+| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+`
	jais2Regex           = `(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s{512}(?!\S)|\s{256}(?!\S)|\s{128}(?!\S)|\s{64}(?!\S)|\s{32}(?!\S)|\s{16}(?!\S)|\s{8}(?!\S)|\s{4}(?!\S)|\s{1,2}(?!\S)|\s{1}`
	deepseekV3CJKRegex   = `[一-龥぀-ゟ゠-ヿ]+`
	deepseekV3Regex      = "[!\"#$%&'()*+,\\-./:;<=>?@\\[\\\\\\]^_`{|}~][A-Za-z]+|[^\r\n\\p{L}\\p{P}\\p{S}]?[\\p{L}\\p{M}]+| ?[\\p{P}\\p{S}]+[\r\n]*|\\s*[\r\n]+|\\s+(?!\\S)|\\s+"
	youtuCJKRegex        = `[가-힣ㄱ-ㆎ]+|[！…“”‘’—：；，、-〿︰-﹏]+|[ㄅ-ㄯ]+|[一-龥぀-ゟ゠-ヿ]+`
	youtuRegex           = `[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]*[\p{Ll}\p{Lm}\p{Lo}\p{M}]+(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])?|[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]+[\p{Ll}\p{Lm}\p{Lo}\p{M}]*(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])?|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n/]*|\s*[\r\n]+|\s+(?!\S)|\s+`
	qwen35Regex          = `(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])|[^\r\n\p{L}\p{N}]?[\p{L}\p{M}]+|\p{N}| ?[^\s\p{L}\p{M}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+`
	bloomRegex           = ` ?[^(\s|.,!?…。，、।۔،)]+`
	tekkenRegex          = `[^\r\n\p{L}\p{N}]?((?=[\p{L}])([^a-z]))*((?=[\p{L}])([^A-Z]))+|[^\r\n\p{L}\p{N}]?((?=[\p{L}])([^a-z]))+((?=[\p{L}])([^A-Z]))*|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n/]*|\s*[\r\n]+|\s+(?!\S)|\s+`
	chameleonSentinel    = `<sentinel:[0-9]+>`
	chameleonImage       = `(IMGIMG)((A|B|C|D|E|F|G|H|I){1,4})Z`
	chameleonSpace       = `([\t\n]|    |  )`
	chameleonPunct       = "[\\p{P}!-/:-@\\[-`{-~]"
	gpt4oRegex           = `[^\r\n\p{L}\p{N}]?((?=[\p{L}])([^a-z]))*((?=[\p{L}])([^A-Z]))+(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])?|[^\r\n\p{L}\p{N}]?((?=[\p{L}])([^a-z]))+((?=[\p{L}])([^A-Z]))*(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])?|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n/]*|\s*[\r\n]+|\s+(?!\S)|\s+`
	graniteEmbMultiRegex = `[^\r\n\p{L}\p{N}]?((?=[\p{L}\p{M}])([^a-z]))*((?=[\p{L}\p{M}])([^A-Z]))+(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])?|[^\r\n\p{L}\p{N}]?((?=[\p{L}\p{M}])([^a-z]))+((?=[\p{L}\p{M}])([^A-Z]))*(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])?|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n/]*|\s*[\r\n]+|\s+(?!\S)|\s+`
	tinyAyaDigitsRegex   = `\d{1,3}(?=(?:\d{3})*\b)`
	tinyAyaRegex         = `[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]*[\p{Ll}\p{Lm}\p{Lo}\p{M}]+(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])?|[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]+[\p{Ll}\p{Lm}\p{Lo}\p{M}]*(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])?|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n/]*|\s*[\r\n]+|\s+(?!\S)|\s+`
	superbpeRegex        = `(?=(\d{3})+(?!\d))`
	bailingmoeRegex      = `'(?:[sSdDmMtT]|[lL][lL]|[vV][eE]|[rR][eE])|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]|\s+(?!\S)|\s+`
	seedCoderRegex       = `(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1}| ?[^\s\p{L}\p{N}\r\n]+|\s*[\r\n]+|\s+(?!\S)|\s+`
	afmoeDigitsRegex     = `\p{AFMoE_digits}`
	afmoeCJKRegex        = `[一-鿿㐀-䶿豈-﫿぀-ゟ゠-ヿ･-ﾟ⼀-⿟เ-๿຀-໿ក-៿က-႟ꩠ-ꩿꧠ-꧿가-힯ᄀ-ᇿ]+`
	afmoeRegex           = "[!\"#$%&'()*+,\\-./:;<=>?@\\[\\\\\\]^_`{|}~][A-Za-z]+|[^\\r\\n\\p{L}\\p{P}\\p{S}]?[\\p{L}\\p{M}]+| ?[\\p{P}\\p{S}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+"
	newlineRunsRegex     = `[^\n]+|[\n]+`
	exaoneMoERegex       = `(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])|[^\r\n\p{L}\p{N}]?(?:\p{L}\p{M}*(?: \p{L}\p{M}*)*)+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n/]?|\s*[\r\n]|\s+(?!\S)|\s+`
)

// regexTimeout bounds one regexp2 match; the patterns are linear in
// practice, this only guards against a pathological input.
const regexTimeout = 10 * time.Second

// preTokenizer splits text into words before the BPE merges
// (llm_tokenizer_bpe regex_exprs + unicode_regex_split).
type preTokenizer struct {
	regexes      []string
	splits       []splitFunc
	ignoreMerges bool // a word that is itself a token is not merged (llama3)
	cleanSpaces  bool // detokenize removes " ," " 's" etc. (clean_up_tokenization_spaces)
	addBOS       bool // llama.cpp's default add_bos for this pre-tokenizer
	noBOS        bool // llama.cpp unsets the default BOS id (chatglm4)
}

// splitFunc refines a split: offsets are lengths (in code points) of
// consecutive pieces of cpts; each piece is split further on its own.
type splitFunc func(cpts []rune, offsets []int) []int

var preTokenizers = map[string]*preTokenizer{}

func init() {
	def := []string{punctRegex, gpt2Regex, numbersRegex, digitTriplesRegex}
	gpt2 := []string{gpt2Regex}
	llama3 := []string{llama3Regex}
	qwen2 := []string{qwen2Regex}
	starcoder := []string{numberRegex, gpt2Regex}
	deepseekLLM := []string{newlineRegex, deepseekLetterRegex, deepseekPunctRegex, trailingSpaceRegex, cjkRegex, numbersRegex}
	deepseekCoder := []string{newlineRegex, letterWordRegex, punctWordRegex, cjkRegex, numberRegex}
	falcon := []string{falconPunctRegex, gpt2Regex, digitTriplesRegex}

	add := func(regexes []string, p preTokenizer, names ...string) {
		p.regexes = regexes
		for _, re := range regexes {
			p.splits = append(p.splits, compileSplit(re))
		}
		for _, name := range names {
			q := p
			preTokenizers[name] = &q
		}
	}
	// Names and flags from llama_vocab::impl::load, regexes from
	// llm_tokenizer_bpe. clean_spaces is true unless load clears it.
	add(def, preTokenizer{cleanSpaces: true}, "default")
	add(gpt2, preTokenizer{cleanSpaces: true}, "gpt-2", "phi-2", "jina-es", "jina-de", "gigachat",
		"jina-v2-es", "jina-v2-de", "a.x-4.0", "mellum", "modern-bert", "mpt", "olmo", "jais", "exaone4",
		"jina-v1-en", "jina-v2-code", "roberta-bpe") // the last three also set add_sep, which tokenize ignores for BPE
	add(gpt2, preTokenizer{}, "trillion", "granite-docling")
	add(llama3, preTokenizer{ignoreMerges: true, cleanSpaces: true, addBOS: true}, "llama3", "llama-v3",
		"llama-bpe", "falcon3", "falcon-h1", "pixtral", "midm-2.0", "lfm2", "jina-v5-nano")
	add(llama3, preTokenizer{cleanSpaces: true}, "dbrx", "smaug-bpe")
	add(llama3, preTokenizer{cleanSpaces: true, noBOS: true}, "glm4", "chatglm-bpe") // CHATGLM4: BOS unset
	add(qwen2, preTokenizer{}, "qwen2", "deepseek-r1-qwen", "kormo", "f2llmv2", "hunyuan", "solar-open", "grok-2")
	add(qwen2, preTokenizer{cleanSpaces: true}, "stablelm2", "megrez")
	add([]string{qwen35Regex}, preTokenizer{}, "qwen35")
	add(starcoder, preTokenizer{}, "smollm", "command-r")
	add(starcoder, preTokenizer{cleanSpaces: true}, "starcoder", "refact", "codeshell", "exaone", "minerva-7b", "mellum2")
	add(deepseekLLM, preTokenizer{}, "deepseek-llm")
	add(deepseekCoder, preTokenizer{}, "deepseek-coder")
	add(falcon, preTokenizer{cleanSpaces: true}, "falcon")
	add([]string{numberTriplesRegex, minicpm5Regex}, preTokenizer{ignoreMerges: true, cleanSpaces: true}, "minicpm5")
	add([]string{numberTriplesRegex, deepseekV3CJKRegex, deepseekV3Regex}, preTokenizer{}, "deepseek-v3", "hunyuan-dense", "joyai-llm")
	add([]string{youtuCJKRegex, youtuRegex}, preTokenizer{ignoreMerges: true}, "youtu")
	add([]string{jais2Regex}, preTokenizer{cleanSpaces: true}, "jais-2")
	add([]string{bloomRegex}, preTokenizer{}, "poro-chat")
	add([]string{bloomRegex}, preTokenizer{cleanSpaces: true}, "bloom", "gpt3-finnish")
	add([]string{bloomRegex, numberRegex}, preTokenizer{}, "viking")
	add([]string{tekkenRegex}, preTokenizer{ignoreMerges: true, addBOS: true}, "tekken")
	add([]string{chameleonSentinel, chameleonImage, chameleonSpace, numberRegex, chameleonPunct, gpt2Regex},
		preTokenizer{addBOS: true}, "chameleon")
	add([]string{gpt4oRegex}, preTokenizer{}, "gpt-4o", "llama4", "kanana2", "talkie", "minimax-m2")
	add([]string{graniteEmbMultiRegex}, preTokenizer{ignoreMerges: true}, "granite-embed-multi-97m")
	add([]string{tinyAyaDigitsRegex, tinyAyaRegex}, preTokenizer{}, "tiny_aya", "cohere2moe")
	add([]string{numbersRegex, superbpeRegex}, preTokenizer{}, "superbpe")
	add([]string{bailingmoeRegex}, preTokenizer{}, "bailingmoe", "bailingmoe2", "llada-moe")
	add([]string{seedCoderRegex}, preTokenizer{}, "seed-coder")
	add([]string{afmoeDigitsRegex, afmoeCJKRegex, afmoeRegex}, preTokenizer{}, "afmoe")
	add([]string{newlineRunsRegex, qwen2Regex}, preTokenizer{}, "laguna")
	add([]string{exaoneMoERegex}, preTokenizer{cleanSpaces: true}, "exaone-moe")
	// Not supported: "kimi-k2" (llama.cpp's custom K2 splitter, vocabularies
	// without merges), "gemma4", "granite-embed-multi-311m", "sarvam-moe"
	// (SPM-style BPE on raw UTF-8 with escaped spaces) and "whitespace"
	// (its own tokenizer session).
}

// compileSplit picks the splitter for a regex: llama.cpp's custom splitter
// for the GPT-2, LLaMA-3 and Qwen2 regexes, a hand-written equivalent of
// the std::regex llama.cpp runs for the class regexes (classSplitters), and
// regexp2 run the way llama.cpp runs std::regex otherwise.
func compileSplit(expr string) splitFunc {
	switch expr {
	case gpt2Regex:
		return splitGPT2
	case llama3Regex, llama3RegexCI:
		return splitLlama3
	case qwen2Regex:
		return splitQwen2
	case qwen35Regex:
		return splitQwen35
	case newlineRunsRegex:
		return splitNewlines
	case afmoeDigitsRegex, tinyAyaDigitsRegex:
		return splitAFMoEDigits
	}
	if split, ok := classSplitters[expr]; ok {
		return split
	}
	return regexSplitter(expr)
}

// words pre-tokenizes text and byte-encodes each word (unicode_regex_split).
func (p *preTokenizer) words(text string) []string {
	cpts := cptsFromUTF8(text)
	offsets := []int{len(cpts)}
	for _, split := range p.splits {
		offsets = split(cpts, offsets)
	}
	words := make([]string, 0, len(offsets))
	var buf []byte
	var sb strings.Builder
	start := 0
	for _, n := range offsets {
		buf = buf[:0]
		for _, c := range cpts[start : start+n] {
			buf = appendCpt(buf, c)
		}
		sb.Reset()
		for _, b := range buf {
			sb.WriteString(byteStrs[b])
		}
		words = append(words, sb.String())
		start += n
	}
	return words
}

// cflags are the code point properties the splitters test
// (unicode_cpt_flags); the zero value means "outside the piece".
type cflags uint8

const (
	fDefined cflags = 1 << iota // inside the piece (as_uint() != 0)
	fLetter
	fNumber
	fWhitespace
	fMark // \p{M}
)

var asciiFlags [128]cflags

func init() {
	for c := range rune(128) {
		asciiFlags[c] = computeFlags(c)
	}
}

// ucat is the one Unicode general category llama.cpp records per code
// point (unicode_cpt_flags' category bits); whitespace is a separate flag.
type ucat uint8

const (
	catOther  ucat = iota // C, Z and unassigned code points
	catNumber             // \p{N}
	catLetter             // \p{L}
	catPunct              // \p{P}
	catMark               // \p{M}
	catSymbol             // \p{S}
)

//go:generate go run gen_unicode.go $LLAMACPP_SRC/src/unicode-data.cpp

// categoryOf is the category llama.cpp's tables (unicode-data.cpp, Unicode
// 15.1) give c; the table is generated from them (gen_unicode.go), so
// splitting does not follow the Unicode version of Go's unicode package.
func categoryOf(c rune) ucat {
	if c < 0 || c > 0x10FFFF {
		return catOther
	}
	lo, hi := 0, len(categoryStarts) // categoryStarts[lo] <= c < categoryStarts[hi]
	for hi-lo > 1 {
		mid := int(uint(lo+hi) >> 1)
		if categoryStarts[mid] <= c {
			lo = mid
		} else {
			hi = mid
		}
	}
	return categoryRuns[lo]
}

// isWhitespace is llama.cpp's unicode_set_whitespace (Unicode White_Space).
func isWhitespace(c rune) bool {
	switch c {
	case '\t', '\n', '\v', '\f', '\r', ' ', 0x85, 0xA0, 0x1680,
		0x2000, 0x2001, 0x2002, 0x2003, 0x2004, 0x2005, 0x2006, 0x2007, 0x2008, 0x2009, 0x200A,
		0x2028, 0x2029, 0x202F, 0x205F, 0x3000:
		return true
	}
	return false
}

func computeFlags(c rune) cflags {
	f := fDefined
	switch {
	case isWhitespace(c):
		f |= fWhitespace
	default:
		switch categoryOf(c) {
		case catLetter:
			f |= fLetter
		case catNumber:
			f |= fNumber
		case catMark:
			f |= fMark
		}
	}
	return f
}

func flagsOf(c rune) cflags {
	if c >= 0 && c < 128 {
		return asciiFlags[c]
	}
	return computeFlags(c)
}

const outOfRange rune = -1

// piece gives the bounds-checked accessors llama.cpp's splitters use.
type piece struct {
	cpts     []rune
	ini, end int
}

func (p piece) cpt(pos int) rune {
	if pos >= p.ini && pos < p.end {
		return p.cpts[pos]
	}
	return outOfRange
}

func (p piece) flags(pos int) cflags {
	if pos >= p.ini && pos < p.end {
		return flagsOf(p.cpts[pos])
	}
	return 0
}

// splitGPT2 is unicode_regex_split_custom_gpt2:
// 's|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+
func splitGPT2(cpts []rune, offsets []int) []int {
	out := make([]int, 0, len(offsets))
	start := 0
	for _, off := range offsets {
		p := piece{cpts, start, start + off}
		start += off
		prevEnd := p.ini
		add := func(end int) int {
			n := end - prevEnd
			if n > 0 {
				out = append(out, n)
			}
			prevEnd = end
			return n
		}
		for pos := p.ini; pos < p.end; {
			c := p.cpt(pos)
			f := p.flags(pos)
			if c == '\'' && pos+1 < p.end {
				n := p.cpt(pos + 1)
				if n == 's' || n == 't' || n == 'm' || n == 'd' {
					pos += add(pos + 2)
					continue
				}
				if pos+2 < p.end {
					nn := p.cpt(pos + 2)
					if (n == 'r' && nn == 'e') || (n == 'v' && nn == 'e') || (n == 'l' && nn == 'l') {
						pos += add(pos + 3)
						continue
					}
				}
			}
			f2 := f
			if c == ' ' {
				f2 = p.flags(pos + 1)
			}
			if f2&fLetter != 0 { // <space>?\p{L}+
				if c == ' ' {
					pos++
				}
				for f2&fLetter != 0 {
					pos++
					f2 = p.flags(pos)
				}
				add(pos)
				continue
			}
			if f2&fNumber != 0 { // <space>?\p{N}+
				if c == ' ' {
					pos++
				}
				for f2&fNumber != 0 {
					pos++
					f2 = p.flags(pos)
				}
				add(pos)
				continue
			}
			if f2&(fWhitespace|fLetter|fNumber) == 0 && f2 != 0 { // <space>?[^\s\p{L}\p{N}]+
				if c == ' ' {
					pos++
				}
				for f2&(fWhitespace|fLetter|fNumber) == 0 && f2 != 0 {
					pos++
					f2 = p.flags(pos)
				}
				add(pos)
				continue
			}
			nws := 0
			for p.flags(pos+nws)&fWhitespace != 0 {
				nws++
			}
			if nws > 1 && p.cpt(pos+nws) != outOfRange { // \s+(?!\S)
				pos += nws - 1
				add(pos)
				continue
			}
			if nws > 0 { // \s+
				pos += nws
				add(pos)
				continue
			}
			pos++
			add(pos)
		}
	}
	return out
}

// splitLlama3 is unicode_regex_split_custom_llama3:
// (?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+
func splitLlama3(cpts []rune, offsets []int) []int { return splitLlama3Like(cpts, offsets, 3, 0) }

// splitQwen2 is unicode_regex_split_custom_qwen2, the LLaMA-3 splitter with
// \p{N} in place of \p{N}{1,3}.
func splitQwen2(cpts []rune, offsets []int) []int { return splitLlama3Like(cpts, offsets, 1, 0) }

// splitQwen35 is unicode_regex_split_custom_qwen35, the Qwen2 splitter with
// marks counted as letters: [^\r\n\p{L}\p{N}]?[\p{L}\p{M}]+ and
// <space>?[^\s\p{L}\p{M}\p{N}]+[\r\n]*.
func splitQwen35(cpts []rune, offsets []int) []int { return splitLlama3Like(cpts, offsets, 1, fMark) }

// splitLlama3Like is the LLaMA-3 splitter with runs of digits cut every
// maxDigits and the flags in extraLetter (fMark for Qwen3.5) counted as
// letters.
func splitLlama3Like(cpts []rune, offsets []int, maxDigits int, extraLetter cflags) []int {
	letter := fLetter | extraLetter
	out := make([]int, 0, len(offsets))
	start := 0
	for _, off := range offsets {
		p := piece{cpts, start, start + off}
		start += off
		prevEnd := p.ini
		add := func(end int) int {
			n := end - prevEnd
			if n > 0 {
				out = append(out, n)
			}
			prevEnd = end
			return n
		}
		for pos := p.ini; pos < p.end; {
			c := p.cpt(pos)
			f := p.flags(pos)
			if c == '\'' && pos+1 < p.end { // case-insensitive contractions
				n := asciiLower(p.cpt(pos + 1))
				if n == 's' || n == 't' || n == 'm' || n == 'd' {
					pos += add(pos + 2)
					continue
				}
				if pos+2 < p.end {
					nn := asciiLower(p.cpt(pos + 2))
					if (n == 'r' && nn == 'e') || (n == 'v' && nn == 'e') || (n == 'l' && nn == 'l') {
						pos += add(pos + 3)
						continue
					}
				}
			}
			if !(c == '\r' || c == '\n' || f&fNumber != 0) { // [^\r\n\p{L}\p{N}]?\p{L}+
				if f&letter != 0 || p.flags(pos+1)&letter != 0 {
					pos++
					for p.flags(pos)&letter != 0 {
						pos++
					}
					add(pos)
					continue
				}
			}
			if f&fNumber != 0 { // \p{N}{1,maxDigits}
				ini := pos
				for p.flags(pos)&fNumber != 0 {
					pos++
					if pos-ini >= maxDigits {
						add(pos)
						ini = pos
					}
				}
				add(pos)
				continue
			}
			f2 := f
			if c == ' ' {
				f2 = p.flags(pos + 1)
			}
			// <space>?[^\s\p{L}\p{N}]+[\r\n]* (llama.cpp tests f, not f2, for "defined")
			if f2&(fWhitespace|letter|fNumber) == 0 && f != 0 {
				if c == ' ' {
					pos++
				}
				for f2&(fWhitespace|letter|fNumber) == 0 && f2 != 0 {
					pos++
					f2 = p.flags(pos)
				}
				for c2 := p.cpt(pos); c2 == '\r' || c2 == '\n'; c2 = p.cpt(pos) {
					pos++
				}
				add(pos)
				continue
			}
			nws, lastRN := 0, 0
			for p.flags(pos+nws)&fWhitespace != 0 {
				if c2 := p.cpt(pos + nws); c2 == '\r' || c2 == '\n' {
					lastRN = pos + nws + 1
				}
				nws++
			}
			if lastRN > 0 { // \s*[\r\n]+
				pos = lastRN
				add(pos)
				continue
			}
			if nws > 1 && p.cpt(pos+nws) != outOfRange { // \s+(?!\S)
				pos += nws - 1
				add(pos)
				continue
			}
			if nws > 0 { // \s+
				pos += nws
				add(pos)
				continue
			}
			pos++
			add(pos)
		}
	}
	return out
}

func asciiLower(c rune) rune {
	if c >= 'A' && c <= 'Z' {
		return c + ('a' - 'A')
	}
	return c
}

// Unicode categories the regexes may name, and the single character that
// stands for a non-ASCII code point of that category in the collapsed text
// (unicode_regex_split's k_ucat_enum / k_ucat_cpt / k_ucat_map).
const (
	collapsedOther  rune = 0xD0
	collapsedNumber rune = 0xD1
	collapsedLetter rune = 0xD2
	collapsedPunct  rune = 0xD3
	collapsedMark   rune = 0xD4
	collapsedSymbol rune = 0xD5
	collapsedSpace  rune = 0x0B // vertical tab: what std::regex \s matches
)

var categoryClasses = map[string]string{
	`\p{N}`:  string(collapsedNumber) + `0-9`,
	`\p{L}`:  string(collapsedLetter) + `A-Za-z`,
	`\p{P}`:  string(collapsedPunct) + `!-#%-*,-/:-;?-@\[-\]_\{\}`,
	`\p{M}`:  string(collapsedMark),
	`\p{S}`:  string(collapsedSymbol) + `\$\+<->^` + "`" + `\|\~`,
	`\p{Lu}`: string(collapsedLetter) + `A-Za-z`,
	`\p{Ll}`: string(collapsedLetter) + `A-Za-z`,
	`\p{Lt}`: string(collapsedLetter) + `A-Za-z`,
	`\p{Lm}`: string(collapsedLetter) + `A-Za-z`,
	`\p{Lo}`: string(collapsedLetter) + `A-Za-z`,
}

func usesCategories(expr string) bool {
	for cat := range categoryClasses {
		if strings.Contains(expr, cat) {
			return true
		}
	}
	return false
}

// collapseRegex rewrites \p{..} classes to match the collapsed text, as
// unicode_regex_split does before handing the regex to std::regex.
func collapseRegex(expr string) string {
	var b strings.Builder
	inside := false
	for i := 0; i < len(expr); i++ {
		c := expr[i]
		if c == '[' && (i == 0 || expr[i-1] != '\\') {
			b.WriteByte('[')
			inside = true
			continue
		}
		if inside && c == ']' && expr[i-1] != '\\' {
			b.WriteByte(']')
			inside = false
			continue
		}
		if c == '\\' && i+3 < len(expr) && expr[i+1] == 'p' && expr[i+2] == '{' {
			if j := strings.IndexByte(expr[i+3:], '}'); j >= 0 && i+3+j <= i+10 {
				if class, ok := categoryClasses[expr[i:i+3+j+1]]; ok {
					if !inside {
						b.WriteByte('[')
					}
					b.WriteString(class)
					if !inside {
						b.WriteByte(']')
					}
					i += 3 + j
					continue
				}
			}
		}
		b.WriteByte(c)
	}
	return b.String()
}

// collapseCpt maps a code point to its collapsed stand-in: ASCII stays,
// whitespace becomes \v, everything else the character of its category.
func collapseCpt(c rune) rune {
	if c >= 0 && c < 128 {
		return c
	}
	if isWhitespace(c) {
		return collapsedSpace
	}
	switch categoryOf(c) {
	case catLetter:
		return collapsedLetter
	case catNumber:
		return collapsedNumber
	case catPunct:
		return collapsedPunct
	case catMark:
		return collapsedMark
	case catSymbol:
		return collapsedSymbol
	}
	return collapsedOther
}

// wideCpt is what std::wregex sees of a code point: non-ASCII whitespace
// becomes \v (std::wregex's \s knows only ASCII whitespace).
func wideCpt(c rune) rune {
	if c > 0x7F && isWhitespace(c) {
		return collapsedSpace
	}
	return c
}

// ecmaScriptAnchors rewrites what regexp2 (.NET) reads differently from
// std::regex (ECMAScript): $ matches only at the end of the text there (not
// multiline), .NET also before a final newline; \z is the former. \d is
// ASCII digits only there (std::wregex's iswdigit), .NET's \d also matches
// other decimal digits; [0-9] is the former.
func ecmaScriptAnchors(expr string) string {
	var b strings.Builder
	inside := false
	for i := 0; i < len(expr); i++ {
		c := expr[i]
		switch {
		case c == '\\' && i+1 < len(expr) && expr[i+1] == 'd':
			if inside {
				b.WriteString("0-9")
			} else {
				b.WriteString("[0-9]")
			}
			i++
			continue
		case c == '\\' && i+1 < len(expr):
			b.WriteByte(c)
			b.WriteByte(expr[i+1])
			i++
			continue
		case c == '[':
			inside = true
		case c == ']':
			inside = false
		case c == '$' && !inside:
			b.WriteString(`\z`)
			continue
		}
		b.WriteByte(c)
	}
	return b.String()
}

// regexSplitter runs a general regex the way unicode_regex_split_stl does:
// on the collapsed text when the regex names Unicode categories, otherwise
// on the code points with non-ASCII whitespace replaced by \v. Every match
// and every gap between matches becomes a piece.
func regexSplitter(expr string) splitFunc {
	collapsed := usesCategories(expr)
	pattern := ecmaScriptAnchors(expr)
	if collapsed {
		pattern = collapseRegex(pattern)
	}
	re := regexp2.MustCompile(pattern, regexp2.None)
	re.MatchTimeout = regexTimeout
	return func(cpts []rune, offsets []int) []int {
		text := make([]rune, len(cpts))
		for i, c := range cpts {
			if collapsed {
				text[i] = collapseCpt(c)
			} else {
				text[i] = wideCpt(c)
			}
		}
		out := make([]int, 0, len(offsets))
		start := 0
		for _, off := range offsets {
			seg := text[start : start+off]
			start += off
			at := 0
			m, err := re.FindRunesMatch(seg)
			for err == nil && m != nil {
				if m.Index > at {
					out = append(out, m.Index-at)
				}
				out = append(out, m.Length)
				at = m.Index + m.Length
				m, err = re.FindNextMatch(m)
			}
			// On a match timeout the rest of the piece stays whole.
			if at < off {
				out = append(out, off-at)
			}
		}
		return out
	}
}

// cptsFromUTF8 decodes like llama.cpp's unicode_cpts_from_utf8: lead and
// continuation bits are checked, but not overlong forms or surrogates; each
// byte that starts no valid sequence becomes U+FFFD. (Sequences above
// U+10FFFF, which make llama.cpp throw later, are treated as invalid too.)
func cptsFromUTF8(s string) []rune {
	out := make([]rune, 0, len(s))
	for i := 0; i < len(s); {
		c, n := cptFromUTF8(s, i)
		if n == 0 {
			out = append(out, 0xFFFD)
			i++
			continue
		}
		out = append(out, c)
		i += n
	}
	return out
}

func cptFromUTF8(s string, i int) (rune, int) {
	b0 := s[i]
	cont := func(k int) bool { return i+k < len(s) && s[i+k]&0xC0 == 0x80 }
	switch {
	case b0&0x80 == 0:
		return rune(b0), 1
	case b0&0x40 == 0:
		return 0, 0
	case b0&0x20 == 0:
		if !cont(1) {
			return 0, 0
		}
		return rune(b0&0x1F)<<6 | rune(s[i+1]&0x3F), 2
	case b0&0x10 == 0:
		if !cont(1) || !cont(2) {
			return 0, 0
		}
		return rune(b0&0x0F)<<12 | rune(s[i+1]&0x3F)<<6 | rune(s[i+2]&0x3F), 3
	case b0&0x08 == 0:
		if !cont(1) || !cont(2) || !cont(3) {
			return 0, 0
		}
		c := rune(b0&0x07)<<18 | rune(s[i+1]&0x3F)<<12 | rune(s[i+2]&0x3F)<<6 | rune(s[i+3]&0x3F)
		if c > 0x10FFFF {
			return 0, 0
		}
		return c, 4
	}
	return 0, 0
}

// appendCpt is unicode_cpt_to_utf8 (which, unlike utf8.AppendRune, keeps
// surrogate code points as their 3-byte form).
func appendCpt(dst []byte, c rune) []byte {
	switch {
	case c <= 0x7F:
		return append(dst, byte(c))
	case c <= 0x7FF:
		return append(dst, 0xC0|byte(c>>6&0x1F), 0x80|byte(c&0x3F))
	case c <= 0xFFFF:
		return append(dst, 0xE0|byte(c>>12&0x0F), 0x80|byte(c>>6&0x3F), 0x80|byte(c&0x3F))
	}
	return append(dst, 0xF0|byte(c>>18&0x07), 0x80|byte(c>>12&0x3F), 0x80|byte(c>>6&0x3F), 0x80|byte(c&0x3F))
}
