package summary

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"

	"github.com/evalrun/evalrun/internal/atomicfile"
	"github.com/evalrun/evalrun/internal/exitcode"
	"github.com/evalrun/evalrun/pipeline/shard"
)

// resultFiles are what a run writes into its directory; one of them there
// means the directory holds a run.
var resultFiles = []string{"summary.json", "prompts.jsonl", "report.md", "junit.xml", "report.html", shard.FileName}

// CheckDir refuses a results directory that is a file, or that holds
// the results of an earlier run unless force says to overwrite them (or to
// resume them).
func CheckDir(dir string, force bool) error {
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

// OpenDir makes the results directory and locks it against a second
// run; with force it then removes an earlier run's results.
func OpenDir(dir string, force bool) (unlock func(), err error) {
	if err := os.MkdirAll(dir, 0o777); err != nil {
		return nil, exitcode.Input("results directory: %v", err)
	}
	unlock, err = atomicfile.LockDir(dir)
	if err != nil {
		return nil, exitcode.Input("results directory %s: %v (another evalrun is writing there)", dir, err)
	}
	for _, f := range resultFiles {
		if !force {
			break // none there (CheckDir), or a run to resume
		}
		if err := os.Remove(filepath.Join(dir, f)); err != nil && !errors.Is(err, fs.ErrNotExist) {
			unlock()
			return nil, exitcode.Input("results directory %s: --force: %v", dir, err)
		}
	}
	return unlock, nil
}
