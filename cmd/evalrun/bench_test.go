package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"os"
	"reflect"
	"testing"

	"github.com/evalrun/evalrun/backend"
	"github.com/evalrun/evalrun/pipeline/summary"
)

// compare-llama-bench.py refuses records that lack any of llama-bench's
// fields; evalrun bench's jsonl must carry every field llama-bench b10587
// writes (testdata: its output on this repository's model), with the same
// JSON kinds, so the script reads evalrun's results as it reads llama.cpp's.
func TestBenchJSONLHasLlamaBenchFields(t *testing.T) {
	golden, err := os.ReadFile("testdata/llama-bench-b10587.jsonl")
	if err != nil {
		t.Fatal(err)
	}
	var want map[string]any
	if err := json.Unmarshal(bytes.TrimSpace(golden), &want); err != nil {
		t.Fatal(err)
	}
	rows := []benchRow{{
		info: backend.Info{Name: "cpu", Device: "cpu"}, model: "models/stories260K.gguf", threads: 2, name: "pp16",
		load: backend.LoadResult{Kernels: "avx512"},
		test: &summary.BenchTest{NPrompt: 16, AvgNS: 1000, AvgTS: 16000, SamplesNS: []int64{1000}},
	}}
	var out bytes.Buffer
	if err := printBench(&out, "jsonl", rows); err != nil {
		t.Fatal(err)
	}
	sc := bufio.NewScanner(&out)
	if !sc.Scan() {
		t.Fatal("no record")
	}
	var got map[string]any
	if err := json.Unmarshal(sc.Bytes(), &got); err != nil {
		t.Fatal(err)
	}
	for k, v := range want {
		g, ok := got[k]
		if !ok {
			t.Errorf("field %q missing (llama-bench writes %v)", k, v)
			continue
		}
		if reflect.TypeOf(g) != reflect.TypeOf(v) {
			t.Errorf("field %q is %T %v, llama-bench writes %T %v", k, g, g, v, v)
		}
	}
}
