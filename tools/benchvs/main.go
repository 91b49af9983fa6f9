// Command benchvs prints the speed ratios of evalrun to llama.cpp from the
// records of one interleaved run (tools/bench-vs-llamacpp.sh): llama-bench's
// and evalrun bench's jsonl, one record per test and round. Records are
// paired round by round, so both sides of a ratio ran under the same load on
// a shared machine, and the table shows the median of the per-round ratios.
package main

import (
	"bufio"
	"cmp"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
)

// record is the part of a llama-bench / evalrun bench jsonl line used here.
type record struct {
	Model   string  `json:"model_filename"`
	Threads int     `json:"n_threads"`
	NPrompt int     `json:"n_prompt"`
	NGen    int     `json:"n_gen"`
	NDepth  int     `json:"n_depth"`
	AvgTS   float64 `json:"avg_ts"`
}

type key struct {
	model   string
	threads int
	test    string
}

func (r record) key() key {
	test := fmt.Sprintf("pp%d", r.NPrompt)
	if r.NGen > 0 {
		test = fmt.Sprintf("tg%d", r.NGen)
	}
	if r.NDepth > 0 {
		test += fmt.Sprintf(" @ d%d", r.NDepth) // llama-bench's name
	}
	return key{filepath.Base(r.Model), r.Threads, test}
}

// read returns the t/s of every round by test, in file order.
func read(path string) (map[key][]float64, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	out := map[key][]float64{}
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for line := 1; sc.Scan(); line++ {
		text := strings.TrimSpace(sc.Text())
		if text == "" {
			continue
		}
		var r record
		if err := json.Unmarshal([]byte(text), &r); err != nil {
			return nil, fmt.Errorf("%s:%d: %v", path, line, err)
		}
		if r.AvgTS <= 0 {
			return nil, fmt.Errorf("%s:%d: avg_ts %v is not a rate", path, line, r.AvgTS)
		}
		out[r.key()] = append(out[r.key()], r.AvgTS)
	}
	return out, sc.Err()
}

func median(x []float64) float64 {
	s := slices.Clone(x)
	slices.Sort(s)
	n := len(s)
	if n == 0 {
		return 0
	}
	if n%2 == 1 {
		return s[n/2]
	}
	return (s[n/2-1] + s[n/2]) / 2
}

// column is one evalrun configuration compared with llama.cpp.
type column struct {
	name string
	ts   map[key][]float64
}

func table(w io.Writer, llama map[key][]float64, cols []column) error {
	keys := make([]key, 0, len(llama))
	for k := range llama {
		keys = append(keys, k)
	}
	slices.SortFunc(keys, func(a, b key) int {
		return cmp.Or(cmp.Compare(a.model, b.model), cmp.Compare(a.threads, b.threads), cmp.Compare(a.test, b.test))
	})
	fmt.Fprint(w, "| model | threads | test | llama.cpp t/s |")
	sep := "| --- | ---: | --- | ---: |"
	for _, c := range cols {
		fmt.Fprintf(w, " evalrun %s t/s | ratio %s |", c.name, c.name)
		sep += " ---: | ---: |"
	}
	fmt.Fprintln(w)
	fmt.Fprintln(w, sep)
	for _, k := range keys {
		l := llama[k]
		fmt.Fprintf(w, "| %s | %d | %s | %.1f |", k.model, k.threads, k.test, median(l))
		for _, c := range cols {
			e := c.ts[k]
			n := min(len(l), len(e))
			if n == 0 {
				fmt.Fprint(w, " - | - |")
				continue
			}
			ratios := make([]float64, n)
			for i := range n {
				ratios[i] = e[i] / l[i]
			}
			fmt.Fprintf(w, " %.1f | %.2f× |", median(e), median(ratios))
		}
		fmt.Fprintln(w)
	}
	return nil
}

func main() {
	llamaPath := flag.String("llama", "", "llama-bench jsonl")
	flag.Usage = func() {
		fmt.Fprintln(os.Stderr, "usage: benchvs -llama LLAMA.jsonl NAME=EVALRUN.jsonl...")
		flag.PrintDefaults()
	}
	flag.Parse()
	if *llamaPath == "" || flag.NArg() == 0 {
		flag.Usage()
		os.Exit(2)
	}
	llama, err := read(*llamaPath)
	if err != nil {
		fmt.Fprintln(os.Stderr, "benchvs:", err)
		os.Exit(2)
	}
	var cols []column
	for _, arg := range flag.Args() {
		name, path, ok := strings.Cut(arg, "=")
		if !ok {
			fmt.Fprintf(os.Stderr, "benchvs: %q is not NAME=FILE\n", arg)
			os.Exit(2)
		}
		ts, err := read(path)
		if err != nil {
			fmt.Fprintln(os.Stderr, "benchvs:", err)
			os.Exit(2)
		}
		cols = append(cols, column{name, ts})
	}
	if err := table(os.Stdout, llama, cols); err != nil {
		fmt.Fprintln(os.Stderr, "benchvs:", err)
		os.Exit(1)
	}
}
