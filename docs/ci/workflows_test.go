// Package ci holds the example CI configurations of docs/ci.md; its test
// lints them.
package ci

import (
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/rhysd/actionlint"
	"gopkg.in/yaml.v3"
)

// TestGitHubWorkflowLints runs actionlint (workflow syntax, expressions,
// action inputs, job conditions; shell scripts too when shellcheck is
// installed) over the GitHub Actions example.
func TestGitHubWorkflowLints(t *testing.T) {
	const path = "github-actions.yml"
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	opts := &actionlint.LinterOptions{Oneline: true}
	if sc, err := exec.LookPath("shellcheck"); err == nil {
		opts.Shellcheck = sc
	} else {
		t.Log("shellcheck not installed: the workflow's run: scripts are not checked by it")
	}
	var out strings.Builder
	l, err := actionlint.NewLinter(&out, opts)
	if err != nil {
		t.Fatal(err)
	}
	errs, err := l.Lint(path, data, nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range errs {
		t.Errorf("%s:%d:%d: %s [%s]", path, e.Line, e.Column, e.Message, e.Kind)
	}

	// The linter is real: a broken expression is caught.
	broken := strings.Replace(string(data), "steps.baseline.outputs.found == 'true'", "steps.baseline.outputs.found == ", 1)
	if errs, err := l.Lint(path, []byte(broken), nil); err != nil || len(errs) == 0 {
		t.Fatalf("actionlint accepted a broken expression (%v)", err)
	}
}

// TestGitLabCI checks the GitLab example's shape: every job has a script,
// jobs run on push/merge requests or on schedules, and each job's JUnit
// report is where its evalrun run writes its results.
func TestGitLabCI(t *testing.T) {
	data, err := os.ReadFile("gitlab-ci.yml")
	if err != nil {
		t.Fatal(err)
	}
	var doc map[string]any
	if err := yaml.Unmarshal(data, &doc); err != nil {
		t.Fatal(err)
	}
	type job struct {
		Stage     string                `yaml:"stage"`
		Script    []string              `yaml:"script"`
		Rules     []struct{ If string } `yaml:"rules"`
		Artifacts struct {
			When    string   `yaml:"when"`
			Paths   []string `yaml:"paths"`
			Reports struct {
				JUnit string `yaml:"junit"`
			} `yaml:"reports"`
		} `yaml:"artifacts"`
	}
	jobs := map[string]job{}
	for _, name := range []string{"simulated-npu", "nightly"} {
		b, _ := yaml.Marshal(doc[name])
		var j job
		if err := yaml.Unmarshal(b, &j); err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		jobs[name] = j
	}
	stages := doc["stages"].([]any)
	for name, want := range map[string]string{"simulated-npu": `$CI_PIPELINE_SOURCE == "push"`, "nightly": `$CI_PIPELINE_SOURCE == "schedule"`} {
		j := jobs[name]
		if len(j.Script) == 0 || len(j.Rules) == 0 || !strings.Contains(j.Rules[0].If, want) {
			t.Errorf("%s: script %q rules %+v", name, j.Script, j.Rules)
		}
		found := false
		for _, s := range stages {
			found = found || s == j.Stage
		}
		if !found {
			t.Errorf("%s: stage %q not in stages %v", name, j.Stage, stages)
		}
		out := evalrunOuts(strings.Join(j.Script, "\n"))
		if len(out) == 0 || j.Artifacts.Reports.JUnit != out[0]+"/junit.xml" || j.Artifacts.When != "always" || j.Artifacts.Paths[0] != out[0]+"/" {
			t.Errorf("%s: evalrun writes to %v, artifacts %+v", name, out, j.Artifacts)
		}
	}
}

var runLine = regexp.MustCompile(`bin/evalrun run (\S+) --out (\S+)`)

// evalrunOuts returns the --out directories of the evalrun run commands in
// a script, and checks that the specs they run exist.
func evalrunOuts(script string) []string {
	var out []string
	for _, m := range runLine.FindAllStringSubmatch(script, -1) {
		if _, err := os.Stat(filepath.Join("..", "..", m[1])); err != nil {
			return nil
		}
		out = append(out, m[2])
	}
	return out
}

// githubWorkflow is what the tests read of github-actions.yml: each job's
// steps' scripts and action inputs.
type githubWorkflow struct {
	Jobs map[string]struct {
		Steps []struct {
			Run  string            `yaml:"run"`
			With map[string]string `yaml:"with"`
		} `yaml:"steps"`
	} `yaml:"jobs"`
}

func readGitHubWorkflow(t *testing.T) githubWorkflow {
	t.Helper()
	data, err := os.ReadFile("github-actions.yml")
	if err != nil {
		t.Fatal(err)
	}
	var wf githubWorkflow
	if err := yaml.Unmarshal(data, &wf); err != nil {
		t.Fatal(err)
	}
	return wf
}

// TestGitHubWorkflowPaths: the specs the workflow runs exist, and the JUnit
// reports and artifacts are the directories evalrun writes.
func TestGitHubWorkflowPaths(t *testing.T) {
	wf := readGitHubWorkflow(t)
	for _, name := range []string{"simulated-npu", "nightly"} {
		var outs []string
		var junit, artifact string
		for _, s := range wf.Jobs[name].Steps {
			outs = append(outs, evalrunOuts(s.Run)...)
			if p := s.With["report_paths"]; p != "" {
				junit = p
			}
			if p := s.With["path"]; p != "" {
				artifact = p
			}
		}
		if len(outs) == 0 || junit != outs[0]+"/junit.xml" || !strings.HasPrefix(artifact+"\n", outs[0]+"\n") {
			t.Errorf("%s: evalrun writes to %v, JUnit report %q, artifact %q", name, outs, junit, artifact)
		}
	}
}

var lastPlugin = regexp.MustCompile(`EVALRUN_BACKENDS_(\d+)_PLUGIN_PATH="\$PWD/baseline/(bin/[\w-]+)"`)

// TestNightlyBenchesLastNightsPlugins: in both nightly jobs, every backend
// of configs/nightly.yaml that a speed gate judges against (speed_baseline)
// is pointed at last night's binary of the plugin it runs, and the job's
// artifact keeps that binary for the next night.
func TestNightlyBenchesLastNightsPlugins(t *testing.T) {
	var spec struct {
		Backends []struct {
			Name       string `yaml:"name"`
			PluginPath string `yaml:"plugin_path"`
			Gates      struct {
				SpeedBaseline string `yaml:"speed_baseline"`
			} `yaml:"gates"`
		} `yaml:"backends"`
	}
	data, err := os.ReadFile("../../configs/nightly.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if err := yaml.Unmarshal(data, &spec); err != nil {
		t.Fatal(err)
	}
	judged := map[string]bool{}
	for _, b := range spec.Backends {
		if b.Gates.SpeedBaseline != "" {
			judged[b.Gates.SpeedBaseline] = true
		}
	}
	if len(judged) < 2 {
		t.Fatalf("configs/nightly.yaml: speed gates judge against %v, want last night's rknn and cpu plugins", judged)
	}

	gh := readGitHubWorkflow(t)
	var gl struct {
		Nightly struct {
			Script    []string `yaml:"script"`
			Artifacts struct {
				Paths []string `yaml:"paths"`
			} `yaml:"artifacts"`
		} `yaml:"nightly"`
	}
	data, err = os.ReadFile("gitlab-ci.yml")
	if err != nil {
		t.Fatal(err)
	}
	if err := yaml.Unmarshal(data, &gl); err != nil {
		t.Fatalf("gitlab-ci.yml: %v", err)
	}
	var ghScript, ghKept []string
	for _, s := range gh.Jobs["nightly"].Steps {
		ghScript = append(ghScript, s.Run)
		if p := s.With["path"]; p != "" {
			ghKept = strings.Fields(p)
		}
	}
	for name, job := range map[string]struct {
		script string
		kept   []string
	}{
		"github-actions.yml": {strings.Join(ghScript, "\n"), ghKept},
		"gitlab-ci.yml":      {strings.Join(gl.Nightly.Script, "\n"), gl.Nightly.Artifacts.Paths},
	} {
		pointed := map[string]bool{}
		for _, m := range lastPlugin.FindAllStringSubmatch(job.script, -1) {
			i, _ := strconv.Atoi(m[1])
			if i >= len(spec.Backends) {
				t.Errorf("%s: EVALRUN_BACKENDS_%d_PLUGIN_PATH: configs/nightly.yaml has %d backends", name, i, len(spec.Backends))
				continue
			}
			b := spec.Backends[i]
			if b.PluginPath != "../"+m[2] {
				t.Errorf("%s: backend %d (%s) runs %s, the job points it at last night's %s", name, i, b.Name, b.PluginPath, m[2])
			}
			if !slices.Contains(job.kept, m[2]) {
				t.Errorf("%s: the artifact %v does not keep %s for the next night", name, job.kept, m[2])
			}
			pointed[b.Name] = true
		}
		for b := range judged {
			if !pointed[b] {
				t.Errorf("%s: the speed gates judge against %s, which the job leaves at this build's plugin", name, b)
			}
		}
	}
}
