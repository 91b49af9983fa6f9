package spec

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"strings"
	"time"
)

// checker fills defaults, validates and resolves one decoded spec.
type checker struct {
	c      *collector
	w      *walker
	s      *Spec
	numCPU int
}

// Defaults that the schema documents; a key counts as given when it is in the
// file (non-null) or set from the environment.
const (
	defaultReferenceName = "reference"
	defaultNCtx          = 128
	defaultMaxNewTokens  = 32
	defaultNPrompt       = 64
	defaultNGen          = 16
	defaultReps          = 5
	defaultOutputDir     = "results"
	minNCtx              = 8
)

var defaultFormats = []string{"json", "jsonl", "md"}

var defaultTimeouts = Timeouts{Start: 30 * time.Second, Load: 120 * time.Second, Eval: 300 * time.Second, Bench: 600 * time.Second}

func (k *checker) defaults() {
	s, has := k.s, k.w.has
	if !has("reference.name") {
		s.Reference.Name = defaultReferenceName
	}
	if s.Reference.Threads == 0 && s.Reference.KLDBase == "" {
		s.Reference.Threads = k.numCPU
	}
	for i := range s.Candidates {
		if s.Candidates[i].Threads == 0 {
			s.Candidates[i].Threads = k.numCPU
		}
	}
	for i := range s.Datasets {
		d, p := &s.Datasets[i], fmt.Sprintf("datasets[%d].", i)
		if !has(p + "mode") {
			d.Mode = ModeScore
		}
		if d.Mode == ModeScore && !has(p+"n_ctx") {
			d.NCtx = defaultNCtx
		}
		if d.Mode == ModeGenerate && !has(p+"max_new_tokens") {
			d.MaxNewTokens = defaultMaxNewTokens
		}
	}
	if !has("bench.enabled") {
		s.Bench.Enabled = true
	}
	if !has("bench.n_prompt") {
		s.Bench.NPrompt = defaultNPrompt
	}
	if !has("bench.n_gen") {
		s.Bench.NGen = defaultNGen
	}
	if !has("bench.reps") {
		s.Bench.Reps = defaultReps
	}
	if !has("bench.warmup") {
		s.Bench.Warmup = true
	}
	if !has("output.formats") {
		s.Output.Formats = append([]string(nil), defaultFormats...)
	}
	td, tv := reflect.ValueOf(defaultTimeouts), reflect.ValueOf(&s.Timeouts).Elem()
	for _, f := range fieldsOf(reflect.TypeFor[Timeouts]()) {
		if !has("timeouts." + f.key) {
			tv.Field(f.index).Set(td.Field(f.index))
		}
	}
}

// add reports a problem with the key at path, pointing at its line.
func (k *checker) add(path, format string, args ...any) {
	k.c.add(k.w.line(path), path, k.w.env[path], fmt.Sprintf(format, args...))
}

var nameRE = regexp.MustCompile(`^[A-Za-z0-9._-]+$`)
var hexRE = regexp.MustCompile(`^[0-9a-fA-F]{64}$`)

func (k *checker) name(path, v string) {
	switch {
	case v == "":
		k.add(path, "required")
	case !nameRE.MatchString(v):
		k.add(path, "%q: use only letters, digits, '.', '_' and '-'", v)
	}
}

func (k *checker) nonNegative(path string, v int) {
	if v < 0 {
		k.add(path, "must be >= 0, got %d", v)
	}
}

func (k *checker) validate() {
	s := k.s
	k.name("name", s.Name)
	if s.Model.Path == "" {
		k.add("model.path", "required (the GGUF model file)")
	}
	if s.Model.SHA256 != "" {
		if !hexRE.MatchString(s.Model.SHA256) {
			k.add("model.sha256", "want 64 hex digits, got %q", s.Model.SHA256)
		}
		s.Model.SHA256 = strings.ToLower(s.Model.SHA256)
	}
	k.validateDatasets()
	k.validateReference()
	k.validateCandidates()
	k.gates("gates", s.Gates)

	b := s.Bench
	k.nonNegative("bench.n_prompt", b.NPrompt)
	k.nonNegative("bench.n_gen", b.NGen)
	if b.Reps < 1 {
		k.add("bench.reps", "must be >= 1, got %d", b.Reps)
	}
	if b.Enabled && b.NPrompt == 0 && b.NGen == 0 {
		k.add("bench", "n_prompt and n_gen are both 0: nothing to benchmark (set enabled: false instead)")
	}

	if len(s.Output.Formats) == 0 {
		k.add("output.formats", "at least one of json, jsonl, md")
	}
	seen := map[string]bool{}
	for i, f := range s.Output.Formats {
		p := fmt.Sprintf("output.formats[%d]", i)
		switch {
		case f != "json" && f != "jsonl" && f != "md":
			k.add(p, "%q: want json, jsonl or md", f)
		case seen[f]:
			k.add(p, "%q listed twice", f)
		}
		seen[f] = true
	}

	tv := reflect.ValueOf(s.Timeouts)
	for _, f := range fieldsOf(reflect.TypeFor[Timeouts]()) {
		if d := tv.Field(f.index).Interface().(time.Duration); d <= 0 {
			k.add("timeouts."+f.key, "must be a positive duration, got %v", d)
		}
	}
}

func (k *checker) validateDatasets() {
	s := k.s
	if s.Reference.KLDBase != "" {
		if len(s.Datasets) > 0 {
			k.add("datasets", "not used with reference.kld_base: the KLD base file carries its own tokens; remove datasets or use a plugin reference")
		}
		return
	}
	if len(s.Datasets) == 0 {
		k.add("datasets", "required: at least one prompt set (or reference.kld_base)")
	}
	first := map[string]int{}
	for i, d := range s.Datasets {
		p := fmt.Sprintf("datasets[%d]", i)
		k.name(p+".name", d.Name)
		if j, dup := first[d.Name]; dup && d.Name != "" {
			k.add(p+".name", "duplicate dataset name %q (also datasets[%d])", d.Name, j)
		} else {
			first[d.Name] = i
		}
		if d.Path == "" {
			k.add(p+".path", "required (a JSONL prompt set)")
		}
		switch d.Mode {
		case ModeScore:
			if d.NCtx < minNCtx {
				k.add(p+".n_ctx", "must be >= %d, got %d", minNCtx, d.NCtx)
			}
			if k.w.has(p + ".max_new_tokens") {
				k.add(p+".max_new_tokens", "only for mode generate")
			}
		case ModeGenerate:
			if d.MaxNewTokens < 1 {
				k.add(p+".max_new_tokens", "must be >= 1, got %d", d.MaxNewTokens)
			}
			if k.w.has(p + ".n_ctx") {
				k.add(p+".n_ctx", "only for mode score")
			}
		default:
			k.add(p+".mode", "%q: want score or generate", d.Mode)
		}
		k.nonNegative(p+".limit", d.Limit)
	}
}

func (k *checker) validateReference() {
	r := k.s.Reference
	k.name("reference.name", r.Name)
	switch {
	case r.KLDBase != "" && r.Plugin != "":
		k.add("reference.kld_base", "set either reference.plugin or reference.kld_base, not both")
	case r.KLDBase != "":
		for _, key := range []string{"threads", "model", "options", "output.kld_base"} {
			if k.w.has("reference." + key) {
				k.add("reference."+key, "has no effect with reference.kld_base (no plugin runs)")
			}
		}
	case r.Plugin == "":
		k.add("reference.plugin", "required: a plugin name such as cpu (or set reference.kld_base)")
	default:
		k.plugin("reference.plugin", r.Plugin)
	}
	k.nonNegative("reference.threads", r.Threads)
}

func (k *checker) validateCandidates() {
	s := k.s
	if len(s.Candidates) == 0 {
		k.add("backends", "required: at least one candidate backend to compare with the reference")
	}
	first := map[string]string{s.Reference.Name: "reference.name"}
	for i, b := range s.Candidates {
		p := fmt.Sprintf("backends[%d]", i)
		k.name(p+".name", b.Name)
		if other, dup := first[b.Name]; dup && b.Name != "" {
			k.add(p+".name", "duplicate backend name %q (also %s)", b.Name, other)
		} else {
			first[b.Name] = p + ".name"
		}
		if b.Plugin == "" {
			k.add(p+".plugin", "required: a plugin name such as cpu, or a path containing '/'")
		} else {
			k.plugin(p+".plugin", b.Plugin)
		}
		k.nonNegative(p+".threads", b.Threads)
		k.gates(p+".gates", b.Gates)
	}
}

func (k *checker) plugin(path, v string) {
	if !strings.Contains(v, "/") && !nameRE.MatchString(v) {
		k.add(path, "%q: a plugin name uses only letters, digits, '.', '_' and '-' (or give a path containing '/')", v)
	}
}

func (k *checker) gates(path string, g Gates) {
	for _, gate := range g.List() {
		p := path + "." + gate.Name
		switch {
		case gate.Limit < 0:
			k.add(p, "must be >= 0, got %g", gate.Limit)
		case (gate.Metric == "same_top_p" || gate.Metric == "greedy_match") && gate.Limit > 1:
			k.add(p, "is a fraction between 0 and 1, got %g", gate.Limit)
		}
	}
}

// resolvePaths makes every path in the spec absolute: relative ones start
// at the spec's directory, except the default output dir, which is
// ./results of the working directory.
func (k *checker) resolvePaths() {
	s := k.s
	abs := func(p string) string {
		if p == "" || filepath.IsAbs(p) {
			return p
		}
		return filepath.Join(s.Dir, p)
	}
	plugin := func(p string) string {
		if strings.Contains(p, "/") {
			return abs(p)
		}
		return p
	}
	s.Model.Path = abs(s.Model.Path)
	for i := range s.Datasets {
		s.Datasets[i].Path = abs(s.Datasets[i].Path)
	}
	r := &s.Reference
	r.Plugin, r.Model, r.KLDBase, r.Output.KLDBase = plugin(r.Plugin), abs(r.Model), abs(r.KLDBase), abs(r.Output.KLDBase)
	for i := range s.Candidates {
		b := &s.Candidates[i]
		b.Plugin, b.Model, b.Output.KLDBase = plugin(b.Plugin), abs(b.Model), abs(b.Output.KLDBase)
	}
	s.PluginDir = abs(s.PluginDir)
	if s.Output.Dir != "" {
		s.Output.Dir = abs(s.Output.Dir)
	} else if wd, err := filepath.Abs(defaultOutputDir); err == nil {
		s.Output.Dir = wd
	} else {
		s.Output.Dir = defaultOutputDir
	}
}

// files checks that the inputs exist, so a typo fails at load with its line
// rather than minutes into a run.
func (k *checker) files() {
	s := k.s
	k.file("model.path", s.Model.Path, false)
	for i, d := range s.Datasets {
		k.file(fmt.Sprintf("datasets[%d].path", i), d.Path, false)
	}
	r := s.Reference
	k.file("reference.kld_base", r.KLDBase, false)
	k.file("reference.model", r.Model, false)
	if strings.Contains(r.Plugin, "/") {
		k.file("reference.plugin", r.Plugin, false)
	}
	for i, b := range s.Candidates {
		p := fmt.Sprintf("backends[%d]", i)
		k.file(p+".model", b.Model, false)
		if strings.Contains(b.Plugin, "/") {
			k.file(p+".plugin", b.Plugin, false)
		}
	}
	k.file("plugin_dir", s.PluginDir, true)
}

func (k *checker) file(path, p string, wantDir bool) {
	if p == "" {
		return
	}
	fi, err := os.Stat(p)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		k.add(path, "%s: no such file or directory", p)
	case err != nil:
		k.add(path, "%v", err)
	case wantDir && !fi.IsDir():
		k.add(path, "%s: not a directory", p)
	case !wantDir && fi.IsDir():
		k.add(path, "%s: is a directory, want a file", p)
	}
}
