package metrics

import (
	"fmt"
	"math"
	"strings"
)

// FormatLlamaPerplexity prints the three statistics blocks of
// llama-perplexity --kl-divergence ("====== Perplexity statistics ======",
// "====== KL divergence statistics ======", "====== Token probability
// statistics ======") with llama.cpp's exact formats, each block followed by
// an empty line except the last, so the text can be diffed with llama.cpp's
// stdout. llama.cpp prints these only when N ≥ MinStatsTokens; this function
// prints whatever it is given.
func FormatLlamaPerplexity(r Result) string {
	var b strings.Builder
	p := func(format string, args ...any) { fmt.Fprintf(&b, format, args...) }

	p("====== Perplexity statistics ======\n")
	p("Mean PPL(Q)                   : %10.6f ± %10.6f\n", cf(r.PPLQ.Value), cf(r.PPLQ.Err))
	p("Mean PPL(base)                : %10.6f ± %10.6f\n", cf(r.PPLBase.Value), cf(r.PPLBase.Err))
	p("Cor(ln(PPL(Q)), ln(PPL(base))): %6.2f%%\n", cf(100*r.Cor))
	p("Mean ln(PPL(Q)/PPL(base))     : %10.6f ± %10.6f\n", cf(r.LnPPLRatio.Value), cf(r.LnPPLRatio.Err))
	p("Mean PPL(Q)/PPL(base)         : %10.6f ± %10.6f\n", cf(r.PPLRatio.Value), cf(r.PPLRatio.Err))
	p("Mean PPL(Q)-PPL(base)         : %10.6f ± %10.6f\n", cf(r.PPLDiff.Value), cf(r.PPLDiff.Err))
	p("\n")

	p("====== KL divergence statistics ======\n")
	p("Mean    KLD: %10.6f ± %10.6f\n", cf(r.KLD.Value), cf(r.KLD.Err))
	for i, label := range KLDQuantileLabels {
		p("%s KLD: %10.6f\n", padLabel(label), cf(r.KLDQuantiles[i]))
	}
	p("\n")

	p("====== Token probability statistics ======\n")
	p("Mean    Δp: %6.3f ± %5.3f %%\n", cf(100*r.PDiff.Value), cf(100*r.PDiff.Err))
	for i, label := range PDiffQuantileLabels {
		p("%s Δp: %6.3f%%\n", padLabel(label), cf(100*r.PDiffQuantiles[i]))
	}
	p("RMS Δp    : %6.3f ± %5.3f %%\n", cf(100*r.RMSPDiff.Value), cf(100*r.RMSPDiff.Err))
	p("Same top p: %6.3f ± %5.3f %%\n", cf(100*r.SameTop.Value), cf(100*r.SameTop.Err))
	return b.String()
}

// cf makes a float print like C's printf: "nan", "-nan", "inf", "-inf"
// instead of Go's "NaN" and "+Inf" (finite values print identically).
type cf float64

func (v cf) Format(s fmt.State, verb rune) {
	f := float64(v)
	if !math.IsNaN(f) && !math.IsInf(f, 0) {
		fmt.Fprintf(s, fmt.FormatString(s, verb), f)
		return
	}
	text := "inf"
	if math.IsNaN(f) {
		text = "nan"
	}
	if math.Signbit(f) {
		text = "-" + text
	}
	w, _ := s.Width()
	fmt.Fprintf(s, "%*s", w, text)
}

// padLabel widens a quantile label to llama.cpp's 7 columns ("99.9%  ",
// "Median ", "Maximum").
func padLabel(label string) string {
	return fmt.Sprintf("%-7s", label)
}
