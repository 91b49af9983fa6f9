package tokenizer

import "strings"

// Piece is llama_token_to_piece(id, lstrip=0, special=false): the bytes a
// token stands for. Control and unknown tokens give nothing, byte tokens
// one raw byte (possibly part of a UTF-8 character), SPM tokens have U+2581
// turned back into spaces and byte-level BPE tokens are mapped back to
// bytes. An id outside the vocabulary gives nil. The result must not be
// modified.
func (t *Tokenizer) Piece(id int32) []byte {
	if !t.valid(id) {
		return nil
	}
	return t.pieces[id]
}

func (t *Tokenizer) computePiece(id int32) []byte {
	a, text := t.attrs[id], t.tokens[id]
	switch {
	case a&(attrUnknown|attrControl) != 0:
		return []byte{}
	case a&attrUserDefined != 0:
		return []byte(text)
	case a&attrNormal != 0:
		if t.kind == kindSPM {
			return []byte(strings.ReplaceAll(text, "\u2581", " "))
		}
		return decodeByteLevel(text)
	case a&attrByte != 0:
		return []byte{tokenByte(text)}
	}
	return []byte{} // unused/undefined tokens decode to nothing, as in llama.cpp
}

// tokenByte is llama.cpp's token_to_byte: strtol(text.substr(3, 2), 16),
// i.e. the hex digits of "<0xXX>" (0 when there are none).
func tokenByte(text string) byte {
	var v byte
	for i := 3; i < len(text) && i < 5; i++ {
		c := text[i]
		switch {
		case c >= '0' && c <= '9':
			v = v<<4 | (c - '0')
		case c >= 'a' && c <= 'f':
			v = v<<4 | (c - 'a' + 10)
		case c >= 'A' && c <= 'F':
			v = v<<4 | (c - 'A' + 10)
		default:
			return v
		}
	}
	return v
}

// Decode is llama_detokenize(ids, removeSpecial, unparse_special=false):
// the pieces concatenated. When the vocabulary adds a space prefix, the
// leading space of the first piece is removed, unless the first token is
// BOS and removeSpecial drops it (then the text keeps its space, as
// llama.cpp does). removeSpecial also drops a trailing EOS when the
// vocabulary appends one. Ids outside the vocabulary decode to nothing. The
// result may hold invalid UTF-8 when a byte-fallback sequence is cut short.
func (t *Tokenizer) Decode(ids []int32, removeSpecial bool) string {
	return string(t.decode(ids, removeSpecial))
}

func (t *Tokenizer) decode(ids []int32, removeSpecial bool) []byte {
	removeSpace := t.addSpace
	if removeSpecial && t.addBOS && len(ids) > 0 && ids[0] == t.bos {
		removeSpace = false
		ids = ids[1:]
	}
	if removeSpecial && t.addEOS && len(ids) > 0 && ids[len(ids)-1] == t.eos {
		ids = ids[:len(ids)-1]
	}
	out := make([]byte, 0, 4*len(ids))
	for _, id := range ids {
		p := t.Piece(id)
		if removeSpace && len(p) > 0 && p[0] == ' ' {
			p = p[1:]
		}
		removeSpace = false // only the very first token, even if it was empty
		out = append(out, p...)
	}
	if t.cleanSpaces {
		out = cleanSpaces(out)
	}
	return out
}

// cleanSpaces is llama.cpp's clean_up_tokenization_spaces, three in-place
// passes over the bytes, ported literally (including their quirks: the
// second pass overwrites the space it skips with a NUL that a later " ' "
// check then sees).
func cleanSpaces(text []byte) []byte {
	// first pass: " ?", " !", " .", " ," lose the space
	total1 := len(text)
	total := min(total1, 1)
	for i := 1; i < total1; i++ {
		x := text[i]
		if text[i-1] == ' ' && (x == '?' || x == '!' || x == '.' || x == ',') {
			total--
		}
		text[total] = x
		total++
	}
	// second pass: a single apostrophe between spaces loses both spaces
	total2 := total
	total = min(total2, 1)
	for i := 1; i < total2; i++ {
		x := text[i]
		if x == '\'' && i+1 < total2 && text[i-1] == ' ' && text[i+1] == ' ' {
			total--
			i++
			text[i] = 0
		}
		text[total] = x
		total++
	}
	// third pass: " 's", " 'm", " 're", " 've" lose the space
	total3 := total
	total = min(total3, 1)
	for i := 1; i < total3; i++ {
		x := text[i]
		if text[i-1] == ' ' && x == '\'' && i+1 < total3 {
			x1 := text[i+1]
			if x1 == 's' || x1 == 'm' {
				total--
			} else if i+2 < total3 {
				x2 := text[i+2]
				if (x1 == 'r' && x2 == 'e') || (x1 == 'v' && x2 == 'e') {
					total--
				}
			}
		}
		text[total] = x
		total++
	}
	return text[:total]
}
