// Package manifests checks the scale-out examples in docs/examples.
package manifests

import (
	"fmt"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/rhysd/actionlint"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/yaml"
)

const examples = "../../docs/examples"

// decode reads a multi-document manifest strictly into the official API
// types: an unknown or misspelt field, or a wrong type, is an error.
func decode(t *testing.T, path string) (jobs []batchv1.Job, cms []corev1.ConfigMap, pvcs []corev1.PersistentVolumeClaim) {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	for i, doc := range regexp.MustCompile(`(?m)^---\s*$`).Split(string(data), -1) {
		var tm metav1.TypeMeta
		if err := yaml.Unmarshal([]byte(doc), &tm); err != nil || tm.Kind == "" {
			t.Fatalf("%s: document %d: no kind (%v)", path, i+1, err)
		}
		var obj any
		switch tm.APIVersion + " " + tm.Kind {
		case "batch/v1 Job":
			jobs = append(jobs, batchv1.Job{})
			obj = &jobs[len(jobs)-1]
		case "v1 ConfigMap":
			cms = append(cms, corev1.ConfigMap{})
			obj = &cms[len(cms)-1]
		case "v1 PersistentVolumeClaim":
			pvcs = append(pvcs, corev1.PersistentVolumeClaim{})
			obj = &pvcs[len(pvcs)-1]
		default:
			t.Fatalf("%s: document %d: unexpected %s %s", path, i+1, tm.APIVersion, tm.Kind)
		}
		if err := yaml.UnmarshalStrict([]byte(doc), obj); err != nil {
			t.Fatalf("%s: document %d (%s): %v", path, i+1, tm.Kind, err)
		}
	}
	return
}

func env(c corev1.Container, name string) string {
	for _, e := range c.Env {
		if e.Name == name {
			return e.Value
		}
	}
	return ""
}

// TestKubernetesIndexedJob: the shards' Indexed Job and the merge Job decode
// as batch/v1 Jobs, and fit together: EVALRUN_SHARDS is the number of
// completions, each pod writes shard-$JOB_COMPLETION_INDEX on the claimed
// volume, and the merge reads exactly those directories.
func TestKubernetesIndexedJob(t *testing.T) {
	jobs, cms, pvcs := decode(t, filepath.Join(examples, "kubernetes", "evalrun-shards.yaml"))
	if len(jobs) != 1 || len(cms) != 1 || len(pvcs) != 1 {
		t.Fatalf("%d jobs, %d config maps, %d claims", len(jobs), len(cms), len(pvcs))
	}
	j := jobs[0].Spec
	if j.CompletionMode == nil || *j.CompletionMode != batchv1.IndexedCompletion || j.Completions == nil || j.Parallelism == nil {
		t.Fatalf("not an Indexed Job with completions and parallelism: %+v", j)
	}
	pod := j.Template.Spec
	if pod.RestartPolicy != corev1.RestartPolicyNever || len(pod.Containers) != 1 {
		t.Fatalf("pod: restart %s, %d containers", pod.RestartPolicy, len(pod.Containers))
	}
	c := pod.Containers[0]
	if n, err := strconv.Atoi(env(c, "EVALRUN_SHARDS")); err != nil || int32(n) != *j.Completions || *j.Parallelism > *j.Completions {
		t.Fatalf("EVALRUN_SHARDS %q, completions %d, parallelism %d", env(c, "EVALRUN_SHARDS"), *j.Completions, *j.Parallelism)
	}
	cmd := strings.Join(c.Command, " ")
	if !strings.Contains(cmd, "evalrun run /spec/nightly.yaml") || !strings.Contains(cmd, "--out /results/nightly/shard-$JOB_COMPLETION_INDEX") {
		t.Fatalf("shard command %q", cmd)
	}
	claim := pvcs[0]
	if !slices.Contains(claim.Spec.AccessModes, corev1.ReadWriteMany) {
		t.Fatalf("the results volume must be shared by the pods: %v", claim.Spec.AccessModes)
	}
	if spec := cms[0].Data["nightly.yaml"]; !strings.Contains(spec, "cache: /results/cache") {
		t.Fatalf("the spec in the config map shares no reference cache:\n%s", spec)
	} else {
		var m map[string]any
		if err := yaml.Unmarshal([]byte(spec), &m); err != nil || m["name"] != "nightly" {
			t.Fatalf("the spec in the config map: %v %v", err, m["name"])
		}
	}
	checkVolumes(t, pod, claim.Name, cms[0].Name)

	merge, _, _ := decode(t, filepath.Join(examples, "kubernetes", "evalrun-merge.yaml"))
	if len(merge) != 1 {
		t.Fatalf("%d merge jobs", len(merge))
	}
	m := merge[0].Spec.Template.Spec
	if mc := strings.Join(m.Containers[0].Command, " "); !strings.Contains(mc, "evalrun merge /results/nightly/shard-* --out /results/nightly/merged") {
		t.Fatalf("merge command %q", mc)
	}
	checkVolumes(t, m, claim.Name, "")
}

// checkVolumes: every mount names a volume of the pod, the results volume
// is the claim, the spec volume the config map.
func checkVolumes(t *testing.T, pod corev1.PodSpec, claim, configMap string) {
	t.Helper()
	vols := map[string]corev1.Volume{}
	for _, v := range pod.Volumes {
		vols[v.Name] = v
	}
	for _, c := range pod.Containers {
		for _, m := range c.VolumeMounts {
			v, ok := vols[m.Name]
			switch {
			case !ok:
				t.Fatalf("mount %s names no volume", m.Name)
			case m.MountPath == "/results" && (v.PersistentVolumeClaim == nil || v.PersistentVolumeClaim.ClaimName != claim):
				t.Fatalf("/results is not the claim %s: %+v", claim, v)
			case m.MountPath == "/spec" && (v.ConfigMap == nil || v.ConfigMap.Name != configMap):
				t.Fatalf("/spec is not the config map %s: %+v", configMap, v)
			}
		}
	}
}

// TestActionsWorkflow: actionlint finds nothing in the workflow (syntax,
// expressions, the actions' inputs, job dependencies), and its matrix
// covers shards 0 .. SHARDS-1 with the merge after them.
func TestActionsWorkflow(t *testing.T) {
	path := filepath.Join(examples, "github", "evalrun-sharded.yml")
	l, err := actionlint.NewLinter(io.Discard, &actionlint.LinterOptions{})
	if err != nil {
		t.Fatal(err)
	}
	errs, err := l.LintFile(path, nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range errs {
		t.Errorf("%s:%d:%d: %s [%s]", path, e.Line, e.Column, e.Message, e.Kind)
	}
	data, _ := os.ReadFile(path)
	var wf struct {
		Env  map[string]any `json:"env"`
		Jobs map[string]struct {
			Needs    any `json:"needs"`
			Strategy struct {
				Matrix struct {
					Index []int `json:"index"`
				} `json:"matrix"`
			} `json:"strategy"`
		} `json:"jobs"`
	}
	if err := yaml.Unmarshal(data, &wf); err != nil {
		t.Fatal(err)
	}
	n, _ := strconv.Atoi(fmt.Sprint(wf.Env["SHARDS"]))
	idx := wf.Jobs["shard"].Strategy.Matrix.Index
	for i := range n {
		if !slices.Contains(idx, i) {
			t.Fatalf("matrix %v does not cover shard %d of %d", idx, i, n)
		}
	}
	if len(idx) != n || n == 0 || wf.Jobs["merge"].Needs != "shard" {
		t.Fatalf("matrix %v for %d shards; merge needs %v", idx, n, wf.Jobs["merge"].Needs)
	}
}
