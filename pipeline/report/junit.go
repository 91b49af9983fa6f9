package report

import (
	"encoding/xml"
	"fmt"
	"io"
	"strings"

	"github.com/evalrun/evalrun/pipeline/summary"
)

// JUnit XML in the shape of the Jenkins xUnit plugin's junit-10.xsd, which
// GitHub Actions test reporters, GitLab (artifacts:reports:junit) and
// Jenkins read: one <testsuite> for the run; per backend one <testcase> per
// gate (a <failure> when it failed), or one <error> testcase when the
// backend crashed, timed out or failed to run, or a <skipped> one when it
// was not run. The test cases' classname is evalrun.<run>.<backend>.
type junitSuites struct {
	XMLName  xml.Name     `xml:"testsuites"`
	Name     string       `xml:"name,attr"`
	Tests    int          `xml:"tests,attr"`
	Failures int          `xml:"failures,attr"`
	Errors   int          `xml:"errors,attr"`
	Time     string       `xml:"time,attr"`
	Suites   []junitSuite `xml:"testsuite"`
}

type junitSuite struct {
	Name       string          `xml:"name,attr"`
	Tests      int             `xml:"tests,attr"`
	Failures   int             `xml:"failures,attr"`
	Errors     int             `xml:"errors,attr"`
	Skipped    int             `xml:"skipped,attr"`
	Time       string          `xml:"time,attr"`
	Timestamp  string          `xml:"timestamp,attr"`
	Hostname   string          `xml:"hostname,attr,omitempty"`
	File       string          `xml:"file,attr,omitempty"`
	Properties []junitProperty `xml:"properties>property"`
	Cases      []junitCase     `xml:"testcase"`
	SystemOut  string          `xml:"system-out,omitempty"`
}

type junitProperty struct {
	Name  string `xml:"name,attr"`
	Value string `xml:"value,attr"`
}

type junitCase struct {
	Name      string `xml:"name,attr"`
	Classname string `xml:"classname,attr"`
	Time      string `xml:"time,attr"`
	// Outcome is nil for a pass, else a <failure>, <error> or <skipped>
	// element (its XMLName).
	Outcome *junitProblem `xml:",any"`
}

type junitProblem struct {
	XMLName xml.Name
	Type    string `xml:"type,attr"`
	Message string `xml:"message,attr"`
	Text    string `xml:",chardata"`
}

func problem(element, typ, msg, text string) *junitProblem {
	return &junitProblem{XMLName: xml.Name{Local: element}, Type: typ, Message: msg, Text: text}
}

// is reports the outcome of a test case: "pass", "failure", "error" or
// "skipped".
func (c junitCase) is() string {
	if c.Outcome == nil {
		return "pass"
	}
	return c.Outcome.XMLName.Local
}

// JUnit writes junit.xml.
func JUnit(w io.Writer, s *summary.Summary) error {
	suite := junitSuite{
		Name: "evalrun " + s.Run.Name, Time: seconds(s.Run.DurationS), Timestamp: s.Run.Started.Format("2006-01-02T15:04:05"),
		Hostname: s.Run.Host.Hostname, File: s.Run.Spec,
		Properties: []junitProperty{
			{"run_id", s.Run.ID}, {"model", s.Model.Path}, {"model_sha256", s.Model.SHA256},
			{"reference", s.Reference.Name}, {"verdict", s.Verdict.Status}, {"exit_code", fmt.Sprint(s.Verdict.ExitCode)},
			{"evalrun_version", s.Run.EvalrunVersion},
		},
	}
	if s.Run.Limit > 0 { // not a full result
		suite.Properties = append(suite.Properties, junitProperty{"limit", fmt.Sprint(s.Run.Limit)})
	}
	var out strings.Builder
	if err := stepSummary(&out, s); err == nil {
		suite.SystemOut = out.String()
	}
	if s.Reference.Status != summary.StatusOK {
		suite.Cases = append(suite.Cases, statusCase(s, s.Reference, "reference"))
	}
	for _, b := range s.Backends {
		suite.Cases = append(suite.Cases, backendCases(s, b)...)
	}
	if orphan := runProblems(s); len(orphan) > 0 { // e.g. an interrupted run
		suite.Cases = append(suite.Cases, junitCase{Name: "run", Classname: className(s, "run"), Time: "0",
			Outcome: problem("error", "error", firstLine(orphan[0], 200), strings.Join(orphan, "\n"))})
	}
	for _, c := range suite.Cases {
		suite.Tests++
		switch c.is() {
		case "failure":
			suite.Failures++
		case "error":
			suite.Errors++
		case "skipped":
			suite.Skipped++
		}
	}
	doc := junitSuites{Name: "evalrun", Tests: suite.Tests, Failures: suite.Failures, Errors: suite.Errors, Time: suite.Time, Suites: []junitSuite{suite}}
	if _, err := io.WriteString(w, xml.Header); err != nil {
		return err
	}
	enc := xml.NewEncoder(w)
	enc.Indent("", "  ")
	if err := enc.Encode(doc); err != nil {
		return err
	}
	_, err := io.WriteString(w, "\n")
	return err
}

// backendCases turns one candidate into its test cases.
func backendCases(s *summary.Summary, b summary.BackendSummary) []junitCase {
	if b.Status != summary.StatusOK {
		return []junitCase{statusCase(s, b, "run")}
	}
	cls := className(s, b.Name)
	var cases []junitCase
	for _, g := range b.Gates {
		c := junitCase{Name: g.Name, Classname: cls, Time: "0"}
		switch {
		case g.Skipped: // a speed gate on a simulated device
			c.Outcome = problem("skipped", "not applied", g.Describe(), g.Note)
		case !g.Pass:
			c.Outcome = problem("failure", "gate", g.Describe(), details(b, g.Describe()))
		}
		cases = append(cases, c)
	}
	if b.Accuracy != nil && !b.Accuracy.Complete {
		msg := fmt.Sprintf("only %d positions were compared", b.Accuracy.Tokens)
		cases = append(cases, junitCase{Name: "complete", Classname: cls, Time: "0", Outcome: problem("failure", "incomplete", msg, details(b, msg))})
	}
	if len(cases) == 0 { // still listed, so a CI's test view shows every backend
		cases = append(cases, junitCase{Name: "run", Classname: cls, Time: "0"})
	}
	return cases
}

// statusCase is the one test case of a backend that did not finish: an
// error (crashed, timeout, failed) or skipped.
func statusCase(s *summary.Summary, b summary.BackendSummary, name string) junitCase {
	element := "error"
	if b.Status == summary.StatusSkipped {
		element = "skipped"
	}
	return junitCase{Name: name, Classname: className(s, b.Name), Time: "0",
		Outcome: problem(element, b.Status, b.Status+": "+firstLine(b.Error, 200), details(b, b.Error))}
}

// details is a failure's body: what failed, then the backend's figures.
func details(b summary.BackendSummary, what string) string {
	var d strings.Builder
	fmt.Fprintf(&d, "%s\n\nbackend %s (plugin %s), status %s\n", what, b.Name, b.Plugin, b.Status)
	if a := b.Accuracy; a != nil {
		fmt.Fprintf(&d, "tokens compared %d", a.Tokens)
		for _, c := range junitColumns {
			fmt.Fprintf(&d, ", %s %s", c.metric.Label, c.cell(a))
		}
		d.WriteString("\n")
	}
	if t := b.Throughput; t != nil {
		fmt.Fprintf(&d, "throughput: pp %s t/s, tg %s t/s\n", fmtTS(t.PP, t.Simulated), fmtTS(t.TG, t.Simulated))
	}
	for _, g := range b.Gates {
		mark := "pass"
		if !g.Pass {
			mark = "FAIL"
		}
		fmt.Fprintf(&d, "gate %s\n", mark+": "+g.Describe())
	}
	for _, w := range b.Warnings {
		fmt.Fprintf(&d, "warning: %s\n", w)
	}
	return d.String()
}

// runProblems are the verdict's reasons that no backend's test case
// carries (an interrupted run, a problem reading the reference file).
func runProblems(s *summary.Summary) []string {
	var out []string
	for _, r := range s.Verdict.Reasons {
		owned := false
		for _, b := range append([]summary.BackendSummary{s.Reference}, s.Backends...) {
			if strings.HasPrefix(r, b.Name+": ") || strings.HasPrefix(r, b.Name+" ") || strings.HasPrefix(r, "reference "+b.Name+" ") {
				owned = true
				break
			}
		}
		if !owned {
			out = append(out, r)
		}
	}
	return out
}

// className is evalrun.<run>.<backend>; Jenkins reads dots as package
// separators, so the names' own dots become underscores.
func className(s *summary.Summary, backend string) string {
	dots := strings.NewReplacer(".", "_")
	return "evalrun." + dots.Replace(s.Run.Name) + "." + dots.Replace(backend)
}

// seconds formats a duration as the schema's SUREFIRE_TIME wants it.
func seconds(s float64) string {
	if s < 0 || s != s {
		s = 0
	}
	return fmt.Sprintf("%.3f", s)
}
