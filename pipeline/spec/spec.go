package spec

import (
	"bytes"
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"reflect"
	"runtime"
	"strings"
	"time"

	"github.com/go-viper/mapstructure/v2"
	"github.com/spf13/viper"
)

// Spec is one experiment: a model, prompt sets, a reference backend, the
// candidate backends compared against it, and the gates that decide the
// verdict. After Load every path in it is absolute and every default is
// filled in.
type Spec struct {
	Name       string    `mapstructure:"name"`
	Model      Model     `mapstructure:"model"`
	Datasets   []Dataset `mapstructure:"datasets"`
	Reference  Reference `mapstructure:"reference"`
	Candidates []Backend `mapstructure:"backends"`
	Bench      Bench     `mapstructure:"bench"`
	Gates      Gates     `mapstructure:"gates"`
	Output     Output    `mapstructure:"output"`
	PluginDir  string    `mapstructure:"plugin_dir"` // "" = beside the evalrun binary
	Timeouts   Timeouts  `mapstructure:"timeouts"`

	Path string `mapstructure:"-"` // the spec file as given to Load
	Dir  string `mapstructure:"-"` // absolute directory of Path; relative paths in the spec start here
}

// Model is the GGUF file every backend loads unless it names its own.
type Model struct {
	Path   string `mapstructure:"path"`
	SHA256 string `mapstructure:"sha256"` // lower-case hex; "" = not checked
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
	Name         string `mapstructure:"name"`
	Path         string `mapstructure:"path"`
	Mode         Mode   `mapstructure:"mode"`           // default score
	NCtx         int    `mapstructure:"n_ctx"`          // score: chunk size, default 128, >= 8
	MaxNewTokens int    `mapstructure:"max_new_tokens"` // generate: default 32
	Limit        int    `mapstructure:"limit"`          // first N records only; 0 = all
}

// Reference is the backend everything is compared against: a live plugin, or
// a llama-perplexity --kl-divergence-base file (KLDBase).
type Reference struct {
	Name    string         `mapstructure:"name"` // default "reference"
	Plugin  string         `mapstructure:"plugin"`
	Threads int            `mapstructure:"threads"` // 0 = number of CPUs
	Model   string         `mapstructure:"model"`   // "" = Spec.Model.Path
	Options map[string]any `mapstructure:"options"` // keys keep their case; validated by the plugin
	KLDBase string         `mapstructure:"kld_base"`
	Output  BackendOutput  `mapstructure:"output"`
}

// Backend is one candidate (or, from Spec.Backends, the reference as well).
type Backend struct {
	Name    string         `mapstructure:"name"`
	Plugin  string         `mapstructure:"plugin"`  // a name (binary evalrun-plugin-NAME) or an absolute path
	Threads int            `mapstructure:"threads"` // 0 = number of CPUs
	Model   string         `mapstructure:"model"`   // "" = Spec.Model.Path
	Options map[string]any `mapstructure:"options"` // keys keep their case; validated by the plugin
	Output  BackendOutput  `mapstructure:"output"`
	Gates   Gates          `mapstructure:"gates"` // overrides of Spec.Gates, key by key
}

// BackendOutput asks for extra files from one backend.
type BackendOutput struct {
	// KLDBase, when set, is where this backend's score logits are written as
	// a llama-perplexity --kl-divergence-base file.
	KLDBase string `mapstructure:"kld_base"`
}

// Bench configures the llama-bench style throughput pass.
type Bench struct {
	Enabled bool `mapstructure:"enabled"`  // default true
	NPrompt int  `mapstructure:"n_prompt"` // default 64; 0 = no pp test
	NGen    int  `mapstructure:"n_gen"`    // default 16; 0 = no tg test
	Reps    int  `mapstructure:"reps"`     // default 5
	Warmup  bool `mapstructure:"warmup"`   // default true
}

// Output says where and in which formats results are written.
type Output struct {
	Dir     string   `mapstructure:"dir"`     // relative to the spec's directory; default ./results of the working directory
	Formats []string `mapstructure:"formats"` // subset of json, jsonl, md; default all three
}

// Timeouts bound each plugin call. In YAML they are strings such as "30s".
type Timeouts struct {
	Start time.Duration `mapstructure:"start"` // plugin start, default 30s
	Load  time.Duration `mapstructure:"load"`  // default 120s
	Eval  time.Duration `mapstructure:"eval"`  // per Eval call, default 300s
	Bench time.Duration `mapstructure:"bench"` // default 600s
}

// Backends returns every backend that runs a plugin, ready to launch: the
// reference first (unless it is a KLD base file), then the candidates in spec
// order. Model is the effective model path (the override or Spec.Model.Path),
// Threads is never 0, and Gates are the effective gates (Spec.Gates overridden
// by the backend's own); the reference has no gates.
func (s *Spec) Backends() []Backend {
	var out []Backend
	if s.Reference.KLDBase == "" {
		r := s.Reference
		out = append(out, Backend{Name: r.Name, Plugin: r.Plugin, Threads: r.Threads, Model: r.Model, Options: r.Options, Output: r.Output})
	}
	for _, b := range s.Candidates {
		b.Gates = s.Gates.Merge(b.Gates)
		out = append(out, b)
	}
	for i := range out {
		if out[i].Model == "" {
			out[i].Model = s.Model.Path
		}
	}
	return out
}

// PluginPath is the executable for a backend's plugin field: a path as is,
// otherwise evalrun-plugin-NAME in PluginDir or, when that is empty, in
// the directory of the running executable.
func (s *Spec) PluginPath(plugin string) (string, error) {
	if strings.Contains(plugin, "/") {
		return plugin, nil
	}
	dir := s.PluginDir
	if dir == "" {
		exe, err := os.Executable()
		if err != nil {
			return "", fmt.Errorf("spec: locating plugin %q: %w", plugin, err)
		}
		if real, err := filepath.EvalSymlinks(exe); err == nil {
			exe = real
		}
		dir = filepath.Dir(exe)
	}
	return filepath.Join(dir, "evalrun-plugin-"+plugin), nil
}

// Option changes how Load reads a spec.
type Option func(*options)

type options struct {
	lookupEnv  func(string) (string, bool)
	checkFiles bool
	numCPU     int
}

// WithEnv replaces os.LookupEnv as the source of EVALRUN_* overrides; nil
// disables environment overrides.
func WithEnv(lookup func(name string) (string, bool)) Option {
	return func(o *options) { o.lookupEnv = lookup }
}

// WithoutFileChecks skips checking that input files (model, datasets, KLD
// base, plugin paths, plugin_dir) exist, for validating a spec elsewhere.
func WithoutFileChecks() Option {
	return func(o *options) { o.checkFiles = false }
}

// Load reads, checks and resolves the spec at path. All problems found are
// returned together as an ErrorList of *Error, each naming the file, line and
// key.
func Load(path string, opts ...Option) (*Spec, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("spec: %w", err)
	}
	return Parse(data, path, opts...)
}

// Parse is Load on bytes already read; path names the file in errors and
// anchors relative paths.
func Parse(data []byte, path string, opts ...Option) (*Spec, error) {
	o := options{lookupEnv: os.LookupEnv, checkFiles: true, numCPU: runtime.NumCPU()}
	for _, opt := range opts {
		opt(&o)
	}
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

	v := viper.New()
	v.SetConfigType("yaml")
	if err := v.ReadConfig(bytes.NewReader(data)); err != nil {
		c.add(0, "", "", "reading YAML: "+err.Error())
		return nil, c.err()
	}
	if o.lookupEnv != nil {
		applyEnv(v, w, o.lookupEnv, c)
		if err := c.err(); err != nil {
			return nil, err
		}
	}

	s := new(Spec)
	err := v.UnmarshalExact(s, func(dc *mapstructure.DecoderConfig) {
		dc.WeaklyTypedInput = false
		dc.DecodeHook = durationHook
	})
	if err != nil {
		// The walker and the typed env values should make this unreachable;
		// still report it against the key mapstructure names.
		var de *mapstructure.DecodeError
		if errors.As(err, &de) {
			c.add(w.line(de.Name()), de.Name(), w.env[de.Name()], de.Unwrap().Error())
		} else {
			c.add(0, "", "", err.Error())
		}
		return nil, c.err()
	}
	// viper lower-cases map keys and splits keys at dots; plugin options
	// are free-form, so take them verbatim from the YAML.
	free := func(path string, dst *map[string]any) {
		if n := w.free[path]; n != nil {
			m, err := decodeFree(n)
			if err != nil {
				c.add(n.Line, path, "", err.Error())
			}
			*dst = m
		}
	}
	free("reference.options", &s.Reference.Options)
	for i := range s.Candidates {
		free(fmt.Sprintf("backends[%d].options", i), &s.Candidates[i].Options)
	}
	if err := c.err(); err != nil {
		return nil, err
	}

	s.Path = path
	dir, err := filepath.Abs(filepath.Dir(path))
	if err != nil {
		return nil, fmt.Errorf("spec: %s: %w", path, err)
	}
	s.Dir = dir

	check := &checker{c: c, w: w, s: s, numCPU: o.numCPU}
	check.defaults()
	check.validate()
	if err := c.err(); err != nil {
		return nil, err
	}
	check.resolvePaths()
	if o.checkFiles {
		check.files()
	}
	if err := c.err(); err != nil {
		return nil, err
	}
	return s, nil
}

var durationType = reflect.TypeFor[time.Duration]()

// durationHook decodes "30s" into a time.Duration and refuses bare numbers,
// which would otherwise pass as nanoseconds.
func durationHook(from, to reflect.Type, data any) (any, error) {
	if to != durationType {
		return data, nil
	}
	switch d := data.(type) {
	case time.Duration:
		return d, nil
	case string:
		return time.ParseDuration(d)
	default:
		return nil, fmt.Errorf("want a duration such as \"30s\", got %v", data)
	}
}

// Gates are the thresholds a candidate must meet. A nil field is not
// checked; a set field is, including 0 (max_abs_diff_max: 0 demands
// bit-identical logits).
type Gates struct {
	KLDMeanMax     *float64 `mapstructure:"kld_mean_max"`     // mean KL divergence (nats)
	KLDP99Max      *float64 `mapstructure:"kld_p99_max"`      // 99th percentile KL divergence
	SameTopPMin    *float64 `mapstructure:"same_top_p_min"`   // fraction of positions with the same argmax, 0..1
	NMSEMax        *float64 `mapstructure:"nmse_max"`         // normalized mean squared error of the logits
	GreedyMatchMin *float64 `mapstructure:"greedy_match_min"` // fraction of free-running greedy tokens equal to the reference's, 0..1
	MaxAbsDiffMax  *float64 `mapstructure:"max_abs_diff_max"` // largest |logit difference|
	PPLRatioMax    *float64 `mapstructure:"ppl_ratio_max"`    // candidate PPL / reference PPL
	TGTSMin        *float64 `mapstructure:"tg_ts_min"`        // generation tokens/s
	PPTSMin        *float64 `mapstructure:"pp_ts_min"`        // prompt processing tokens/s
}

// Gate is one set threshold.
type Gate struct {
	Name   string  // the spec key, e.g. "kld_mean_max"
	Metric string  // the metric it limits, e.g. "kld_mean"
	Max    bool    // true: the metric must be <= Limit; false: >= Limit
	Limit  float64 // the threshold
}

// Pass reports whether value meets the gate. NaN never passes.
func (g Gate) Pass(value float64) bool {
	if math.IsNaN(value) {
		return false
	}
	if g.Max {
		return value <= g.Limit
	}
	return value >= g.Limit
}

// List returns the set gates in schema order.
func (g Gates) List() []Gate {
	var out []Gate
	rv := reflect.ValueOf(g)
	for _, f := range fieldsOf(reflect.TypeFor[Gates]()) {
		p := rv.Field(f.index).Interface().(*float64)
		if p == nil {
			continue
		}
		gate := Gate{Name: f.key, Limit: *p}
		if m, ok := strings.CutSuffix(f.key, "_max"); ok {
			gate.Metric, gate.Max = m, true
		} else {
			gate.Metric = strings.TrimSuffix(f.key, "_min")
		}
		out = append(out, gate)
	}
	return out
}

// Merge returns g with every gate set in over replacing g's.
func (g Gates) Merge(over Gates) Gates {
	// Fresh pointers, so changing the result never changes g or over.
	var out Gates
	rg, ro, rout := reflect.ValueOf(g), reflect.ValueOf(over), reflect.ValueOf(&out).Elem()
	for i := range rout.NumField() {
		src := rg.Field(i)
		if !ro.Field(i).IsNil() {
			src = ro.Field(i)
		}
		if !src.IsNil() {
			v := *src.Interface().(*float64)
			rout.Field(i).Set(reflect.ValueOf(&v))
		}
	}
	return out
}
