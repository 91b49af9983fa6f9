package llamaplugin

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/evalrun/evalrun/backend"
	"github.com/evalrun/evalrun/engine/gguf"
	"github.com/evalrun/evalrun/plugins/llamacpp/llama"
)

// Option parsing needs no library: these run everywhere.
func TestParseOptions(t *testing.T) {
	o, err := parseOptions(nil)
	if err != nil || o.flashAttn != llama.FlashAttnOff || o.KVType != "f32" || o.kvType != 0 {
		t.Fatalf("defaults: %+v, %v", o, err)
	}
	o, err = parseOptions(map[string]any{"flash_attn": "on", "kv_type": "Q8_0", "threads": float64(3), "n_gpu_layers": float64(-1), "devices": []any{"CPU"}})
	if err != nil || o.flashAttn != llama.FlashAttnOn || o.kvType != 8 || o.Threads != 3 || *o.NGPULayers != -1 || o.Devices[0] != "CPU" {
		t.Fatalf("parsed %+v, %v", o, err)
	}
	if o, err := parseOptions(map[string]any{"swa_full": true}); err != nil || !o.SWAFull || describeOptions(o) != "flash_attn off, kv f32, swa_full on" {
		t.Errorf("swa_full true: %+v, %v", o, err)
	}
	for in, want := range map[any]int32{true: llama.FlashAttnOn, false: llama.FlashAttnOff, "auto": llama.FlashAttnAuto, "off": llama.FlashAttnOff} {
		if o, err := parseOptions(map[string]any{"flash_attn": in}); err != nil || o.flashAttn != want {
			t.Errorf("flash_attn %v: %v, %v", in, o, err)
		}
	}
	for _, tc := range []struct {
		opts map[string]any
		text string
	}{
		{map[string]any{"flash": "on"}, `unknown option "flash" (valid options: cpu_variant, devices, fault_abort_after, flash_attn, kv_type, lib_dir, n_gpu_layers, swa_full, threads)`},
		{map[string]any{"kv_type": "q3_k"}, `option "kv_type": "q3_k", want one of f32, f16, bf16, q8_0`},
		{map[string]any{"flash_attn": "maybe"}, `option "flash_attn": maybe, want off, on or auto`},
		{map[string]any{"threads": "two"}, `option "threads": want an integer, got "two"`},
		{map[string]any{"threads": float64(-2)}, `option "threads": -2 is negative`},
		{map[string]any{"n_gpu_layers": float64(-5)}, `option "n_gpu_layers": -5`},
		{map[string]any{"devices": []any{""}}, `option "devices": entry 0 is empty`},
		{map[string]any{"cpu_variant": "../x"}, `not a path`},
		{map[string]any{"fault_abort_after": float64(-1)}, `option "fault_abort_after": -1`},
		{map[string]any{"swa_full": "no"}, `option "swa_full"`},
	} {
		_, err := parseOptions(tc.opts)
		if !errors.Is(err, backend.ErrInvalidArgument) || !strings.Contains(fmt.Sprint(err), tc.text) {
			t.Errorf("parseOptions(%v): err = %v; want InvalidArgument containing %q", tc.opts, err, tc.text)
		}
	}
}

func TestResolveLibDir(t *testing.T) {
	if d, _ := resolveLibDir("/x/y"); d != "/x/y" {
		t.Errorf("the option is not first: %q", d)
	}
	t.Setenv(LibDirEnv, "/from/env")
	if d, _ := resolveLibDir(""); d != "/from/env" {
		t.Errorf("the environment is not second: %q", d)
	}
	t.Setenv(LibDirEnv, "")
	exe, _ := os.Executable()
	want := filepath.Clean(filepath.Join(filepath.Dir(exe), "..", InstallDir))
	d, err := resolveLibDir("")
	if _, statErr := os.Stat(want); statErr == nil {
		if d != want {
			t.Errorf("default %q, want %q", d, want)
		}
	} else if !errors.Is(err, backend.ErrInvalidArgument) || !strings.Contains(fmt.Sprint(err), "run `make llamacpp`") {
		t.Errorf("no library anywhere: %v", err)
	}
}

func TestFileType(t *testing.T) {
	for desc, want := range map[string]string{"llama ?B (guessed) all F32": "(guessed) all F32", "llama 1B Q8_0": "Q8_0", "odd": "odd"} {
		if got := fileType(desc); got != want {
			t.Errorf("fileType(%q) = %q, want %q", desc, got, want)
		}
	}
}

// fakeVocab is a vocabulary as a library might read it.
type fakeVocab []string

func (v fakeVocab) NVocab() int             { return len(v) }
func (v fakeVocab) TokenText(id int) string { return v[id] }

// TestCheckVocabNamesTheFirstDifference: when libllama reads the file's
// vocabulary differently from the host, the refusal names the token.
func TestCheckVocabNamesTheFirstDifference(t *testing.T) {
	path := "../../../models/stories260K.gguf"
	f, err := gguf.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	toks, _ := f.Strings("tokenizer.ggml.tokens")
	f.Close()
	host := backend.VocabDigest(len(toks), func(i int) string { return toks[i] })

	if err := checkVocab(fakeVocab(toks), path, host); err != nil {
		t.Fatalf("the same vocabulary: %v", err)
	}
	if err := checkVocab(fakeVocab(toks[:10]), path, ""); err != nil {
		t.Fatalf("no digest from the host must not be checked: %v", err)
	}
	read := slices.Clone(toks)
	read[77] = "<0x4A>x" // a library that reads token 77 differently
	err = checkVocab(fakeVocab(read), path, host)
	if !errors.Is(err, backend.ErrInvalidArgument) || !strings.Contains(fmt.Sprint(err), `token 77 is "<0x4A>x" in libllama but "<0x4A>" in the model file`) {
		t.Errorf("a differently read token: %v", err)
	}
	err = checkVocab(fakeVocab(toks[:500]), path, host)
	if !errors.Is(err, backend.ErrInvalidArgument) || !strings.Contains(fmt.Sprint(err), "libllama reads 500 tokens, the model file has 512 (first differing id 500)") {
		t.Errorf("a shorter vocabulary: %v", err)
	}
	other := slices.Clone(toks)
	other[5] = "zz"
	err = checkVocab(fakeVocab(toks), path, backend.VocabDigest(len(other), func(i int) string { return other[i] }))
	if !errors.Is(err, backend.ErrInvalidArgument) || !strings.Contains(fmt.Sprint(err), "the host tokenizes with another vocabulary") {
		t.Errorf("the host's vocabulary is another file's: %v", err)
	}
}
