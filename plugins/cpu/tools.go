package main

import (
	"context"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"math"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"

	"github.com/spf13/cobra"

	"github.com/evalrun/evalrun/engine"
	"github.com/evalrun/evalrun/engine/ggml"
	"github.com/evalrun/evalrun/engine/gguf"
	"github.com/evalrun/evalrun/engine/sampling"
	"github.com/evalrun/evalrun/engine/synth"
	"github.com/evalrun/evalrun/engine/tokenizer"
	"github.com/evalrun/evalrun/internal/atomicfile"
	"github.com/evalrun/evalrun/internal/filehash"
	"github.com/evalrun/evalrun/internal/toolcmd"
)

// tools are the engine's user commands, run as "evalrun-plugin-cpu
// inspect|tokenize|generate|logits|synth ..." by evalrun, which passes its
// arguments on: the cpu plugin binary is the engine, so the host links none
// of it for these.
func tools() []*cobra.Command {
	return []*cobra.Command{newInspectCmd(), newTokenizeCmd(), newGenerateCmd(), newLogitsCmd(), newSynthCmd()}
}

// modelFlags are the flags of the engine commands that run a model.
type modelFlags struct {
	path, numerics string
	threads        int
}

func (mf *modelFlags) add(cmd *cobra.Command) {
	f := cmd.Flags()
	f.StringVarP(&mf.path, "model", "m", "", "GGUF model file")
	f.StringVar(&mf.numerics, "numerics", "exact", "CPU numerics: exact or ggml")
	f.IntVarP(&mf.threads, "threads", "t", runtime.NumCPU(), "threads")
	cmd.MarkFlagRequired("model")
}

// open opens the model; a bad file is bad input.
func (mf *modelFlags) open() (*engine.Model, error) {
	if mf.threads < 1 || mf.threads > 4*runtime.NumCPU() {
		return nil, toolcmd.UsageErr("--threads: 1 to %d (4 × the CPUs), got %d", 4*runtime.NumCPU(), mf.threads)
	}
	n, err := engine.ParseNumerics(mf.numerics)
	if err != nil {
		return nil, toolcmd.UsageErr("--numerics: %v", err)
	}
	m, err := engine.Open(mf.path, engine.Options{Numerics: n, Threads: mf.threads})
	if err != nil {
		return nil, toolcmd.UsageErr("%v", err)
	}
	return m, nil
}

func newInspectCmd() *cobra.Command {
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "inspect MODEL",
		Short: "Show a GGUF file's metadata, tensors (types and shapes) and parameter count",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			f, err := gguf.Open(args[0])
			if err != nil {
				return toolcmd.UsageErr("%v", err)
			}
			defer f.Close()
			return printInspect(cmd.OutOrStdout(), f, asJSON)
		},
	}
	cmd.Flags().BoolVar(&asJSON, "json", false, "print JSON")
	return cmd
}

func printInspect(w io.Writer, f *gguf.File, asJSON bool) error {
	type tensorOut struct {
		Name  string   `json:"name"`
		Type  string   `json:"type"`
		Shape []uint64 `json:"shape"`
		Bytes uint64   `json:"bytes"`
	}
	var tensors []tensorOut
	nParams, byType := f.NParams(), map[string]int{}
	for _, t := range f.Tensors {
		byType[t.Type.String()]++
		tensors = append(tensors, tensorOut{t.Name, t.Type.String(), t.Dims, t.Size})
	}
	meta := map[string]any{}
	for _, kv := range f.KVs { // long arrays (vocabularies) shortened
		meta[kv.Key] = kv.Value
		if a, ok := kv.Value.(gguf.Array); ok && a.Len() > 8 {
			meta[kv.Key] = fmt.Sprintf("[%d × %s]", a.Len(), a.Elem)
		} else if ok {
			meta[kv.Key] = a.Values
		}
	}
	if asJSON {
		return json.NewEncoder(w).Encode(map[string]any{
			"path": f.Path, "version": f.Version, "alignment": f.Alignment, "n_params": nParams,
			"metadata": meta, "tensors": tensors, "tensor_types": byType,
		})
	}
	fmt.Fprintf(w, "%s: GGUF v%d, alignment %d, %d metadata keys, %d tensors, %d parameters\n\nmetadata:\n",
		f.Path, f.Version, f.Alignment, len(f.KVs), len(f.Tensors), nParams)
	for _, kv := range f.KVs {
		fmt.Fprintf(w, "  %-40s %v\n", kv.Key, meta[kv.Key])
	}
	fmt.Fprintf(w, "\ntensors:\n")
	for _, t := range tensors {
		fmt.Fprintf(w, "  %-32s %-6s %v\n", t.Name, t.Type, t.Shape)
	}
	fmt.Fprintf(w, "\ntensor types:")
	for _, t := range slices.Sorted(maps.Keys(byType)) {
		fmt.Fprintf(w, " %s×%d", t, byType[t])
	}
	fmt.Fprintln(w)
	return nil
}

func openTokenizer(path string) (*tokenizer.Tokenizer, error) {
	f, err := gguf.Open(path)
	if err != nil {
		return nil, toolcmd.UsageErr("%v", err)
	}
	defer f.Close()
	tok, err := tokenizer.FromGGUF(f)
	if err != nil {
		return nil, toolcmd.UsageErr("%s: %v", path, err)
	}
	return tok, nil
}

func newTokenizeCmd() *cobra.Command {
	var model string
	var addSpecial bool
	cmd := &cobra.Command{
		Use:   "tokenize --model M [--add-special=false] TEXT",
		Short: "Print the token ids of TEXT as a JSON array (parse_special=false, as llama_tokenize)",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			tok, err := openTokenizer(model)
			if err != nil {
				return err
			}
			ids := tok.Encode(args[0], addSpecial)
			if ids == nil {
				ids = []int32{}
			}
			return json.NewEncoder(cmd.OutOrStdout()).Encode(ids)
		},
	}
	cmd.Flags().StringVarP(&model, "model", "m", "", "GGUF model file (its tokenizer is used)")
	cmd.Flags().BoolVar(&addSpecial, "add-special", true, "add BOS/EOS as the vocabulary asks")
	cmd.MarkFlagRequired("model")
	return cmd
}

// parseTokens parses "1,2,3" into ids.
func parseTokens(s string, nVocab int) ([]int32, error) {
	var ids []int32
	for _, f := range strings.Split(s, ",") {
		f = strings.TrimSpace(f)
		if f == "" {
			continue
		}
		v, err := strconv.ParseInt(f, 10, 32)
		if err != nil || v < 0 || int(v) >= nVocab {
			return nil, toolcmd.UsageErr("--tokens: %q is not a token id in 0..%d", f, nVocab-1)
		}
		ids = append(ids, int32(v))
	}
	if len(ids) == 0 {
		return nil, toolcmd.UsageErr("--tokens: no ids")
	}
	return ids, nil
}

func newGenerateCmd() *cobra.Command {
	var (
		mf                modelFlags
		prompt            string
		n                 int
		asJSON, stopAtEOS bool
		sp                = sampling.Defaults()
		seed              int64
	)
	cmd := &cobra.Command{
		Use:   "generate --model M --prompt P -n N",
		Short: "Generate text (greedy by default: first index wins ties; EOS not special unless --stop-at-eos)",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			switch {
			case n < 0:
				return toolcmd.UsageErr("-n must be ≥ 0")
			case !(sp.Temperature >= 0):
				return toolcmd.UsageErr("--temp must be ≥ 0 (0 = greedy)")
			case !(sp.TopP > 0 && sp.TopP <= 1):
				return toolcmd.UsageErr("--top-p must be in (0, 1] (1 = off)")
			case !(sp.MinP >= 0 && sp.MinP <= 1):
				return toolcmd.UsageErr("--min-p must be in [0, 1] (0 = off)")
			case sp.TopK < 0:
				return toolcmd.UsageErr("--top-k must be ≥ 0 (0 = off)")
			case !(sp.RepeatPenalty > 0):
				return toolcmd.UsageErr("--repeat-penalty must be > 0 (1 = off)")
			case sp.RepeatLastN < -1:
				return toolcmd.UsageErr("--repeat-last-n must be ≥ -1")
			}
			m, err := mf.open()
			if err != nil {
				return err
			}
			defer m.Close()
			tok := m.Tokenizer()
			ids := tok.Encode(prompt, true)
			if len(ids) == 0 {
				return toolcmd.UsageErr("the prompt has no tokens")
			}
			sp.Seed = uint64(seed)
			smp := sampling.New(sp)
			for _, id := range ids {
				smp.Accept(id)
			}
			s := m.NewSession(len(ids) + n)
			out := cmd.OutOrStdout()
			if !asJSON {
				io.WriteString(out, prompt)
			}
			gen := []int32{}
			var text []byte
			for batch := ids; len(gen) < n; batch = gen[len(gen)-1:] {
				if err := cmd.Context().Err(); err != nil {
					if !asJSON {
						fmt.Fprintln(out) // the message on a line of its own
					}
					return err // interrupted: toolcmd.Run says so
				}
				var next int32
				last := func(i int) bool { return i == len(batch)-1 }
				if err := s.Decode(batch, last, func(_ int, logits []float32) error {
					next = smp.Sample(logits)
					return nil
				}); err != nil {
					return toolcmd.BackendErr(err)
				}
				smp.Accept(next)
				gen = append(gen, next)
				piece := tok.Piece(next)
				if text = append(text, piece...); !asJSON {
					out.Write(piece)
				}
				if stopAtEOS && tok.IsEOG(next) {
					break
				}
			}
			if asJSON {
				return json.NewEncoder(out).Encode(map[string]any{"prompt_ids": ids, "generated_ids": gen, "text": string(text)})
			}
			fmt.Fprintln(out)
			return nil
		},
	}
	mf.add(cmd)
	f := cmd.Flags()
	f.StringVarP(&prompt, "prompt", "p", "", "prompt text (tokenized with BOS)")
	f.IntVarP(&n, "n-predict", "n", 64, "tokens to generate")
	f.BoolVar(&asJSON, "json", false, `print {"prompt_ids":[...],"generated_ids":[...],"text":"..."}`)
	f.BoolVar(&stopAtEOS, "stop-at-eos", false, "stop at an end-of-generation token")
	f.Float64Var(&sp.Temperature, "temp", 0, "temperature (0 = greedy)")
	f.IntVar(&sp.TopK, "top-k", sp.TopK, "top-k (0 = off)")
	f.Float64Var(&sp.TopP, "top-p", sp.TopP, "top-p (1 = off)")
	f.Float64Var(&sp.MinP, "min-p", sp.MinP, "min-p (0 = off)")
	f.Float64Var(&sp.RepeatPenalty, "repeat-penalty", 1, "repeat penalty (1 = off)")
	f.IntVar(&sp.RepeatLastN, "repeat-last-n", sp.RepeatLastN, "tokens the repeat penalty looks back")
	f.Int64Var(&seed, "seed", 0, "random seed for sampling")
	return cmd
}

func newLogitsCmd() *cobra.Command {
	var mf modelFlags
	var prompt, tokens, out string
	cmd := &cobra.Command{
		Use:   "logits --model M (--prompt P | --tokens 1,2,3) --out FILE",
		Short: "Write the logits of every position: raw little-endian f32 [n_tokens][n_vocab] in FILE, facts in FILE.json",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			m, err := mf.open()
			if err != nil {
				return err
			}
			defer m.Close()
			var ids []int32
			if tokens != "" {
				if ids, err = parseTokens(tokens, m.Config.NVocab); err != nil {
					return err
				}
			} else if ids = m.Tokenizer().Encode(prompt, true); len(ids) == 0 {
				return toolcmd.UsageErr("the prompt has no tokens")
			}
			return writeLogits(cmd.Context(), m, mf, ids, prompt, out)
		},
	}
	mf.add(cmd)
	f := cmd.Flags()
	f.StringVarP(&prompt, "prompt", "p", "", "prompt text (tokenized with add_special=true)")
	f.StringVar(&tokens, "tokens", "", "comma-separated token ids")
	f.StringVarP(&out, "out", "o", "", "output file (FILE and FILE.json)")
	cmd.MarkFlagsOneRequired("prompt", "tokens")
	cmd.MarkFlagsMutuallyExclusive("prompt", "tokens")
	cmd.MarkFlagRequired("out")
	return cmd
}

func writeLogits(ctx context.Context, m *engine.Model, mf modelFlags, ids []int32, text, out string) error {
	// Hashed first: a stop request ends the hash where it is, and a decode
	// that finishes within the grace is written.
	modelSum, err := filehash.SHA256(ctx, mf.path)
	if err != nil {
		return toolcmd.BackendErr(err)
	}
	nv := m.Config.NVocab
	raw := make([]byte, 0, len(ids)*nv*4)
	argmax := make([]int32, len(ids))
	argmaxLogit := make([]float64, len(ids))
	lse := make([]float64, len(ids))
	s := m.NewSession(len(ids))
	err = s.Decode(ids, nil, func(i int, row []float32) error {
		argmax[i] = sampling.Greedy(row)
		mx := float64(row[argmax[i]]) // a NaN in the row makes the sum NaN, as it should
		sum := 0.0
		for _, v := range row {
			sum += math.Exp(float64(v) - mx)
			raw = binary.LittleEndian.AppendUint32(raw, math.Float32bits(v))
		}
		argmaxLogit[i], lse[i] = mx, mx+math.Log(sum)
		return nil
	})
	if err != nil {
		return toolcmd.BackendErr(err)
	}
	ls := sha256.Sum256(raw)
	meta := map[string]any{
		"tool": "evalrun", "evalrun_version": version, "model_file": filepath.Base(mf.path), "model_path": mf.path,
		"model_sha256": modelSum, "n_vocab": nv, "numerics": mf.numerics, "add_special": true, "parse_special": false,
		"n_tokens": len(ids), "token_ids": ids, "logits_file": filepath.Base(out),
		"logits_format": "raw little-endian float32, row-major [n_tokens][n_vocab], row i = logits after token i (predicts token i+1)",
		"logits_shape":  []int{len(ids), nv}, "argmax": argmax, "argmax_logit": argmaxLogit, "row_logsumexp": lse,
		"sha256_of_logits_file": hex.EncodeToString(ls[:]), "threads": m.Threads(),
	}
	if text != "" {
		meta["text"] = text
	}
	data, _ := json.MarshalIndent(meta, "", " ")
	return writePair(out, raw, out+".json", append(data, '\n'))
}

// writePair writes the logits and their sidecar and renames them into place
// together (atomicfile.CommitAll): an interruption or a full disk leaves the
// old pair or the new one, not new logits beside an old sidecar.
func writePair(path1 string, data1 []byte, path2 string, data2 []byte) error {
	var files []*atomicfile.File
	defer func() {
		for _, f := range files {
			f.Abort() // does nothing to a file already in place
		}
	}()
	for _, w := range []struct {
		path string
		data []byte
	}{{path1, data1}, {path2, data2}} {
		f, err := atomicfile.Create(w.path)
		if err == nil {
			files = append(files, f)
			_, err = f.Write(w.data)
		}
		if err != nil {
			return writeErr(err)
		}
	}
	if err := atomicfile.CommitAll(files...); err != nil {
		return writeErr(err)
	}
	return nil
}

// writeErr is a failed write of --out: the user's path, unless the
// process is being interrupted.
func writeErr(err error) error {
	if errors.Is(err, context.Canceled) {
		return err
	}
	return toolcmd.UsageErr("--out: %v", err)
}

func newSynthCmd() *cobra.Command {
	var (
		cfg      synth.Config
		typeName string
		out      string
	)
	cmd := &cobra.Command{
		Use:   "synth --arch llama --n-embd 768 --n-layer 12 --n-head 12 --n-head-kv 12 --n-ff 2048 --n-vocab 32000 --type q8_0 --seed 1 --out FILE",
		Short: "Write a synthetic model with random weights and realistic shapes (loadable by llama.cpp too)",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			t, err := ggml.ParseType(typeName)
			if err != nil {
				return toolcmd.UsageErr("--type: %v", err)
			}
			cfg.Type = t
			if err := synth.Generate(cfg, out); err != nil {
				return toolcmd.UsageErr("%v", err)
			}
			fmt.Fprintf(cmd.OutOrStdout(), "wrote %s\n", out)
			return nil
		},
	}
	f := cmd.Flags()
	f.StringVar(&cfg.Arch, "arch", "llama", "architecture: "+strings.Join(synth.Archs, ", "))
	f.IntVar(&cfg.NEmbd, "n-embd", 768, "embedding size")
	f.IntVar(&cfg.NLayer, "n-layer", 12, "layers")
	f.IntVar(&cfg.NHead, "n-head", 12, "attention heads")
	f.IntVar(&cfg.NHeadKV, "n-head-kv", 12, "KV heads (GQA when fewer than heads)")
	f.IntVar(&cfg.NFF, "n-ff", 2048, "feed-forward size")
	f.IntVar(&cfg.NVocab, "n-vocab", 32000, "vocabulary size")
	f.StringVar(&typeName, "type", "f32", "weight type: f32, f16, q8_0, q4_0")
	f.Int64Var(&cfg.Seed, "seed", 1, "random seed")
	f.IntVar(&cfg.NCtx, "n-ctx", 2048, "context_length")
	f.IntVar(&cfg.HeadDim, "head-dim", 0, "attention.key_length (0: n-embd/n-head)")
	f.Float32Var(&cfg.RopeBase, "rope-base", 10000, "rope.freq_base")
	f.BoolVar(&cfg.RopeFreqs, "rope-freqs", false, "llama: rope_freqs.weight as Llama 3.1+ conversions write it")
	f.BoolVar(&cfg.Biases, "biases", false, "the optional biases of the architecture's graph (llama, minicpm: Q/K/V, attention output, FFN; qwen3: Q/K/V)")
	f.IntVar(&cfg.SlidingWindow, "sliding-window", 0, "gemma2/gemma3: attention.sliding_window (0: gemma2's 4096, gemma3 none)")
	f.IntVar(&cfg.SWAPattern, "swa-pattern", 0, "gemma2/gemma3: attention.sliding_window_pattern (0: 2 for gemma2, 6 for gemma3)")
	f.Float32Var(&cfg.RopeBaseSWA, "rope-base-swa", 0, "gemma2/gemma3: rope.freq_base_swa of the local layers (0: not written)")
	f.BoolVar(&cfg.LongRope, "long-rope", false, "phi3: rope_factors_long/short and their original context (--rope-orig-ctx, default n-ctx/4)")
	f.IntVar(&cfg.RopeDim, "rope-dim", 0, "glm4, phi3: rope.dimension_count (0: glm4 half the head, phi3 all of it)")
	f.Float64Var(&cfg.NormNoise, "norm-noise", 0, "norm weights 1 + N(0, this) instead of 1")
	f.StringVar(&cfg.RopeScaling, "rope-scaling", "", "rope.scaling.type: linear or yarn (with --rope-factor)")
	f.Float32Var(&cfg.RopeFactor, "rope-factor", 0, "rope.scaling.factor")
	f.IntVar(&cfg.RopeOrigCtx, "rope-orig-ctx", 0, "yarn, --long-rope: rope.scaling.original_context_length")
	f.StringVarP(&out, "out", "o", "", "output GGUF file")
	cmd.MarkFlagRequired("out")
	return cmd
}
