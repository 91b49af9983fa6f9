package tokenizer

// byteRunes is GPT-2's byte-to-unicode map (unicode_byte_to_utf8_map): the
// printable Latin-1 bytes stand for themselves, the other 68 bytes are
// shifted to U+0100.. in byte order. runeBytes is its inverse.
var (
	byteRunes [256]rune
	byteStrs  [256]string
	runeBytes = map[rune]byte{}
)

func init() {
	n := rune(0)
	for b := range 256 {
		r := rune(b)
		if !(b >= 0x21 && b <= 0x7E || b >= 0xA1 && b <= 0xAC || b >= 0xAE && b <= 0xFF) {
			r = 256 + n
			n++
		}
		byteRunes[b] = r
		byteStrs[b] = string(r)
		runeBytes[r] = byte(b)
	}
}

// bpeEncode is llm_tokenizer_bpe_session::tokenize for one text fragment:
// pre-tokenize into words, byte-encode them, merge each word by rank.
func (t *Tokenizer) bpeEncode(text string, out []int32) []int32 {
	for _, word := range t.splitter.words(text) {
		out = t.bpeWord(word, out)
	}
	return out
}

func (t *Tokenizer) bpeWord(word string, out []int32) []int32 {
	if t.ignoreMerges {
		if id, ok := t.ids[word]; ok {
			return append(out, id)
		}
	}
	syms := utf8Symbols(word)
	mergeSymbols(syms, func(l, r spmSymbol, left int) (uint64, bool) {
		rank, ok := t.ranks[mergePair{word[l.start : l.start+l.n], word[r.start : r.start+r.n]}]
		return bpeKey(rank, left), ok
	})

	for i := 0; i != -1 && len(syms) > 0; i = syms[i].next {
		s := syms[i]
		piece := word[s.start : s.start+s.n]
		if id, ok := t.ids[piece]; ok {
			out = append(out, id)
			continue
		}
		// llama.cpp looks each byte up as a one-byte token and silently
		// drops the ones that do not exist.
		for j := 0; j < len(piece); j++ {
			if id, ok := t.ids[piece[j:j+1]]; ok {
				out = append(out, id)
			}
		}
	}
	return out
}

// decodeByteLevel is llama_decode_text: map each character of a byte-level
// token back to its byte. Characters outside the map are rendered the way
// llama.cpp does, as "[UNK_BYTE_0x<hex>" followed by the whole token text.
func decodeByteLevel(text string) []byte {
	out := make([]byte, 0, len(text))
	for _, c := range cptsFromUTF8(text) {
		if b, ok := runeBytes[c]; ok {
			out = append(out, b)
			continue
		}
		out = append(out, "[UNK_BYTE_0x"...)
		for _, x := range appendCpt(nil, c) {
			const hex = "0123456789abcdef"
			out = append(out, hex[x>>4], hex[x&15])
		}
		out = append(out, text...)
		out = append(out, ']')
	}
	return out
}
