package verdict

import (
	"encoding/json"
	"reflect"
	"strings"
	"testing"

	"github.com/evalrun/evalrun/internal/exitcode"
	"github.com/evalrun/evalrun/pipeline/metrics"
	"github.com/evalrun/evalrun/pipeline/spec"
	"github.com/evalrun/evalrun/pipeline/speedstat"
	"github.com/evalrun/evalrun/pipeline/summary"
)

// unit compares three rows against a live reference and one greedy run.
func unit(t *testing.T) *Comparison {
	t.Helper()
	c := &Comparison{}
	var ref metrics.RefRow
	for pos, shift := range []float32{0, 0.5, -1} {
		ref.Set([]float32{1, 2, 3, 4})
		if err := c.AddLive([]float32{1, 2 + shift, 3, 4 - shift}, &ref, int32(pos), pos); err != nil {
			t.Fatal(err)
		}
	}
	c.AddGreedy([]int32{5, 6, 7}, []int32{5, 6, 8})
	return c
}

// A unit's state read back from the units file gives the same accuracy,
// and a state whose counts disagree is refused.
func TestStateRoundTrip(t *testing.T) {
	c := unit(t)
	data, err := c.MarshalState()
	if err != nil {
		t.Fatal(err)
	}
	back, err := UnmarshalState(data)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(back.Accuracy(true), c.Accuracy(true)) || back.Compared() != 3 {
		t.Fatalf("read back %+v, want %+v", back.Accuracy(true), c.Accuracy(true))
	}
	var st map[string]any
	json.Unmarshal(data, &st)
	st["compared"] = 1 // fewer rows than scored positions
	bad, _ := json.Marshal(st)
	if _, err := UnmarshalState(bad); err == nil {
		t.Fatal("a state with 1 compared row and 3 scored positions was accepted")
	}
}

// A candidate that compared fewer rows than planned does not pass, even
// with its gates met; one without gates makes the run "no gates".
func TestBuilderIncomplete(t *testing.T) {
	limit := 10.0
	gates := spec.Gates{KLDMeanMax: &limit}
	for _, tc := range []struct {
		planned int
		gates   spec.Gates
		want    string
	}{{3, gates, summary.VerdictPass}, {4, gates, summary.VerdictFail}, {3, spec.Gates{}, summary.VerdictNoGates}} {
		c := &Comparison{Planned: tc.planned}
		c.Add(unit(t))
		v := &Builder{LiveRef: true}
		bs := v.Candidate(summary.BackendSummary{Name: "cand", Status: summary.StatusOK}, c, tc.gates)
		got := v.Result()
		if got.Status != tc.want || bs.Pass != (tc.want != summary.VerdictFail) {
			t.Errorf("planned %d: verdict %s (pass %v), want %s; reasons %q", tc.planned, got.Status, bs.Pass, tc.want, got.Reasons)
		}
		if tc.want == summary.VerdictFail && (got.ExitCode != exitcode.GateFailed || !strings.Contains(strings.Join(got.Reasons, "\n"), "only 3 of 4 positions")) {
			t.Errorf("incomplete: exit %d, reasons %q", got.ExitCode, got.Reasons)
		}
	}
}

// A speed_baseline gate is judged only on two whole, interleaved benches:
// not when a shard benched the other apart, the other failed, or either
// has too few repetitions for the test to ever find a slowdown; then it
// fails as not measured. A run whose only gate is one of these is gated.
func TestInRunGate(t *testing.T) {
	old, limit := "old", 0.05
	tput := func(reps int) *summary.Throughput {
		samples := make([]int64, reps)
		for i := range samples {
			samples[i] = int64(1e6 + i)
		}
		return &summary.Throughput{PP: speedstat.NewBenchTest(64, 0, samples)}
	}
	gates := spec.Gates{PPTSMaxSlowdown: &limit, SpeedBaseline: &old}
	for _, c := range []struct {
		name, apart, oldStatus string
		oldReps, newReps       int
		want                   string // "" passes
	}{
		{"interleaved", "", summary.StatusOK, 100, 100, ""},
		{"benched apart", "old was benched by shard 0/2 and new by shard 1/2", summary.StatusOK, 100, 100, "not measured: old was benched by shard 0/2"},
		{"old crashed in the bench", "", summary.StatusCrashed, 10, 100, "not measured: old crashed"},
		{"too few repetitions", "", summary.StatusOK, 100, 20, "not measured: 100 repetitions (old in this run) and 20 (this backend); the p95 test needs >= 60"},
	} {
		cmp := &Comparison{Planned: 3}
		cmp.Add(unit(t))
		v := &Builder{LiveRef: true, Speeds: map[string]*summary.Throughput{"old": tput(c.oldReps)},
			Statuses:     map[string]string{"old": c.oldStatus},
			BenchedApart: func(a, b string) string { return c.apart }}
		bs := v.Candidate(summary.BackendSummary{Name: "new", Status: summary.StatusOK, Throughput: tput(c.newReps)}, cmp, gates)
		if len(bs.Gates) != 1 || bs.Pass != (c.want == "") || !strings.Contains(bs.Gates[0].Note, c.want) {
			t.Errorf("%s: pass %v, gates %+v", c.name, bs.Pass, bs.Gates)
		}
		want := summary.VerdictPass
		if c.want != "" {
			want = summary.VerdictFail
		}
		if got := v.Result(); got.Status != want {
			t.Errorf("%s: verdict %s, want %s (%q)", c.name, got.Status, want, got.Reasons)
		}
	}
}
