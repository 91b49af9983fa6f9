// Package report renders a run's summary for people and CI systems:
// the tables evalrun run prints, report.md (its first section a one-screen
// summary, also appended to a GitHub Actions step summary), junit.xml,
// GitHub Actions annotations and report.html. It reads only the Summary, so
// every output can be rendered again from a summary.json.
package report

import (
	"bytes"
	"fmt"
	"io"
	"os"
	"path/filepath"

	"github.com/evalrun/evalrun/internal/atomicfile"
	"github.com/evalrun/evalrun/pipeline/resultsdir"
	"github.com/evalrun/evalrun/pipeline/runcompare"
	"github.com/evalrun/evalrun/pipeline/summary"
)

// Files of each output format beside summary.json (written by the run) and
// prompts.jsonl (streamed by the run).
var files = map[string]string{"md": resultsdir.ReportMD, "junit": resultsdir.JUnitFile, "html": resultsdir.ReportHTML}

// Write writes the formats' files into dir, each atomically. summary.json
// and prompts.jsonl are the run's own; other formats are ignored. cmp, the
// run compared with its baseline (nil: none), adds the changes to
// report.html.
func Write(dir string, s *summary.Summary, formats []string, cmp *runcompare.Result) error {
	html := func(w io.Writer, s *summary.Summary) error { return HTMLCompared(w, s, cmp) }
	render := map[string]func(io.Writer, *summary.Summary) error{"md": Markdown, "junit": JUnit, "html": html}
	for _, f := range formats {
		fn, ok := render[f]
		if !ok {
			continue
		}
		var b bytes.Buffer
		if err := fn(&b, s); err != nil {
			return fmt.Errorf("%s: %w", files[f], err)
		}
		if err := atomicfile.WriteFile(filepath.Join(dir, files[f]), b.Bytes()); err != nil {
			return err
		}
	}
	return nil
}

// Print prints what evalrun run ends with: the accuracy and throughput
// tables, the verdict with its reasons, and where the results are. The
// tables fit in width display columns by showing only their key columns
// when every column does not fit (with a line naming the hidden ones);
// width 0 shows every column, however wide (--wide).
func Print(w io.Writer, res *resultsdir.Run, width int) error {
	s := res.Summary
	if err := printTables(w, s, width, detailsFile(res.Dir)); err != nil {
		return err
	}
	fmt.Fprintf(w, "\n%s", verdictLine(s))
	for _, why := range s.Verdict.Reasons {
		fmt.Fprintf(w, "\n  - %s", why)
	}
	fmt.Fprintf(w, "\nresults: %s\n", res.Dir)
	return nil
}

// detailsFile is the file of a results directory that a person reads the
// whole diagnostics in: report.md, else report.html, else summary.json.
func detailsFile(dir string) string {
	for _, f := range []string{resultsdir.ReportMD, resultsdir.ReportHTML} {
		if _, err := os.Stat(filepath.Join(dir, f)); err == nil {
			return f
		}
	}
	return resultsdir.SummaryFile + " (diagnostics)"
}

// PrintVerdict prints what evalrun run --quiet prints: the verdict line
// and where the results are, on one line.
func PrintVerdict(w io.Writer, res *resultsdir.Run) error {
	_, err := fmt.Fprintf(w, "%s; results: %s\n", verdictLine(res.Summary), res.Dir)
	return err
}

// verdictLine is "verdict: pass (exit 0)", marked when --limit cut the run.
func verdictLine(s *summary.Summary) string {
	return fmt.Sprintf("verdict: %s (exit %d)%s", s.Verdict.Status, s.Verdict.ExitCode, notFull(s))
}

// notFull marks a run that --limit cut short: its verdict is the first
// records' only.
func notFull(s *summary.Summary) string {
	if s.Run.Limit == 0 {
		return ""
	}
	return fmt.Sprintf(", not a full result (--limit %d)", s.Run.Limit)
}

// AppendStepSummary appends the one-screen summary (report.md's first
// section) to path, the file GitHub Actions names in $GITHUB_STEP_SUMMARY.
func AppendStepSummary(path string, s *summary.Summary) error {
	var b bytes.Buffer
	if err := stepSummary(&b, s); err != nil {
		return err
	}
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o666)
	if err != nil {
		return err
	}
	if _, err := f.Write(b.Bytes()); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}
