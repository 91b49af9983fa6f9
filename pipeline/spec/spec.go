package spec

import (
	"cmp"
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"reflect"
	"runtime"
	"time"

	"go.yaml.in/yaml/v3"

	"github.com/evalrun/evalrun/pipeline/gate"
)

// Spec is one experiment: a model, prompt sets, a reference backend, the
// candidate backends compared against it, and the gates that decide the
// verdict. After Load every path in it is absolute and every default is
// filled in.
type Spec struct {
	Name       string    `yaml:"name" check:"name"`
	Model      Model     `yaml:"model"`
	Datasets   []Dataset `yaml:"datasets"`
	Reference  Reference `yaml:"reference"`
	Candidates []Backend `yaml:"backends"`
	Bench      Bench     `yaml:"bench"`
	Gates      Gates     `yaml:"gates"`
	Output     Output    `yaml:"output"`
	PluginDir  string    `yaml:"plugin_dir" path:"dir"` // "" = beside the evalrun binary
	Timeouts   Timeouts  `yaml:"timeouts"`

	// Cache is a reference-logits cache directory (package refcache), shared
	// by runs and shards; EVALRUN_CACHE sets it too.
	Cache string `yaml:"cache" path:"out"`

	// Baseline is an earlier run (its directory or summary.json) that the
	// relative gates compare with; evalrun run --baseline overrides it.
	Baseline string `yaml:"baseline" path:"run"`

	Path string `yaml:"-"` // the spec file as given to Load
	Dir  string `yaml:"-"` // absolute directory of Path; relative paths in the spec start here

	where *walker // lines and environment variables of the keys, for Err
}

// Model is the GGUF file every backend loads unless it names its own.
type Model struct {
	Path   string `yaml:"path" path:"file"`
	SHA256 string `yaml:"sha256"` // lower-case hex; "" = not checked
}

// Mode says how a prompt set is used.
type Mode string

const (
	// ModeScore feeds each record in chunks of NCtx tokens and compares the
	// logits of every position (llama-perplexity style).
	ModeScore Mode = "score"
	// ModeGenerate lets the reference generate MaxNewTokens greedily after
	// each prompt; candidates are teacher-forced and also run free.
	ModeGenerate Mode = "generate"
)

// Dataset is one JSONL prompt set (see package pipeline/dataset).
type Dataset struct {
	Name         string `yaml:"name" check:"name"`
	Path         string `yaml:"path" path:"file"`
	Mode         Mode   `yaml:"mode" check:"modes"`                 // default score
	NCtx         int    `yaml:"n_ctx" check:"8..16777216"`          // score: chunk size, default 128
	MaxNewTokens int    `yaml:"max_new_tokens" check:"1..16777216"` // generate: default 32
	Limit        int    `yaml:"limit" check:"0..2147483647"`        // first N records only; 0 = all

	// RunLimited: LimitRecords lowered Limit (evalrun run --limit), so
	// records the spec itself runs may be left out.
	RunLimited bool `yaml:"-"`
}

// Backend is one candidate, or (from Backends) the reference.
type Backend struct {
	Name       string         `yaml:"name" check:"name"`
	Plugin     string         `yaml:"plugin"`                       // a name: the binary evalrun-plugin-NAME
	PluginPath string         `yaml:"plugin_path" path:"file"`      // or an executable, given explicitly
	Threads    int            `yaml:"threads" check:"0..4 per CPU"` // 0 = number of CPUs
	Model      string         `yaml:"model" path:"file"`            // "" = Spec.Model.Path
	Options    map[string]any `yaml:"options"`                      // keys keep their case; validated by the plugin
	Output     BackendOutput  `yaml:"output"`
	Gates      Gates          `yaml:"gates"` // overrides of Spec.Gates, key by key (candidates only)

	// Key is where the backend is in the spec ("reference", "backends[1]"):
	// Spec.Err(b.Key+".options.type", ...) points at its lines.
	Key string `yaml:"-"`
}

// Reference is the backend everything is compared against: a live plugin, or
// a llama-perplexity --kl-divergence-base file (KLDBase).
type Reference struct {
	Backend `yaml:",inline"`
	KLDBase string `yaml:"kld_base" path:"file"`
}

// BackendOutput asks for extra files from one backend.
type BackendOutput struct {
	// KLDBase, when set, is where this backend's score logits are written as
	// a llama-perplexity --kl-divergence-base file.
	KLDBase string `yaml:"kld_base" path:"out"`
}

// Bench configures the llama-bench style throughput pass.
type Bench struct {
	Enabled bool `yaml:"enabled"`                      // default true
	NPrompt int  `yaml:"n_prompt" check:"0..16777216"` // default 64; 0 = no pp test
	NGen    int  `yaml:"n_gen" check:"0..16777216"`    // default 16; 0 = no tg test
	Reps    int  `yaml:"reps" check:"1..1000"`         // default 100 (the p95's 95% CI needs 76, compare 90 for 8 tests)
	Warmup  bool `yaml:"warmup"`                       // default true
}

// OutputFormats are the files a run can write: summary.json (json, always
// written), prompts.jsonl (jsonl), report.md (md), junit.xml (junit) and
// report.html (html).
var OutputFormats = []string{"json", "jsonl", "md", "junit", "html"}

// Output says where and in which formats results are written.
type Output struct {
	Dir     string   `yaml:"dir" path:"out"`          // relative to the spec's directory; default ./results of the working directory
	Formats []string `yaml:"formats" check:"formats"` // subset of OutputFormats; default all of them
}

// Timeouts bound each plugin call. In YAML they are strings such as "30s".
type Timeouts struct {
	Start time.Duration `yaml:"start" check:"positive"` // plugin start, default 30s
	Load  time.Duration `yaml:"load" check:"positive"`  // default 120s
	Eval  time.Duration `yaml:"eval" check:"positive"`  // wait for each logits row, default 300s
	Bench time.Duration `yaml:"bench" check:"positive"` // default 600s
}

// Backends returns every backend that runs a plugin, ready to launch: the
// reference first (unless it is a KLD base file), then the candidates in spec
// order. Model is the effective model path, Threads is never 0, and Gates are
// the effective gates (Spec.Gates overridden by the backend's own, as fresh
// copies); the reference has no gates.
func (s *Spec) Backends() []Backend {
	var out []Backend
	if s.Reference.KLDBase == "" {
		out = append(out, s.Reference.Backend)
	}
	for _, b := range s.Candidates {
		b.Gates = s.Gates.Merge(b.Gates)
		out = append(out, b)
	}
	for i := range out {
		out[i].Model = cmp.Or(out[i].Model, s.Model.Path)
	}
	return out
}

// LimitRecords is evalrun run --limit n: every dataset runs at most its
// first n records (its limit key lowered to n; a smaller limit of its own
// stays). A kld_base reference's chunks are the file's: it has no records
// to cut.
func (s *Spec) LimitRecords(n int) error {
	if n < 1 {
		return fmt.Errorf("want a number of records >= 1, got %d", n)
	}
	if s.Reference.KLDBase != "" {
		return fmt.Errorf("the reference is a kld_base file (%s), whose tokens and chunks are the file's: there are no dataset records to cut", s.Reference.KLDBase)
	}
	for i := range s.Datasets {
		if d := &s.Datasets[i]; d.Limit == 0 || d.Limit > n {
			d.Limit, d.RunLimited = n, true
		}
	}
	return nil
}

// Effective is the spec as a run uses it (environment overrides applied,
// defaults filled in, paths absolute), for the record in summary.json.
func (s *Spec) Effective() map[string]any {
	var m map[string]any // gates not set are left out (omitempty)
	if data, err := yaml.Marshal(s); err == nil {
		yaml.Unmarshal(data, &m)
	}
	return m
}

// Err is an error about the value at a key path ("backends[0].threads",
// "backends[0].options.type"), pointing at the key's line (or its nearest
// ancestor's) and naming the environment variable that set it, if any:
// for checks made after Load, against the model or by a plugin.
func (s *Spec) Err(key, format string, args ...any) error {
	e := &Error{File: s.Path, Key: key, Msg: fmt.Sprintf(format, args...)}
	if s.where != nil {
		e.Line, e.Env = s.where.line(key), s.where.env[key]
	}
	return ErrorList{e}
}

// MaxSize bounds a spec file: a spec is a page of YAML, and /dev/zero is not.
const MaxSize = 1 << 20

// Load reads, checks and resolves the spec at path (any readable file,
// a FIFO included, up to MaxSize bytes) with its EVALRUN_ overrides. ctx
// cancels the read. All problems found are returned together as an
// ErrorList of *Error, each naming the file, line and key.
func Load(ctx context.Context, path string) (*Spec, error) {
	return readSpec(ctx, path, options{env: true, checkFiles: true})
}

// Parse checks a spec's text as Load checks a file, less the environment's
// overrides and the checks that the files it names exist: for examples
// whose files are elsewhere (the docs' test). path names the file in errors
// and anchors relative paths.
func Parse(data []byte, path string) (*Spec, error) { return parse(data, path, options{}) }

// options are what tests leave out: the environment's overrides, the
// checks that input files exist.
type options struct{ env, checkFiles bool }

func readSpec(ctx context.Context, path string, o options) (*Spec, error) {
	var data []byte
	var err error
	done := make(chan struct{})
	go func() { // a FIFO with no writer blocks in open and read
		defer close(done)
		var f *os.File
		if f, err = os.Open(path); err == nil {
			data, err = io.ReadAll(io.LimitReader(f, MaxSize+1))
			f.Close()
		}
	}()
	select {
	case <-done:
	case <-ctx.Done():
		return nil, fmt.Errorf("spec %s: %w", path, ctx.Err())
	}
	if err != nil {
		return nil, fmt.Errorf("spec: %w", err)
	}
	if len(data) > MaxSize {
		return nil, ErrorList{{File: path, Msg: fmt.Sprintf("larger than %d KiB: not a spec", MaxSize>>10)}}
	}
	return parse(data, path, o)
}

// parse is readSpec on bytes already read; path names the file in errors and
// anchors relative paths.
func parse(data []byte, path string, o options) (*Spec, error) {
	c := &collector{file: path}
	root := parseYAML(data, c)
	if root == nil {
		return nil, c.err()
	}
	w := newWalker(c)
	w.mapping(root, specType, "")
	if err := c.err(); err != nil {
		return nil, err
	}
	s := defaultSpec()
	if err := root.Decode(s); err != nil {
		// The walk should have caught every type problem first.
		c.add(0, "", "", "decoding: "+err.Error())
		return nil, c.err()
	}
	if o.env {
		applyEnv(s, w, c)
	}
	s.Path, s.where = path, w
	dir, err := filepath.Abs(filepath.Dir(path))
	if err != nil {
		return nil, fmt.Errorf("spec: %s: %w", path, err)
	}
	s.Dir = dir
	check := &checker{c: c, w: w, s: s, numCPU: runtime.NumCPU()}
	check.defaults()
	check.validate()
	if err := c.err(); err != nil {
		return nil, err
	}
	check.paths(o.checkFiles)
	if err := c.err(); err != nil {
		return nil, err
	}
	return s, nil
}

// Gates are the thresholds a candidate must meet. A nil field is not
// checked; a set field is, including 0 (max_abs_diff_max: 0 demands
// bit-identical logits).
type Gates struct {
	KLDMeanMax     *float64 `yaml:"kld_mean_max,omitempty"`     // mean KL divergence (nats)
	KLDP99Max      *float64 `yaml:"kld_p99_max,omitempty"`      // 99th percentile KL divergence
	SameTopPMin    *float64 `yaml:"same_top_p_min,omitempty"`   // fraction of positions with the same argmax, 0..1
	NMSEMax        *float64 `yaml:"nmse_max,omitempty"`         // normalized mean squared error of the logits
	GreedyMatchMin *float64 `yaml:"greedy_match_min,omitempty"` // fraction of free-running greedy tokens equal to the reference's, 0..1
	MaxAbsDiffMax  *float64 `yaml:"max_abs_diff_max,omitempty"` // largest |logit difference|
	PPLRatioMax    *float64 `yaml:"ppl_ratio_max,omitempty"`    // candidate PPL / reference PPL
	CosineMeanMin  *float64 `yaml:"cosine_mean_min,omitempty"`  // mean cosine similarity of the logits rows with the reference's
	TGTSMin        *float64 `yaml:"tg_ts_min,omitempty"`        // generation tokens/s (the p95 of the repetitions)
	PPTSMin        *float64 `yaml:"pp_ts_min,omitempty"`        // prompt processing tokens/s (the p95)

	// Relative to the baseline run's same-named backend (see Relative).
	KLDMeanMaxIncrease  *float64 `yaml:"kld_mean_max_increase,omitempty"`  // kld_mean may grow by at most this (nats)
	SameTopPMaxDrop     *float64 `yaml:"same_top_p_max_drop,omitempty"`    // same_top_p may fall by at most this (fraction)
	PPLRatioMaxIncrease *float64 `yaml:"ppl_ratio_max_increase,omitempty"` // ppl_ratio may grow by at most this
	CosineMeanMaxDrop   *float64 `yaml:"cosine_mean_max_drop,omitempty"`   // cosine_mean may fall by at most this
	TGTSMaxSlowdown     *float64 `yaml:"tg_ts_max_slowdown,omitempty"`     // tg t/s may fall by at most this fraction, unless not significant
	PPTSMaxSlowdown     *float64 `yaml:"pp_ts_max_slowdown,omitempty"`     // pp t/s likewise

	// SpeedGatesOnSimulated applies the speed gates (tg_ts_min, pp_ts_min,
	// *_max_slowdown) to simulated devices too; by default a simulator's
	// throughput is not gated.
	SpeedGatesOnSimulated *bool `yaml:"speed_gates_on_simulated,omitempty"`

	// RequireOffload fails a backend whose device left a listed kernel
	// unused, or ran nothing at all (the plugin's kernel accounting).
	RequireOffload *bool `yaml:"require_offload,omitempty"`

	// SpeedBaseline names another backend of the same run (the reference
	// or a candidate) that the slowdown gates judge against instead of the
	// baseline run. The bench interleaves the two round by round, so the
	// machine's drift between runs, which two runs cannot tell from a
	// change of the code, does not enter (last night's plugin beside
	// tonight's, by plugin_path:). A candidate's own key only.
	SpeedBaseline *string `yaml:"speed_baseline,omitempty"`
}

// List returns the set absolute gates in schema order.
func (g Gates) List() []gate.Gate { return g.list(false) }

// Relative returns the set gates that compare with a baseline run, in
// schema order; Metric is the metric compared (kld_mean, same_top_p,
// ppl_ratio, tg_ts, pp_ts) and Limit the largest change for the worse.
func (g Gates) Relative() []gate.Gate { return g.list(true) }

// BaselineRun returns the relative gates that compare with a baseline run:
// all of them, less the slowdown gates when SpeedBaseline names a backend of
// this run to judge them against.
func (g Gates) BaselineRun() []gate.Gate { return g.relative(false) }

// InRun returns the slowdown gates judged against SpeedBaseline's backend
// in this run; none without it.
func (g Gates) InRun() []gate.Gate { return g.relative(true) }

// Slowdowns returns the slowdown gates, judged in this run or against the
// baseline run.
func (g Gates) Slowdowns() []gate.Gate {
	var out []gate.Gate
	for _, r := range g.Relative() {
		if r.Bound == gate.MaxSlowdown {
			out = append(out, r)
		}
	}
	return out
}

// relative returns the relative gates judged in this run (inRun) or
// against the baseline run.
func (g Gates) relative(inRun bool) []gate.Gate {
	var out []gate.Gate
	for _, r := range g.Relative() {
		if (g.SpeedBaseline != nil && r.Bound == gate.MaxSlowdown) == inRun {
			out = append(out, r)
		}
	}
	return out
}

// SpeedOnSimulated reports whether speed gates apply to simulated devices.
func (g Gates) SpeedOnSimulated() bool {
	return g.SpeedGatesOnSimulated != nil && *g.SpeedGatesOnSimulated
}

// list parses the set gate keys (package gate's catalog knows their
// metrics) that are relative or not.
func (g Gates) list(relative bool) []gate.Gate {
	var out []gate.Gate
	rv := reflect.ValueOf(g)
	for _, f := range fieldsOf(reflect.TypeFor[Gates]()) {
		p, ok := rv.FieldByIndex(f.index).Interface().(*float64)
		if !ok || p == nil {
			continue
		}
		r, err := gate.Parse(f.key, *p)
		if err != nil {
			panic("spec: Gates: " + err.Error()) // the struct's keys are the catalog's (TestEveryGateKeyIsTheCatalogs)
		}
		if r.Relative() == relative {
			out = append(out, r)
		}
	}
	return out
}

// Merge returns g with every gate set in over replacing g's, as fresh
// pointers: changing the result never changes g or over.
func (g Gates) Merge(over Gates) Gates {
	var out Gates
	rg, ro, rout := reflect.ValueOf(g), reflect.ValueOf(over), reflect.ValueOf(&out).Elem()
	for i := range rout.NumField() {
		src := rg.Field(i)
		if !ro.Field(i).IsNil() {
			src = ro.Field(i)
		}
		if !src.IsNil() {
			v := reflect.New(src.Type().Elem())
			v.Elem().Set(src.Elem())
			rout.Field(i).Set(v)
		}
	}
	return out
}
