package spec

import (
	"cmp"
	"errors"
	"fmt"
	"io/fs"
	"maps"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/evalrun/evalrun/pipeline/gate"
)

// checker fills defaults, validates and resolves one decoded spec. The
// per-key rules are the struct tags of the spec's types: check:"name" (a
// required name), check:"LO..HI" (an integer range, for values the file or
// environment set), check:"positive" (a duration), check:"modes|formats" (one of enums), path:"file|dir|out|run" (resolved
// against the spec's directory; file and dir must exist, run is a run
// directory or its summary.json).
type checker struct {
	c      *collector
	w      *walker
	s      *Spec
	numCPU int
}

// maxThreads bounds threads: at most this many per CPU of the machine.
const maxThreads = 4

// defaultSpec holds the documented defaults; decoding the YAML over it
// replaces what the file (or the environment) sets.
func defaultSpec() *Spec {
	return &Spec{
		Reference: Reference{Backend: Backend{Name: "reference"}},
		Bench:     Bench{Enabled: true, NPrompt: 64, NGen: 16, Reps: 100, Warmup: true},
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
		s.Candidates[i].Threads = cmp.Or(s.Candidates[i].Threads, k.numCPU)
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
	if s.Output.Dir == "" {
		s.Output.Dir, _ = filepath.Abs("results")
	}
}

// add reports a problem with the key at path, pointing at its line.
func (k *checker) add(path, format string, args ...any) {
	k.c.add(k.w.line(path), path, k.w.env[path], fmt.Sprintf(format, args...))
}

var nameRE = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._-]*$`)
var hexRE = regexp.MustCompile(`^[0-9a-fA-F]{64}$`)

// enums are the values of check:"modes" and check:"formats".
var enums = map[string][]string{"modes": {string(ModeScore), string(ModeGenerate)}, "formats": OutputFormats}

const nameRule = "use only letters, digits, '.', '_' and '-', starting with a letter or digit"

// eachField calls fn for every field of the struct v (key path, field,
// value), depth first, items of lists of structs included.
func eachField(v reflect.Value, path string, fn func(path string, f field, v reflect.Value)) {
	for _, f := range fieldsOf(v.Type()) {
		p, fv := join(path, f.key), v.FieldByIndex(f.index)
		fn(p, f, fv)
		switch {
		case fv.Kind() == reflect.Struct && f.typ != durationType:
			eachField(fv, p, fn)
		case fv.Kind() == reflect.Slice && f.typ.Elem().Kind() == reflect.Struct:
			for i := range fv.Len() {
				eachField(fv.Index(i), fmt.Sprintf("%s[%d]", p, i), fn)
			}
		}
	}
}

// tagged applies the check tags.
func (k *checker) tagged(path string, f field, v reflect.Value) {
	rule := f.tag.Get("check")
	lo, hi, isRange := strings.Cut(rule, "..")
	switch {
	case rule == "name" && v.String() == "":
		k.add(path, "required")
	case rule == "name" && !nameRE.MatchString(v.String()):
		k.add(path, "%q: %s", v.String(), nameRule)
	case rule == "positive" && v.Int() <= 0:
		k.add(path, "must be a positive duration, got %v", time.Duration(v.Int()))
	case isRange && k.w.has(path):
		l, _ := strconv.Atoi(lo)
		h, err := strconv.Atoi(hi)
		if err != nil { // "4 per CPU"
			h = maxThreads * k.numCPU
		}
		if n := int(v.Int()); n < l {
			k.add(path, "must be >= %d, got %d", l, n)
		} else if n > h {
			k.add(path, "must be <= %d, got %d", h, n)
		}
	case enums[rule] != nil:
		want := "one of " + strings.Join(enums[rule], ", ")
		one := func(p, val string) {
			if !slices.Contains(enums[rule], val) {
				k.add(p, "%q: want %s", val, want)
			}
		}
		if v.Kind() != reflect.Slice {
			one(path, v.String())
			return
		}
		if v.Len() == 0 {
			k.add(path, "empty: want at least one of %s", strings.Join(enums[rule], ", "))
		}
		seen := map[string]bool{}
		for i := range v.Len() {
			p, val := fmt.Sprintf("%s[%d]", path, i), v.Index(i).String()
			if one(p, val); seen[val] {
				k.add(p, "%q listed twice", val)
			}
			seen[val] = true
		}
	}
}

func (k *checker) validate() {
	s, has := k.s, k.w.has
	eachField(reflect.ValueOf(s).Elem(), "", k.tagged)
	if s.Model.Path == "" {
		k.add("model.path", "required (the GGUF model file)")
	}
	if s.Model.SHA256 != "" && !hexRE.MatchString(s.Model.SHA256) {
		k.add("model.sha256", "want 64 hex digits, got %q", s.Model.SHA256)
	}
	s.Model.SHA256 = strings.ToLower(s.Model.SHA256)
	switch {
	case s.Reference.KLDBase != "" && len(s.Datasets) > 0:
		k.add("datasets", "not used with reference.kld_base: the KLD base file carries its own tokens; remove datasets or use a plugin reference")
	case s.Reference.KLDBase == "" && len(s.Datasets) == 0:
		k.add("datasets", "required: at least one prompt set (or reference.kld_base)")
	}
	datasets := map[string]int{}
	for i, d := range s.Datasets {
		p := fmt.Sprintf("datasets[%d]", i)
		if j, dup := datasets[d.Name]; dup && d.Name != "" {
			k.add(p+".name", "duplicate dataset name %q (also datasets[%d])", d.Name, j)
		} else {
			datasets[d.Name] = i
		}
		switch {
		case d.Path == "":
			k.add(p+".path", "required (a JSONL prompt set)")
		case d.Mode == ModeScore && has(p+".max_new_tokens"):
			k.add(p+".max_new_tokens", "only for mode generate")
		case d.Mode == ModeGenerate && has(p+".n_ctx"):
			k.add(p+".n_ctx", "only for mode score")
		}
	}
	if s.Reference.KLDBase == "" {
		k.backend(s.Reference.Backend)
	}
	for _, key := range []string{"plugin", "plugin_path", "threads", "model", "options", "output.kld_base"} {
		if s.Reference.KLDBase != "" && has("reference."+key) {
			k.add("reference."+key, "has no effect with reference.kld_base (no plugin runs)")
		}
	}
	if has("reference.gates") {
		k.add("reference.gates", "the reference has no gates (set them on the backends)")
	}
	if len(s.Candidates) == 0 {
		k.add("backends", "required: at least one candidate backend to compare with the reference")
	}
	backends := map[string]string{s.Reference.Name: "reference.name"}
	for _, b := range s.Candidates {
		if other, dup := backends[b.Name]; dup && b.Name != "" {
			k.add(b.Key+".name", "duplicate backend name %q (also %s)", b.Name, other)
		}
		backends[b.Name] = b.Key + ".name"
		k.backend(b)
		k.gates(b.Key+".gates", b.Gates)
	}
	k.gates("gates", s.Gates)
	k.speedBaselines(backends)
	if b := s.Bench; b.Enabled && b.NPrompt == 0 && b.NGen == 0 {
		k.add("bench", "n_prompt and n_gen are both 0: nothing to benchmark (set enabled: false instead)")
	}
}

// backend checks what the reference and the candidates share.
func (k *checker) backend(b Backend) {
	switch {
	case b.Plugin != "" && b.PluginPath != "":
		k.add(b.Key+".plugin_path", "set either plugin (a name) or plugin_path (an executable), not both")
	case b.Plugin == "" && b.PluginPath == "" && b.Key == "reference":
		k.add(b.Key+".plugin", "required: a plugin name such as cpu (or plugin_path: an executable), or reference.kld_base")
	case b.Plugin == "" && b.PluginPath == "":
		k.add(b.Key+".plugin", "required: a plugin name such as cpu (or plugin_path: an executable)")
	case b.Plugin != "" && strings.ContainsAny(b.Plugin, `/\`):
		k.add(b.Key+".plugin", "%q is a path: say plugin_path: to run an executable by its path", b.Plugin)
	case b.Plugin != "" && !nameRE.MatchString(b.Plugin):
		k.add(b.Key+".plugin", "%q: a plugin name uses %s", b.Plugin, strings.TrimPrefix(nameRule, "use "))
	}
}

func (k *checker) gates(path string, g Gates) {
	for _, r := range append(g.List(), g.Relative()...) {
		m, _ := gate.Lookup(r.Metric)
		if r.Limit < 0 {
			k.add(path+"."+r.Name, "must be >= 0, got %g", r.Limit)
		} else if m.Fraction && r.Limit > 1 {
			k.add(path+"."+r.Name, "is a fraction between 0 and 1, got %g", r.Limit)
		} else if r.Bound == gate.MaxSlowdown && r.Limit >= 1 {
			k.add(path+"."+r.Name, "is a fraction of the baseline's tokens/s, below 1, got %g", r.Limit)
		}
	}
}

// speedBaselines checks each candidate's gates.speed_baseline: another
// backend of this run that is benchmarked, and slowdown gates to judge.
func (k *checker) speedBaselines(backends map[string]string) {
	s := k.s
	if s.Gates.SpeedBaseline != nil {
		k.add("gates.speed_baseline", "set it in a backend's gates: it names the backend that backend's speed is judged against")
	}
	for _, b := range s.Candidates {
		name := b.Gates.SpeedBaseline
		if name == nil {
			continue
		}
		path := b.Key + ".gates.speed_baseline"
		gates := s.Gates.Merge(b.Gates)
		_, known := backends[*name]
		switch {
		case *name == b.Name:
			k.add(path, "names this backend itself: name another backend of the run to judge its speed against")
		case !known:
			k.add(path, "no backend %q in this spec (backends: %s)", *name, strings.Join(slices.Sorted(maps.Keys(backends)), ", "))
		case *name == s.Reference.Name && s.Reference.KLDBase != "":
			k.add(path, "the reference %q is a kld_base file: it has no speed to judge against", *name)
		case !s.Bench.Enabled:
			k.add(path, "needs bench.enabled: true (nothing is benchmarked)")
		case len(gates.InRun()) == 0:
			k.add(path, "judges the slowdown gates, and none is set: add tg_ts_max_slowdown or pp_ts_max_slowdown")
		case judgesBack(s, b.Name, *name):
			k.add(path, "%s judges its speed against %s, and %s (through speed_baseline) against %s: one of them must be the baseline", b.Name, *name, *name, b.Name)
		}
	}
}

// judgesBack reports whether following speed_baseline from backend from
// leads back to backend to (a cycle: each judged against the other).
func judgesBack(s *Spec, to, from string) bool {
	next := map[string]string{}
	for _, b := range s.Candidates {
		if b.Gates.SpeedBaseline != nil {
			next[b.Name] = *b.Gates.SpeedBaseline
		}
	}
	for range len(next) {
		n, ok := next[from]
		if !ok {
			return false
		}
		if n == to {
			return true
		}
		from = n
	}
	return false
}

// paths makes every path tagged path:"..." absolute (relative ones start at
// the spec's directory) and, with checkFiles, checks that the inputs exist,
// so a typo fails at load with its line rather than minutes into a run.
func (k *checker) paths(checkFiles bool) {
	eachField(reflect.ValueOf(k.s).Elem(), "", func(path string, f field, v reflect.Value) {
		kind, p := f.tag.Get("path"), v.String()
		if kind == "" || p == "" {
			return
		}
		if !filepath.IsAbs(p) {
			p = filepath.Join(k.s.Dir, p)
			v.SetString(p)
		}
		if !checkFiles || kind == "out" {
			return
		}
		fi, err := os.Stat(p)
		switch {
		case errors.Is(err, fs.ErrNotExist):
			k.add(path, "%s: no such file or directory", p)
		case err != nil:
			k.add(path, "%v", err)
		case kind == "dir" && !fi.IsDir():
			k.add(path, "%s: not a directory", p)
		case kind == "file" && fi.IsDir():
			k.add(path, "%s: is a directory, want a file", p)
		case kind == "run" && fi.IsDir(): // a run directory holds its summary.json
			if _, err := os.Stat(filepath.Join(p, "summary.json")); err != nil {
				k.add(path, "%s: not a run directory (no summary.json)", p)
			}
		}
	})
}
