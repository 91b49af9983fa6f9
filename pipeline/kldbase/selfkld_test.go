package kldbase

import (
	"math"
	"os"
	"strings"
	"testing"

	"github.com/evalrun/evalrun/pipeline/metrics"
)

// lineWith returns the line of text that starts with prefix.
func lineWith(t *testing.T, text, prefix string) string {
	t.Helper()
	for _, l := range strings.Split(text, "\n") {
		if strings.HasPrefix(l, prefix) {
			return l
		}
	}
	t.Fatalf("no line starting %q", prefix)
	return ""
}

// Scoring a base file against itself. PPL(base) depends only on the file, so
// it must print exactly as llama-perplexity printed it in every --kl-divergence
// run against that base; the candidate side (the decoded log-probs used as
// logits) must agree with the base everywhere.
func TestBaseAgainstItself(t *testing.T) {
	for _, cfg := range []string{"plain", "default"} {
		t.Run(cfg, func(t *testing.T) {
			r := openBase(t, goldenDir+"/perplexity/stories260K-F32."+cfg+".c128.kld")
			var file, live metrics.KLD
			var wantKLD []float64
			lp := make([]float32, r.NVocab())
			for c := range r.NChunk() {
				for k := range r.PerChunk() {
					if err := r.Record(c, k, lp); err != nil {
						t.Fatal(err)
					}
					if err := file.Add(lp, lp, r.Target(c, k)); err != nil {
						t.Fatal(err)
					}
					if err := live.AddLogits(lp, lp, r.Target(c, k)); err != nil {
						t.Fatal(err)
					}
					// With the log-probs b as logits, log q_i = b_i − L where
					// L = log Σ exp(b) is the record's normalisation error, so
					// each kept term p_i·(b_i − log q_i) is p_i·L.
					var sum, kept float64
					for _, b := range lp {
						sum += math.Exp(float64(b))
						if b > metrics.KLDTruncation {
							kept += math.Exp(float64(b))
						}
					}
					wantKLD = append(wantKLD, math.Log(sum)*kept)
				}
			}
			kld, _ := file.Values()
			for i, v := range kld {
				if math.Abs(float64(v)-wantKLD[i]) > 1e-6 {
					t.Fatalf("record %d: KLD %g, want log Σexp(b)·Σ_{b>−16} exp(b) = %g", i, v, wantKLD[i])
				}
			}
			res := file.Result()
			if res.N != 1512 {
				t.Fatalf("N = %d, want 1512", res.N)
			}
			out := metrics.FormatLlamaPerplexity(res)
			runs := []string{"F16." + cfg, "Q8_0." + cfg, "Q4_0." + cfg}
			if cfg == "plain" {
				runs = append(runs, "F32-default-vs-plain-base")
			}
			for _, run := range runs {
				golden, err := os.ReadFile(goldenDir + "/perplexity/kld." + run + ".stdout.txt")
				if err != nil {
					t.Fatal(err)
				}
				want := lineWith(t, string(golden), "Mean PPL(base)")
				if got := lineWith(t, out, "Mean PPL(base)"); got != want {
					t.Errorf("vs kld.%s: got  %q\n want %q", run, got, want)
				}
			}
			// The decoded records sum to 1 within ~1e-4, so Q is the base up
			// to that: KLD ≈ 0, same top everywhere.
			if res.SameTop.Value != 1 || math.Abs(res.KLD.Value) > 1e-4 || res.KLDQuantiles[0] > 1e-4 {
				t.Errorf("file base vs itself: same top %v, mean KLD %g, max KLD %g; want 1, ≈0, ≈0",
					res.SameTop.Value, res.KLD.Value, res.KLDQuantiles[0])
			}
			if math.Abs(res.LnPPLRatio.Value) > 1e-4 || res.MaxAbsPDiff > 1e-4 {
				t.Errorf("file base vs itself: ln ratio %g, max |Δp| %g", res.LnPPLRatio.Value, res.MaxAbsPDiff)
			}
			// The live path compares identical rows exactly.
			lr := live.Result()
			if lr.KLD.Value != 0 || lr.KLDQuantiles[0] != 0 || lr.MaxAbsPDiff != 0 || lr.SameTop.Value != 1 || lr.LnPPLRatio.Value != 0 {
				t.Errorf("live identical rows: KLD %g (max %g), max |Δp| %g, same top %g, ln ratio %g; want 0, 0, 0, 1, 0",
					lr.KLD.Value, lr.KLDQuantiles[0], lr.MaxAbsPDiff, lr.SameTop.Value, lr.LnPPLRatio.Value)
			}
		})
	}
}
