package main

import (
	"cmp"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/evalrun/evalrun/backend"
	"github.com/evalrun/evalrun/pipeline/speedstat"
	"github.com/evalrun/evalrun/pipeline/summary"
)

// parseOptions turns repeated --option key=value flags into plugin options.
// Values that parse as JSON (numbers, booleans, quoted strings) keep their
// type; anything else is a string.
func parseOptions(kvs []string) (map[string]any, error) {
	opts := map[string]any{}
	for _, kv := range kvs {
		k, v, ok := strings.Cut(kv, "=")
		if !ok || k == "" {
			return nil, usageErr("--option %q: want key=value", kv)
		}
		var val any
		if err := json.Unmarshal([]byte(v), &val); err != nil {
			val = v
		}
		opts[k] = val
	}
	return opts, nil
}

func newBenchCmd() *cobra.Command {
	var (
		model, plugin, pluginDir, output string
		threads, nPrompt, nGen, reps     int
		noWarmup                         bool
		options                          []string
	)
	cmd := &cobra.Command{
		Use:   "bench --model M --plugin P",
		Short: "Measure prompt processing (pp) and generation (tg) speed of a plugin, as llama-bench does",
		Long: `bench runs llama-bench's tests inside a plugin: ppN (N prompt tokens in one
batch) and tgN (N single-token decodes), each repeated -r times after a warm-up,
timed inside the plugin so IPC is excluded. t/s is the mean of the per-repetition
rates ± their sample standard deviation, as llama-bench computes them.
--plugin is a name (the binary evalrun-plugin-NAME) or a path to a plugin.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			switch {
			case nPrompt < 0 || nGen < 0 || nPrompt+nGen == 0 || nPrompt > 1<<24 || nGen > 1<<24:
				return usageErr("-p and -n: 0 to %d tokens, not both 0", 1<<24)
			case reps < 1 || reps > 1000:
				return usageErr("-r: 1 to 1000 repetitions")
			case threads < 1 || threads > 4*runtime.NumCPU():
				return usageErr("-t: 1 to %d threads (4 × the CPUs)", 4*runtime.NumCPU())
			case output != "md" && output != "json" && output != "jsonl":
				return usageErr("-o must be md, json or jsonl")
			}
			opts, err := parseOptions(options)
			if err != nil {
				return err
			}
			ctx := cmd.Context()
			path, err := backend.FindPlugin(plugin, pluginDir)
			if err != nil {
				return usageErr("--plugin: %v", err)
			}
			client, err := backend.Launch(ctx, backend.LaunchConfig{Path: path, StartTimeout: 30 * time.Second,
				Logger: slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))})
			if err != nil {
				return backendErr(err)
			}
			defer backend.EndOrphans() // after the Kill below: what the plugin left behind
			defer client.Kill()
			cwd, _ := os.Getwd() // relative paths in options are the user's, not the plugin's
			load, err := client.Load(ctx, backend.LoadRequest{ModelPath: absPath(model), Threads: threads, Options: opts, BaseDir: cwd})
			if (errors.Is(err, backend.ErrInvalidArgument) || errors.Is(err, fs.ErrNotExist)) && strings.Contains(err.Error(), absPath(model)) {
				return usageErr("load: %v", err) // the plugin named the file
			} else if errors.Is(err, backend.ErrInvalidArgument) || errors.Is(err, fs.ErrNotExist) {
				return usageErr("load %s: %v", model, err)
			} else if err != nil {
				return backendErr(fmt.Errorf("load %s: %w", model, err))
			}
			info, err := client.Describe(ctx) // after Load: some plugins only know their device then
			if err != nil {
				return backendErr(err)
			}
			var rows []benchRow
			for _, req := range []backend.BenchRequest{{NPrompt: nPrompt}, {NGen: nGen}} {
				if req.NPrompt+req.NGen == 0 {
					continue
				}
				req.Reps, req.Warmup, req.Seed = reps, !noWarmup, 1
				res, err := client.Bench(ctx, req)
				if err != nil {
					return backendErr(err)
				}
				rows = append(rows, benchRow{info: info, load: load, model: model, threads: threads,
					name: req.String(), test: speedstat.NewBenchTest(req.NPrompt, req.NGen, res.SamplesNS)})
			}
			return printBench(cmd.OutOrStdout(), output, rows)
		},
	}
	f := cmd.Flags()
	f.StringVarP(&model, "model", "m", "", "GGUF model file")
	f.StringVar(&plugin, "plugin", "cpu", "plugin name (evalrun-plugin-NAME) or path")
	f.StringVar(&pluginDir, "plugin-dir", "", "directory to look for plugins in first")
	f.IntVarP(&threads, "threads", "t", runtime.NumCPU(), "threads")
	f.IntVarP(&nPrompt, "n-prompt", "p", 128, "prompt tokens (ppN test; 0 to skip)")
	f.IntVarP(&nGen, "n-gen", "n", 64, "generated tokens (tgN test; 0 to skip)")
	f.IntVarP(&reps, "repetitions", "r", 5, "repetitions of each test")
	f.BoolVar(&noWarmup, "no-warmup", false, "skip the warm-up run")
	f.StringVarP(&output, "output", "o", "md", "output format: md, json or jsonl")
	f.StringArrayVar(&options, "option", nil, "plugin option key=value (repeatable), e.g. --option numerics=ggml")
	cmd.MarkFlagRequired("model")
	return cmd
}

type benchRow struct {
	info    backend.Info
	load    backend.LoadResult
	model   string
	threads int
	name    string // pp128, tg64
	test    *summary.BenchTest
}

func humanSize(b int64) string {
	if b >= 1<<30 {
		return fmt.Sprintf("%.2f GiB", float64(b)/(1<<30))
	}
	return fmt.Sprintf("%.2f MiB", float64(b)/(1<<20))
}

func humanParams(n int64) string {
	if n >= 1e9 {
		return fmt.Sprintf("%.2f B", float64(n)/1e9)
	}
	return fmt.Sprintf("%.2f M", float64(n)/1e6)
}

// printBench prints llama-bench's md table or its json/jsonl records (the
// fields evalrun knows, keyed by llama-bench's names).
func printBench(w io.Writer, format string, rows []benchRow) error {
	switch format {
	case "md":
		fmt.Fprintln(w, "| model | size | params | backend | kernels | threads | test | t/s |")
		fmt.Fprintln(w, "| ----- | ---: | -----: | ------- | ------- | ------: | ---: | --: |")
		for _, r := range rows {
			m := r.load.Model
			sim := "" // a simulator's speed on this CPU, not the device's
			if r.info.Simulated() {
				sim = " (simulated)"
			}
			fmt.Fprintf(w, "| %s %s | %s | %s | %s | %s | %d | %s | %.2f ± %.2f%s |\n",
				m.Arch, m.FileType, humanSize(m.SizeBytes), humanParams(m.NParams), r.info.Name+"/"+r.info.Device,
				cmp.Or(r.load.Kernels, "-"), r.threads, r.name, r.test.AvgTS, r.test.StddevTS, sim)
		}
		fmt.Fprintf(w, "\nbuild: %s (%s)\n", gitCommit, version)
		return nil
	default:
		var recs []map[string]any
		for _, r := range rows {
			m := r.load.Model
			samplesTS := speedstat.SamplesTS(r.test)
			// Every field llama-bench writes (compare-llama-bench.py
			// requires them), describing what the engine plugins do: F32 KV
			// cache, no flash attention, no offload to a GPU, mmap'ed model.
			recs = append(recs, map[string]any{
				"build_commit": gitCommit, "build_number": 0, "cpu_info": summary.CPUModel(), "gpu_info": "",
				"cpu_mask": "0x0", "cpu_strict": false, "poll": 0, "type_k": "f32", "type_v": "f32",
				"n_gpu_layers": 0, "n_cpu_moe": 0, "split_mode": "none", "main_gpu": 0, "no_kv_offload": false,
				"flash_attn": 0, "devices": "none", "tensor_split": "0.00", "tensor_buft_overrides": "none",
				"use_mmap": true, "load_mode": "mmap", "embeddings": false, "no_op_offload": 0, "no_host": false, "fit_target": 0, "fit_min_ctx": 0,
				"backends": r.info.Name + "/" + r.info.Device, "kernels": r.load.Kernels, "model_filename": r.model,
				"model_type": strings.TrimSpace(m.Arch + " " + m.FileType), "model_size": m.SizeBytes,
				"model_n_params": m.NParams, "n_batch": r.test.NPrompt, "n_ubatch": r.test.NPrompt,
				"n_threads": r.threads, "n_prompt": r.test.NPrompt, "n_gen": r.test.NGen, "n_depth": 0,
				"test_time": time.Now().UTC().Format("2006-01-02T15:04:05Z"),
				"avg_ns":    r.test.AvgNS, "stddev_ns": r.test.StddevNS, "avg_ts": r.test.AvgTS, "stddev_ts": r.test.StddevTS,
				"samples_ns": r.test.SamplesNS, "samples_ts": samplesTS,
			})
		}
		enc := json.NewEncoder(w)
		if format == "jsonl" {
			for _, r := range recs {
				if err := enc.Encode(r); err != nil {
					return err
				}
			}
			return nil
		}
		enc.SetIndent("", "  ")
		return enc.Encode(recs)
	}
}

// absPath resolves a flag path for messages and plugins (which run in their
// own working directory only by accident).
func absPath(p string) string {
	if p == "" {
		return p
	}
	if a, err := filepath.Abs(p); err == nil {
		return a
	}
	return p
}
