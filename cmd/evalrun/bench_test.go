package main

import (
	"bufio"
	"bytes"
	"encoding/csv"
	"encoding/json"
	"os"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/evalrun/evalrun/backend"
	"github.com/evalrun/evalrun/pipeline/summary"
)

// The llama-bench goldens in testdata are llama.cpp b10587's output (a CPU
// build of commit 3f545becc) on this repository's model. The csv and sql
// ones were made from the repository root with
//
//	llama-bench -m models/stories260K.gguf -p 16,32 -n 8 -o csv >cmd/evalrun/testdata/llama-bench-b10587.csv
//	llama-bench -m models/stories260K.gguf -p 16,32 -n 8 -o sql >cmd/evalrun/testdata/llama-bench-b10587.sql
//
// the jsonl one is a pp16 record captured the same way with -o jsonl. Their
// timings and CPU are the machine's that made them; the tests compare the
// fields, their kinds and the model's figures.

// compare-llama-bench.py refuses records that lack any of llama-bench's
// fields; evalrun bench's jsonl must carry every field llama-bench b10587
// writes, with the same JSON kinds, so the script reads evalrun's results as
// it reads llama.cpp's.
func TestBenchJSONLHasLlamaBenchFields(t *testing.T) {
	golden, err := os.ReadFile("testdata/llama-bench-b10587.jsonl")
	if err != nil {
		t.Fatal(err)
	}
	var want map[string]any
	if err := json.Unmarshal(bytes.TrimSpace(golden), &want); err != nil {
		t.Fatal(err)
	}
	rows := benchRow{
		info: backend.Info{Name: "cpu", Device: "cpu"}, model: "models/stories260K.gguf", threads: 2, req: backend.BenchRequest{NPrompt: 16},
		load: backend.LoadResult{Kernels: "avx512"}, time: time.Now(),
		test: &summary.BenchTest{NPrompt: 16, AvgNS: 1000, AvgTS: 16000, SamplesNS: []int64{1000}},
	}
	var out bytes.Buffer
	p := &benchPrinter{w: &out, format: "jsonl"}
	if err := p.row(rows); err != nil {
		t.Fatal(err)
	}
	sc := bufio.NewScanner(&out)
	if !sc.Scan() {
		t.Fatal("no record")
	}
	var got map[string]any
	if err := json.Unmarshal(sc.Bytes(), &got); err != nil {
		t.Fatalf("%v:\n%s", err, sc.Bytes())
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
	if got["backends"] != "CPU" || got["plugin"] != "cpu" || got["kernels"] != "avx512" {
		t.Errorf("backends %v, plugin %v, kernels %v; want CPU, cpu, avx512", got["backends"], got["plugin"], got["kernels"])
	}
}

// The list flags read llama-bench's parse_int_range forms.
func TestParseIntRange(t *testing.T) {
	for in, want := range map[string][]int{
		"512":         {512},
		"16,32":       {16, 32},
		"16,32,":      {16, 32},
		"1-4":         {1, 2, 3, 4},
		"0-10+5":      {0, 5, 10},
		"0-12+5":      {0, 5, 10},
		"8-64*2":      {8, 16, 32, 64},
		"8-100*2":     {8, 16, 32, 64},
		"1-3,7,16-32": append([]int{1, 2, 3, 7}, 16, 17, 18, 19, 20, 21, 22, 23, 24, 25, 26, 27, 28, 29, 30, 31, 32),
		"5-4":         nil,
	} {
		got, err := parseIntRange(in)
		if err != nil || !reflect.DeepEqual(got, want) {
			t.Errorf("%q: %v, %v; want %v", in, got, err, want)
		}
	}
	for in, text := range map[string]string{
		"x":        "want N, FIRST-LAST",
		"16;32":    "want N, FIRST-LAST",
		"-1":       "want N, FIRST-LAST",
		"1-":       "want N, FIRST-LAST",
		"1-8|2":    "want N, FIRST-LAST",
		"0-8*2":    "does not grow",
		"1-8+0":    "does not grow",
		"1-100000": "more than 10000 values",
	} {
		if got, err := parseIntRange(in); err == nil || !strings.Contains(err.Error(), text) {
			t.Errorf("%q: %v, %v; want an error with %q", in, got, err, text)
		}
	}
}

// Tests run in llama-bench's order: models, then threads, then depths, each
// depth's pp tests before its tg tests, a 0 skipped.
func TestBenchInstancesOrder(t *testing.T) {
	var got []string
	for _, in := range benchInstances([]string{"a", "b"}, []int{1, 2}, []int{0, 64}, []int{16, 32}, []int{0, 8}) {
		got = append(got, in.model+" t"+string(rune('0'+in.threads))+" "+in.req.String())
	}
	var want []string
	for _, m := range []string{"a", "b"} {
		for _, th := range []string{"t1", "t2"} {
			want = append(want, m+" "+th+" pp16", m+" "+th+" pp32", m+" "+th+" tg8",
				m+" "+th+" pp16 @ d64", m+" "+th+" pp32 @ d64", m+" "+th+" tg8 @ d64")
		}
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("order:\n got %q\nwant %q", got, want)
	}
}

func readCSV(t *testing.T, text string) []map[string]string {
	t.Helper()
	recs, err := csv.NewReader(strings.NewReader(text)).ReadAll()
	if err != nil || len(recs) < 1 {
		t.Fatalf("csv: %v\n%s", err, text)
	}
	var rows []map[string]string
	for _, r := range recs[1:] {
		row := map[string]string{"": strings.Join(recs[0], ",")}
		for i, name := range recs[0] {
			row[name] = r[i]
		}
		rows = append(rows, row)
	}
	return rows
}

// evalrun bench -o csv on the model llama-bench ran: the same header row,
// the same tests in the same order, and the same model's size, parameters
// and backend for the cpu plugin.
func TestBenchCSVMatchesLlamaBench(t *testing.T) {
	golden, err := os.ReadFile("testdata/llama-bench-b10587.csv")
	if err != nil {
		t.Fatal(err)
	}
	r := evalrun(t, nil, "bench", "--model", "models/stories260K.gguf", "--plugin", "cpu", "-p", "16,32", "-n", "8", "-r", "2", "-o", "csv")
	if r.code != 0 {
		t.Fatalf("bench: exit %d %s", r.code, r.stderr)
	}
	wantHeader, _, _ := strings.Cut(string(golden), "\n")
	if gotHeader, _, _ := strings.Cut(r.stdout, "\n"); gotHeader != wantHeader {
		t.Errorf("header row:\n got %s\nwant %s", gotHeader, wantHeader)
	}
	want, got := readCSV(t, string(golden)), readCSV(t, r.stdout)
	if len(got) != len(want) {
		t.Fatalf("%d rows, llama-bench %d:\n%s", len(got), len(want), r.stdout)
	}
	for i := range want {
		for _, k := range []string{"backends", "model_filename", "model_size", "model_n_params", "n_prompt", "n_gen", "n_depth"} {
			if got[i][k] != want[i][k] {
				t.Errorf("row %d: %s %q, llama-bench %q", i+1, k, got[i][k], want[i][k])
			}
		}
		if got[i]["avg_ts"] == "" || got[i]["avg_ts"] == "0.000000" || got[i]["type_k"] != "f32" {
			t.Errorf("row %d: %v", i+1, got[i])
		}
	}
}

// -o sql creates llama-bench's table and inserts into the same columns.
func TestBenchSQLMatchesLlamaBench(t *testing.T) {
	golden, err := os.ReadFile("testdata/llama-bench-b10587.sql")
	if err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	p := &benchPrinter{w: &out, format: "sql"}
	row := benchRow{info: backend.Info{Name: "cpu", Device: "cpu"}, model: "models/it's.gguf", threads: 2, req: backend.BenchRequest{NGen: 8},
		time: time.Now(), test: &summary.BenchTest{NGen: 8, AvgNS: 1000, AvgTS: 8000, SamplesNS: []int64{1000}}}
	if err := p.row(row); err != nil {
		t.Fatal(err)
	}
	wantCreate, wantInserts, _ := strings.Cut(string(golden), ");\n\n")
	gotCreate, gotInserts, _ := strings.Cut(out.String(), ");\n\n")
	if gotCreate != wantCreate {
		t.Errorf("CREATE TABLE:\n%s\nllama-bench:\n%s", gotCreate, wantCreate)
	}
	columns := func(s string) string { c, _, _ := strings.Cut(s, " VALUES ("); return c }
	if columns(gotInserts) != columns(wantInserts) {
		t.Errorf("INSERT:\n%s\nllama-bench:\n%s", columns(gotInserts), columns(wantInserts))
	}
	if !strings.Contains(gotInserts, "'models/it''s.gguf'") || !strings.HasSuffix(gotInserts, "'8000.000000', '0.000000');\n") {
		t.Errorf("INSERT values: %s", gotInserts)
	}
}

// -d runs each test at a depth and names it as llama-bench does; a depth
// and test that do not fit in the model's context are refused, naming the
// flags.
func TestBenchDepthFlag(t *testing.T) {
	r := evalrun(t, nil, "bench", "--model", "models/stories260K.gguf", "-p", "16", "-n", "4", "-d", "0,32", "-r", "1", "-t", "1")
	if r.code != 0 {
		t.Fatalf("bench -d: exit %d %s", r.code, r.stderr)
	}
	var tests []string
	for _, l := range strings.Split(r.stdout, "\n") {
		if f := strings.Split(l, " | "); len(f) == 9 && f[7] != "test" && !strings.HasPrefix(f[7], "--") {
			tests = append(tests, f[7])
		}
	}
	if want := []string{"pp16", "tg4", "pp16 @ d32", "tg4 @ d32"}; !reflect.DeepEqual(tests, want) {
		t.Errorf("tests %q, want %q:\n%s", tests, want, r.stdout)
	}

	r = evalrun(t, nil, "bench", "--model", "models/stories260K.gguf", "-p", "16", "-n", "4", "-d", "2040", "-r", "1", "-o", "jsonl")
	if r.code != 2 || r.stdout != "" || !strings.Contains(r.stderr, "-d 2040 with -p 16: pp16 @ d2040 needs 2056 positions, more than models/stories260K.gguf's context of 2048") {
		t.Errorf("a depth beyond the context: exit %d, stdout %q, stderr %s", r.code, r.stdout, r.stderr)
	}
}
