package resultsdir

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"

	"github.com/evalrun/evalrun/internal/userfile"
	"github.com/evalrun/evalrun/pipeline/summary"
)

// Run is one run's results: what evalrun run and merge produce, and what
// Load reads back from disk.
type Run struct {
	Dir     string // the run directory
	Summary *summary.Summary
	// Prompts holds each backend's chunk and prompt digests in run order, as
	// Load reads them; nil when the run has no prompts.jsonl, and for a run
	// just made (pipeline.Run, pipeline.Merge).
	Prompts map[string][]PromptDigest
}

// PromptDigest is one prompts.jsonl line's digest.
type PromptDigest struct {
	Dataset, ID string
	summary.PromptDigest
}

// maxLine bounds one prompts.jsonl line: a generate prompt's or score
// chunk's row hashes (19 bytes each) and tokens.
const maxLine = 64 << 20

// Load reads a run from its directory or its summary.json (prompts.jsonl
// beside it is read when present). Errors name the file and, for
// prompts.jsonl, the line.
func Load(path string) (*Run, error) {
	file, dir := path, filepath.Dir(path)
	if fi, err := os.Stat(path); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	} else if fi.IsDir() {
		file, dir = filepath.Join(path, SummaryFile), path
	}
	s, err := ReadSummary(file)
	if err != nil {
		return nil, fmt.Errorf("%s: not a run (%w)", path, err)
	}
	r := &Run{Dir: dir, Summary: s}
	if r.Prompts, err = loadPrompts(filepath.Join(dir, PromptsFile)); err != nil {
		return nil, err
	}
	return r, nil
}

func loadPrompts(path string) (map[string][]PromptDigest, error) {
	f, err := userfile.Open(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	defer f.Close()
	out := map[string][]PromptDigest{}
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 0, 64<<10), maxLine)
	for n := 1; sc.Scan(); n++ {
		var p summary.PromptResult
		if err := json.Unmarshal(sc.Bytes(), &p); err != nil {
			return nil, fmt.Errorf("%s:%d: %w", path, n, err)
		}
		if p.PromptDigest == nil { // a run from before digests: nothing to compare
			continue
		}
		out[p.Backend] = append(out[p.Backend], PromptDigest{Dataset: p.Dataset, ID: p.ID, PromptDigest: *p.PromptDigest})
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return out, nil
}

// Speeds is every backend's throughput by name, the reference's included.
func (r *Run) Speeds() map[string]*summary.Throughput {
	out := map[string]*summary.Throughput{}
	for _, b := range r.Backends() {
		out[b.Name] = b.Throughput
	}
	return out
}

// Backends lists the run's backends, reference first.
func (r *Run) Backends() []summary.BackendSummary {
	return append([]summary.BackendSummary{r.Summary.Reference}, r.Summary.Backends...)
}

// Backend finds a backend by name.
func (r *Run) Backend(name string) (summary.BackendSummary, bool) {
	for _, b := range r.Backends() {
		if b.Name == name {
			return b, true
		}
	}
	return summary.BackendSummary{}, false
}
