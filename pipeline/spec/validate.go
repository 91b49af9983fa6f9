package spec

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"slices"
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

// Limits of values the spec accepts.
const (
	minNCtx    = 8
	maxTokens  = 1 << 24 // n_ctx, max_new_tokens, bench sizes; the model's context is checked against the plan
	maxThreads = 4       // times the CPUs of the machine
)

// defaultSpec holds the documented defaults; decoding the YAML over it
// replaces what the file (or the environment) sets.
func defaultSpec() *Spec {
	return &Spec{
		Reference: Reference{Backend: Backend{Name: "reference"}},
		Bench:     Bench{Enabled: true, NPrompt: 64, NGen: 16, Reps: 5, Warmup: true},
		Output:    Output{Formats: slices.Clone(OutputFormats)},
		Timeouts:  Timeouts{Start: 30 * time.Second, Load: 120 * time.Second, Eval: 300 * time.Second, Bench: 600 * time.Second},
	}
}

// defaults fills what depends on other values: list items and threads.
func (k *checker) defaults() {
	s, has := k.s, k.w.has
	s.Reference.Key = "reference"
	if s.Reference.Threads == 0 && s.Reference.KLDBase == "" {
		s.Reference.Threads = k.numCPU
	}
	for i := range s.Candidates {
		s.Candidates[i].Key = fmt.Sprintf("backends[%d]", i)
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
			d.NCtx = 128
		}
		if d.Mode == ModeGenerate && !has(p+"max_new_tokens") {
			d.MaxNewTokens = 32
		}
	}
}

// add reports a problem with the key at path, pointing at its line.
func (k *checker) add(path, format string, args ...any) {
	k.c.add(k.w.line(path), path, k.w.env[path], fmt.Sprintf(format, args...))
}

var nameRE = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._-]*$`)
var hexRE = regexp.MustCompile(`^[0-9a-fA-F]{64}$`)

func (k *checker) name(path, v string) {
	switch {
	case v == "":
		k.add(path, "required")
	case !nameRE.MatchString(v):
		k.add(path, "%q: use only letters, digits, '.', '_' and '-', starting with a letter or digit", v)
	}
}

func (k *checker) between(path string, v, lo, hi int) {
	switch {
	case v < lo:
		k.add(path, "must be >= %d, got %d", lo, v)
	case v > hi:
		k.add(path, "must be <= %d, got %d", hi, v)
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
	if len(s.Candidates) == 0 {
		k.add("backends", "required: at least one candidate backend to compare with the reference")
	}
	first := map[string]string{s.Reference.Name: "reference.name"}
	for _, b := range s.Candidates {
		if other, dup := first[b.Name]; dup && b.Name != "" {
			k.add(b.Key+".name", "duplicate backend name %q (also %s)", b.Name, other)
		}
		first[b.Name] = b.Key + ".name"
		k.backend(b)
		k.gates(b.Key+".gates", b.Gates)
	}
	k.gates("gates", s.Gates)

	b := s.Bench
	k.between("bench.n_prompt", b.NPrompt, 0, maxTokens)
	k.between("bench.n_gen", b.NGen, 0, maxTokens)
	k.between("bench.reps", b.Reps, 1, 1000)
	if b.Enabled && b.NPrompt == 0 && b.NGen == 0 {
		k.add("bench", "n_prompt and n_gen are both 0: nothing to benchmark (set enabled: false instead)")
	}

	if len(s.Output.Formats) == 0 {
		k.add("output.formats", "at least one of %s", strings.Join(OutputFormats, ", "))
	}
	seen := map[string]bool{}
	for i, f := range s.Output.Formats {
		p := fmt.Sprintf("output.formats[%d]", i)
		switch {
		case !slices.Contains(OutputFormats, f):
			k.add(p, "%q: want one of %s", f, strings.Join(OutputFormats, ", "))
		case seen[f]:
			k.add(p, "%q listed twice", f)
		}
		seen[f] = true
	}
	tv := reflect.ValueOf(s.Timeouts)
	for _, f := range fieldsOf(reflect.TypeFor[Timeouts]()) {
		if d := tv.FieldByIndex(f.index).Interface().(time.Duration); d <= 0 {
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
			k.between(p+".n_ctx", d.NCtx, minNCtx, maxTokens)
			if k.w.has(p + ".max_new_tokens") {
				k.add(p+".max_new_tokens", "only for mode generate")
			}
		case ModeGenerate:
			k.between(p+".max_new_tokens", d.MaxNewTokens, 1, maxTokens)
			if k.w.has(p + ".n_ctx") {
				k.add(p+".n_ctx", "only for mode score")
			}
		default:
			k.add(p+".mode", "%q: want score or generate", d.Mode)
		}
		k.between(p+".limit", d.Limit, 0, 1<<31-1)
	}
}

func (k *checker) validateReference() {
	r := k.s.Reference
	k.name("reference.name", r.Name)
	if r.KLDBase == "" {
		k.backend(r.Backend)
	} else {
		for _, key := range []string{"plugin", "plugin_path", "threads", "model", "options", "output.kld_base"} {
			if k.w.has("reference." + key) {
				k.add("reference."+key, "has no effect with reference.kld_base (no plugin runs)")
			}
		}
	}
	if k.w.has("reference.gates") {
		k.add("reference.gates", "the reference has no gates (set them on the backends)")
	}
}

// backend checks what the reference and the candidates share.
func (k *checker) backend(b Backend) {
	if b.Key != "reference" {
		k.name(b.Key+".name", b.Name)
	}
	switch {
	case b.Plugin != "" && b.PluginPath != "":
		k.add(b.Key+".plugin_path", "set either plugin (a name) or plugin_path (an executable), not both")
	case b.Plugin == "" && b.PluginPath == "":
		what := "a plugin name such as cpu (or plugin_path: an executable)"
		if b.Key == "reference" {
			what += ", or reference.kld_base"
		}
		k.add(b.Key+".plugin", "required: %s", what)
	case b.Plugin != "" && strings.ContainsAny(b.Plugin, `/\`):
		k.add(b.Key+".plugin", "%q is a path: say plugin_path: to run an executable by its path", b.Plugin)
	case b.Plugin != "" && !nameRE.MatchString(b.Plugin):
		k.add(b.Key+".plugin", "%q: a plugin name uses only letters, digits, '.', '_' and '-', starting with a letter or digit", b.Plugin)
	}
	k.between(b.Key+".threads", b.Threads, 0, maxThreads*k.numCPU)
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
	abs := func(p *string) {
		if *p != "" && !filepath.IsAbs(*p) {
			*p = filepath.Join(s.Dir, *p)
		}
	}
	abs(&s.Model.Path)
	for i := range s.Datasets {
		abs(&s.Datasets[i].Path)
	}
	abs(&s.Reference.KLDBase)
	for _, b := range append([]*Backend{&s.Reference.Backend}, pointers(s.Candidates)...) {
		abs(&b.PluginPath)
		abs(&b.Model)
		abs(&b.Output.KLDBase)
	}
	abs(&s.PluginDir)
	if s.Output.Dir == "" {
		s.Output.Dir, _ = filepath.Abs("results")
	}
	abs(&s.Output.Dir)
}

func pointers(bs []Backend) []*Backend {
	out := make([]*Backend, len(bs))
	for i := range bs {
		out[i] = &bs[i]
	}
	return out
}

// files checks that the inputs exist, so a typo fails at load with its line
// rather than minutes into a run.
func (k *checker) files() {
	s := k.s
	k.file("model.path", s.Model.Path, false)
	for i, d := range s.Datasets {
		k.file(fmt.Sprintf("datasets[%d].path", i), d.Path, false)
	}
	k.file("reference.kld_base", s.Reference.KLDBase, false)
	for _, b := range append([]Backend{s.Reference.Backend}, s.Candidates...) {
		k.file(b.Key+".model", b.Model, false)
		k.file(b.Key+".plugin_path", b.PluginPath, false)
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
