package metrics

import (
	"math"
	"slices"
	"strings"
	"testing"
)

// A hand-computed case: base p = (½, ½), candidate q = (¼, ¾) at every
// token, targets alternating 0, 1 over 100 tokens.
//
//	KLD_t = ½ln(½/¼) + ½ln(½/¾) = ½ln(4/3)
//	Δp = q_tok − ½ = −¼ (tok 0) or +¼ (tok 1): mean 0, RMS ¼
//	NLL(Q) = ln 4 or ln(4/3); NLL(base) = ln 2 (PPL(base) = 2)
//	argmax: candidate 1, base 0 (tie, first index): same top 0%
func TestKLDHandComputed(t *testing.T) {
	var k KLD
	logits := []float32{0, float32(math.Log(3))}
	half := float32(math.Log(0.5))
	base := []float32{half, half}
	for i := range 100 {
		if err := k.Add(logits, base, int32(i%2)); err != nil {
			t.Fatal(err)
		}
	}
	r := k.Result()
	wantKLD := 0.5 * math.Log(4.0/3)
	meanNLL := (math.Log(4) + math.Log(4.0/3)) / 2
	checks := []struct {
		name      string
		got, want float64
	}{
		{"N", float64(r.N), 100},
		{"KLD", r.KLD.Value, wantKLD}, {"KLD ±", r.KLD.Err, 0},
		{"max KLD", r.KLDQuantiles[0], wantKLD}, {"min KLD", r.KLDQuantiles[10], wantKLD},
		{"mean Δp", r.PDiff.Value, 0},
		{"Δp ±", r.PDiff.Err, 0.25 / math.Sqrt(99)},
		{"max Δp", r.PDiffQuantiles[0], 0.25}, {"99.9% Δp", r.PDiffQuantiles[1], 0.25},
		{"75% Δp", r.PDiffQuantiles[5], 0.25}, // p = 74.25 ≥ 50
		{"median Δp", r.PDiffQuantiles[6], 0}, // (−¼ + ¼)/2
		{"25% Δp", r.PDiffQuantiles[7], -0.25}, {"min Δp", r.PDiffQuantiles[12], -0.25},
		{"max |Δp|", r.MaxAbsPDiff, 0.25},
		{"RMS Δp", r.RMSPDiff.Value, 0.25}, {"RMS Δp ±", r.RMSPDiff.Err, 0},
		{"same top", r.SameTop.Value, 0}, {"same top ±", r.SameTop.Err, 0},
		{"PPL(Q)", r.PPLQ.Value, math.Exp(meanNLL)},
		{"PPL(Q) ±", r.PPLQ.Err, math.Exp(meanNLL) * math.Log(3) / 2 / math.Sqrt(99)},
		{"PPL(base)", r.PPLBase.Value, 2},
		{"ln ratio", r.LnPPLRatio.Value, meanNLL - math.Log(2)},
		{"ratio", r.PPLRatio.Value, math.Exp(meanNLL) / 2},
		{"ΔPPL", r.PPLDiff.Value, math.Exp(meanNLL) - 2},
	}
	for _, c := range checks {
		if !near(c.got, c.want, 2e-6*max(1, math.Abs(c.want))) {
			t.Errorf("%s = %.9g, want %.9g", c.name, c.got, c.want)
		}
	}
	// Constant NLL(base): σ_base is 0, so llama.cpp's correlation is 0/0.
	if !strings.Contains(FormatLlamaPerplexity(r), "Cor(ln(PPL(Q)), ln(PPL(base))):    nan%") &&
		!strings.Contains(FormatLlamaPerplexity(r), "inf%") {
		t.Errorf("correlation with a constant base: %v, want nan or inf as llama.cpp", r.Cor)
	}
}

// Base log-probs at or below −16 are left out of the KL sum (llama.cpp's
// truncation), AddLogits keeps the whole vocabulary.
func TestKLDTruncation(t *testing.T) {
	half := float32(math.Log(0.5))
	base := []float32{half, half, -17} // third token clamped away in a base file
	logits := []float32{0, 0, 5}
	var k KLD
	if err := k.Add(logits, base, 0); err != nil {
		t.Fatal(err)
	}
	// Σ_{i<2} ½·(ln ½ − ln(1/(2+e⁵))) = ln(1 + e⁵/2)
	want := math.Log(1 + math.Exp(5)/2)
	kld, pd := k.Values()
	if !near(float64(kld[0]), want, 1e-5) {
		t.Errorf("truncated KLD %v, want %v", kld[0], want)
	}
	if !near(float64(pd[0]), 1/(2+math.Exp(5))-0.5, 1e-6) {
		t.Errorf("Δp %v, want %v", pd[0], 1/(2+math.Exp(5))-0.5)
	}

	// Live: reference logits (½, ½, e^−17)-ish, exact float64 KL over all 3.
	ref := []float32{half, half, -17}
	var live KLD
	if err := live.AddLogits(logits, ref, 2); err != nil {
		t.Fatal(err)
	}
	p := []float64{0.5, 0.5, math.Exp(-17)}
	zp := p[0] + p[1] + p[2]
	zq := 2 + math.Exp(5)
	q := []float64{1 / zq, 1 / zq, math.Exp(5) / zq}
	var wantLive float64
	for i := range p {
		wantLive += p[i] / zp * math.Log(p[i]/zp/q[i])
	}
	kld, pd = live.Values()
	if !near(float64(kld[0]), wantLive, 1e-6) || float64(kld[0]) == float64(float32(want)) {
		t.Errorf("live KLD %v, want %v (not the truncated %v)", kld[0], wantLive, want)
	}
	if !near(float64(pd[0]), q[2]-p[2]/zp, 1e-7) {
		t.Errorf("live Δp %v, want %v", pd[0], q[2]-p[2]/zp)
	}
	if live.Result().SameTop.Value != 0 || k.Result().SameTop.Value != 0 {
		t.Error("argmax 2 vs 0 counted as the same top token")
	}
}

// Against a plain float64 implementation of the doc's table on
// pseudo-random rows (N = 150 ≥ 100): every statistic, every ± formula.
func TestKLDAgainstFloat64Reference(t *testing.T) {
	const n, nv = 150, 7
	seed := uint32(7)
	rnd := func() float64 {
		seed = seed*1664525 + 1013904223
		return float64(seed>>8) / (1 << 24)
	}
	var k KLD
	var nll, nllB, klds, pds []float64
	same := 0
	for range n {
		l := make([]float32, nv)
		b := make([]float32, nv)
		for i := range l {
			l[i] = float32(rnd()*6 - 3)
		}
		// Base: the candidate perturbed, normalised in float64.
		var z float64
		raw := make([]float64, nv)
		for i := range raw {
			raw[i] = float64(l[i]) + rnd() - 0.5
			z += math.Exp(raw[i])
		}
		for i := range b {
			b[i] = float32(raw[i] - math.Log(z))
		}
		tok := int32(rnd() * nv)
		if err := k.Add(l, b, tok); err != nil {
			t.Fatal(err)
		}
		// Reference, float64 throughout.
		var zq float64
		for _, v := range l {
			zq += math.Exp(float64(v))
		}
		lq := func(i int) float64 { return float64(l[i]) - math.Log(zq) }
		var kl float64
		for i := range b {
			kl += math.Exp(float64(b[i])) * (float64(b[i]) - lq(i))
		}
		nll = append(nll, -lq(int(tok)))
		nllB = append(nllB, -float64(b[tok]))
		klds = append(klds, kl)
		pds = append(pds, math.Exp(lq(int(tok)))-math.Exp(float64(b[tok])))
		if argmax32(l) == argmax32(b) {
			same++
		}
	}
	mean := func(v []float64) float64 {
		var s float64
		for _, x := range v {
			s += x
		}
		return s / float64(len(v))
	}
	sem := func(v []float64) float64 { // standard error of the mean
		m := mean(v)
		var s float64
		for _, x := range v {
			s += (x - m) * (x - m)
		}
		return math.Sqrt(s / float64(len(v)) / float64(len(v)-1))
	}
	prod := func(a, b []float64) []float64 {
		out := make([]float64, len(a))
		for i := range a {
			out[i] = a[i] * b[i]
		}
		return out
	}
	cov := (mean(prod(nll, nllB)) - mean(nll)*mean(nllB)) / float64(n-1)
	mq, mb, sq, sb := mean(nll), mean(nllB), sem(nll), sem(nllB)
	pq, pb := math.Exp(mq), math.Exp(mb)
	sortedK := slices.Clone(klds)
	slices.Sort(sortedK)
	sortedP := slices.Clone(pds)
	slices.Sort(sortedP)
	pct := func(s []float64, f float64) float64 {
		p := f * float64(len(s)-1)
		i := int(p)
		return (1-(p-float64(i)))*s[i] + (p-float64(i))*s[min(i+1, len(s)-1)]
	}
	msq := mean(prod(pds, pds))
	rms := math.Sqrt(msq)
	s := float64(same) / n

	r := k.Result()
	checks := []struct {
		name      string
		got, want float64
	}{
		{"PPL(Q)", r.PPLQ.Value, pq}, {"PPL(Q) ±", r.PPLQ.Err, pq * sq},
		{"PPL(base)", r.PPLBase.Value, pb}, {"PPL(base) ±", r.PPLBase.Err, pb * sb},
		{"Cor", r.Cor, cov / (sq * sb)},
		{"ln ratio", r.LnPPLRatio.Value, mq - mb}, {"ln ratio ±", r.LnPPLRatio.Err, math.Sqrt(sq*sq + sb*sb - 2*cov)},
		{"ratio", r.PPLRatio.Value, math.Exp(mq - mb)}, {"ratio ±", r.PPLRatio.Err, math.Exp(mq-mb) * math.Sqrt(sq*sq+sb*sb-2*cov)},
		{"ΔPPL", r.PPLDiff.Value, pq - pb}, {"ΔPPL ±", r.PPLDiff.Err, math.Sqrt(pq*sq*pq*sq + pb*sb*pb*sb - 2*pq*pb*cov)},
		{"KLD", r.KLD.Value, mean(klds)}, {"KLD ±", r.KLD.Err, sem(klds)},
		{"max KLD", r.KLDQuantiles[0], sortedK[n-1]}, {"99% KLD", r.KLDQuantiles[2], pct(sortedK, 0.99)},
		{"90% KLD", r.KLDQuantiles[4], pct(sortedK, 0.9)},
		{"median KLD", r.KLDQuantiles[5], (sortedK[n/2] + sortedK[n/2-1]) / 2},
		{"1% KLD", r.KLDQuantiles[8], pct(sortedK, 0.01)}, {"min KLD", r.KLDQuantiles[10], sortedK[0]},
		{"Δp", r.PDiff.Value, mean(pds)}, {"Δp ±", r.PDiff.Err, sem(pds)},
		{"75% Δp", r.PDiffQuantiles[5], pct(sortedP, 0.75)}, {"25% Δp", r.PDiffQuantiles[7], pct(sortedP, 0.25)},
		{"0.1% Δp", r.PDiffQuantiles[11], pct(sortedP, 0.001)},
		{"RMS Δp", r.RMSPDiff.Value, rms}, {"RMS Δp ±", r.RMSPDiff.Err, 0.5 / rms * sem(prod(pds, pds))},
		{"same top", r.SameTop.Value, s}, {"same top ±", r.SameTop.Err, math.Sqrt(s * (1 - s) / (n - 1))},
	}
	for _, c := range checks {
		// float32 per-token arithmetic: ~1e-5 relative, ~1e-7 absolute
		if !near(c.got, c.want, 1e-5*math.Abs(c.want)+2e-7) {
			t.Errorf("%s = %.9g, want %.9g", c.name, c.got, c.want)
		}
	}
	if s == 0 || s == 1 {
		t.Fatalf("test data has same top %v: pick data that exercises both cases", s)
	}
	if r.Cor < 0.5 || r.Cor > 1 {
		t.Errorf("correlation of NLLs of perturbed rows %v, want within (0.5, 1]", r.Cor)
	}
}

func argmax32(v []float32) int {
	best := 0
	for i, x := range v {
		if x > v[best] {
			best = i
		}
	}
	return best
}

func TestKLDRefusesMismatchedRows(t *testing.T) {
	var k KLD
	if err := k.Add([]float32{1, 2}, []float32{1}, 0); err == nil {
		t.Error("rows of 2 and 1 entries accepted")
	}
	if err := k.Add([]float32{1, 2}, []float32{1, 2}, 2); err == nil {
		t.Error("token 2 of a 2-token vocabulary accepted")
	}
	if err := k.AddLogits(nil, nil, 0); err == nil {
		t.Error("empty rows accepted")
	}
	if k.N() != 0 {
		t.Errorf("refused rows were counted: N = %d", k.N())
	}
}
