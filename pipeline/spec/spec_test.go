package spec

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"runtime"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/evalrun/evalrun/pipeline/gate"
)

// base is a minimal valid spec; the line numbers in the tests below count
// from it.
const base = `name: t
model:
  path: m.gguf
datasets:
  - name: d
    path: d.jsonl
reference:
  plugin: cpu
backends:
  - name: b
    plugin: cpu
`

// writeSpec puts a spec and the input files it names into a fresh directory.
func writeSpec(t *testing.T, text string, files ...string) string {
	t.Helper()
	dir := t.TempDir()
	for _, f := range append([]string{"m.gguf", "d.jsonl"}, files...) {
		if err := os.WriteFile(filepath.Join(dir, f), []byte("x"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	path := filepath.Join(dir, "t.yaml")
	if err := os.WriteFile(path, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

// load loads text from a temp dir with env set and returns errors with the
// directory replaced by "DIR" so messages can be compared literally.
func load(t *testing.T, text string, env map[string]string, files ...string) (*Spec, string) {
	t.Helper()
	for k, v := range env {
		t.Setenv(k, v)
	}
	path := writeSpec(t, text, files...)
	s, err := Load(context.Background(), path)
	if err == nil {
		return s, ""
	}
	return s, strings.ReplaceAll(err.Error(), filepath.Dir(path), "DIR")
}

func TestBadSpecs(t *testing.T) {
	addModel := func(extra string) string {
		return strings.Replace(base, "  path: m.gguf\n", "  path: m.gguf\n"+extra, 1)
	}
	addDataset := func(extra string) string {
		return strings.Replace(base, "    path: d.jsonl\n", "    path: d.jsonl\n"+extra, 1)
	}
	cases := []struct {
		name string
		text string
		env  map[string]string
		want []string // substrings of the error, in any order
	}{
		{"unknown top-level key", base + "tolerence: 0.1\n", nil,
			[]string{`DIR/t.yaml:12: unknown key "tolerence"`}},
		{"unknown nested key", addModel("  sha265: abc\n"), nil,
			[]string{`DIR/t.yaml:4: unknown key "model.sha265" (did you mean "sha256"?)`}},
		{"unknown key in a list item", base + "    thread: 2\n", nil,
			[]string{`DIR/t.yaml:12: unknown key "backends[0].thread" (did you mean "threads"?)`}},
		{"upper-case key", strings.Replace(base, "name: t", "Name: t", 1), nil,
			[]string{`DIR/t.yaml:1: unknown key "Name" (did you mean "name"?)`}},
		{"upper-case key in a list item", strings.Replace(base, "    plugin: cpu\n", "    Plugin: cpu\n", 1), nil,
			[]string{`DIR/t.yaml:11: unknown key "backends[0].Plugin" (did you mean "plugin"?)`}},
		{"float for int", base + "    threads: 2.5\n", nil,
			[]string{`DIR/t.yaml:12: backends[0].threads: want an integer, got number 2.5`}},
		{"string for int", base + "    threads: two\n", nil,
			[]string{`DIR/t.yaml:12: backends[0].threads: want an integer, got string "two"`}},
		{"int for string", strings.Replace(base, "name: t", "name: 12", 1), nil,
			[]string{`DIR/t.yaml:1: name: want a string (quote it if it looks like a number), got integer 12`}},
		{"yes for bool", base + "bench: {enabled: yes}\n", nil,
			[]string{`DIR/t.yaml:12: bench.enabled: want true or false, got string "yes"`}},
		{"number for duration", base + "timeouts:\n  eval: 300\n", nil,
			[]string{`DIR/t.yaml:13: timeouts.eval: want a duration such as "30s" (a number has no unit), got integer 300`}},
		{"bad duration", base + "timeouts: {load: 2 minutes}\n", nil,
			[]string{`DIR/t.yaml:12: timeouts.load: want a duration such as "30s", "2m" or "1h30m", got string "2 minutes"`}},
		{"zero duration", base + "timeouts: {bench: 0s}\n", nil,
			[]string{`DIR/t.yaml:12: timeouts.bench: must be a positive duration, got 0s`}},
		{"string gate", base + "gates: {kld_mean_max: low}\n", nil,
			[]string{`DIR/t.yaml:12: gates.kld_mean_max: want a number, got string "low"`}},
		{"mapping for list", strings.Replace(base, "  - name: b\n    plugin: cpu\n", "  name: b\n", 1), nil,
			[]string{`DIR/t.yaml:10: backends: want a list, got a mapping`}},
		{"scalar for mapping", base + "bench: fast\n", nil,
			[]string{`DIR/t.yaml:12: bench: want a mapping of keys, got string "fast"`}},
		{"missing model", strings.Replace(base, "model:\n  path: m.gguf\n", "", 1), nil,
			[]string{`DIR/t.yaml: model.path: required`}},
		{"missing name", strings.Replace(base, "name: t\n", "", 1), nil,
			[]string{`DIR/t.yaml: name: required`}},
		{"missing reference plugin", strings.Replace(base, "  plugin: cpu\nbackends", "  name: r\nbackends", 1), nil,
			[]string{`DIR/t.yaml:7: reference.plugin: required`}},
		{"missing backend plugin", strings.TrimSuffix(base, "    plugin: cpu\n"), nil,
			[]string{`DIR/t.yaml:10: backends[0].plugin: required`}},
		{"no backends", strings.TrimSuffix(base, "backends:\n  - name: b\n    plugin: cpu\n"), nil,
			[]string{`DIR/t.yaml: backends: required`}},
		{"no datasets", strings.Replace(base, "datasets:\n  - name: d\n    path: d.jsonl\n", "", 1), nil,
			[]string{`DIR/t.yaml: datasets: required`}},
		{"empty list item", base + "  -\n", nil,
			[]string{`DIR/t.yaml:12: backends[1]: empty list entry`}},
		{"duplicate backend", base + "  - name: b\n    plugin: cpu\n", nil,
			[]string{`DIR/t.yaml:12: backends[1].name: duplicate backend name "b" (also backends[0].name)`}},
		{"backend named like the reference", strings.Replace(base, "  plugin: cpu\nbackends", "  name: b\n  plugin: cpu\nbackends", 1), nil,
			[]string{`DIR/t.yaml:11: backends[0].name: duplicate backend name "b" (also reference.name)`}},
		{"duplicate dataset", strings.Replace(base, "reference:", "  - name: d\n    path: d.jsonl\nreference:", 1), nil,
			[]string{`DIR/t.yaml:7: datasets[1].name: duplicate dataset name "d" (also datasets[0])`}},
		{"bad mode", addDataset("    mode: sample\n"), nil,
			[]string{`DIR/t.yaml:7: datasets[0].mode: "sample": want one of score, generate`}},
		{"small n_ctx", addDataset("    n_ctx: 4\n"), nil,
			[]string{`DIR/t.yaml:7: datasets[0].n_ctx: must be >= 8, got 4`}},
		{"n_ctx for generate", addDataset("    mode: generate\n    n_ctx: 64\n"), nil,
			[]string{`DIR/t.yaml:8: datasets[0].n_ctx: only for mode score`}},
		{"negative limit", addDataset("    limit: -1\n"), nil,
			[]string{`DIR/t.yaml:7: datasets[0].limit: must be >= 0, got -1`}},
		{"negative threads", base + "    threads: -2\n", nil,
			[]string{`DIR/t.yaml:12: backends[0].threads: must be >= 0, got -2`}},
		{"zero reps", base + "bench:\n  reps: 0\n", nil,
			[]string{`DIR/t.yaml:13: bench.reps: must be >= 1, got 0`}},
		{"negative gate", base + "gates:\n  nmse_max: -1\n", nil,
			[]string{`DIR/t.yaml:13: gates.nmse_max: must be >= 0, got -1`}},
		{"percent for a fraction", base + "    gates: {same_top_p_min: 98}\n", nil,
			[]string{`DIR/t.yaml:12: backends[0].gates.same_top_p_min: is a fraction between 0 and 1, got 98`}},
		{"bad format", base + "output: {formats: [json, pdf]}\n", nil,
			[]string{`DIR/t.yaml:12: output.formats[1]: "pdf": want one of json, jsonl, md, junit, html`}},
		{"bad name", strings.Replace(base, "name: t", "name: my run", 1), nil,
			[]string{`DIR/t.yaml:1: name: "my run": use only letters, digits`}},
		{"bad sha256", addModel("  sha256: 1234abcd\n"), nil,
			[]string{`DIR/t.yaml:4: model.sha256: want 64 hex digits, got "1234abcd"`}},
		{"plugin and kld_base", strings.Replace(base, "  plugin: cpu\nbackends", "  plugin: cpu\n  kld_base: k.kld\nbackends", 1), nil,
			[]string{`DIR/t.yaml:8: reference.plugin: has no effect with reference.kld_base (no plugin runs)`}},
		{"kld_base with datasets", strings.Replace(base, "  plugin: cpu\nbackends", "  kld_base: k.kld\nbackends", 1), nil,
			[]string{`DIR/t.yaml:4: datasets: not used with reference.kld_base`}},
		{"options with a number key", base + "    options: {1: x}\n", nil,
			[]string{`DIR/t.yaml:12: backends[0].options: keys must be strings, got integer 1`}},
		{"duplicate option", base + "    options:\n      numerics: ggml\n      numerics: exact\n", nil,
			[]string{`DIR/t.yaml:14: backends[0].options: duplicate key "numerics" (first on line 13)`}},
		{"duplicate key", "name: t\n" + base, nil,
			[]string{`DIR/t.yaml:2: duplicate key "name" (first on line 1)`}},
		{"empty file", "", nil, []string{`DIR/t.yaml: empty spec`}},
		{"only comments", "# nothing yet\n", nil, []string{`DIR/t.yaml: empty spec`}},
		{"top-level list", "- name: t\n", nil,
			[]string{`DIR/t.yaml:1: the top level must be a mapping of keys`}},
		{"invalid YAML", "name: t\nmodel: {path: m.gguf\nreference:\n", nil,
			[]string{`DIR/t.yaml:2: invalid YAML: did not find expected ',' or '}'`}},
		{"unclosed list", "name: [t\n", nil, // reported where the file ends
			[]string{`DIR/t.yaml:2: invalid YAML: did not find expected ',' or ']'`}},
		{"bad indentation", "name: t\nmodel:\n  path: m.gguf\n bad: 1\n", nil,
			[]string{`DIR/t.yaml:4: invalid YAML: did not find expected key`}},
		{"tab indentation", "name: t\nmodel:\n\tpath: m.gguf\n", nil,
			[]string{`DIR/t.yaml:3: invalid YAML: found character that cannot start any token`}},
		{"two documents", base + "---\nname: u\n", nil,
			[]string{`DIR/t.yaml:12: more than one YAML document`}},
		{"missing model file", strings.Replace(base, "m.gguf", "nope.gguf", 1), nil,
			[]string{`DIR/t.yaml:3: model.path: DIR/nope.gguf: no such file or directory`}},
		{"missing dataset file", strings.Replace(base, "d.jsonl", "nope.jsonl", 1), nil,
			[]string{`DIR/t.yaml:6: datasets[0].path: DIR/nope.jsonl: no such file or directory`}},
		{"env int parse error", base, map[string]string{"EVALRUN_BENCH_REPS": "abc"},
			[]string{`DIR/t.yaml: bench.reps (from $EVALRUN_BENCH_REPS): want an integer, got string "abc"`}},
		{"env bool parse error", base, map[string]string{"EVALRUN_BENCH_ENABLED": "maybe"},
			[]string{`DIR/t.yaml: bench.enabled (from $EVALRUN_BENCH_ENABLED): want true or false, got string "maybe"`}},
		{"env duration parse error", base, map[string]string{"EVALRUN_TIMEOUTS_LOAD": "120"},
			[]string{`DIR/t.yaml: timeouts.load (from $EVALRUN_TIMEOUTS_LOAD): want a duration such as "30s" (a number has no unit), got integer 120`}},
		{"env float parse error", base, map[string]string{"EVALRUN_BACKENDS_0_GATES_NMSE_MAX": ".nan"},
			[]string{`DIR/t.yaml: backends[0].gates.nmse_max (from $EVALRUN_BACKENDS_0_GATES_NMSE_MAX): want a finite number, got number .nan`}},
		{"env value fails validation", base, map[string]string{"EVALRUN_BENCH_REPS": "0"},
			[]string{`DIR/t.yaml: bench.reps (from $EVALRUN_BENCH_REPS): must be >= 1, got 0`}},
		{"env for a missing list item", base, map[string]string{"EVALRUN_BACKENDS_1_THREADS": "1"},
			[]string{`DIR/t.yaml: backends[1].threads (from $EVALRUN_BACKENDS_1_THREADS): the spec has only 1 backends entries`}},
		{"env typo", base, map[string]string{"EVALRUN_BENCH_REP": "1"},
			[]string{`DIR/t.yaml: $EVALRUN_BENCH_REP: names no spec key (EVALRUN_ + a key path in upper case) and no other evalrun variable (did you mean EVALRUN_BENCH_REPS?)`}},
		{"env naming nothing", base, map[string]string{"EVALRUN_UNRELATED": "x"},
			[]string{`DIR/t.yaml: $EVALRUN_UNRELATED: names no spec key`}},
		{"env for plugin options", base, map[string]string{"EVALRUN_REFERENCE_OPTIONS": "x"},
			[]string{`DIR/t.yaml: reference.options (from $EVALRUN_REFERENCE_OPTIONS): plugin options cannot be set from the environment`}},
		{"plugin named ..", strings.Replace(base, "    plugin: cpu\n", "    plugin: ..\n", 1), nil,
			[]string{`DIR/t.yaml:11: backends[0].plugin: "..": a plugin name uses only letters, digits, '.', '_' and '-', starting with a letter or digit`}},
		{"plugin given as a path", strings.Replace(base, "    plugin: cpu\n", "    plugin: ./x.sh\n", 1), nil,
			[]string{`DIR/t.yaml:11: backends[0].plugin: "./x.sh" is a path: say plugin_path:`}},
		{"plugin and plugin_path", base + "    plugin_path: x.sh\n", nil,
			[]string{`DIR/t.yaml:12: backends[0].plugin_path: set either plugin (a name) or plugin_path (an executable), not both`}},
		{"too many threads", base + "    threads: 100000\n", nil,
			[]string{`DIR/t.yaml:12: backends[0].threads: must be <= `}},
		{"huge bench", base + "bench: {n_prompt: 2000000000}\n", nil,
			[]string{`DIR/t.yaml:12: bench.n_prompt: must be <= 16777216, got 2000000000`}},
		{"gates on the reference", strings.Replace(base, "  plugin: cpu\nbackends", "  plugin: cpu\n  gates: {nmse_max: 1}\nbackends", 1), nil,
			[]string{`DIR/t.yaml:9: reference.gates: the reference has no gates`}},
		{"several problems at once", strings.Replace(base, "name: t", "name: 12", 1) + "    thread: 2\nextra: 1\n", nil,
			[]string{`DIR/t.yaml:1: name: want a string`, `DIR/t.yaml:12: unknown key "backends[0].thread"`, `DIR/t.yaml:13: unknown key "extra"`}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			s, msg := load(t, c.text, c.env)
			if msg == "" {
				t.Fatalf("loaded without error: %+v", s)
			}
			for _, w := range c.want {
				if !strings.Contains(msg, w) {
					t.Errorf("error\n%s\ndoes not contain\n%s", msg, w)
				}
			}
		})
	}
}

func TestErrorListHoldsEachProblem(t *testing.T) {
	path := writeSpec(t, base+"    thread: 2\nextra: 1\n")
	_, err := readSpec(context.Background(), path, options{checkFiles: true})
	var list ErrorList
	if !errors.As(err, &list) || len(list) != 2 {
		t.Fatalf("want an ErrorList of 2, got %T %v", err, err)
	}
	if list[0].Line != 12 || list[1].Line != 13 || list[0].File != path {
		t.Errorf("lines %d, %d, file %q", list[0].Line, list[1].Line, list[0].File)
	}
	var one *Error
	if !errors.As(err, &one) || one.Line != 12 {
		t.Errorf("errors.As(*Error) = %v", one)
	}
}

// Every problem is reported once, whichever rule finds it.
func TestEachProblemOnce(t *testing.T) {
	path := writeSpec(t, base+"output: {formats: [json, pdf, json]}\n")
	_, err := readSpec(context.Background(), path, options{checkFiles: true})
	var list ErrorList
	if !errors.As(err, &list) || len(list) != 2 || list[0].Key != "output.formats[1]" || list[1].Key != "output.formats[2]" {
		t.Fatalf("want 2 errors (pdf, json twice), got %v", err)
	}
}

func TestDefaults(t *testing.T) {
	s, msg := load(t, base+"  - name: g\n    plugin: cpu\n    threads: 3\n", nil)
	if msg != "" {
		t.Fatal(msg)
	}
	want := Spec{
		Name:       "t",
		Model:      Model{Path: filepath.Join(s.Dir, "m.gguf")},
		Datasets:   []Dataset{{Name: "d", Path: filepath.Join(s.Dir, "d.jsonl"), Mode: ModeScore, NCtx: 128}},
		Reference:  Reference{Backend: Backend{Name: "reference", Plugin: "cpu", Threads: runtime.NumCPU(), Key: "reference"}},
		Candidates: []Backend{{Name: "b", Plugin: "cpu", Threads: runtime.NumCPU(), Key: "backends[0]"}, {Name: "g", Plugin: "cpu", Threads: 3, Key: "backends[1]"}},
		Bench:      Bench{Enabled: true, NPrompt: 64, NGen: 16, Reps: 100, Warmup: true},
		Output:     Output{Dir: mustAbs(t, "results"), Formats: []string{"json", "jsonl", "md", "junit", "html"}},
		Timeouts:   Timeouts{Start: 30 * time.Second, Load: 120 * time.Second, Eval: 300 * time.Second, Bench: 600 * time.Second},
		Path:       s.Path,
		Dir:        s.Dir,
		where:      s.where,
	}
	if !reflect.DeepEqual(*s, want) {
		t.Errorf("got\n%+v\nwant\n%+v", *s, want)
	}
	if !filepath.IsAbs(s.Dir) || filepath.Dir(s.Path) != s.Dir {
		t.Errorf("Path %q Dir %q", s.Path, s.Dir)
	}

	gen := strings.Replace(base, "    path: d.jsonl\n", "    path: d.jsonl\n    mode: generate\n", 1)
	s, msg = load(t, gen, nil)
	if msg != "" {
		t.Fatal(msg)
	}
	if d := s.Datasets[0]; d.MaxNewTokens != 32 || d.NCtx != 0 {
		t.Errorf("generate defaults: %+v", d)
	}
}

func mustAbs(t *testing.T, p string) string {
	a, err := filepath.Abs(p)
	if err != nil {
		t.Fatal(err)
	}
	return a
}

func TestExplicitValuesAndTypes(t *testing.T) {
	text := base + `    threads: 1
    model: q8.gguf
    options: {Numerics: ggml, npu.cores: 3, List: [1, {Deep: true}]}
    output: {kld_base: out/b.kld}
    gates: {kld_mean_max: 1, same_top_p_min: 0.5}
bench: {enabled: false, n_prompt: 0, n_gen: 8, reps: 2, warmup: false}
gates:
  kld_mean_max: 0.01
  max_abs_diff_max: 0
output:
  dir: ../out
  formats: [md]
plugin_dir: plugins
timeouts: {start: 1s, load: 2m, eval: 1h30m, bench: 500ms}
`
	path := writeSpec(t, text, "q8.gguf")
	if err := os.Mkdir(filepath.Join(filepath.Dir(path), "plugins"), 0o755); err != nil {
		t.Fatal(err)
	}
	s, err := readSpec(context.Background(), path, options{checkFiles: true})
	if err != nil {
		t.Fatal(err)
	}
	dir := s.Dir
	b := s.Candidates[0]
	if b.Threads != 1 || b.Model != filepath.Join(dir, "q8.gguf") || b.Output.KLDBase != filepath.Join(dir, "out/b.kld") {
		t.Errorf("backend %+v", b)
	}
	wantOpts := map[string]any{"Numerics": "ggml", "npu.cores": 3, "List": []any{1, map[string]any{"Deep": true}}}
	if !reflect.DeepEqual(b.Options, wantOpts) {
		t.Errorf("options keep their keys: got %#v", b.Options)
	}
	if *b.Gates.KLDMeanMax != 1 || *b.Gates.SameTopPMin != 0.5 {
		t.Errorf("backend gates %v %v", *b.Gates.KLDMeanMax, *b.Gates.SameTopPMin)
	}
	if s.Bench != (Bench{Enabled: false, NPrompt: 0, NGen: 8, Reps: 2, Warmup: false}) {
		t.Errorf("bench %+v", s.Bench)
	}
	if *s.Gates.KLDMeanMax != 0.01 || s.Gates.MaxAbsDiffMax == nil || *s.Gates.MaxAbsDiffMax != 0 || s.Gates.NMSEMax != nil {
		t.Errorf("gates %+v", s.Gates)
	}
	if s.Output.Dir != filepath.Join(filepath.Dir(dir), "out") || !reflect.DeepEqual(s.Output.Formats, []string{"md"}) {
		t.Errorf("output %+v", s.Output)
	}
	if s.PluginDir != filepath.Join(dir, "plugins") {
		t.Errorf("plugin_dir %q", s.PluginDir)
	}
	if s.Timeouts != (Timeouts{Start: time.Second, Load: 2 * time.Minute, Eval: 90 * time.Minute, Bench: 500 * time.Millisecond}) {
		t.Errorf("timeouts %+v", s.Timeouts)
	}
}

func TestEnvOverrides(t *testing.T) {
	env := map[string]string{
		// keys present in the file
		"EVALRUN_MODEL_PATH":       "other.gguf",
		"EVALRUN_BACKENDS_0_NAME":  "renamed",
		"EVALRUN_DATASETS_0_N_CTX": "64",
		// keys absent from the file (viper#761)
		"EVALRUN_PLUGIN_DIR":                ".",
		"EVALRUN_BENCH_REPS":                "1",
		"EVALRUN_BENCH_ENABLED":             "false",
		"EVALRUN_OUTPUT_DIR":                "out",
		"EVALRUN_OUTPUT_FORMATS":            "json, md",
		"EVALRUN_REFERENCE_THREADS":         "3",
		"EVALRUN_TIMEOUTS_EVAL":             "45s",
		"EVALRUN_GATES_KLD_MEAN_MAX":        "0.5",
		"EVALRUN_BACKENDS_0_THREADS":        "1",
		"EVALRUN_BACKENDS_0_GATES_NMSE_MAX": "1e-4",
		"EVALRUN_DATASETS_0_LIMIT":          "2",
		"EVALRUN_MODEL_SHA256":              strings.Repeat("0", 64), // digits only: still a string
		"EVALRUN_PLUGIN_MTLS":               "0",                     // not a spec key, but evalrun's
		"TEST_EVALRUN_ANYTHING":             "x",                     // the tests': outside the namespace
		"EVALRUN_NAME":                      "",                      // empty = unset, so name stays "t"
	}
	s, msg := load(t, base, env, "other.gguf")
	if msg != "" {
		t.Fatal(msg)
	}
	if s.Model.Path != filepath.Join(s.Dir, "other.gguf") {
		t.Errorf("model.path %q", s.Model.Path)
	}
	if s.Bench.Reps != 1 || s.Bench.Enabled || !s.Bench.Warmup {
		t.Errorf("bench %+v", s.Bench)
	}
	if s.Output.Dir != filepath.Join(s.Dir, "out") || !reflect.DeepEqual(s.Output.Formats, []string{"json", "md"}) {
		t.Errorf("output %+v", s.Output)
	}
	if s.Reference.Threads != 3 || s.Timeouts.Eval != 45*time.Second || s.Timeouts.Load != 120*time.Second {
		t.Errorf("reference threads %d, timeouts %+v", s.Reference.Threads, s.Timeouts)
	}
	if s.Gates.KLDMeanMax == nil || *s.Gates.KLDMeanMax != 0.5 {
		t.Errorf("gates %+v", s.Gates)
	}
	b := s.Candidates[0]
	if b.Name != "renamed" || b.Threads != 1 || b.Gates.NMSEMax == nil || *b.Gates.NMSEMax != 1e-4 {
		t.Errorf("backend %+v", b)
	}
	if d := s.Datasets[0]; d.NCtx != 64 || d.Limit != 2 {
		t.Errorf("dataset %+v", d)
	}
	if s.Model.SHA256 != strings.Repeat("0", 64) || s.PluginDir != s.Dir {
		t.Errorf("sha256 %q plugin_dir %q", s.Model.SHA256, s.PluginDir)
	}
	// An error about a value from the environment names the variable.
	if err := s.Err("bench.reps", "too few"); !strings.Contains(err.Error(), "bench.reps (from $EVALRUN_BENCH_REPS): too few") {
		t.Errorf("Err: %v", err)
	}
	s, err := readSpec(context.Background(), writeSpec(t, base), options{checkFiles: true})
	if err != nil || s.Bench.NGen != 16 || s.Bench.Reps != 100 {
		t.Errorf("without the environment: %+v, %v", s.Bench, err)
	}
}

func TestAnchorsAndMergeKeys(t *testing.T) {
	text := `name: t
model: {path: m.gguf}
datasets: [{name: d, path: d.jsonl}]
reference: &cpu
  plugin: cpu
  options: {numerics: exact}
backends:
  - <<: *cpu
    name: b
    options: {numerics: ggml}
`
	s, msg := load(t, text, nil)
	if msg != "" {
		t.Fatal(msg)
	}
	if b := s.Candidates[0]; b.Plugin != "cpu" || b.Options["numerics"] != "ggml" {
		t.Errorf("merged backend %+v", b)
	}
}

func TestKLDBaseReference(t *testing.T) {
	text := `name: k
model: {path: m.gguf}
reference: {kld_base: ref.kld}
backends: [{name: b, plugin_path: ./bin/my-plugin}]
`
	path := writeSpec(t, text, "ref.kld")
	dir := filepath.Dir(path)
	if err := os.MkdirAll(filepath.Join(dir, "bin"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "bin", "my-plugin"), nil, 0o755); err != nil {
		t.Fatal(err)
	}
	s, err := readSpec(context.Background(), path, options{checkFiles: true})
	if err != nil {
		t.Fatal(err)
	}
	if s.Reference.KLDBase != filepath.Join(s.Dir, "ref.kld") || s.Reference.Name != "reference" {
		t.Errorf("reference %+v", s.Reference)
	}
	bs := s.Backends()
	if len(bs) != 1 || bs[0].PluginPath != filepath.Join(s.Dir, "bin", "my-plugin") || bs[0].Model != s.Model.Path {
		t.Errorf("Backends() = %+v", bs)
	}

	bad := strings.Replace(text, "{kld_base: ref.kld}", "{kld_base: ref.kld, threads: 2}", 1)
	_, msg := load(t, bad, nil, "ref.kld")
	if !strings.Contains(msg, "DIR/t.yaml:3: reference.threads: has no effect with reference.kld_base") {
		t.Errorf("got %q", msg)
	}
}

func TestBackendsAndGates(t *testing.T) {
	text := base + `    model: q8.gguf
    gates: {kld_mean_max: 0.5}
  - name: c
    plugin: cpu
gates: {kld_mean_max: 0.01, same_top_p_min: 0.9}
`
	s, msg := load(t, text, nil, "q8.gguf")
	if msg != "" {
		t.Fatal(msg)
	}
	bs := s.Backends()
	var names []string
	for _, b := range bs {
		names = append(names, b.Name)
	}
	if !reflect.DeepEqual(names, []string{"reference", "b", "c"}) {
		t.Fatalf("order %v", names)
	}
	if bs[0].Model != s.Model.Path || bs[1].Model != filepath.Join(s.Dir, "q8.gguf") || bs[2].Model != s.Model.Path {
		t.Errorf("models %q %q %q", bs[0].Model, bs[1].Model, bs[2].Model)
	}
	if len(bs[0].Gates.List()) != 0 {
		t.Errorf("reference has gates %+v", bs[0].Gates.List())
	}
	wantB := []gate.Gate{{Name: "kld_mean_max", Metric: "kld_mean", Bound: gate.Max, Limit: 0.5}, {Name: "same_top_p_min", Metric: "same_top_p", Bound: gate.Min, Limit: 0.9}}
	if got := bs[1].Gates.List(); !reflect.DeepEqual(got, wantB) {
		t.Errorf("b gates %+v", got)
	}
	if got := bs[2].Gates.List(); got[0].Limit != 0.01 {
		t.Errorf("c gates %+v", got)
	}
	// The effective gates are copies: changing them leaves the spec alone.
	*bs[2].Gates.KLDMeanMax = 7
	if *s.Gates.KLDMeanMax != 0.01 {
		t.Error("Backends() shares gate values with the spec")
	}
}

// TestShippedConfigs loads every example in configs/ against the real files
// of the repository and checks what each promises its reader.
func TestShippedConfigs(t *testing.T) {
	paths, err := filepath.Glob("../../configs/*.yaml")
	if err != nil || len(paths) < 3 {
		t.Fatalf("configs: %v %v", paths, err)
	}
	specs := map[string]*Spec{}
	for _, p := range paths {
		// bench-1b's model is made by evalrun synth, nightly's last-night
		// plugins by make build: not shipped
		check := filepath.Base(p) != "bench-1b.yaml" && filepath.Base(p) != "nightly.yaml"
		s, err := readSpec(context.Background(), p, options{checkFiles: check})
		if err != nil {
			t.Errorf("%s: %v", p, err)
			continue
		}
		specs[filepath.Base(p)] = s
		if s.Model.SHA256 != "" {
			data, err := os.ReadFile(s.Model.Path)
			if err != nil {
				t.Fatal(err)
			}
			if sum := sha256.Sum256(data); hex.EncodeToString(sum[:]) != s.Model.SHA256 {
				t.Errorf("%s: model.sha256 does not match %s", p, s.Model.Path)
			}
		}
		if s.Output.Dir != mustAbs(t, "../../results") {
			t.Errorf("%s: output.dir %q", p, s.Output.Dir)
		}
	}

	def := specs["default.yaml"]
	if def == nil {
		t.Fatal("configs/default.yaml missing or broken")
	}
	if def.Reference.Name != "cpu-exact" || def.Reference.Options["numerics"] != "exact" {
		t.Errorf("default reference %+v", def.Reference)
	}
	// The product's point: the CPU reference against the simulated NPU in
	// fp16 and int8, plus the CPU in llama.cpp's numerics.
	var names []string
	for _, c := range def.Candidates {
		names = append(names, c.Name+":"+c.Plugin)
	}
	if strings.Join(names, ",") != "npu-fp16:rknn,npu-int8:rknn,cpu-ggml:cpu" ||
		def.Candidates[0].Options["type"] != "fp16" || def.Candidates[1].Options["type"] != "int8" || def.Candidates[2].Options["numerics"] != "ggml" {
		t.Errorf("default candidates %+v", def.Candidates)
	}
	if len(def.Datasets) != 2 || def.Datasets[0].Mode != ModeScore || def.Datasets[0].NCtx != 128 ||
		def.Datasets[1].Mode != ModeGenerate || def.Datasets[1].MaxNewTokens != 32 {
		t.Errorf("default datasets %+v", def.Datasets)
	}
	if def.Bench != (Bench{Enabled: true, NPrompt: 64, NGen: 16, Reps: 300, Warmup: true}) {
		t.Errorf("default bench %+v", def.Bench)
	}
	// What each default candidate measures on this model (fp16 rounding:
	// KLD ~1e-6; int8: ~2e-3, 97.5% same top; ggml numerics: ~1e-12) passes
	// its gates, and a hundredfold worse NPU result fails them.
	expect := map[string][2]float64{"npu-fp16": {1.1e-6, 0.9995}, "npu-int8": {0.0018, 0.975}, "cpu-ggml": {1e-6, 1}}
	for _, b := range def.Backends()[1:] {
		e := expect[b.Name]
		for _, g := range b.Gates.List() {
			switch g.Name {
			case "kld_mean_max":
				if !g.Pass(e[0]) || strings.HasPrefix(b.Name, "npu") && g.Pass(e[0]*100) {
					t.Errorf("%s: gate %+v for KLD %g", b.Name, g, e[0])
				}
			case "same_top_p_min":
				if !g.Pass(e[1]) || g.Pass(e[1]-0.1) {
					t.Errorf("%s: gate %+v for same top %g", b.Name, g, e[1])
				}
			}
		}
	}

	// nightly.yaml is default.yaml plus last night's builds of the plugins
	// its candidates run, which their slowdown gates judge against.
	if n := specs["nightly.yaml"]; n == nil {
		t.Error("configs/nightly.yaml missing or broken")
	} else {
		if n.Model != def.Model || !reflect.DeepEqual(n.Datasets, def.Datasets) || !reflect.DeepEqual(n.Reference, def.Reference) ||
			n.Bench != def.Bench || !reflect.DeepEqual(n.Gates, def.Gates) || len(n.Candidates) != len(def.Candidates)+2 {
			t.Errorf("nightly.yaml is not default.yaml plus two backends")
		}
		byName := map[string]Backend{}
		for _, c := range n.Candidates {
			byName[c.Name] = c
		}
		judged := 0
		for i, d := range def.Candidates {
			c := n.Candidates[i]
			g := c.Gates
			if c.Name != d.Name || c.Plugin != d.Plugin || !reflect.DeepEqual(c.Options, d.Options) {
				t.Errorf("nightly %s is not default's %s", c.Name, d.Name)
			}
			if g.SpeedBaseline == nil {
				continue
			}
			judged++
			last, ok := byName[*g.SpeedBaseline]
			if !ok || last.PluginPath != mustAbs(t, "../../bin/evalrun-plugin-"+c.Plugin) || !reflect.DeepEqual(last.Options, c.Options) || len(g.InRun()) != 2 {
				t.Errorf("nightly %s judges its speed (%+v) against %+v", c.Name, g.InRun(), last)
			}
			g.SpeedBaseline, g.TGTSMaxSlowdown, g.PPTSMaxSlowdown, g.SpeedGatesOnSimulated = nil, nil, nil, nil
			if !reflect.DeepEqual(g, d.Gates) {
				t.Errorf("nightly %s's accuracy gates %+v, default's %+v", c.Name, g, d.Gates)
			}
		}
		if judged != 2 {
			t.Errorf("nightly: %d candidates judge their speed against last night's build, want 2 (npu-fp16, cpu-ggml)", judged)
		}
	}

	// llama.cpp's KLD figures for the quantized files (testdata/llamacpp/
	// perplexity/kld.*.plain.stdout.txt): Q8_0 must pass, Q4_0 must fail.
	type result struct{ kldMean, kldP99, sameTop float64 }
	llama := map[string]result{"q8_0": {0.000839, 0.004592, 0.98413}, "q4_0": {0.087270, 0.500650, 0.84987}}
	for _, name := range []string{"quantized.yaml", "kld-base.yaml"} {
		s := specs[name]
		if s == nil {
			t.Errorf("configs/%s missing or broken", name)
			continue
		}
		for _, b := range s.Backends() {
			r, ok := llama[b.Name]
			if !ok {
				continue
			}
			pass := true
			for _, g := range b.Gates.List() {
				switch g.Metric {
				case "kld_mean":
					pass = pass && g.Pass(r.kldMean)
				case "kld_p99":
					pass = pass && g.Pass(r.kldP99)
				case "same_top_p":
					pass = pass && g.Pass(r.sameTop)
				}
			}
			if want := b.Name == "q8_0"; pass != want {
				t.Errorf("%s: %s passes the gates = %v, want %v", name, b.Name, pass, want)
			}
			if !strings.Contains(b.Model, strings.ReplaceAll(b.Name, "_", "_")) || b.Model == s.Model.Path {
				t.Errorf("%s: %s loads %s", name, b.Name, b.Model)
			}
		}
	}
	if k := specs["kld-base.yaml"]; k != nil && (k.Reference.KLDBase == "" || len(k.Datasets) != 0 || len(k.Backends()) != 2) {
		t.Errorf("kld-base reference %+v", k.Reference)
	}
}

// TestLoadRefusesHugeAndStaysInterruptible: a spec is read up to MaxSize
// (not /dev/zero until memory runs out), and a FIFO nobody writes to does
// not block Ctrl-C.
func TestLoadRefusesHugeAndStaysInterruptible(t *testing.T) {
	big := filepath.Join(t.TempDir(), "big.yaml")
	if err := os.WriteFile(big, []byte(base+"# "+strings.Repeat("x", MaxSize)+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{big, "/dev/zero"} {
		if _, err := os.Stat(p); err != nil {
			continue
		}
		if _, err := Load(context.Background(), p); err == nil || !strings.Contains(err.Error(), "larger than 1024 KiB") {
			t.Errorf("%s: err = %v", p, err)
		}
	}
	fifo := filepath.Join(t.TempDir(), "spec.fifo")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Skip("no FIFOs here:", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel()
	start := time.Now()
	if _, err := Load(ctx, fifo); !errors.Is(err, context.DeadlineExceeded) || time.Since(start) > 2*time.Second {
		t.Errorf("FIFO without a writer: err = %v after %v", err, time.Since(start))
	}
}

func FuzzParse(f *testing.F) {
	f.Add([]byte(base))
	f.Add([]byte(base + "gates: {kld_mean_max: 1}\ntimeouts: {eval: 1s}\n"))
	f.Add([]byte("a: &x [*x]\n"))
	f.Add([]byte("name: [\n"))
	f.Add([]byte("reference: {kld_base: k, options: {<<: {a: 1}}}\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		s, err := parse(data, "fuzz.yaml", options{})
		if err == nil {
			if s.Name == "" || s.Model.Path == "" || len(s.Candidates) == 0 || s.Bench.Reps < 1 {
				t.Fatalf("accepted an invalid spec: %+v", s)
			}
			return
		}
		if !strings.HasPrefix(err.Error(), "fuzz.yaml") {
			t.Fatalf("error does not name the file: %v", err)
		}
	})
}
func TestRelativeGatesAndBaseline(t *testing.T) {
	text := base + `    gates: {same_top_p_max_drop: 0.001, speed_gates_on_simulated: true}
baseline: runs/last
gates: {kld_mean_max: 0.01, kld_mean_max_increase: 0.0001, tg_ts_max_slowdown: 0.05}
`
	dir := writeSpec(t, text)
	run := filepath.Join(filepath.Dir(dir), "runs", "last")
	if err := os.MkdirAll(run, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(run, "summary.json"), []byte("{}"), 0o644); err != nil {
		t.Fatal(err)
	}
	s, err := Load(context.Background(), dir)
	if err != nil {
		t.Fatal(err)
	}
	if s.Baseline != filepath.Join(s.Dir, "runs", "last") {
		t.Fatalf("baseline %q: relative to the spec's directory", s.Baseline)
	}
	g := s.Backends()[1].Gates
	if got := g.List(); len(got) != 1 || got[0].Name != "kld_mean_max" {
		t.Fatalf("absolute gates %+v", got)
	}
	want := []gate.Gate{
		{Name: "kld_mean_max_increase", Metric: "kld_mean", Bound: gate.MaxIncrease, Limit: 0.0001},
		{Name: "same_top_p_max_drop", Metric: "same_top_p", Bound: gate.MaxDrop, Limit: 0.001},
		{Name: "tg_ts_max_slowdown", Metric: "tg_ts", Bound: gate.MaxSlowdown, Limit: 0.05},
	}
	if got := g.Relative(); !reflect.DeepEqual(got, want) {
		t.Fatalf("relative gates %+v", got)
	}
	if !g.SpeedOnSimulated() || s.Gates.SpeedOnSimulated() {
		t.Fatal("speed_gates_on_simulated: set on the backend only")
	}

	for _, c := range []struct{ text, want string }{
		{base + "baseline: nowhere\n", `DIR/t.yaml:12: baseline: DIR/nowhere: no such file or directory`},
		{base + "baseline: .\n", `DIR/t.yaml:12: baseline: DIR: not a run directory (no summary.json)`},
		{base + "gates: {tg_ts_max_slowdown: 1}\n", `DIR/t.yaml:12: gates.tg_ts_max_slowdown: is a fraction of the baseline's tokens/s, below 1, got 1`},
		{base + "gates: {same_top_p_max_drop: 2}\n", `DIR/t.yaml:12: gates.same_top_p_max_drop: is a fraction between 0 and 1, got 2`},
		{base + "gates: {kld_mean_max_increase: -1}\n", `DIR/t.yaml:12: gates.kld_mean_max_increase: must be >= 0, got -1`},
		{base + "gates: {speed_gates_on_simulated: 1}\n", `DIR/t.yaml:12: gates.speed_gates_on_simulated: want true or false`},
	} {
		if _, msg := load(t, c.text, nil); !strings.Contains(msg, c.want) {
			t.Errorf("%q:\n got %s\nwant %s", c.text, msg, c.want)
		}
	}
}

// The effective spec in summary.json lists the gates set, a gate of 0
// included, and leaves out those not set.
func TestEffectiveGates(t *testing.T) {
	s, errs := load(t, base+"gates:\n  max_abs_diff_max: 0\n  kld_mean_max: 0.5\n", nil)
	if errs != "" {
		t.Fatal(errs)
	}
	want := map[string]any{"max_abs_diff_max": 0, "kld_mean_max": 0.5}
	if got := s.Effective()["gates"]; !reflect.DeepEqual(got, want) {
		t.Errorf("effective gates %#v, want %#v", got, want)
	}
}

// gates.speed_baseline moves a backend's slowdown gates from the baseline
// run to another backend of the same run, and names a backend that is
// benchmarked in this run.
func TestSpeedBaseline(t *testing.T) {
	two := base + "    gates: {pp_ts_max_slowdown: 0.05, kld_mean_max_increase: 0.001, speed_baseline: c}\n  - name: c\n    plugin: cpu\n"
	s, msg := load(t, two, nil)
	if msg != "" {
		t.Fatalf("load: %s", msg)
	}
	g := s.Backends()[1].Gates
	if in, run := g.InRun(), g.BaselineRun(); len(in) != 1 || in[0].Name != "pp_ts_max_slowdown" || len(run) != 1 || run[0].Name != "kld_mean_max_increase" {
		t.Fatalf("in the run %+v, against the baseline run %+v", in, run)
	}
	if c := s.Backends()[2].Gates; len(c.InRun()) != 0 || c.SpeedBaseline != nil {
		t.Fatalf("backend c has no speed_baseline: %+v", c)
	}
	noBaseline := base + "    gates: {pp_ts_max_slowdown: 0.05}\n"
	s, msg = load(t, noBaseline, nil)
	if msg != "" {
		t.Fatalf("load: %s", msg)
	}
	if g := s.Backends()[1].Gates; len(g.BaselineRun()) != 1 || len(g.InRun()) != 0 {
		t.Fatalf("without speed_baseline the slowdown gate compares with the baseline run: %+v", g)
	}

	gated := func(gates string) string { return base + "    gates: {" + gates + "}\n  - name: c\n    plugin: cpu\n" }
	for _, c := range []struct{ text, want string }{
		{gated("pp_ts_max_slowdown: 0.05, speed_baseline: b"), `backends[0].gates.speed_baseline: names this backend itself`},
		{gated("pp_ts_max_slowdown: 0.05, speed_baseline: x"), `backends[0].gates.speed_baseline: no backend "x" in this spec (backends: b, c, reference)`},
		{gated("pp_ts_max_slowdown: 0.05, speed_baseline: c") + "bench: {enabled: false}\n", `backends[0].gates.speed_baseline: needs bench.enabled: true`},
		{gated("kld_mean_max: 1, speed_baseline: c"), `backends[0].gates.speed_baseline: judges the slowdown gates, and none is set`},
		{base + "gates: {speed_baseline: b}\n", `gates.speed_baseline: set it in a backend's gates`},
		{base + "    gates: {pp_ts_max_slowdown: 0, speed_baseline: c}\n  - name: c\n    plugin: cpu\n    gates: {pp_ts_max_slowdown: 0, speed_baseline: b}\n",
			`backends[0].gates.speed_baseline: b judges its speed against c, and c (through speed_baseline) against b: one of them must be the baseline`},
		{strings.Replace(base, "  plugin: cpu\nbackends", "  kld_base: k.kld\nbackends", 1) + "    gates: {tg_ts_max_slowdown: 0, speed_baseline: reference}\n",
			`backends[0].gates.speed_baseline: the reference "reference" is a kld_base file`},
	} {
		if _, msg := load(t, c.text, nil); !strings.Contains(msg, c.want) {
			t.Errorf("%q:\n got %s\nwant %s", c.text, msg, c.want)
		}
	}
}
