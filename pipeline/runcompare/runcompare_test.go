package runcompare

import (
	"bytes"
	"encoding/json"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/evalrun/evalrun/pipeline/digest"
	"github.com/evalrun/evalrun/pipeline/resultsdir"
	"github.com/evalrun/evalrun/pipeline/spec"
	"github.com/evalrun/evalrun/pipeline/speedstat"
	"github.com/evalrun/evalrun/pipeline/summary"
)

func p(v float64) *float64 { return &v }

func hashed(from int, rows ...float32) digest.Prompt {
	h := digest.NewHasher(from)
	h.Tokens([]int32{1, 2, 3})
	for _, r := range rows {
		h.Row([]float32{r, 1})
	}
	return h.Sum()
}

// bench makes a test whose repetitions run at rate*(1 + small spread).
func bench(nGen int, rate float64, reps int) *summary.BenchTest {
	ns := make([]int64, reps)
	for i := range ns {
		ns[i] = int64(float64(max(nGen, 1)) * 1e9 / (rate * (1 + 0.002*float64(i-reps/2))))
	}
	if nGen == 0 {
		return speedstat.NewBenchTest(1, 0, ns)
	}
	return speedstat.NewBenchTest(0, nGen, ns)
}

// writeRun writes a run directory with one candidate "b" whose chunk 2
// has rows rows2, and throughput tg at tgRate.
func writeRun(t *testing.T, kld, kldErr float64, rows2 []float32, tgRate float64, simulated bool) string {
	t.Helper()
	dir := t.TempDir()
	var ref, cand digest.RunHasher
	var lines []summary.PromptResult
	for i, rows := range [][]float32{{1, 2, 3}, rows2} {
		id := []string{"chunk-1", "chunk-2"}[i]
		rd, cd := hashed(64, 1, 2, 3), hashed(64, rows...)
		ref.Add("s", id, rd)
		cand.Add("s", id, cd)
		lines = append(lines, summary.PromptResult{Backend: "ref", Reference: true, Dataset: "s", ID: id, PromptDigest: &rd},
			summary.PromptResult{Backend: "b", Dataset: "s", ID: id, PromptDigest: &cd})
	}
	s := summary.Summary{Schema: summary.SchemaVersion, Run: summary.RunInfo{ID: filepath.Base(dir)},
		Reference: summary.BackendSummary{Name: "ref", Status: summary.StatusOK, Digest: ref.Sum()},
		Backends: []summary.BackendSummary{{Name: "b", Status: summary.StatusOK, Digest: cand.Sum(),
			Accuracy:   &summary.Accuracy{KLDMean: p(kld), KLDMeanErr: p(kldErr), SameTopP: p(0.99), SameTopPErr: p(0.001), MaxAbsDiff: p(0.5)},
			Throughput: &summary.Throughput{TG: bench(16, tgRate, 120), Simulated: simulated}}}}
	data, _ := json.Marshal(s)
	if err := os.WriteFile(filepath.Join(dir, "summary.json"), data, 0o644); err != nil {
		t.Fatal(err)
	}
	var jl bytes.Buffer
	for _, l := range lines {
		b, _ := json.Marshal(l)
		jl.Write(append(b, '\n'))
	}
	if err := os.WriteFile(filepath.Join(dir, "prompts.jsonl"), jl.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	return dir
}

func load(t *testing.T, path string) *resultsdir.Run {
	t.Helper()
	r, err := resultsdir.Load(path)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

func TestCompareFindsTheFirstChangedPosition(t *testing.T) {
	base := load(t, writeRun(t, 0.001, 0.0001, []float32{4, 5, 6}, 1000, false))
	same := load(t, filepath.Join(writeRun(t, 0.001, 0.0001, []float32{4, 5, 6}, 1000, false), "summary.json"))
	res := Compare(base, same, DefaultMinChange)
	for _, b := range res.Backends {
		if b.Logits.Verdict != BitIdentical || b.Logits.ChangedPrompts != 0 || b.Logits.ComparedPrompts != 2 {
			t.Fatalf("%s: %+v", b.Name, b.Logits)
		}
	}
	// Row 1 of chunk 2 changed: position 64+1.
	changed := load(t, writeRun(t, 0.0013, 0.0001, []float32{4, 5.5, 6}, 1000, false))
	res = Compare(base, changed, DefaultMinChange)
	ref, b := res.Backends[0], res.Backends[1]
	if ref.Logits.Verdict != BitIdentical || !ref.Reference {
		t.Fatalf("reference %+v", ref)
	}
	l := b.Logits
	if l.Verdict != Changed || l.ChangedPrompts != 1 || l.First == nil || l.First.ID != "chunk-2" || *l.First.Position != 65 || *l.First.Row != 1 || l.TokensChanged {
		t.Fatalf("logits %+v first %+v", l, l.First)
	}
	// KLD +0.0003 against ±0.00014 (0.0001 in quadrature): beyond, worse.
	kld := b.Metrics[0]
	if kld.Name != "kld_mean" || !kld.Beyond || !kld.Worse || *kld.Err < 0.000141 || *kld.Err > 0.000142 {
		t.Fatalf("kld %+v", kld)
	}
	for _, m := range b.Metrics[1:] {
		if m.Beyond || *m.Delta != 0 {
			t.Errorf("%s changed: %+v", m.Name, m)
		}
	}
	var out bytes.Buffer
	if err := Print(&out, res, false); err != nil || !strings.Contains(out.String(), "changed @ s/chunk-2 pos 65 (1/2)") {
		t.Fatalf("%v\n%s", err, out.String())
	}
	// Within its ±: not beyond.
	res = Compare(base, load(t, writeRun(t, 0.00105, 0.0001, []float32{4, 5, 6}, 1000, false)), DefaultMinChange)
	if m := res.Backends[1].Metrics[0]; m.Beyond || m.Worse {
		t.Fatalf("within ±: %+v", m)
	}
	// Without prompts.jsonl the change is known, its place is not.
	dir := writeRun(t, 0.001, 0.0001, []float32{9, 9, 9}, 1000, false)
	os.Remove(filepath.Join(dir, "prompts.jsonl"))
	res = Compare(base, load(t, dir), DefaultMinChange)
	if l := res.Backends[1].Logits; l.Verdict != Changed || l.First != nil || !strings.Contains(l.Note, "prompts.jsonl") {
		t.Fatalf("no prompts.jsonl: %+v", l)
	}
}

func TestCompareSpeed(t *testing.T) {
	base := load(t, writeRun(t, 0.001, 0.0001, nil, 1000, false))
	for _, c := range []struct {
		rate      float64
		minChange float64
		want      string
	}{
		{1000, DefaultMinChange, speedstat.NoChange},
		{900, DefaultMinChange, speedstat.Slower},
		{1100, DefaultMinChange, speedstat.Faster},
		{980, DefaultMinChange, speedstat.NoChange}, // significant, but 2 % < 3 %
		{980, 0, speedstat.Slower},
	} {
		res := Compare(base, load(t, writeRun(t, 0.001, 0.0001, nil, c.rate, false)), c.minChange)
		s := res.Backends[1].Speed
		if len(s) != 1 || s[0].Test != "tg16" || s[0].Verdict != c.want {
			t.Errorf("rate %v min %v: %+v", c.rate, c.minChange, s)
		}
	}
}

// A test only one run has (the bench sizes changed, or one run skipped
// it) is listed as not comparable.
func TestCompareSpeedTestInOneRunOnly(t *testing.T) {
	base := load(t, writeRun(t, 0.001, 0.0001, nil, 1000, false))
	newRun := load(t, writeRun(t, 0.001, 0.0001, nil, 1000, false))
	base.Summary.Backends[0].Throughput.PP = bench(0, 500, 10) // not in the new run
	base.Summary.Backends[0].Throughput.TG.NGen = 32
	s := Compare(base, newRun, DefaultMinChange).Backends[1].Speed
	if len(s) != 2 || s[0].Test != "pp1" || s[0].Verdict != speedstat.NotComparable || s[1].Test != "tg16" || s[1].Verdict != speedstat.NotComparable || !strings.Contains(s[1].Note, "tg32") {
		t.Fatalf("%+v", s)
	}
}

func TestRelativeGates(t *testing.T) {
	base := load(t, writeRun(t, 0.001, 0.0001, nil, 1000, false))
	gates := spec.Gates{KLDMeanMaxIncrease: p(0.0002), SameTopPMaxDrop: p(0), TGTSMaxSlowdown: p(0.05)}
	check := Gates(base)
	run := func(kld, rate float64, simulated bool, g spec.Gates) map[string]summary.GateResult {
		r := load(t, writeRun(t, kld, 0.0001, nil, rate, simulated))
		b := r.Summary.Backends[0]
		out := map[string]summary.GateResult{}
		for _, res := range check(&b, g, nil) {
			out[res.Name] = res
		}
		return out
	}
	ok := run(0.0011, 970, false, gates) // +1e-4 KLD, 3 % slower: within both limits
	for name, r := range ok {
		if !r.Pass {
			t.Errorf("%s: %+v", name, r)
		}
	}
	bad := run(0.0015, 800, false, gates)
	if r := bad["kld_mean_max_increase"]; r.Pass || *r.Value < 0.00049 {
		t.Errorf("KLD +5e-4: %+v", r)
	}
	if r := bad["tg_ts_max_slowdown"]; r.Pass || *r.Value < 0.19 || !strings.Contains(r.Note, "significant") {
		t.Errorf("20%% slower: %+v", r)
	}
	if r := bad["same_top_p_max_drop"]; !r.Pass {
		t.Errorf("same top p unchanged: %+v", r)
	}
	// A simulated device's slowdown is not gated unless asked.
	if r := run(0.001, 500, true, gates)["tg_ts_max_slowdown"]; !r.Pass || !r.Skipped {
		t.Errorf("simulated: %+v", r)
	}
	on := true
	gates.SpeedGatesOnSimulated = &on
	if r := run(0.001, 500, true, gates)["tg_ts_max_slowdown"]; r.Pass || r.Skipped {
		t.Errorf("simulated with speed_gates_on_simulated: %+v", r)
	}
	// A backend the baseline does not have fails its relative gates.
	b := summary.BackendSummary{Name: "new-one"}
	for _, r := range check(&b, spec.Gates{KLDMeanMaxIncrease: p(1)}, nil) {
		if r.Pass || !strings.Contains(r.Note, "no backend new-one in the baseline") {
			t.Errorf("missing backend: %+v", r)
		}
	}
}

func TestLoadErrors(t *testing.T) {
	dir := t.TempDir()
	write := func(name, text string) {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	for _, c := range []struct{ summary, prompts, want string }{
		{"", "", "not a run"},
		{"{", "", "summary.json: unexpected end of JSON input"},
		{`{"schema":"other"}`, "", `schema "other"`},
		{`{"schema":"` + summary.SchemaVersion + `"}`, "{}\n[", "prompts.jsonl:2:"},
	} {
		os.Remove(filepath.Join(dir, "summary.json"))
		os.Remove(filepath.Join(dir, "prompts.jsonl"))
		if c.summary != "" {
			write("summary.json", c.summary)
		}
		if c.prompts != "" {
			write("prompts.jsonl", c.prompts)
		}
		if _, err := resultsdir.Load(dir); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%q: %v, want %q", c.summary, err, c.want)
		}
	}
}

func TestWrite(t *testing.T) {
	base := load(t, writeRun(t, 0.001, 0.0001, nil, 1000, false))
	dir := t.TempDir()
	if err := Write(dir, Compare(base, base, DefaultMinChange)); err != nil {
		t.Fatal(err)
	}
	var r Result
	data, _ := os.ReadFile(filepath.Join(dir, "compare.json"))
	if err := json.Unmarshal(data, &r); err != nil || r.Schema != Schema || len(r.Backends) != 2 {
		t.Fatalf("%v %+v", err, r)
	}
	md, _ := os.ReadFile(filepath.Join(dir, "compare.md"))
	if !strings.Contains(string(md), "### b") || !strings.Contains(string(md), "| kld_mean") {
		t.Fatalf("compare.md:\n%s", md)
	}
}

// FuzzLoad: any summary.json and prompts.jsonl is read or refused, never a
// panic, and a loaded run compares with itself.
func FuzzLoad(f *testing.F) {
	f.Add([]byte(`{"schema":"`+summary.SchemaVersion+`","reference":{"name":"r","digest":{"logits_sha256":"a"}},"backends":[{"name":"b","accuracy":{"kld_mean":1},"throughput":{"tg":{"n_gen":4,"samples_ns":[1,2,0,-5]}}}]}`),
		[]byte(`{"backend":"b","dataset":"s","id":"c","logits_sha256":"x","logits_from":-3,"row_xxh64":["a"]}`+"\n"))
	f.Add([]byte(`{"schema":"`+summary.SchemaVersion+`","backends":[{"name":"b","throughput":{"pp":{"n_prompt":4,"samples_ns":[1]}}}]}`), []byte{})
	f.Fuzz(func(t *testing.T, summary, prompts []byte) {
		dir := t.TempDir()
		os.WriteFile(filepath.Join(dir, "summary.json"), summary, 0o644)
		os.WriteFile(filepath.Join(dir, "prompts.jsonl"), prompts, 0o644)
		r, err := resultsdir.Load(dir)
		if err != nil {
			return
		}
		res := Compare(r, r, DefaultMinChange)
		var out bytes.Buffer
		if err := Print(&out, res, false); err != nil {
			t.Fatal(err)
		}
		check := Gates(r)
		for _, b := range r.Summary.Backends {
			check(&b, spec.Gates{KLDMeanMaxIncrease: p(0), TGTSMaxSlowdown: p(0.1)}, r.Speeds())
		}
	})
}

// A candidate's speed relative to the reference, round by round, does not
// move when the whole machine got slower between the runs, and does when
// the candidate alone did.
// fleet is a run of a reference and three candidates benched at the given
// tg rates (reference first), pp at 4 × those.
func fleet(t *testing.T, rates ...float64) *resultsdir.Run { return fleetPP(t, 4, rates...) }

// fleetPP is fleet with pp at ppTimes × the tg rates.
func fleetPP(t *testing.T, ppTimes float64, rates ...float64) *resultsdir.Run {
	return fleetN(t, 120, ppTimes, rates...)
}

// fleetN is fleetPP with reps repetitions per test and a reference plus
// len(rates)-1 candidates (b, c, d).
func fleetN(t *testing.T, reps int, ppTimes float64, rates ...float64) *resultsdir.Run {
	r := load(t, writeRun(t, 0.001, 0.0001, nil, rates[1], false))
	tput := func(rate float64) *summary.Throughput {
		return &summary.Throughput{PP: bench(0, ppTimes*rate, reps), TG: bench(16, rate, reps)}
	}
	r.Summary.Reference.Throughput = tput(rates[0])
	r.Summary.Backends[0].Throughput = tput(rates[1])
	for i, name := range []string{"c", "d"}[:len(rates)-2] {
		r.Summary.Backends = append(r.Summary.Backends, summary.BackendSummary{Name: name, Status: summary.StatusOK, Throughput: tput(rates[2+i])})
	}
	return r
}

// With three backends, the other two's shift would be their mean, which
// one changed backend carries halfway: each row is then judged against
// the median over all three, which ignores it.
func TestMachineShiftOfThreeBackends(t *testing.T) {
	res := Compare(fleetN(t, 120, 4, 2000, 1000, 1500), fleetN(t, 120, 4, 2000, 800, 1500), DefaultMinChange)
	for _, b := range res.Backends {
		want := speedstat.NoChange
		if b.Name == "b" {
			want = speedstat.Slower
		}
		for _, s := range b.Speed {
			if s.Verdict != want {
				t.Errorf("b 20%% slower: %s %s %s (Δ judged %+.3f), want %s", b.Name, s.Test, s.Verdict, *s.Delta, want)
			}
		}
	}
}

// Eight tests adjusted together need 90 repetitions per run before any can
// be significant: at 60, a run twice as fast is "no significant change",
// and the note says why.
func TestTooFewRepetitionsForTheTable(t *testing.T) {
	res := Compare(fleetN(t, 60, 4, 2000, 1000, 1500, 800), fleetN(t, 60, 4, 2000, 2000, 1500, 800), DefaultMinChange)
	s := res.Backends[1].Speed[1]
	if s.Verdict != speedstat.NoChange || !strings.Contains(s.Note, "among 8 tests: need >= 90") {
		t.Fatalf("b twice as fast at 60 repetitions: %s %q", s.Verdict, s.Note)
	}
}

// Two runs on a shared machine: every backend 30 % slower is the machine
// (printed, no backend slower); one candidate 20 % slower besides is that
// candidate, and its tg_ts_max_slowdown gate fails while the others pass.
func TestCompareRemovesTheMachineShift(t *testing.T) {
	base := fleet(t, 2000, 1000, 1500, 800)
	verdicts := func(res *Result) map[string]string {
		out := map[string]string{}
		for _, b := range res.Backends {
			for _, s := range b.Speed {
				out[b.Name+" "+s.Test] = s.Verdict
			}
		}
		return out
	}
	machine := Compare(base, fleet(t, 1400, 700, 1050, 560), DefaultMinChange)
	if machine.Machine == nil || math.Abs(machine.Machine.Factor-0.7) > 1e-3 || machine.Machine.Backends != 4 || machine.Machine.Tests != 8 {
		t.Fatalf("machine shift %+v", machine.Machine)
	}
	for k, v := range verdicts(machine) {
		if v != speedstat.NoChange {
			t.Errorf("machine 30%% slower: %s %s", k, v)
		}
	}
	tg := machine.Backends[0].Speed[1]
	if tg.Test != "tg16" || math.Abs(*tg.DeltaRaw+0.3) > 1e-3 || math.Abs(*tg.Delta) > 1e-3 || math.Abs(tg.New.Median-1400) > 5 {
		t.Errorf("reference tg: raw Δ %v, judged Δ %v, new median %v", *tg.DeltaRaw, *tg.Delta, tg.New.Median)
	}
	alone := Compare(base, fleet(t, 1400, 560, 1050, 560), DefaultMinChange)
	if math.Abs(alone.Machine.Factor-0.7) > 1e-3 {
		t.Fatalf("one backend's change moved the machine shift: %+v", alone.Machine)
	}
	// Each backend is judged against the other backends' shift, so its
	// own change does not leak into the yardstick: b 20 % and d 10 %
	// slower besides the machine's 30 % (a median over all four tg rows,
	// 0.665, would have judged b -15.8 % and d -5.3 %).
	two := Compare(base, fleet(t, 1400, 560, 1050, 504), DefaultMinChange)
	for i, want := range map[int]float64{1: -0.2, 3: -0.1} {
		if bt := two.Backends[i].Speed[1]; math.Abs(*bt.Delta-want) > 1e-3 || bt.Verdict != speedstat.Slower {
			t.Errorf("%s tg judged Δ %v (%s), want %v", two.Backends[i].Name, *bt.Delta, bt.Verdict, want)
		}
	}
	for k, v := range verdicts(alone) {
		want := speedstat.NoChange
		if strings.HasPrefix(k, "b ") {
			want = speedstat.Slower
		}
		if v != want {
			t.Errorf("candidate b 20%% slower: %s %s, want %s", k, v, want)
		}
	}
	var out bytes.Buffer
	if err := Print(&out, alone, false); err != nil || !strings.Contains(out.String(), "machine: every backend -30.0% (median over 8 tests of 4 backends): pp1 -30.0%, tg16 -30.0%") {
		t.Errorf("printed machine shift: %v\n%s", err, out.String())
	}

	// Two identical runs as once measured (docs/design-notes.md,
	// MachineShift): pp +37 %, tg +5 % on every backend. One shift for both
	// tests (+21 %) would make every backend's pp "faster" and tg "slower";
	// each test's own shift explains both.
	split := Compare(base, fleetPP(t, 4*1.37/1.05, 2100, 1050, 1575, 840), DefaultMinChange)
	for k, v := range verdicts(split) {
		if v != speedstat.NoChange {
			t.Errorf("pp +37%%, tg +5%% on every backend: %s %s", k, v)
		}
	}
	if f := split.Machine.ByTest; math.Abs(f["pp1"]-1.37) > 1e-3 || math.Abs(f["tg16"]-1.05) > 1e-3 {
		t.Errorf("shift by test %v, want pp1 1.37, tg16 1.05", f)
	}

	// The others 20 % faster, b 5 % faster as measured: -12.5 % after the
	// shift, but not judged (the backends of a shared machine's run do
	// not move together); b 10 % slower as measured is.
	for _, c := range []struct {
		b       float64
		verdict string
	}{{1050, speedstat.NoChange}, {900, speedstat.Slower}} {
		res := Compare(base, fleet(t, 2400, c.b, 1800, 960), DefaultMinChange)
		bt := res.Backends[1].Speed[1]
		if bt.Verdict != c.verdict || c.verdict == speedstat.NoChange && !strings.Contains(bt.Note, "only once the machine's change is removed; as measured +5.0%") {
			t.Errorf("others +20%%, b at %v: %s %q (judged Δ %+.3f)", c.b, bt.Verdict, bt.Note, *bt.Delta)
		}
	}

	// The others 20 % faster, b 4 % slower as measured (-20 % after the
	// shift): slower, but no regression, since the limit's 5 % is not
	// passed as measured; b 10 % slower as measured is a regression.
	for _, c := range []struct {
		b          float64
		regression bool
	}{{960, false}, {900, true}} {
		res := Compare(base, fleet(t, 2400, c.b, 1800, 960), DefaultMinChange)
		bt := res.Backends[1].Speed[1]
		if bt.Verdict != speedstat.Slower || (res.Verdict.Status == VerdictRegression) != c.regression ||
			!c.regression && !strings.Contains(bt.Note, "20.0% slower once the machine's change is removed, 4.0% as measured: within the 5% allowed") {
			t.Errorf("others +20%%, b at %v: %s, verdict %+v, note %q", c.b, bt.Verdict, res.Verdict, bt.Note)
		}
	}

	g := spec.Gates{TGTSMaxSlowdown: p(0.1)}
	gates := Gates(base)
	for _, c := range []struct {
		run  *resultsdir.Run
		name string
		pass bool
	}{
		{fleet(t, 1400, 700, 1050, 560), "b", true},
		{fleet(t, 1400, 560, 1050, 560), "b", false},
		{fleet(t, 1400, 560, 1050, 560), "c", true},
	} {
		bs, _ := c.run.Backend(c.name)
		res := gates(&bs, g, c.run.Speeds())
		if len(res) != 1 || res[0].Pass != c.pass {
			t.Errorf("%s tg_ts_max_slowdown: %+v, want pass %v", c.name, res, c.pass)
		}
	}
}

// A slowdown gate between runs that benched different tests (tg16, then
// tg32) is not judged on the other test's rates: it fails as not comparable.
func TestSlowdownGateNeedsTheSameTest(t *testing.T) {
	base := fleet(t, 2000, 1000, 1500, 800)
	run := fleet(t, 2000, 1000, 1500, 800)
	run.Summary.Backends[0].Throughput.TG = bench(32, 1000, 120)
	bs, _ := run.Backend("b")
	res := Gates(base)(&bs, spec.Gates{TGTSMaxSlowdown: p(0.1)}, run.Speeds())
	if len(res) != 1 || res[0].Pass || !strings.Contains(res[0].Note, "not comparable: the baseline ran tg16, this backend tg32") {
		t.Errorf("tg16 against tg32: %+v", res)
	}
}
