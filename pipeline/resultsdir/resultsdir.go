// Package resultsdir owns a results directory: the names of the files a run
// writes there, the lock a writing run holds, the check that refuses to
// overwrite an earlier run, summary.json's reading and writing, the units
// file (units.jsonl: the run as it goes, which resume and merge read) and
// the results root's index.jsonl. Every write is atomic (atomicfile).
//
// A run's work is split into units that independent processes (CI matrix
// jobs, Kubernetes Indexed Job pods, boards) can execute as shards, and
// their results directories are merged back exactly. A unit is one score
// chunk, one generate prompt or the bench of one backend, named by an id
// that is stable for a given spec (ScoreUnit, GenerateUnit, BenchUnit).
// Shard I of N owns the units whose position in the plan's unit list is I
// modulo N, and a unit that goes With another goes to that one's shard:
// every unit lands in exactly one shard whatever N is. Every run writes its
// units file (an unsharded one as shard 0/1): the plan (every unit, in
// order, and the spec's digest) and, for each unit it ran and each
// candidate, the unit's accumulated comparison, from which a resume or a
// merge rebuilds every statistic with the bits of one unsharded run.
package resultsdir

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"

	"github.com/evalrun/evalrun/internal/atomicfile"
	"github.com/evalrun/evalrun/internal/exitcode"
	"github.com/evalrun/evalrun/internal/userfile"
	"github.com/evalrun/evalrun/pipeline/summary"
)

// The files of a results directory.
const (
	SummaryFile = "summary.json"  // the run (package summary's Summary)
	PromptsFile = "prompts.jsonl" // a line per backend and chunk or prompt (summary.PromptResult)
	UnitsFile   = "units.jsonl"   // the run as it goes (Writer, Read)
	ReportMD    = "report.md"     // package report renders these from summary.json
	ReportHTML  = "report.html"
	JUnitFile   = "junit.xml"
	// IndexFile is beside the runs' directories, in the results root: a
	// line per run (summary.IndexEntry).
	IndexFile = "index.jsonl"
	// Compare's files: evalrun compare --out DIR.
	CompareJSON = "compare.json"
	CompareMD   = "compare.md"
	CompareHTML = "compare.html"
)

// resultFiles are what a run writes into its directory; one of them there
// means the directory holds a run.
var resultFiles = []string{SummaryFile, PromptsFile, ReportMD, JUnitFile, ReportHTML, UnitsFile}

// Check refuses a results directory that is a file, or that holds
// the results of an earlier run unless force says to overwrite them (or to
// resume them).
func Check(dir string, force bool) error {
	st, err := os.Stat(dir)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return nil
	case err != nil:
		return exitcode.Input("results directory: %v", err)
	case !st.IsDir():
		return exitcode.Input("results directory %s: exists and is not a directory", dir)
	}
	for _, f := range resultFiles {
		if _, err := os.Stat(filepath.Join(dir, f)); err == nil && !force {
			return exitcode.Input("results directory %s holds the results of an earlier run (%s): choose another --out, or --force to overwrite them (--resume continues an interrupted run)", dir, f)
		}
	}
	return nil
}

// Open makes the results directory and locks it against a second
// run; with force it then removes an earlier run's results.
func Open(dir string, force bool) (unlock func(), err error) {
	if err := os.MkdirAll(dir, 0o777); err != nil {
		return nil, exitcode.Input("results directory: %v", err)
	}
	unlock, err = atomicfile.LockDir(dir)
	if err != nil {
		return nil, exitcode.Input("results directory %s: %v (another evalrun is writing there)", dir, err)
	}
	for _, f := range resultFiles {
		if !force {
			break // none there (Check), or a run to resume
		}
		if err := os.Remove(filepath.Join(dir, f)); err != nil && !errors.Is(err, fs.ErrNotExist) {
			unlock()
			return nil, exitcode.Input("results directory %s: --force: %v", dir, err)
		}
	}
	return unlock, nil
}

// MaxFileSize bounds a summary.json that ReadSummary reads (compare, merge and
// --baseline read files a user names).
const MaxFileSize = 256 << 20

// ReadSummary reads a summary.json and checks its schema.
func ReadSummary(path string) (*summary.Summary, error) {
	data, err := userfile.ReadFile(path, MaxFileSize)
	if err != nil {
		return nil, err
	}
	var s summary.Summary
	if err := json.Unmarshal(data, &s); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	if s.Schema != summary.SchemaVersion {
		return nil, fmt.Errorf("%s: schema %q, want %q", path, s.Schema, summary.SchemaVersion)
	}
	return &s, nil
}

// WriteSummary writes dir/summary.json atomically; the other result files are
// rendered from it by package report.
func WriteSummary(dir string, s *summary.Summary) error {
	data, err := json.MarshalIndent(s, "", "  ")
	if err != nil {
		return err
	}
	return atomicfile.WriteFile(filepath.Join(dir, SummaryFile), append(data, '\n'))
}

// AppendIndex adds the run in dir, a directory of the results root, to the
// root's index.jsonl (beside dir): one line, written with a single append so
// runs sharing a root never interleave.
func AppendIndex(dir string, s *summary.Summary) error {
	e := summary.IndexEntry{ID: s.Run.ID, Name: s.Run.Name, Dir: dir, Spec: s.Run.Spec, Started: s.Run.Started.Format("2006-01-02T15:04:05Z07:00"),
		DurationS: s.Run.DurationS, GitCommit: s.Run.GitCommit, ModelSHA256: s.Model.SHA256, Verdict: s.Verdict.Status, ExitCode: s.Verdict.ExitCode, Limit: s.Run.Limit}
	for _, b := range s.Backends {
		e.Backends = append(e.Backends, summary.IndexBE{Name: b.Name, Status: b.Status, Pass: b.Pass})
	}
	line, err := json.Marshal(e)
	if err != nil {
		return err
	}
	f, err := os.OpenFile(filepath.Join(filepath.Dir(dir), IndexFile), os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o666)
	if err != nil {
		return err
	}
	if _, err := f.Write(append(line, '\n')); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}
