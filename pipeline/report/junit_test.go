package report

import (
	"encoding/xml"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/evalrun/evalrun/pipeline/gate"
)

// xmllint validates a file against testdata/junit-10.xsd (the Jenkins
// xUnit plugin's schema) and returns its complaint, if any.
func xmllint(t *testing.T, path string) error {
	t.Helper()
	bin, err := exec.LookPath("xmllint")
	if err != nil {
		t.Skip("xmllint not installed (Debian: apt-get install libxml2-utils; .ci/run installs it): JUnit output not validated")
	}
	out, err := exec.Command(bin, "--noout", "--schema", filepath.Join("testdata", "junit-10.xsd"), path).CombinedOutput()
	if err != nil {
		return &lintError{string(out)}
	}
	return nil
}

type lintError struct{ out string }

func (e *lintError) Error() string { return e.out }

func TestJUnitValidatesAgainstXSD(t *testing.T) {
	dir := t.TempDir()
	check := func(name string, tests, failures, errs, skipped int, path string) junitSuites {
		t.Helper()
		if err := xmllint(t, path); err != nil {
			t.Fatalf("%s: junit.xml does not validate against junit-10.xsd:\n%v", name, err)
		}
		data, _ := os.ReadFile(path)
		var doc junitSuites
		if err := xml.Unmarshal(data, &doc); err != nil {
			t.Fatal(err)
		}
		if len(doc.Suites) != 1 {
			t.Fatalf("%s: %d test suites, want one per run", name, len(doc.Suites))
		}
		su := doc.Suites[0]
		if su.Tests != tests || su.Failures != failures || su.Errors != errs || su.Skipped != skipped || len(su.Cases) != tests ||
			doc.Tests != tests || doc.Failures != failures || doc.Errors != errs {
			t.Fatalf("%s: tests %d/%d failures %d errors %d skipped %d, want %d, %d, %d, %d", name, su.Tests, len(su.Cases), su.Failures, su.Errors, su.Skipped, tests, failures, errs, skipped)
		}
		return doc
	}

	pass := filepath.Join(dir, "pass.xml")
	if err := Write(dir, loadSummary(t), []string{"junit"}, nil); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(filepath.Join(dir, "junit.xml"), pass); err != nil {
		t.Fatal(err)
	}
	// configs/default.yaml: the three candidates × two gates (kld_mean_max,
	// same_top_p_min), all passing.
	doc := check("passing run", 6, 0, 0, 0, pass)
	for _, c := range doc.Suites[0].Cases {
		if c.is() != "pass" || !strings.HasPrefix(c.Classname, "evalrun.default.") {
			t.Fatalf("passing run case %+v", c)
		}
	}

	bad := filepath.Join(dir, "troubled.xml")
	if err := Write(dir, troubled(t), []string{"junit"}, nil); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(filepath.Join(dir, "junit.xml"), bad); err != nil {
		t.Fatal(err)
	}
	// npu-fp16 3 gates (one not applied), npu-int8 3 (one failed), the
	// crashed, timed-out and skipped backends one each, and the interruption.
	doc = check("troubled run", 3+3+1+1+1+1, 1, 3, 2, bad)
	by := map[string]junitCase{}
	for _, c := range doc.Suites[0].Cases {
		by[c.Classname+"/"+c.Name] = c
	}
	f := by["evalrun.default.npu-int8/kld_mean_max"].Outcome
	if f == nil || f.XMLName.Local != "failure" || f.Message != "kld_mean_max: 0.0123 against limit 0.001" || !strings.Contains(f.Text, "KLD mean 0.001826") {
		t.Fatalf("failed gate: %+v", f)
	}
	e := by["evalrun.default.cpu-ggml/run"].Outcome
	if by["evalrun.default.cpu-ggml/run"].is() != "error" || e.Type != "crashed" || !strings.Contains(e.Text, "<stderr> \"npu\" & 100% 'core' ]]>") {
		t.Fatalf("crashed backend: %+v", e)
	}
	if e := by["evalrun.default.npu_hang/run"]; e.is() != "error" || e.Outcome.Type != "timeout" {
		t.Fatalf("timed-out backend (dots in its name become _): %+v", by)
	}
	if c := by["evalrun.default.npu-fp16/tg_ts_min"]; c.is() != "skipped" || c.Outcome.Text != gate.NoteSimulated {
		t.Fatalf("speed gate on a simulated device: %+v", c.Outcome)
	}
	if by["evalrun.default.later/run"].is() != "skipped" {
		t.Fatalf("skipped backend: %+v", by["evalrun.default.later/run"])
	}
	if e := by["evalrun.default.run/run"]; e.is() != "error" || e.Outcome.Message != "the run was interrupted" {
		t.Fatalf("run-level problem: %+v", e)
	}

	// The validator is real: a suite without its required counts is refused.
	broken := filepath.Join(dir, "broken.xml")
	os.WriteFile(broken, []byte(`<testsuites><testsuite name="x" tests="1"><testcase name="a"/></testsuite></testsuites>`), 0o644)
	if err := xmllint(t, broken); err == nil || !strings.Contains(err.Error(), "failures") {
		t.Fatalf("xmllint accepted a testsuite without failures/errors: %v", err)
	}
}
