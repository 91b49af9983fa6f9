package gate_test

import (
	"math"
	"reflect"
	"strings"
	"testing"

	"github.com/evalrun/evalrun/pipeline/gate"
	"github.com/evalrun/evalrun/pipeline/spec"
	"github.com/evalrun/evalrun/pipeline/speedstat"
	"github.com/evalrun/evalrun/pipeline/summary"
)

// TestEveryGateKeyIsTheCatalogs: every threshold key a spec accepts names a
// metric of the catalog with a bound that fits its direction, so adding a
// metric is a catalog row and its spec keys.
func TestEveryGateKeyIsTheCatalogs(t *testing.T) {
	n := 0
	ty := reflect.TypeFor[spec.Gates]()
	for i := range ty.NumField() {
		f := ty.Field(i)
		if f.Type != reflect.TypeFor[*float64]() {
			continue
		}
		key, _, _ := strings.Cut(f.Tag.Get("yaml"), ",")
		g, err := gate.Parse(key, 1)
		if err != nil {
			t.Errorf("spec key %s: %v", key, err)
			continue
		}
		m := gate.MustLookup(g.Metric)
		if m.Speed() != (g.Metric == "tg_ts" || g.Metric == "pp_ts") {
			t.Errorf("%s: speed %v", key, m.Speed())
		}
		n++
	}
	if n < 16 {
		t.Fatalf("only %d gate keys in spec.Gates", n)
	}
}

func TestParseRefusesABoundAgainstTheDirection(t *testing.T) {
	for key, want := range map[string]string{
		"kld_mean_min":       "kld_mean takes kld_mean_max or kld_mean_max_increase",
		"same_top_p_max":     "same_top_p takes same_top_p_min or same_top_p_max_drop",
		"tg_ts_max_increase": "tg_ts takes tg_ts_min or tg_ts_max_slowdown",
		"kld_mean_max_drop":  "kld_mean takes",
		"kl_mean_max":        `no metric "kl_mean"`,
		"kld_mean":           "a gate key ends in",
	} {
		if _, err := gate.Parse(key, 1); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: %v, want %q", key, err, want)
		}
	}
}

func TestPass(t *testing.T) {
	max := gate.Gate{Name: "kld_mean_max", Bound: gate.Max, Limit: 0.01}
	min := gate.Gate{Name: "same_top_p_min", Bound: gate.Min, Limit: 0.9}
	for _, c := range []struct {
		g    gate.Gate
		v    float64
		pass bool
	}{{max, 0.01, true}, {max, 0.0101, false}, {max, math.NaN(), false}, {min, 0.9, true}, {min, 0.89, false}, {min, math.NaN(), false}} {
		if c.g.Pass(c.v) != c.pass {
			t.Errorf("%s.Pass(%v) = %v", c.g.Name, c.v, !c.pass)
		}
	}
}

func ptr(v float64) *float64 { return &v }

func mustParse(t *testing.T, key string, limit float64) gate.Gate {
	t.Helper()
	g, err := gate.Parse(key, limit)
	if err != nil {
		t.Fatal(err)
	}
	return g
}

// TestAbsolute: each gate reads its metric from the catalog; a statistic
// not measured fails; a speed gate on a simulated device is skipped;
// non-finite logits always fail.
func TestAbsolute(t *testing.T) {
	a := &summary.Accuracy{KLDMean: ptr(0.002), SameTopP: ptr(0.95), Top5Overlap: ptr(0.97), CosineMean: ptr(0.9995), NaNCount: 1}
	tp := &summary.Throughput{TG: speedstat.NewBenchTest(0, 16, []int64{1e9, 1e9}), Simulated: true}
	gates := []gate.Gate{mustParse(t, "kld_mean_max", 0.001), mustParse(t, "same_top_p_min", 0.9), mustParse(t, "top5_overlap_min", 0.99),
		mustParse(t, "nmse_max", 1), mustParse(t, "cosine_mean_min", 0.999), mustParse(t, "tg_ts_min", 100)}
	got := gate.Absolute(gates, true, a, tp)
	want := []struct {
		name       string
		pass, skip bool
		note       string
	}{{"kld_mean_max", false, false, ""}, {"same_top_p_min", true, false, ""}, {"top5_overlap_min", false, false, ""},
		{"nmse_max", false, false, "not measured"}, {"cosine_mean_min", true, false, ""}, {"tg_ts_min", true, true, gate.NoteSimulated}, {"finite_logits", false, false, "1 NaN, 0 Inf logits"}}
	if len(got) != len(want) {
		t.Fatalf("%d results, want %d: %+v", len(got), len(want), got)
	}
	for i, w := range want {
		if g := got[i]; g.Name != w.name || g.Pass != w.pass || g.Skipped != w.skip || g.Note != w.note {
			t.Errorf("%d: %+v, want %+v", i, g, w)
		}
	}
	if got := gate.Absolute(gates[5:], false, a, tp); got[0].Skipped || got[0].Pass || *got[0].Value != 16 {
		t.Errorf("tg_ts_min applied: %+v", got[0])
	}
}

// TestAbsoluteSpeedReadsTheP95: tg_ts_min judges the rate the fastest 5 %
// of the repetitions reach, as the slowdown gates and compare do, not
// llama-bench's mean, which repetitions slowed by a neighbour pull down.
func TestAbsoluteSpeedReadsTheP95(t *testing.T) {
	samples := make([]int64, 100) // 16 tokens: 80 repetitions at 16 t/s, 20 slowed to 4 t/s
	for i := range samples {
		samples[i] = 1e9
		if i%5 == 0 {
			samples[i] = 4e9
		}
	}
	tp := &summary.Throughput{TG: speedstat.NewBenchTest(0, 16, samples)}
	if tp.TG.AvgTS >= 15 {
		t.Fatalf("the mean %g is not below the limit: the test shows nothing", tp.TG.AvgTS)
	}
	got := gate.Absolute([]gate.Gate{mustParse(t, "tg_ts_min", 15)}, false, nil, tp)[0]
	if !got.Pass || got.Value == nil || *got.Value != 16 || got.Note != "p95 16 t/s of 100 repetitions against limit 15" {
		t.Errorf("tg_ts_min 15 on a p95 of 16 t/s (mean %g): %+v", tp.TG.AvgTS, got)
	}
	if got := gate.Absolute([]gate.Gate{mustParse(t, "pp_ts_min", 1)}, false, nil, tp)[0]; got.Pass || got.Note != "not measured" {
		t.Errorf("pp_ts_min without a pp test: %+v", got)
	}
}

// TestChangeFollowsTheDirection: a metric where higher is worse may grow
// by the limit, one where lower is worse may fall by it.
func TestChangeFollowsTheDirection(t *testing.T) {
	base := &summary.Accuracy{KLDMean: ptr(0.010), SameTopP: ptr(0.95)}
	new := &summary.Accuracy{KLDMean: ptr(0.008), SameTopP: ptr(0.94)}
	if r := gate.Change(mustParse(t, "kld_mean_max_increase", 0), base, new); !r.Pass || *r.Value > 0 {
		t.Errorf("kld_mean fell: %+v", r)
	}
	if r := gate.Change(mustParse(t, "same_top_p_max_drop", 0.005), base, new); r.Pass || math.Abs(*r.Value-0.01) > 1e-12 {
		t.Errorf("same_top_p fell by 0.01: %+v", r)
	}
	if r := gate.Change(mustParse(t, "same_top_p_max_drop", 0.005), base, &summary.Accuracy{}); r.Pass || r.Note != "not measured" {
		t.Errorf("missing: %+v", r)
	}
}

// TestCatalogDirections: the rows reports and compare rely on.
func TestCatalogDirections(t *testing.T) {
	for name, higherWorse := range map[string]bool{"kld_mean": true, "same_top_p": false, "ppl_ratio": true, "nmse": true, "greedy_match": false,
		"cosine_min": false, "first_divergence_mean": false, "nan_count": true, "top5_overlap": false} {
		if m, ok := gate.Lookup(name); !ok || m.HigherWorse != higherWorse || m.Speed() {
			t.Errorf("%s: %+v %v", name, m, ok)
		}
	}
	a := &summary.Accuracy{InfCount: 3}
	if v, _ := gate.MustLookup("inf_count").Value(a); v == nil || *v != 3 {
		t.Errorf("inf_count %v", v)
	}
}
