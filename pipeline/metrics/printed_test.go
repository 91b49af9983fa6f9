package metrics

import (
	"fmt"
	"strconv"
	"strings"
)

// Reading llama-perplexity's printed statistics back, and its per-chunk
// table: what the tests compare our formatting and figures with.

// Running holds the cumulative statistics llama-perplexity prints in its
// per-chunk table. Fractions (RMSPDiff, SameTop) are not multiplied by 100.
type Running struct {
	N          int
	PPLQ       ValueErr // exp(mean NLL of Q), ± PPL·σ
	LnPPLRatio ValueErr // mean ln(PPL(Q)/PPL(base))
	KLD        ValueErr // mean KLD
	RMSPDiff   ValueErr // sqrt(mean Δp²)
	SameTop    ValueErr // fraction of tokens with the same argmax
}

// running is the per-chunk table's cumulative figures: Result's, unsorted.
func running(k *KLD) Running {
	r := k.Result()
	return Running{N: r.N, PPLQ: r.PPLQ, LnPPLRatio: r.LnPPLRatio, KLD: r.KLD, RMSPDiff: r.RMSPDiff, SameTop: r.SameTop}
}

// ChunkTableHeader is the header line of llama-perplexity --kl-divergence's
// per-chunk table (without the newline).
const ChunkTableHeader = "chunk             PPL               ln(PPL(Q)/PPL(base))          KL Divergence              Δp RMS            Same top p"

// FormatChunkRow formats one row of the per-chunk table (1-based chunk
// number, cumulative statistics), without the newline, as llama-perplexity.
func FormatChunkRow(chunk int, r Running) string {
	return fmt.Sprintf("%4d    %9.4f ± %9.4f    %10.5f ± %10.5f    %10.5f ± %10.5f    %6.3f ± %6.3f %%    %6.3f ± %6.3f %%",
		chunk,
		cf(r.PPLQ.Value), cf(r.PPLQ.Err),
		cf(r.LnPPLRatio.Value), cf(r.LnPPLRatio.Err),
		cf(r.KLD.Value), cf(r.KLD.Err),
		cf(100*r.RMSPDiff.Value), cf(100*r.RMSPDiff.Err),
		cf(100*r.SameTop.Value), cf(100*r.SameTop.Err))
}

// Printed is what llama-perplexity --kl-divergence prints: the final
// statistics (Result with N = 0 and MaxAbsPDiff = 0, which it does not
// print) and the per-chunk table rows in order (Running with N = 0).
// Percentages are converted to fractions, as in Result.
type Printed struct {
	Result
	Chunks []Running
}

// ParseLlamaPerplexity reads llama-perplexity --kl-divergence's stdout:
// every line of the three statistics blocks must be present exactly once;
// per-chunk table rows are collected when present (the header may repeat,
// as older builds print it per chunk). Errors name the line.
func ParseLlamaPerplexity(stdout string) (Printed, error) {
	var out Printed
	r := &out.Result
	type target struct {
		dst     []*float64 // value, then ± if two
		percent bool
	}
	targets := map[string]target{
		"Mean PPL(Q)":                    {[]*float64{&r.PPLQ.Value, &r.PPLQ.Err}, false},
		"Mean PPL(base)":                 {[]*float64{&r.PPLBase.Value, &r.PPLBase.Err}, false},
		"Cor(ln(PPL(Q)), ln(PPL(base)))": {[]*float64{&r.Cor}, true},
		"Mean ln(PPL(Q)/PPL(base))":      {[]*float64{&r.LnPPLRatio.Value, &r.LnPPLRatio.Err}, false},
		"Mean PPL(Q)/PPL(base)":          {[]*float64{&r.PPLRatio.Value, &r.PPLRatio.Err}, false},
		"Mean PPL(Q)-PPL(base)":          {[]*float64{&r.PPLDiff.Value, &r.PPLDiff.Err}, false},
		"Mean KLD":                       {[]*float64{&r.KLD.Value, &r.KLD.Err}, false},
		"Mean Δp":                        {[]*float64{&r.PDiff.Value, &r.PDiff.Err}, true},
		"RMS Δp":                         {[]*float64{&r.RMSPDiff.Value, &r.RMSPDiff.Err}, true},
		"Same top p":                     {[]*float64{&r.SameTop.Value, &r.SameTop.Err}, true},
	}
	for i, label := range KLDQuantileLabels {
		targets[normalizeKey(label+" KLD")] = target{[]*float64{&r.KLDQuantiles[i]}, false}
	}
	for i, label := range PDiffQuantileLabels {
		targets[normalizeKey(label+" Δp")] = target{[]*float64{&r.PDiffQuantiles[i]}, true}
	}

	seen := map[string]int{}
	inTable := false
	for n, line := range strings.Split(stdout, "\n") {
		lineNo := n + 1
		if strings.TrimSpace(line) == ChunkTableHeader {
			inTable = true
			continue
		}
		if inTable {
			if row, ok, err := parseChunkRow(line); err != nil {
				return out, fmt.Errorf("metrics: llama-perplexity output line %d: %v", lineNo, err)
			} else if ok {
				out.Chunks = append(out.Chunks, row)
				continue
			}
			inTable = false
		}
		key, rest, ok := strings.Cut(line, ":")
		if !ok {
			continue
		}
		key = normalizeKey(key)
		t, ok := targets[key]
		if !ok {
			continue
		}
		if prev, dup := seen[key]; dup {
			return out, fmt.Errorf("metrics: llama-perplexity output line %d: %q repeats line %d", lineNo, key, prev)
		}
		seen[key] = lineNo
		vals, err := parseNumbers(rest)
		if err != nil {
			return out, fmt.Errorf("metrics: llama-perplexity output line %d (%s): %v", lineNo, key, err)
		}
		if len(vals) != len(t.dst) {
			return out, fmt.Errorf("metrics: llama-perplexity output line %d (%s): %d numbers, want %d", lineNo, key, len(vals), len(t.dst))
		}
		for i, v := range vals {
			if t.percent {
				v /= 100
			}
			*t.dst[i] = v
		}
	}
	for key := range targets {
		if _, ok := seen[key]; !ok {
			return out, fmt.Errorf("metrics: llama-perplexity output has no %q line", key)
		}
	}
	return out, nil
}

// normalizeKey collapses the padding in a label ("Mean    KLD", " 5.0%   Δp").
func normalizeKey(s string) string { return strings.Join(strings.Fields(s), " ") }

// parseNumbers reads "v", "v%" or "v ± e [%]".
func parseNumbers(s string) ([]float64, error) {
	s = strings.ReplaceAll(s, "%", " ")
	var vals []float64
	for _, part := range strings.Split(s, "±") {
		v, err := parseCFloat(strings.TrimSpace(part))
		if err != nil {
			return nil, err
		}
		vals = append(vals, v)
	}
	return vals, nil
}

// parseCFloat parses a number printed by C's printf, including "-nan".
func parseCFloat(s string) (float64, error) {
	if s == "-nan" {
		s = "nan"
	}
	v, err := strconv.ParseFloat(s, 64)
	if err != nil {
		return 0, fmt.Errorf("bad number %q", s)
	}
	return v, nil
}

// parseChunkRow reads one per-chunk table row; ok is false for a line that
// is not a row (the table has ended).
func parseChunkRow(line string) (r Running, ok bool, err error) {
	f := strings.Fields(strings.NewReplacer("±", " ", "%", " ").Replace(line))
	if len(f) == 0 {
		return r, false, nil
	}
	if _, err := strconv.Atoi(f[0]); err != nil {
		return r, false, nil
	}
	if len(f) != 11 {
		return r, false, fmt.Errorf("chunk row has %d fields, want 11", len(f))
	}
	var v [10]float64
	for i := range v {
		if v[i], err = parseCFloat(f[i+1]); err != nil {
			return r, false, err
		}
	}
	r.PPLQ = ValueErr{v[0], v[1]}
	r.LnPPLRatio = ValueErr{v[2], v[3]}
	r.KLD = ValueErr{v[4], v[5]}
	r.RMSPDiff = ValueErr{v[6] / 100, v[7] / 100}
	r.SameTop = ValueErr{v[8] / 100, v[9] / 100}
	return r, true, nil
}
