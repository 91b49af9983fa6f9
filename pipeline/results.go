package pipeline

import (
	"bufio"
	"encoding/json"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"runtime"
	"strings"

	"github.com/evalrun/evalrun/internal/atomicfile"
	"github.com/evalrun/evalrun/pipeline/shard"
)

// resultFiles are what a run writes into its directory; one of them there
// means the directory holds a run.
var resultFiles = []string{"summary.json", "prompts.jsonl", "report.md", "junit.xml", "report.html", shard.FileName}

// checkOutDir refuses a results directory that is a file, or that holds
// the results of an earlier run unless force says to overwrite them (or to
// resume them).
func checkOutDir(dir string, force bool) error {
	st, err := os.Stat(dir)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return nil
	case err != nil:
		return inputErr("results directory: %v", err)
	case !st.IsDir():
		return inputErr("results directory %s: exists and is not a directory", dir)
	}
	for _, f := range resultFiles {
		if _, err := os.Stat(filepath.Join(dir, f)); err == nil && !force {
			return inputErr("results directory %s holds the results of an earlier run (%s): choose another --out, or --force to overwrite them (--resume continues an interrupted run)", dir, f)
		}
	}
	return nil
}

// openOutDir makes the results directory and locks it against a second
// run; with force it then removes an earlier run's results.
func openOutDir(dir string, force bool) (unlock func(), err error) {
	if err := os.MkdirAll(dir, 0o777); err != nil {
		return nil, inputErr("results directory: %v", err)
	}
	unlock, err = atomicfile.LockDir(dir)
	if err != nil {
		return nil, inputErr("results directory %s: %v (another evalrun is writing there)", dir, err)
	}
	for _, f := range resultFiles {
		if !force {
			break // none there (checkOutDir), or a run to resume
		}
		if err := os.Remove(filepath.Join(dir, f)); err != nil && !errors.Is(err, fs.ErrNotExist) {
			unlock()
			return nil, inputErr("results directory %s: --force: %v", dir, err)
		}
	}
	return unlock, nil
}

// IndexEntry is one line of index.jsonl, the history of the runs whose
// directories are beside it (the results root).
type IndexEntry struct {
	ID          string    `json:"id"`
	Name        string    `json:"name"`
	Dir         string    `json:"dir"`
	Spec        string    `json:"spec"`
	Started     string    `json:"started"`
	DurationS   float64   `json:"duration_s"`
	GitCommit   string    `json:"git_commit"`
	ModelSHA256 string    `json:"model_sha256"`
	Verdict     string    `json:"verdict"`
	ExitCode    int       `json:"exit_code"`
	Backends    []IndexBE `json:"backends"`
}

// IndexBE is a backend's outcome in an IndexEntry.
type IndexBE struct {
	Name   string `json:"name"`
	Status string `json:"status"`
	Pass   bool   `json:"pass"`
}

// appendIndex adds the run to root/index.jsonl: one line, written with a
// single append so runs sharing a root never interleave.
func appendIndex(root, dir string, s *Summary) error {
	e := IndexEntry{ID: s.Run.ID, Name: s.Run.Name, Dir: dir, Spec: s.Run.Spec, Started: s.Run.Started.Format("2006-01-02T15:04:05Z07:00"),
		DurationS: s.Run.DurationS, GitCommit: s.Run.GitCommit, ModelSHA256: s.Model.SHA256, Verdict: s.Verdict.Status, ExitCode: s.Verdict.ExitCode}
	for _, b := range s.Backends {
		e.Backends = append(e.Backends, IndexBE{b.Name, b.Status, b.Pass})
	}
	line, err := json.Marshal(e)
	if err != nil {
		return err
	}
	f, err := os.OpenFile(filepath.Join(root, "index.jsonl"), os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o666)
	if err != nil {
		return err
	}
	if _, err := f.Write(append(line, '\n')); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

// thisHost describes the machine a run (or a merge) ran on.
func thisHost() HostInfo {
	name, _ := os.Hostname()
	return HostInfo{OS: runtime.GOOS, Arch: runtime.GOARCH, CPUs: runtime.NumCPU(), CPUModel: CPUModel(), Hostname: name, GoVer: runtime.Version()}
}

// CPUModel names the host's CPU (Linux: /proc/cpuinfo's model name; the
// architecture elsewhere), for telling runs on different machines apart.
func CPUModel() string {
	f, err := os.Open("/proc/cpuinfo")
	if err != nil {
		return runtime.GOARCH
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if k, v, ok := strings.Cut(sc.Text(), ":"); ok && strings.TrimSpace(k) == "model name" {
			return strings.TrimSpace(v)
		}
	}
	return runtime.GOARCH
}
