package summary

import "github.com/evalrun/evalrun/backend"

// The parts of summary.json and prompts.jsonl that the runner's packages
// compute (digest, shard, diag, refcache, metrics, speedstat): their
// layout is the schema's, so it is defined here and those packages name
// these types.

// PromptDigest is the digest of one backend's logits for one score chunk or
// generate prompt, as written in prompts.jsonl.
type PromptDigest struct {
	// LogitsSHA256 is the SHA-256 of every logits row of the chunk or
	// prompt, float32 little-endian, concatenated in row order.
	LogitsSHA256 string `json:"logits_sha256"`
	// TokensSHA256 is the SHA-256 of the token ids the backend was fed
	// (int32 little-endian): a score chunk's input, or a generate prompt
	// followed by the reference's greedy tokens.
	TokensSHA256 string `json:"tokens_sha256"`
	// LogitsFrom is the position (in the chunk or prompt) of the first
	// row; row k is at position LogitsFrom+k.
	LogitsFrom int `json:"logits_from"`
	// RowXXH64 is each row's xxHash64 (hex), in row order: what compare
	// uses to find the first position that changed.
	RowXXH64 []string `json:"row_xxh64"`
}

// Rows is the number of rows hashed.
func (p PromptDigest) Rows() int { return len(p.RowXXH64) }

// FirstDiff returns the index of the first row whose hash differs between
// p and q (including a row one of them lacks), or -1 when every row
// agrees.
func (p PromptDigest) FirstDiff(q PromptDigest) int {
	for i := range max(len(p.RowXXH64), len(q.RowXXH64)) {
		if i >= len(p.RowXXH64) || i >= len(q.RowXXH64) || p.RowXXH64[i] != q.RowXXH64[i] {
			return i
		}
	}
	return -1
}

// RunDigest is the digest of a whole run for one backend, in summary.json: a
// SHA-256 over its prompts' digests in the order they ran, so two runs
// agree on it exactly when every chunk and prompt was fed the same tokens
// and returned the same logits bits.
type RunDigest struct {
	LogitsSHA256 string `json:"logits_sha256"`
	TokensSHA256 string `json:"tokens_sha256"`
	Prompts      int    `json:"prompts"` // chunks and prompts hashed
	Rows         int    `json:"rows"`    // logits rows hashed
}

// ShardMarker marks a shard's summary.json (run.shard).
type ShardMarker struct {
	Index      int      `json:"index"` // this shard, 0-based
	Total      int      `json:"total"` // of this many
	SpecDigest string   `json:"spec_digest"`
	Units      []string `json:"units"` // the units this shard ran
}

// MergeMarker marks a merged summary.json (run.merged).
type MergeMarker struct {
	SpecDigest string   `json:"spec_digest"`
	Shards     []string `json:"shards"` // the shards' results directories, by shard index
	// Partial is set when units were missing (merge --allow-partial).
	Partial bool     `json:"partial,omitempty"`
	Missing []string `json:"missing,omitempty"`
}

// Diagnostics is one candidate's diagnostics in summary.json.
type Diagnostics struct {
	// Shadow: every offloaded matmul was also computed on the CPU path on
	// the same input; Ops compares them, worst NMSE first.
	Shadow bool              `json:"shadow"`
	Ops    []backend.OpError `json:"ops,omitempty"`
	// LayerDrift compares the residual stream after each layer with the
	// reference's (shadow mode only).
	LayerDrift *LayerDrift `json:"layer_drift,omitempty"`
	// Kernels is the kernel accounting; nil when the plugin has none.
	Kernels *KernelAccounting `json:"kernels,omitempty"`
	// Warnings are findings that do not fail the run by themselves (a
	// listed kernel that never ran fails only under require_offload).
	Warnings []string `json:"warnings,omitempty"`
}

// KernelAccounting is the kernel accounting: device calls per kernel since Load.
type KernelAccounting struct {
	List     string              `json:"list"`   // "auto" or the kernel list's path
	Listed   int                 `json:"listed"` // entries of the list (0 for auto)
	Ran      int                 `json:"ran"`    // kernels with at least one device call
	NeverRan []string            `json:"never_ran,omitempty"`
	Calls    int64               `json:"npu_calls"` // device calls in all
	Entries  []backend.KernelUse `json:"entries,omitempty"`
}

// LayerDrift is the candidate's residual stream after each layer against
// the reference's, on the same tokens.
type LayerDrift struct {
	Dataset   string       `json:"dataset"`
	Chunk     int          `json:"chunk"`     // 1-based score chunk
	Positions []int        `json:"positions"` // compared positions in the chunk
	Layers    []LayerError `json:"layers"`
	// Grows is the layer whose NMSE rose most above the previous layer's
	// (layer 0's above 0): where the error enters or is amplified most.
	Grows int `json:"grows_most_at"`
}

// LayerError compares one layer's output over the compared positions.
type LayerError struct {
	Layer  int     `json:"layer"`
	NMSE   float64 `json:"nmse"` // Σ(cand−ref)²/Σref²
	Cosine float64 `json:"cosine"`
	MaxAbs float64 `json:"max_abs"`
	// Growth is NMSE over the previous layer's (0 for layer 0, or when the
	// previous layer's was 0).
	Growth float64 `json:"growth"`
}

// CacheStats counts a run's use of the cache.
type CacheStats struct {
	Hits    int `json:"hits"`    // score chunks read from the cache
	Misses  int `json:"misses"`  // score chunks the reference computed
	Corrupt int `json:"corrupt"` // entries that failed their checksum (recomputed)
	Written int `json:"written"` // entries written
}

// Add sums another's counts into s (a merge of shards).
func (s *CacheStats) Add(o *CacheStats) {
	s.Hits, s.Misses, s.Corrupt, s.Written = s.Hits+o.Hits, s.Misses+o.Misses, s.Corrupt+o.Corrupt, s.Written+o.Written
}

// KLDHistogram is the distribution of per-token KLD over log-spaced bins.
type KLDHistogram struct {
	Zero   int64   `json:"zero"`     // tokens with KLD ≤ 0: bit-identical distributions
	Lo     float64 `json:"log10_lo"` // log10 of the first bin's lower edge
	Width  float64 `json:"log10_width"`
	Counts []int64 `json:"counts"`
}

// PositionProfile is the result: buckets of Width positions from 0.
type PositionProfile struct {
	Width   int              `json:"bucket_width"`
	Buckets []PositionBucket `json:"buckets"` // only buckets with rows
}

// PositionBucket holds the rows at positions Pos .. Pos+Width−1.
type PositionBucket struct {
	Pos      int      `json:"pos"`
	N        int64    `json:"n"`
	KLDMean  *float64 `json:"kld_mean"` // over the rows with a finite KLD; null if none
	SameTopP float64  `json:"same_top_p"`
}

// SpeedStats is the center and spread of one test's rates (tokens/s).
type SpeedStats struct {
	N      int     `json:"n"`         // repetitions
	Median float64 `json:"median_ts"` // median of the per-repetition rates
	// Lo and Hi bound the median's confidence interval (order statistics);
	// null when N is too small for one (see MinRepsCI).
	Lo         *float64 `json:"ci_lo_ts"`
	Hi         *float64 `json:"ci_hi_ts"`
	Confidence float64  `json:"ci_level"` // the interval's actual level (>= Confidence)
	// Fast is the 95th percentile of the rates (speedstat.FastQuantile): the speed the fastest 5 % of
	// the repetitions reach; FastLo and FastHi bound its confidence
	// interval (null below 76 repetitions, speedstat.MinRepsFastCI).
	Fast   float64  `json:"p95_ts"`
	FastLo *float64 `json:"p95_ci_lo_ts"`
	FastHi *float64 `json:"p95_ci_hi_ts"`
}
