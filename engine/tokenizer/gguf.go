package tokenizer

import (
	"fmt"

	"github.com/evalrun/evalrun/engine/gguf"
)

// GGUF metadata keys read by FromGGUF.
const (
	keyModel       = "tokenizer.ggml.model"
	keyPre         = "tokenizer.ggml.pre"
	keyTokens      = "tokenizer.ggml.tokens"
	keyScores      = "tokenizer.ggml.scores"
	keyTypes       = "tokenizer.ggml.token_type"
	keyMerges      = "tokenizer.ggml.merges"
	keyBOS         = "tokenizer.ggml.bos_token_id"
	keyEOS         = "tokenizer.ggml.eos_token_id"
	keyUNK         = "tokenizer.ggml.unknown_token_id"
	keyPAD         = "tokenizer.ggml.padding_token_id"
	keyEOT         = "tokenizer.ggml.eot_token_id"
	keyEOM         = "tokenizer.ggml.eom_token_id"
	keyAddBOS      = "tokenizer.ggml.add_bos_token"
	keyAddEOS      = "tokenizer.ggml.add_eos_token"
	keyAddSpacePfx = "tokenizer.ggml.add_space_prefix"
	keyName        = "general.name"
	keyArch        = "general.architecture"
)

// FromGGUF builds the tokenizer stored in a GGUF file's tokenizer.ggml.*
// metadata, applying llama.cpp's defaults for keys that are absent. Errors
// name the file and the key.
func FromGGUF(f *gguf.File) (*Tokenizer, error) {
	v, err := vocabFromGGUF(f)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", f.Path, err)
	}
	t, err := New(v)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", f.Path, err)
	}
	return t, nil
}

func vocabFromGGUF(f *gguf.File) (Vocab, error) {
	model, err := optString(f, keyModel)
	if err != nil {
		return Vocab{}, err
	}
	if model == "" {
		return Vocab{}, fmt.Errorf("%s: missing", keyModel)
	}
	pre, err := optString(f, keyPre)
	if err != nil {
		return Vocab{}, err
	}
	v := DefaultVocab(model, pre)
	var ok bool

	if _, ok := f.Get(keyTokens); !ok {
		return Vocab{}, fmt.Errorf("%s: missing", keyTokens)
	}
	if v.Tokens, ok = f.Strings(keyTokens); !ok {
		return Vocab{}, fmt.Errorf("%s: %s, want an array of strings", keyTokens, describe(f, keyTokens))
	}
	n := len(v.Tokens)

	if _, present := f.Get(keyScores); present {
		if v.Scores, ok = f.Float32s(keyScores); !ok {
			ints, isInt := f.Int32s(keyScores) // llama.cpp also accepts int32 scores
			if !isInt {
				return Vocab{}, fmt.Errorf("%s: %s, want an array of f32 or i32", keyScores, describe(f, keyScores))
			}
			v.Scores = make([]float32, len(ints))
			for i, s := range ints {
				v.Scores[i] = float32(s)
			}
		}
	}
	if _, present := f.Get(keyTypes); present {
		if v.Types, ok = f.Int32s(keyTypes); !ok {
			return Vocab{}, fmt.Errorf("%s: %s, want an array of i32", keyTypes, describe(f, keyTypes))
		}
	}
	if model == "gpt2" {
		if _, present := f.Get(keyMerges); !present {
			return Vocab{}, fmt.Errorf("%s: missing (required for model %q)", keyMerges, model)
		}
		if v.Merges, ok = f.Strings(keyMerges); !ok {
			return Vocab{}, fmt.Errorf("%s: %s, want an array of strings", keyMerges, describe(f, keyMerges))
		}
	}

	// A default id outside the vocabulary is disabled; an id from the file
	// outside it is ignored (llama.cpp warns and keeps the default).
	for _, s := range []struct {
		key string
		id  *int32
	}{{keyBOS, &v.BOS}, {keyEOS, &v.EOS}, {keyUNK, &v.UNK}, {keyPAD, &v.PAD}, {keyEOT, &v.EOT}, {keyEOM, &v.EOM}} {
		if int(*s.id) >= n {
			*s.id = None
		}
		if _, present := f.Get(s.key); !present {
			continue
		}
		if id, ok := f.Uint(s.key); ok {
			if id < uint64(n) {
				*s.id = int32(id)
			}
			continue
		}
		if id, ok := f.Int(s.key); ok && id < 0 {
			continue // a negative id means "unset": keep the default
		}
		return Vocab{}, fmt.Errorf("%s: %s, want an integer token id", s.key, describe(f, s.key))
	}

	for _, s := range []struct {
		key string
		val *bool
	}{{keyAddBOS, &v.AddBOS}, {keyAddEOS, &v.AddEOS}, {keyAddSpacePfx, &v.AddSpacePrefix}} {
		if _, present := f.Get(s.key); !present {
			continue
		}
		b, ok := f.Bool(s.key)
		if !ok {
			return Vocab{}, fmt.Errorf("%s: %s, want a bool", s.key, describe(f, s.key))
		}
		*s.val = b
	}
	// Read like llama.cpp's get_key(..., required=false), which throws on a
	// value of another type.
	if v.Name, err = optString(f, keyName); err != nil {
		return Vocab{}, err
	}
	if v.Architecture, err = optString(f, keyArch); err != nil {
		return Vocab{}, err
	}
	return v, nil
}

func optString(f *gguf.File, key string) (string, error) {
	if _, present := f.Get(key); !present {
		return "", nil
	}
	s, ok := f.String(key)
	if !ok {
		return "", fmt.Errorf("%s: %s, want a string", key, describe(f, key))
	}
	return s, nil
}

// describe names the stored type of a key for error messages.
func describe(f *gguf.File, key string) string {
	kv, _ := f.Get(key)
	if a, isArr := kv.Value.(gguf.Array); isArr {
		return fmt.Sprintf("found an array of %s", a.Elem)
	}
	return fmt.Sprintf("found %s", kv.Type)
}
