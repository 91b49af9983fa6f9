package metrics

import (
	"fmt"
	"math"
	"slices"
	"sync"
)

// KLDTruncation is the base log-probability at or below which
// llama-perplexity leaves a token out of the KL divergence sum: its base
// file clamps logits more than 16 below the maximum, so their log-probs are
// not known there.
const KLDTruncation = -16

// MinStatsTokens is the token count below which llama-perplexity prints no
// statistics blocks ("we do not wish to do statistics on so few values").
const MinStatsTokens = 100

// KLD accumulates llama-perplexity's --kl-divergence statistics of a
// candidate model Q against a base distribution, one scored token at a time.
//
// Memory: like llama.cpp it keeps every per-token KLD and Δp (two float32,
// 8 bytes per token) for the percentiles; everything else is O(1).
// The zero value is ready to use. Not safe for concurrent use.
type KLD struct {
	sumNLL, sumNLL2         float64
	sumNLLBase, sumNLLBase2 float64
	sumNLLNLLBase           float64
	sumKLD, sumKLD2         float64
	sumPDiff, sumPDiff2     float64
	sumPDiff4               float64
	maxPDiff                float32
	sameTop                 int
	kld, pDiff              []float32
}

// KLDRow is one scored position: its KL divergence, Δp, top-1 agreement
// and the NLL terms of the perplexities, computed once (BaseKLDRow,
// LiveKLDRow) and added to any number of accumulators with AddRow. The terms
// are kept as they are summed, so every accumulator gets the same bits.
type KLDRow struct {
	kld               float64
	pDiff             float32
	sameTop           bool
	nll, nll2         float64
	nllBase, nllBase2 float64
	nllNLLBase        float64
}

// BaseKLDRow scores one token the way llama-perplexity --kl-divergence does.
// logits is the candidate's logit row, base the base log-probabilities
// decoded from a base file (kldbase: scale·q + min_log_prob), tok the token
// that actually follows. The arithmetic, including its float32 roundings and
// the −16 truncation of the KL sum, is llama.cpp's.
func BaseKLDRow(logits, base []float32, tok int32) (KLDRow, error) {
	if err := checkRow(logits, base, tok); err != nil {
		return KLDRow{}, err
	}
	maxLogit, imax := logits[0], 0
	for i, l := range logits[1:] {
		if l > maxLogit {
			maxLogit, imax = l, i+1
		}
	}
	var sumExp float64
	for _, l := range logits {
		sumExp += float64(expf(l - maxLogit))
	}
	logSumExp := float32(math.Log(sumExp))

	nll := (maxLogit + logSumExp) - logits[tok]
	nllBase := -base[tok]
	norm := maxLogit + logSumExp // log Σ exp(l): l_i − norm is log q_i
	var sum float64
	imaxBase := 0
	for i, b := range base {
		if i == 0 || b > base[imaxBase] {
			imaxBase = i
		}
		if b > KLDTruncation {
			sum += float64(expf(b) * ((b - logits[i]) + norm))
		}
	}
	return KLDRow{
		kld: sum, pDiff: expf(-nll) - expf(-nllBase), sameTop: imax == imaxBase,
		nll: float64(nll), nll2: float64(nll * nll),
		nllBase: float64(nllBase), nllBase2: float64(nllBase * nllBase), nllNLLBase: float64(nll * nllBase),
	}, nil
}

// RefRow is a reference logits row prepared once for every candidate
// compared with it: its log-softmax normalizer and argmax, and what the logit
// statistics need (non-finite counts, Σ ref², top 5). Set reuses its storage.
type RefRow struct {
	Logits   []float32
	imax     int
	norm     float64
	nan, inf int
	sumSq    float64 // Σ ref² in float64, for the cosine
	top      []int
	p        []float64 // the probabilities, made by the first LiveKLDRow
	pMu      sync.Mutex
	pReady   bool
}

// Set prepares ref (kept, not copied). Set must not run concurrently with
// anything else on r; LiveKLDRow and AddLogitRow may then compare any number
// of candidates with r at once.
func (r *RefRow) Set(ref []float32) {
	r.Logits, r.sumSq, r.pReady = ref, 0, false
	r.nan, r.inf = nonFinite(ref)
	if len(ref) == 0 {
		return
	}
	r.top = topK(ref, 5, r.top[:0])
	r.imax = argmax(ref, r.top, r.nan)
	r.p = slices.Grow(r.p[:0], len(ref))[:len(ref)] // scratch until LiveKLDRow fills it
	e := r.p
	m := float64(ref[r.imax])
	expShifted(e, ref, m)
	// Σ ref² and Σ exp in one pass: two chains of additions side by side,
	// each in index order.
	var s, sumSq float64
	if r.nan+r.inf == 0 {
		for i, v := range ref {
			f := float64(v)
			sumSq += float64(f * f)
			s += e[i]
		}
	} else {
		for i, v := range ref {
			if f := float64(v); !math.IsNaN(f) && !math.IsInf(f, 0) {
				sumSq += float64(f * f)
			}
			s += e[i]
		}
	}
	r.sumSq, r.norm = sumSq, m+math.Log(s)
}

// argmax is the first index of row's maximum: top[0] of its topK, which
// orders ties the same way, unless the row holds a NaN (topK and a scan
// treat NaN differently: the scan decides).
func argmax(row []float32, top []int, nan int) int {
	if nan == 0 {
		return top[0]
	}
	imax := 0
	for i, v := range row[1:] {
		if v > row[imax] {
			imax = i + 1
		}
	}
	return imax
}

// LiveKLDRow scores one token against a live reference: ref is the
// reference backend's prepared row, logits the candidate's. Unlike
// BaseKLDRow there is no base file, so nothing is quantized or truncated:
// both log-softmaxes are computed in float64 and the KL divergence
// KL(ref‖cand) = Σ p_ref·(log p_ref − log p_cand) runs over the whole
// vocabulary (terms whose p_ref underflows to 0 contribute 0). NLLs and Δp
// are float64 too; the per-token KLD and Δp are stored as float32 and summed
// in float64 like llama.cpp's. Identical rows give KLD 0 and Δp 0 exactly.
func LiveKLDRow(logits []float32, ref *RefRow, tok int32) (KLDRow, error) {
	if err := checkRow(logits, ref.Logits, tok); err != nil {
		return KLDRow{}, err
	}
	nan, _ := nonFinite(logits)
	c := newCandRow(logits)
	c.top = topK(logits, 5, c.top)
	return c.kld(ref, tok, nan, nil), nil
}

// candRow is one candidate row on its way through the comparisons with a
// reference row: its top 5 once for the logit statistics and the KLD.
type candRow struct {
	values []float32
	top    []int
	buf    [5]int // top's storage
}

func newCandRow(values []float32) *candRow {
	c := &candRow{values: values}
	c.top = c.buf[:0]
	return c
}

// kld is LiveKLDRow after the checks (nan counts the row's NaNs). With
// stats non-nil the pass that sums the candidate's exponentials also
// gathers its logit statistics (rowStats.pass: the same bits as alone).
func (c *candRow) kld(ref *RefRow, tok int32, nan int, stats *rowStats) KLDRow {
	logits := c.values
	imax := argmax(logits, c.top, nan)
	m := float64(logits[imax])
	scratch := expScratch.Get().(*[]float64)
	e := slices.Grow((*scratch)[:0], len(logits))[:len(logits)]
	expShifted(e, logits, m)
	var s float64
	if stats != nil {
		s = stats.pass(logits, ref.Logits, e)
	} else {
		for _, v := range e {
			s += v
		}
	}
	*scratch = e
	expScratch.Put(scratch)
	normQ := m + math.Log(s)
	ref.pMu.Lock()
	if !ref.pReady { // once per reference row, whatever the candidates
		ref.p = slices.Grow(ref.p[:0], len(ref.Logits))[:len(ref.Logits)]
		expShifted(ref.p, ref.Logits, ref.norm)
		ref.pReady = true
	}
	ref.pMu.Unlock()
	var sum float64
	for i, rv := range ref.Logits {
		p := ref.p[i]
		if p == 0 {
			continue
		}
		lpRef := float64(rv) - ref.norm
		sum += float64(p * (lpRef - (float64(logits[i]) - normQ)))
	}
	nll := normQ - float64(logits[tok])
	nllBase := ref.norm - float64(ref.Logits[tok])
	return KLDRow{
		kld: sum, pDiff: float32(math.Exp(-nll) - math.Exp(-nllBase)), sameTop: imax == ref.imax,
		nll: nll, nll2: float64(nll * nll), nllBase: nllBase, nllBase2: float64(nllBase * nllBase), nllNLLBase: float64(nll * nllBase),
	}
}

// Add is BaseKLDRow added to k.
func (k *KLD) Add(logits, base []float32, tok int32) error {
	r, err := BaseKLDRow(logits, base, tok)
	if err == nil {
		k.AddRow(r)
	}
	return err
}

// AddLogits is LiveKLDRow added to k.
func (k *KLD) AddLogits(logits, ref []float32, tok int32) error {
	var rr RefRow
	rr.Set(ref)
	r, err := LiveKLDRow(logits, &rr, tok)
	if err == nil {
		k.AddRow(r)
	}
	return err
}

// expScratch holds the candidates' exponentials between rows.
var expScratch = sync.Pool{New: func() any { return new([]float64) }}

// AddRow adds one scored position.
func (k *KLD) AddRow(r KLDRow) {
	k.sumNLL += r.nll
	k.sumNLL2 += r.nll2
	k.sumNLLBase += r.nllBase
	k.sumNLLBase2 += r.nllBase2
	k.sumNLLNLLBase += r.nllNLLBase
	k.sumKLD += r.kld
	k.sumKLD2 += float64(r.kld * r.kld)
	k.kld = append(k.kld, float32(r.kld))
	k.sumPDiff += float64(r.pDiff)
	pDiff2 := float64(r.pDiff * r.pDiff)
	k.sumPDiff2 += pDiff2
	k.sumPDiff4 += float64(pDiff2 * pDiff2)
	k.maxPDiff = max(k.maxPDiff, float32(math.Abs(float64(r.pDiff))))
	k.pDiff = append(k.pDiff, r.pDiff)
	if r.sameTop {
		k.sameTop++
	}
}

func checkRow(logits, base []float32, tok int32) error {
	if len(logits) == 0 {
		return fmt.Errorf("metrics: empty logit row")
	}
	if len(base) != len(logits) {
		return fmt.Errorf("metrics: logit row has %d entries, base row %d", len(logits), len(base))
	}
	if tok < 0 || int(tok) >= len(logits) {
		return fmt.Errorf("metrics: token %d outside the vocabulary of %d", tok, len(logits))
	}
	return nil
}

// N is the number of tokens scored so far.
func (k *KLD) N() int { return len(k.kld) }

// Values returns the per-token KLD and Δp values in the order they were
// added (views of the accumulator's storage: do not modify).
func (k *KLD) Values() (kld, pDiff []float32) { return k.kld, k.pDiff }

// ValueErr is a value with its ± (a standard error, as llama.cpp prints).
type ValueErr struct{ Value, Err float64 }

// Result holds every statistic of llama-perplexity --kl-divergence's final
// blocks. Percent-valued lines are stored as fractions (Cor 0.9997 prints
// as 99.97%, Δp −0.00024 as −0.024%); FormatLlamaPerplexity scales them.
type Result struct {
	N int // scored tokens

	PPLQ, PPLBase ValueErr
	Cor           float64 // Pearson correlation of per-token ln-probabilities
	LnPPLRatio    ValueErr
	PPLRatio      ValueErr
	PPLDiff       ValueErr

	KLD ValueErr // mean KL divergence
	// KLD distribution: Maximum, 99.9%, 99.0%, 95.0%, 90.0%, Median, 10.0%,
	// 5.0%, 1.0%, 0.1%, Minimum (KLDQuantileLabels).
	KLDQuantiles [11]float64

	PDiff ValueErr // mean Δp = p_Q(tok) − p_base(tok)
	// Δp distribution: Maximum, 99.9, 99.0, 95.0, 90.0, 75.0, Median, 25.0,
	// 10.0, 5.0, 1.0, 0.1, Minimum (PDiffQuantileLabels).
	PDiffQuantiles [13]float64
	MaxAbsPDiff    float64
	RMSPDiff       ValueErr
	SameTop        ValueErr
}

// Quantile fractions of the printed distributions; −1 marks the median
// (llama.cpp's median is not percentile(0.5)), 1 the maximum, 0 the minimum.
var (
	KLDQuantileLabels   = [11]string{"Maximum", "99.9%", "99.0%", "95.0%", "90.0%", "Median", "10.0%", " 5.0%", " 1.0%", " 0.1%", "Minimum"}
	kldQuantileFracs    = [11]float32{1, 0.999, 0.990, 0.950, 0.900, -1, 0.100, 0.050, 0.010, 0.001, 0}
	PDiffQuantileLabels = [13]string{"Maximum", "99.9%", "99.0%", "95.0%", "90.0%", "75.0%", "Median", "25.0%", "10.0%", " 5.0%", " 1.0%", " 0.1%", "Minimum"}
	pDiffQuantileFracs  = [13]float32{1, 0.999, 0.990, 0.950, 0.900, 0.750, -1, 0.250, 0.100, 0.050, 0.010, 0.001, 0}
)

// Result computes every final statistic (sorting copies of the stored
// per-token values). llama.cpp prints them only when N ≥ MinStatsTokens;
// with fewer tokens the uncertainties are 0 or NaN as in llama.cpp's
// formulas (e.g. 0/0 for the correlation).
func (k *KLD) Result() Result {
	n := k.N()
	lnQ, errQ := MeanAndUncertainty(k.sumNLL, k.sumNLL2, n)
	lnB, errB := MeanAndUncertainty(k.sumNLLBase, k.sumNLLBase2, n)
	cov := Covariance(k.sumNLL, k.sumNLLBase, k.sumNLLNLLBase, n)

	var r Result
	r.N = n
	pplQ, pplB := math.Exp(lnQ), math.Exp(lnB)
	r.PPLQ = ValueErr{pplQ, pplQ * errQ}
	r.PPLBase = ValueErr{pplB, pplB * errB}
	r.Cor = cov / (errQ * errB)
	r.LnPPLRatio = ValueErr{lnQ - lnB, math.Sqrt(float64(errQ*errQ) + float64(errB*errB) - float64(2*cov))}
	ratio := math.Exp(r.LnPPLRatio.Value)
	r.PPLRatio = ValueErr{ratio, ratio * r.LnPPLRatio.Err}
	pplCov := pplQ * pplB * cov
	r.PPLDiff = ValueErr{pplQ - pplB, math.Sqrt(float64(r.PPLQ.Err*r.PPLQ.Err) + float64(r.PPLBase.Err*r.PPLBase.Err) - float64(2*pplCov))}

	r.KLD.Value, r.KLD.Err = MeanAndUncertainty(k.sumKLD, k.sumKLD2, n)
	kld := slices.Clone(k.kld)
	slices.Sort(kld)
	for i, f := range kldQuantileFracs {
		r.KLDQuantiles[i] = float64(quantile(kld, f))
	}

	r.PDiff.Value, r.PDiff.Err = MeanAndUncertainty(k.sumPDiff, k.sumPDiff2, n)
	pd := slices.Clone(k.pDiff)
	slices.Sort(pd)
	for i, f := range pDiffQuantileFracs {
		r.PDiffQuantiles[i] = float64(quantile(pd, f))
	}
	r.MaxAbsPDiff = float64(k.maxPDiff)
	mse, mseErr := MeanAndUncertainty(k.sumPDiff2, k.sumPDiff4, n)
	rms := math.Sqrt(mse)
	r.RMSPDiff = ValueErr{rms, 0.5 / rms * mseErr}
	same := float64(k.sameTop) / float64(n)
	r.SameTop = ValueErr{same, math.Sqrt(same * (1 - same) / float64(n-1))}
	return r
}

// quantile is Percentile, or Median for the marker −1.
func quantile(sorted []float32, f float32) float32 {
	if f < 0 {
		return Median(sorted)
	}
	return Percentile(sorted, f)
}
