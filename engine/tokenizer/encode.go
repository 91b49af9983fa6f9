package tokenizer

import "strings"

// Encode tokenizes text like llama_tokenize(text, addSpecial,
// parse_special=false): control tokens such as "<s>" written in the text are
// tokenized as ordinary text. With addSpecial, BOS is prepended when the
// vocabulary asks for it (AddBOS) and EOS appended when it asks for that.
func (t *Tokenizer) Encode(text string, addSpecial bool) []int32 {
	return t.Tokenize(text, addSpecial, false)
}

// Tokenize is llama_tokenize with an explicit parse_special: when true,
// control tokens written in the text (e.g. "<|im_start|>") become their ids.
// User-defined tokens are matched in the text either way, as in llama.cpp.
func (t *Tokenizer) Tokenize(text string, addSpecial, parseSpecial bool) []int32 {
	frags := t.partition(text, parseSpecial)
	out := make([]int32, 0, len(text)/3+2)

	switch t.kind {
	case kindSPM:
		if addSpecial && t.addBOS {
			out = append(out, t.bos)
		}
		prevSpecial := true // the text start counts as "after a special token"
		for _, f := range frags {
			if f.token != None {
				out = append(out, f.token)
				prevSpecial = true
				continue
			}
			s := text[f.start:f.end]
			if t.addSpace && prevSpecial {
				s = " " + s
			}
			out = t.spmEncode(strings.ReplaceAll(s, " ", "\u2581"), out)
			prevSpecial = false
		}
	case kindBPE:
		if addSpecial && t.addBOS {
			out = append(out, t.bos)
		}
		for _, f := range frags {
			if f.token != None {
				out = append(out, f.token)
				continue
			}
			out = t.bpeEncode(text[f.start:f.end], out)
		}
	}
	if addSpecial && t.addEOS {
		out = append(out, t.eos)
	}
	return out
}

// fragment is either a special token (token != None) or the raw text
// text[start:end].
type fragment struct {
	token      int32
	start, end int
}

// partition splits text around the special tokens that may appear in it
// (llama_vocab::impl::tokenizer_st_partition): each special token, longest
// first, is searched left to right in the text fragments that remain.
// Control and unknown tokens take part only with parseSpecial. Tokens with
// the LSTRIP (RSTRIP) attribute take the ASCII whitespace before (after)
// them out of the text.
func (t *Tokenizer) partition(text string, parseSpecial bool) []fragment {
	if text == "" {
		return nil
	}
	frags := []fragment{{token: None, start: 0, end: len(text)}}
	for _, id := range t.special {
		if !parseSpecial && t.attrs[id]&(attrControl|attrUnknown) != 0 {
			continue
		}
		tok := t.tokens[id]
		if !strings.Contains(text, tok) {
			continue // the common case: nothing to split
		}
		next := make([]fragment, 0, len(frags)+2)
		for _, f := range frags {
			if f.token != None {
				next = append(next, f)
				continue
			}
			lstrip, rstrip := t.attrs[id]&attrLStrip != 0, t.attrs[id]&attrRStrip != 0
			start := f.start
			for {
				i := strings.Index(text[start:f.end], tok)
				if i < 0 {
					break
				}
				left := start + i
				for lstrip && left > start && cIsSpace(text[left-1]) {
					left--
				}
				if left > start {
					next = append(next, fragment{token: None, start: start, end: left})
				}
				next = append(next, fragment{token: id})
				start += i + len(tok)
				for rstrip && start < f.end && cIsSpace(text[start]) {
					start++
				}
			}
			if start < f.end {
				next = append(next, fragment{token: None, start: start, end: f.end})
			}
		}
		frags = next
	}
	return frags
}

// cIsSpace is C's isspace in the "C" locale, which llama.cpp uses to strip
// whitespace around LSTRIP/RSTRIP tokens.
func cIsSpace(c byte) bool {
	return c == ' ' || c >= '\t' && c <= '\r'
}

// spmSymbol is a run of text[start:start+n] in the merge chain (SPM and BPE).
type spmSymbol struct {
	start, n   int
	prev, next int
}

// utf8Symbols splits text into one linked symbol per UTF-8 character.
func utf8Symbols(text string) []spmSymbol {
	syms := make([]spmSymbol, 0, len(text))
	for offs := 0; offs < len(text); {
		n := min(utf8Len(text[offs]), len(text)-offs)
		i := len(syms)
		next := i + 1
		if offs+n == len(text) {
			next = -1
		}
		syms = append(syms, spmSymbol{start: offs, n: n, prev: i - 1, next: next})
		offs += n
	}
	return syms
}

// mergeSymbols is the bigram merge loop llama.cpp's SPM and BPE sessions
// share: key gives the priority of merging two adjacent symbols (false: they
// do not merge); the best pair is merged until none is left.
func mergeSymbols(syms []spmSymbol, key func(l, r spmSymbol, left int) (uint64, bool)) {
	queue := make(mergeQueue, 0, len(syms))
	push := func(left, right int) {
		if left < 0 || right < 0 {
			return
		}
		l, r := syms[left], syms[right]
		k, ok := key(l, r, left)
		if !ok {
			return
		}
		queue.push(candidate{key: k, size: int32(l.n + r.n)})
	}
	for i := 1; i < len(syms); i++ {
		push(i-1, i)
	}
	for len(queue) > 0 {
		b := queue.pop()
		left := b.left()
		l := &syms[left]
		if l.n == 0 || l.next < 0 {
			continue
		}
		// Skip pairs made stale by an earlier merge of either side: the
		// right symbol of a live pair is still the next one, and both keep
		// their start, so an unchanged total size means an unchanged pair.
		r := &syms[l.next]
		if r.n == 0 || l.n+r.n != int(b.size) {
			continue
		}
		l.n += r.n
		r.n = 0
		l.next = r.next
		if r.next >= 0 {
			syms[r.next].prev = left
		}
		push(l.prev, left)
		push(left, l.next)
	}
}

// spmEncode is llm_tokenizer_spm_session::tokenize on whitespace-escaped
// text: start from UTF-8 characters and repeatedly merge the adjacent pair
// whose concatenation is the highest-scoring token; whatever is left that is
// not a token becomes byte tokens.
func (t *Tokenizer) spmEncode(text string, out []int32) []int32 {
	if text == "" {
		return out
	}
	syms := utf8Symbols(text)
	mergeSymbols(syms, func(l, r spmSymbol, left int) (uint64, bool) {
		size := l.n + r.n
		if size > t.maxTokenLen {
			return 0, false // cannot be a token: skip the lookup
		}
		id, ok := t.ids[text[l.start:l.start+size]]
		if !ok {
			return 0, false
		}
		return spmKey(t.scores[id], left), true
	})

	for i := 0; i != -1; i = syms[i].next {
		s := syms[i]
		piece := text[s.start : s.start+s.n]
		if id, ok := t.ids[piece]; ok {
			out = append(out, id)
			continue
		}
		// Every merged symbol is a token, so only single characters get
		// here; llama.cpp's rev_merge lookup can never match them, so we go
		// straight to the byte fallback.
		for j := 0; j < len(piece); j++ {
			switch id := t.byteTokens[piece[j]]; {
			case id != None:
				out = append(out, id)
			case t.unk != None:
				out = append(out, t.unk) // llama.cpp throws here (vocab without byte tokens)
			}
		}
	}
	return out
}

// utf8Len is llama.cpp's unicode_len_utf8: the sequence length announced by
// a lead byte, 1 for continuation and invalid bytes.
func utf8Len(b byte) int {
	switch {
	case b < 0xC0:
		return 1
	case b < 0xE0:
		return 2
	case b < 0xF0:
		return 3
	}
	return 4
}
