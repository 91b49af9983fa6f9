package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func write(t *testing.T, name, text string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), name)
	if err := os.WriteFile(p, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

// The ratio is the median of per-round ratios (rounds paired in file order),
// not the ratio of medians: a round where the machine was slow for both
// sides must not count as a slowdown of one.
func TestTableMedianOfPairedRatios(t *testing.T) {
	llama := write(t, "llama.jsonl", `{"model_filename":"/x/m.gguf","n_threads":1,"n_prompt":128,"n_gen":0,"avg_ts":100}
{"model_filename":"/x/m.gguf","n_threads":1,"n_prompt":0,"n_gen":64,"avg_ts":10}
{"model_filename":"/x/m.gguf","n_threads":1,"n_prompt":128,"n_gen":0,"avg_ts":50}
{"model_filename":"/x/m.gguf","n_threads":1,"n_prompt":0,"n_gen":64,"avg_ts":20}
{"model_filename":"/x/m.gguf","n_threads":1,"n_prompt":128,"n_gen":0,"avg_ts":100}
{"model_filename":"/x/m.gguf","n_threads":1,"n_prompt":0,"n_gen":64,"avg_ts":20}
`)
	ev := write(t, "exact.jsonl", `{"model_filename":"models/m.gguf","n_threads":1,"n_prompt":128,"n_gen":0,"avg_ts":40}
{"model_filename":"models/m.gguf","n_threads":1,"n_prompt":0,"n_gen":64,"avg_ts":9}
{"model_filename":"models/m.gguf","n_threads":1,"n_prompt":128,"n_gen":0,"avg_ts":25}
{"model_filename":"models/m.gguf","n_threads":1,"n_prompt":0,"n_gen":64,"avg_ts":18}
{"model_filename":"models/m.gguf","n_threads":1,"n_prompt":128,"n_gen":0,"avg_ts":60}
{"model_filename":"models/m.gguf","n_threads":1,"n_prompt":0,"n_gen":64,"avg_ts":16}
`)
	out := tableOf(t, llama, "exact", ev)
	// pp ratios 0.4, 0.5, 0.6 -> 0.50 (ratio of medians would be 40/100);
	// tg ratios 0.9, 0.9, 0.8 -> 0.90.
	for _, want := range []string{"| m.gguf | 1 | pp128 | 100.0 | 40.0 | 0.50× |", "| m.gguf | 1 | tg64 | 20.0 | 16.0 | 0.90× |"} {
		if !strings.Contains(out, want) {
			t.Errorf("table lacks %q:\n%s", want, out)
		}
	}
}

func TestReadRejectsBadLines(t *testing.T) {
	for name, text := range map[string]string{
		"not json": "{\"avg_ts\": 1}\nnope\n",
		"no rate":  `{"model_filename":"m","n_threads":1,"n_prompt":1,"avg_ts":0}` + "\n",
	} {
		_, err := read(write(t, "x.jsonl", text))
		if err == nil || !strings.Contains(err.Error(), "x.jsonl:") {
			t.Errorf("%s: err %v, want one naming the file and line", name, err)
		}
	}
}

// A test at depth is its own row, named as llama-bench names it: pp512 at
// depth 4096 is not paired with pp512 at depth 0.
func TestDepthIsPartOfTheTest(t *testing.T) {
	llama := write(t, "llama.jsonl", `{"model_filename":"m.gguf","n_threads":2,"n_prompt":512,"n_gen":0,"n_depth":0,"avg_ts":400}
{"model_filename":"m.gguf","n_threads":2,"n_prompt":512,"n_gen":0,"n_depth":4096,"avg_ts":100}
`)
	ev := write(t, "ggml.jsonl", `{"model_filename":"m.gguf","n_threads":2,"n_prompt":512,"n_gen":0,"n_depth":0,"avg_ts":400}
{"model_filename":"m.gguf","n_threads":2,"n_prompt":512,"n_gen":0,"n_depth":4096,"avg_ts":150}
`)
	out := tableOf(t, llama, "ggml", ev)
	for _, want := range []string{"| m.gguf | 2 | pp512 | 400.0 | 400.0 | 1.00× |", "| m.gguf | 2 | pp512 @ d4096 | 100.0 | 150.0 | 1.50× |"} {
		if !strings.Contains(out, want) {
			t.Errorf("table lacks %q:\n%s", want, out)
		}
	}
}

// tableOf is the table of one evalrun column against llama.cpp's records.
func tableOf(t *testing.T, llamaPath, name, evalrunPath string) string {
	t.Helper()
	l, err := read(llamaPath)
	if err != nil {
		t.Fatal(err)
	}
	e, err := read(evalrunPath)
	if err != nil {
		t.Fatal(err)
	}
	var b bytes.Buffer
	if err := table(&b, l, []column{{name, e}}); err != nil {
		t.Fatal(err)
	}
	return b.String()
}
