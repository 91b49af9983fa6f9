// Package metrics holds the statistics evalrun reports, each computed exactly
// as the llama.cpp tool that defines it, so that our numbers can be diffed
// with llama.cpp's printed ones:
//
//   - KLD: llama-perplexity --kl-divergence (per-token KL divergence, Δp,
//     top-1 agreement, PPL(Q) vs PPL(base) with their uncertainties), with
//     FormatLlamaPerplexity for its printed blocks (the tests parse
//     llama.cpp's own and compare);
//   - LogitStats: logit error statistics, led by test-backend-ops' NMSE;
//   - BenchStats: llama-bench's avg/stddev of time and tokens per second.
//
// Floating-point expressions that llama.cpp evaluates in float are evaluated
// in float32 here, one rounding per C operation (an explicit float32(...)
// conversion also keeps Go from fusing a*b+c into an FMA); sums that are
// double in llama.cpp are float64. expf is computed as float32(math.Exp),
// which is correctly rounded; glibc's expf is within 0.502 ULP, so a rare
// last-bit difference in one term is possible.
package metrics
