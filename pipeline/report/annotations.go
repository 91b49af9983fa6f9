package report

import (
	"fmt"
	"io"
	"path/filepath"
	"strings"

	"github.com/evalrun/evalrun/pipeline/summary"
)

// Annotate prints GitHub Actions workflow commands for what a reviewer must
// see on the run's page: an ::error for every failed gate and for every
// backend that crashed, timed out or could not run (and for a run-level
// problem such as an interruption), a ::warning for a skipped backend, a
// plugin's warning (e.g. a kernel list that offloads nothing) or an
// incomplete comparison, and a ::notice with the verdict. The annotations
// point at the spec file, relative to workspace (GITHUB_WORKSPACE) when it
// lies inside it.
func Annotate(w io.Writer, s *summary.Summary, workspace string) {
	file := s.Run.Spec
	if abs, err := filepath.Abs(file); err == nil && workspace != "" {
		if rel, err := filepath.Rel(workspace, abs); err == nil && !strings.HasPrefix(rel, "..") {
			file = filepath.ToSlash(rel)
		}
	}
	cmd := func(level, title, msg string) {
		fmt.Fprintf(w, "::%s file=%s,title=%s::%s\n", level, escapeProperty(file), escapeProperty(title), escapeData(msg))
	}
	for _, b := range append([]summary.BackendSummary{s.Reference}, s.Backends...) {
		switch {
		case b.Status == summary.StatusSkipped:
			cmd("warning", fmt.Sprintf("evalrun %s: %s skipped", s.Run.Name, b.Name), b.Error)
		case b.Status != summary.StatusOK:
			cmd("error", fmt.Sprintf("evalrun %s: %s %s", s.Run.Name, b.Name, b.Status), b.Error)
		}
		for _, g := range b.Gates {
			if !g.Pass {
				cmd("error", fmt.Sprintf("evalrun %s: %s failed %s", s.Run.Name, b.Name, g.Name), details(b, g.Describe()))
			}
		}
		for _, warn := range b.Warnings {
			cmd("warning", fmt.Sprintf("evalrun %s: %s", s.Run.Name, b.Name), warn)
		}
		if a := b.Accuracy; b.Status == summary.StatusOK && a != nil && !a.Complete {
			cmd("warning", fmt.Sprintf("evalrun %s: %s incomplete", s.Run.Name, b.Name), fmt.Sprintf("only %d positions were compared", a.Tokens))
		}
	}
	for _, r := range runProblems(s) {
		cmd("error", fmt.Sprintf("evalrun %s: run", s.Run.Name), r)
	}
	cmd("notice", fmt.Sprintf("evalrun %s: %s", s.Run.Name, strings.ToUpper(s.Verdict.Status)),
		fmt.Sprintf("verdict %s (exit %d), %d backends, reference %s", s.Verdict.Status, s.Verdict.ExitCode, len(s.Backends), s.Reference.Name))
}

// escapeData escapes a workflow command's message as the Actions runner
// decodes it (%, CR and LF).
func escapeData(s string) string {
	return strings.NewReplacer("%", "%25", "\r", "%0D", "\n", "%0A").Replace(strings.TrimRight(s, "\n"))
}

// escapeProperty escapes a property value (also ':' and ',', which end it).
func escapeProperty(s string) string {
	return strings.NewReplacer("%", "%25", "\r", "%0D", "\n", "%0A", ":", "%3A", ",", "%2C").Replace(s)
}
