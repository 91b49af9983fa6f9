package main

import (
	"bytes"
	"cmp"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"regexp"
	"runtime"
	"slices"
	"strconv"
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

// maxRangeValues bounds what one list flag expands to: "1-1000000000" is a
// typo, not a billion tests.
const maxRangeValues = 10000

var rangeRE = regexp.MustCompile(`^(\d+)(?:-(\d+)(?:([+*|])(\d+))?)?(?:,|$)`)

// parseIntRange is llama-bench's parse_int_range: comma-separated values and
// ranges FIRST-LAST, FIRST-LAST+STEP, FIRST-LAST*MULT (LAST included when
// the steps reach it), in the order given.
func parseIntRange(s string) ([]int, error) {
	const want = "want N, FIRST-LAST, FIRST-LAST+STEP or FIRST-LAST*MULT, comma-separated"
	var out []int
	for rest := s; rest != ""; {
		m := rangeRE.FindStringSubmatch(rest)
		if m == nil {
			return nil, fmt.Errorf("%q: %s", s, want)
		}
		rest = rest[len(m[0]):]
		first, err := strconv.Atoi(m[1])
		if err != nil {
			return nil, fmt.Errorf("%q: %s too large", s, m[1])
		}
		last, op, step := first, "+", 1
		if m[2] != "" {
			if last, err = strconv.Atoi(m[2]); err != nil {
				return nil, fmt.Errorf("%q: %s too large", s, m[2])
			}
		}
		if m[3] == "|" { // llama-bench's pattern admits it, and refuses it
			return nil, fmt.Errorf("%q: %s", s, want)
		} else if m[3] != "" {
			op = m[3]
			if step, err = strconv.Atoi(m[4]); err != nil {
				return nil, fmt.Errorf("%q: %s too large", s, m[4])
			}
		}
		for i := first; i <= last; {
			if len(out) == maxRangeValues {
				return nil, fmt.Errorf("%q: more than %d values", s, maxRangeValues)
			}
			out = append(out, i)
			prev := i
			if op == "+" {
				i += step
			} else {
				i *= step
			}
			if i <= prev {
				return nil, fmt.Errorf("%q: the range %s does not grow", s, strings.TrimSuffix(m[0], ","))
			}
		}
	}
	return out, nil
}

// intList is a llama-bench list flag: values and ranges (parseIntRange),
// the flag repeatable; the first value given replaces the default.
type intList struct {
	vals []int
	set  bool
}

func (l *intList) Set(s string) error {
	v, err := parseIntRange(s)
	if err != nil {
		return err
	}
	if !l.set {
		l.vals, l.set = nil, true
	}
	l.vals = append(l.vals, v...)
	return nil
}

func (l *intList) String() string {
	s := make([]string, len(l.vals))
	for i, v := range l.vals {
		s[i] = strconv.Itoa(v)
	}
	return strings.Join(s, ",")
}

func (l *intList) Type() string { return "list" }

// pathList is llama-bench's -m: comma-separated paths, the flag repeatable.
type pathList []string

func (l *pathList) Set(s string) error {
	for _, p := range strings.Split(s, ",") {
		if p == "" {
			return fmt.Errorf("%q: an empty path", s)
		}
		*l = append(*l, p)
	}
	return nil
}

func (l *pathList) String() string { return strings.Join(*l, ",") }
func (l *pathList) Type() string   { return "paths" }

// benchInstance is one test of the cross product (llama-bench's
// cmd_params_instance): a model, a thread count and a pp or tg test.
type benchInstance struct {
	model   string
	threads int
	req     backend.BenchRequest
}

// benchInstances orders the tests as llama-bench's get_cmd_params_instances
// does for the flags bench has: for each model, thread count and depth, the
// pp tests (-p, 0 skipped), then the tg tests (-n, 0 skipped).
func benchInstances(models []string, threads, depths, prompts, gens []int) []benchInstance {
	var out []benchInstance
	for _, m := range models {
		for _, t := range threads {
			for _, d := range depths {
				for _, p := range prompts {
					if p > 0 {
						out = append(out, benchInstance{m, t, backend.BenchRequest{NPrompt: p, NDepth: d}})
					}
				}
				for _, n := range gens {
					if n > 0 {
						out = append(out, benchInstance{m, t, backend.BenchRequest{NGen: n, NDepth: d}})
					}
				}
			}
		}
	}
	return out
}

// checkContext refuses a test of model whose depth and length do not fit
// in the model's context (n_ctx_train), naming the flags.
func checkContext(tests []benchInstance, model string, nCtx int) error {
	if nCtx <= 0 {
		return nil // the plugin does not say
	}
	for _, in := range tests {
		r := in.req
		if in.model != model || r.Positions() <= nCtx {
			continue
		}
		flags := fmt.Sprintf("-p %d", r.NPrompt)
		if r.NGen > 0 {
			flags = fmt.Sprintf("-n %d", r.NGen)
		}
		if r.NDepth > 0 {
			flags = fmt.Sprintf("-d %d with %s", r.NDepth, flags)
		}
		return usageErr("%s: %s needs %d positions, more than %s's context of %d (n_ctx_train)", flags, r, r.Positions(), model, nCtx)
	}
	return nil
}

func newBenchCmd() *cobra.Command {
	var (
		plugin, pluginDir, output string
		reps                      int
		noWarmup                  bool
		options                   []string
		models                    pathList
		nPrompt                   = intList{vals: []int{128}}
		nGen                      = intList{vals: []int{64}}
		nDepth                    = intList{vals: []int{0}}
		threads                   = intList{vals: []int{runtime.NumCPU()}}
	)
	cmd := &cobra.Command{
		Use:   "bench --model M --plugin P",
		Short: "Measure prompt processing (pp) and generation (tg) speed of a plugin, as llama-bench does",
		Long: `bench runs llama-bench's tests inside a plugin: ppN (N prompt tokens in one
batch) and tgN (N single-token decodes), each repeated -r times after a warm-up,
timed inside the plugin so IPC is excluded. With -d D, D tokens are in the KV
cache when each repetition's clock starts (ppN @ dD, tgN @ dD). t/s is the mean
of the per-repetition rates ± their sample standard deviation, as llama-bench
computes them.

-m, -p, -n, -d and -t take llama-bench's lists: comma-separated values and
ranges FIRST-LAST, FIRST-LAST+STEP, FIRST-LAST*MULT, or the flag repeated;
bench runs every combination in llama-bench's order. -o csv, json, jsonl and
sql have llama-bench's fields.
--plugin is a name (the binary evalrun-plugin-NAME) or a path to a plugin.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			bad := func(l intList, max int) bool {
				return slices.ContainsFunc(l.vals, func(v int) bool { return v > max })
			}
			switch {
			case bad(nPrompt, 1<<24) || bad(nGen, 1<<24) || bad(nDepth, 1<<24):
				return usageErr("-p, -n and -d: 0 to %d tokens", 1<<24)
			case !slices.ContainsFunc(append(slices.Clone(nPrompt.vals), nGen.vals...), func(v int) bool { return v > 0 }):
				return usageErr("-p and -n: no test to run (every value is 0)")
			case len(nDepth.vals) == 0:
				return usageErr("-d: no depth given")
			case reps < 1 || reps > 1000:
				return usageErr("-r: 1 to 1000 repetitions")
			case len(threads.vals) == 0 || slices.ContainsFunc(threads.vals, func(t int) bool { return t < 1 || t > 4*runtime.NumCPU() }):
				return usageErr("-t: 1 to %d threads (4 × the CPUs)", 4*runtime.NumCPU())
			case !slices.Contains(benchFormats, output):
				return usageErr("-o must be one of %s", strings.Join(benchFormats, ", "))
			}
			opts, err := parseOptions(options)
			if err != nil {
				return err
			}
			tests := benchInstances(models, threads.vals, nDepth.vals, nPrompt.vals, nGen.vals)
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
			out := &benchPrinter{w: cmd.OutOrStdout(), format: output}
			var (
				loaded  *benchInstance // the model and threads loaded
				load    backend.LoadResult
				info    backend.Info
				checked = map[string]bool{}
			)
			for i, in := range tests {
				// A model is loaded again for another thread count: threads
				// are a Load setting.
				if loaded == nil || loaded.model != in.model || loaded.threads != in.threads {
					load, err = client.Load(ctx, backend.LoadRequest{ModelPath: absPath(in.model), Threads: in.threads, Options: opts, BaseDir: cwd})
					if (errors.Is(err, backend.ErrInvalidArgument) || errors.Is(err, fs.ErrNotExist)) && strings.Contains(err.Error(), absPath(in.model)) {
						return usageErr("load: %v", err) // the plugin named the file
					} else if errors.Is(err, backend.ErrInvalidArgument) || errors.Is(err, fs.ErrNotExist) {
						return usageErr("load %s: %v", in.model, err)
					} else if err != nil {
						return backendErr(fmt.Errorf("load %s: %w", in.model, err))
					}
					if info, err = client.Describe(ctx); err != nil { // after Load: some plugins only know their device then
						return backendErr(err)
					}
					if !checked[in.model] {
						if err := checkContext(tests, in.model, load.Model.NCtxTrain); err != nil {
							return err
						}
						checked[in.model] = true
					}
					loaded = &tests[i]
				}
				req := in.req
				req.Reps, req.Warmup, req.Seed = reps, !noWarmup, 1
				started := time.Now()
				res, err := client.Bench(ctx, req)
				if err != nil {
					return backendErr(err)
				}
				if err := out.row(benchRow{info: info, load: load, model: in.model, threads: in.threads, req: req, time: started,
					test: speedstat.NewBenchTest(req.NPrompt, req.NGen, res.SamplesNS)}); err != nil {
					return err
				}
			}
			return out.end()
		},
	}
	f := cmd.Flags()
	f.VarP(&models, "model", "m", "GGUF model file (comma-separated, repeatable: one after the other)")
	f.StringVar(&plugin, "plugin", "cpu", "plugin name (evalrun-plugin-NAME) or path")
	f.StringVar(&pluginDir, "plugin-dir", "", "directory to look for plugins in first")
	f.VarP(&threads, "threads", "t", "threads (list)")
	f.VarP(&nPrompt, "n-prompt", "p", "prompt tokens (list; a ppN test each, 0 none)")
	f.VarP(&nGen, "n-gen", "n", "generated tokens (list; a tgN test each, 0 none)")
	f.VarP(&nDepth, "n-depth", "d", "tokens in the KV cache before each test (list)")
	f.IntVarP(&reps, "repetitions", "r", 5, "repetitions of each test")
	f.BoolVar(&noWarmup, "no-warmup", false, "skip the warm-up run")
	f.StringVarP(&output, "output", "o", "md", "output format: "+strings.Join(benchFormats, ", "))
	f.StringArrayVar(&options, "option", nil, "plugin option key=value (repeatable), e.g. --option numerics=ggml")
	cmd.MarkFlagRequired("model")
	return cmd
}

// benchFormats are -o's values, llama-bench's.
var benchFormats = []string{"md", "csv", "json", "jsonl", "sql"}

type benchRow struct {
	info    backend.Info
	load    backend.LoadResult
	model   string
	threads int
	req     backend.BenchRequest
	time    time.Time // when the test started (llama-bench's test_time)
	test    *summary.BenchTest
}

// backendName is llama-bench's backends column: CPU for the engine on the
// host's CPU (the cpu plugin), otherwise the plugin's device.
func backendName(info backend.Info) string {
	if info.Device == "cpu" {
		return "CPU"
	}
	return info.Device
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

// The kinds of llama-bench's fields (test::get_field_type): how json writes
// them and sql types them.
const (
	fieldString = iota
	fieldBool
	fieldInt
	fieldFloat
)

// benchFields are llama-bench b10587's fields (test::get_fields), in its
// order, with their kinds: the csv header and sql columns.
var benchFields = []struct {
	name string
	kind int
}{
	{"build_commit", fieldString}, {"build_number", fieldInt}, {"cpu_info", fieldString}, {"gpu_info", fieldString},
	{"backends", fieldString}, {"model_filename", fieldString}, {"model_type", fieldString}, {"model_size", fieldInt},
	{"model_n_params", fieldInt}, {"n_batch", fieldInt}, {"n_ubatch", fieldInt}, {"n_threads", fieldInt},
	{"cpu_mask", fieldString}, {"cpu_strict", fieldBool}, {"poll", fieldInt}, {"type_k", fieldString},
	{"type_v", fieldString}, {"n_gpu_layers", fieldInt}, {"n_cpu_moe", fieldInt}, {"split_mode", fieldString},
	{"main_gpu", fieldInt}, {"no_kv_offload", fieldBool}, {"flash_attn", fieldInt}, {"devices", fieldString},
	{"tensor_split", fieldString}, {"tensor_buft_overrides", fieldString}, {"load_mode", fieldString}, {"embeddings", fieldBool},
	{"no_op_offload", fieldInt}, {"no_host", fieldBool}, {"fit_target", fieldInt}, {"fit_min_ctx", fieldInt},
	{"n_prompt", fieldInt}, {"n_gen", fieldInt}, {"n_depth", fieldInt},
	{"test_time", fieldString}, {"avg_ns", fieldInt}, {"stddev_ns", fieldInt}, {"avg_ts", fieldFloat}, {"stddev_ts", fieldFloat},
}

// values are the row's benchFields as llama-bench writes them (bools 0/1,
// rates with 6 decimals). The llama.cpp settings describe what the engine
// plugins do: an F32 KV cache, no flash attention, nothing offloaded to a
// GPU, the model mmap'ed, the prompt in chunks of 512 tokens, each one
// forward pass.
func (r benchRow) values() []string {
	m := r.load.Model
	i := func(v int64) string { return strconv.FormatInt(v, 10) }
	batch := i(backend.DefaultBenchBatch)
	return []string{
		gitCommit, "0", summary.CPUModel(), "",
		backendName(r.info), r.model, strings.TrimSpace(m.Arch + " " + m.FileType), i(m.SizeBytes),
		i(m.NParams), batch, batch, i(int64(r.threads)),
		"0x0", "0", "0", "f32",
		"f32", "0", "0", "none",
		"0", "0", "0", "none",
		"0.00", "none", "mmap", "0",
		"0", "0", "0", "0",
		i(int64(r.req.NPrompt)), i(int64(r.req.NGen)), i(int64(r.req.NDepth)),
		r.time.UTC().Format("2006-01-02T15:04:05Z"),
		strconv.FormatUint(r.test.AvgNS, 10), strconv.FormatUint(r.test.StddevNS, 10),
		fmt.Sprintf("%f", r.test.AvgTS), fmt.Sprintf("%f", r.test.StddevTS),
	}
}

// benchPrinter writes bench's rows as llama-bench's printers do; the header
// comes with the first row, so a bench that fails before any prints none.
type benchPrinter struct {
	w      io.Writer
	format string
	rows   int
}

func (p *benchPrinter) row(r benchRow) error {
	var b bytes.Buffer
	if p.rows == 0 {
		p.header(&b)
	}
	switch p.format {
	case "md":
		sim := "" // a simulator's speed on this CPU, not the device's
		if r.info.Simulated() {
			sim = " (simulated)"
		}
		m := r.load.Model
		fmt.Fprintf(&b, "| %s | %s | %s | %s | %s | %s | %d | %s | %.2f ± %.2f%s |\n",
			strings.TrimSpace(m.Arch+" "+m.FileType), humanSize(m.SizeBytes), humanParams(m.NParams), backendName(r.info),
			r.info.Name, cmp.Or(r.load.Kernels, "-"), r.threads, r.req, r.test.AvgTS, r.test.StddevTS, sim)
	case "csv":
		vals := r.values()
		for i, v := range vals {
			vals[i] = `"` + strings.ReplaceAll(v, `"`, `""`) + `"`
		}
		fmt.Fprintln(&b, strings.Join(vals, ","))
	case "sql":
		names := make([]string, len(benchFields))
		for i, f := range benchFields {
			names[i] = f.name
		}
		vals := r.values()
		for i, v := range vals {
			vals[i] = "'" + strings.ReplaceAll(v, "'", "''") + "'" // llama-bench does not double a quote; SQL needs it
		}
		fmt.Fprintf(&b, "INSERT INTO llama_bench (%s) VALUES (%s);\n", strings.Join(names, ", "), strings.Join(vals, ", "))
	case "json", "jsonl":
		sep, indent, open, end := ", ", "", "{", "}\n"
		if p.format == "json" {
			sep, indent, open, end = ",\n", "    ", "  {\n", "\n  }"
			if p.rows > 0 {
				b.WriteString(",\n")
			}
		}
		b.WriteString(open)
		for i, kv := range r.jsonFields() {
			if i > 0 {
				b.WriteString(sep)
			}
			fmt.Fprintf(&b, "%s%s: %s", indent, jsonString(kv[0]), kv[1])
		}
		b.WriteString(end)
	}
	p.rows++
	_, err := p.w.Write(b.Bytes())
	return err
}

// jsonFields are the row's llama-bench fields as JSON values (llama-bench's
// format_json_value), its samples, and evalrun's own: the plugin and the CPU
// kernels it ran.
func (r benchRow) jsonFields() [][2]string {
	var out [][2]string
	for i, v := range r.values() {
		switch benchFields[i].kind {
		case fieldString:
			v = jsonString(v)
		case fieldBool:
			v = strconv.FormatBool(v != "0")
		}
		out = append(out, [2]string{benchFields[i].name, v})
	}
	ns, _ := json.Marshal(r.test.SamplesNS)
	ts, _ := json.Marshal(speedstat.SamplesTS(r.test))
	return append(out, [2]string{"samples_ns", string(ns)}, [2]string{"samples_ts", string(ts)},
		[2]string{"plugin", jsonString(r.info.Name)}, [2]string{"kernels", jsonString(r.load.Kernels)})
}

func jsonString(s string) string {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	enc.Encode(s)
	return strings.TrimSuffix(b.String(), "\n")
}

func (p *benchPrinter) header(b *bytes.Buffer) {
	switch p.format {
	case "md":
		b.WriteString("| model | size | params | backend | plugin | kernels | threads | test | t/s |\n")
		b.WriteString("| ----- | ---: | -----: | ------- | ------ | ------- | ------: | ---: | --: |\n")
	case "csv":
		names := make([]string, len(benchFields))
		for i, f := range benchFields {
			names[i] = f.name
		}
		fmt.Fprintln(b, strings.Join(names, ","))
	case "sql":
		b.WriteString("CREATE TABLE IF NOT EXISTS llama_bench (\n")
		for i, f := range benchFields {
			typ := map[int]string{fieldString: "TEXT", fieldBool: "INTEGER", fieldInt: "INTEGER", fieldFloat: "REAL"}[f.kind]
			sep := ","
			if i == len(benchFields)-1 {
				sep = ""
			}
			fmt.Fprintf(b, "  %s %s%s\n", f.name, typ, sep)
		}
		b.WriteString(");\n\n")
	case "json":
		b.WriteString("[\n")
	}
}

// end writes the footer after the last row.
func (p *benchPrinter) end() error {
	var err error
	switch p.format {
	case "md":
		_, err = fmt.Fprintf(p.w, "\nbuild: %s (%s)\n", gitCommit, version)
	case "json":
		_, err = io.WriteString(p.w, "\n]\n")
	}
	return err
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
