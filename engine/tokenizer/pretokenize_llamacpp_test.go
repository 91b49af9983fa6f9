package tokenizer

import (
	"bufio"
	"bytes"
	"compress/gzip"
	"encoding/hex"
	"os"
	"slices"
	"strings"
	"testing"
)

// splitsDir holds llama.cpp b10587's own pre-tokenizer splits (see its
// README): texts.hex, one hex-encoded text a line, and splits.txt.gz, for
// each set of regexes of llm_tokenizer_bpe a line "@name name..." (the
// tokenizer.ggml.pre names that select it) and then one line per text with
// the words unicode_regex_split returns, hex, space-separated ("-" for an
// empty word).
const splitsDir = "testdata/pretokenize"

type llamaSplits struct {
	names []string
	words [][]string // per text
}

func loadLlamaSplits(t *testing.T) ([]string, []llamaSplits) {
	t.Helper()
	raw, err := os.ReadFile(splitsDir + "/texts.hex")
	if err != nil {
		t.Fatal(err)
	}
	var texts []string
	for _, line := range strings.Split(strings.TrimSuffix(string(raw), "\n"), "\n") {
		b, err := hex.DecodeString(line)
		if err != nil {
			t.Fatalf("texts.hex: %v", err)
		}
		texts = append(texts, string(b))
	}
	gz, err := os.ReadFile(splitsDir + "/splits.txt.gz")
	if err != nil {
		t.Fatal(err)
	}
	zr, err := gzip.NewReader(bytes.NewReader(gz))
	if err != nil {
		t.Fatal(err)
	}
	var groups []llamaSplits
	sc := bufio.NewScanner(zr)
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		line := sc.Text()
		switch {
		case strings.HasPrefix(line, "#"):
		case strings.HasPrefix(line, "@"):
			groups = append(groups, llamaSplits{names: strings.Fields(line[1:])})
		default:
			if len(groups) == 0 {
				t.Fatal("splits.txt: words before the first @ line")
			}
			var words []string
			for _, w := range strings.Fields(line) {
				if w == "-" { // an empty word (superbpe's lookahead matches)
					words = append(words, "")
					continue
				}
				b, err := hex.DecodeString(w)
				if err != nil {
					t.Fatalf("splits.txt: %v", err)
				}
				words = append(words, string(b))
			}
			g := &groups[len(groups)-1]
			g.words = append(g.words, words)
		}
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	for _, g := range groups {
		if len(g.words) != len(texts) {
			t.Fatalf("splits.txt: %v has %d lines for %d texts", g.names, len(g.words), len(texts))
		}
	}
	return texts, groups
}

// TestPreTokenizersMatchLlamaCpp checks every supported pre-tokenizer name
// against the words llama.cpp's unicode_regex_split gives for the same
// regexes: the 46 texts of llama.cpp's tokenizer tests, the 418 random and
// targeted texts of TestVocabRandom and 500 random texts over the classes
// the new regexes tell apart (case, marks, CJK, kana, Hangul, Thai, digits
// of several scripts, chameleon's sentinels...).
func TestPreTokenizersMatchLlamaCpp(t *testing.T) {
	texts, groups := loadLlamaSplits(t)
	seen := map[string]bool{}
	for _, g := range groups {
		for _, name := range g.names {
			seen[name] = true
			t.Run(name, func(t *testing.T) {
				p, ok := preTokenizers[name]
				if !ok {
					t.Fatalf("pre-tokenizer %q not supported", name)
				}
				passed := 0
				for i, text := range texts {
					var got []string
					if text != "" { // llama.cpp never splits an empty fragment
						for _, w := range p.words(text) {
							got = append(got, string(decodeByteLevel(w)))
						}
					}
					if slices.Equal(got, g.words[i]) {
						passed++
					} else if passed == i {
						t.Errorf("text %d %q:\n got  %q\n want %q", i+1, text, got, g.words[i])
					}
				}
				t.Logf("%s: %d/%d texts split as llama.cpp splits them", name, passed, len(texts))
				if passed != len(texts) {
					t.Errorf("%s: %d of %d texts differ", name, len(texts)-passed, len(texts))
				}
			})
		}
	}
	// Every name New accepts is among them.
	for name := range preTokenizers {
		if !seen[name] && !slices.Contains(sameRegexesAsChecked, name) {
			t.Errorf("pre-tokenizer %q has no llama.cpp splits in %s", name, splitsDir)
		}
	}
}

// sameRegexesAsChecked are names whose regexes are those of a checked name
// (llm_tokenizer_bpe gives their types the same list).
var sameRegexesAsChecked = []string{
	"llama3", "llama-v3", "falcon3", "falcon-h1", "pixtral", "midm-2.0", "lfm2", "jina-v5-nano", // llama-bpe
	"phi-2", "jina-es", "jina-de", "gigachat", "jina-v2-es", "jina-v2-de", "a.x-4.0", "mellum", "modern-bert",
	"jina-v2-code", "roberta-bpe", // gpt-2
	"deepseek-r1-qwen", "kormo", "f2llmv2", // qwen2
}
