// Package summary is the schema of a run's result files: summary.json
// (Summary), each line of prompts.jsonl (PromptResult) and of the results
// root's index.jsonl (IndexEntry), and how they are read and written. The
// runner fills them; reports, comparisons and merges read them.
package summary

import (
	"bufio"
	"fmt"
	"os"
	"runtime"
	"strings"
	"time"

	"github.com/evalrun/evalrun/backend"
)

// SchemaVersion names the layout of summary.json. Fields are only ever added
// under the same version; a rename or removal bumps it.
const SchemaVersion = "evalrun/summary/v1"

// Status of a backend at the end of a run.
const (
	StatusOK      = "ok"      // every pass ran
	StatusFailed  = "failed"  // could not start, load or evaluate (an error, not a crash)
	StatusCrashed = "crashed" // the plugin process died
	StatusTimeout = "timeout" // a call exceeded its timeout; the plugin was killed
	StatusSkipped = "skipped" // not run (e.g. the reference could not run)
)

// Verdict statuses; their exit codes are exitcode.Pass, ExitGateFailed
// and ExitBackend.
const (
	VerdictPass = "pass" // exit 0
	// VerdictNoGates: every backend ran and nothing failed, but no gate was
	// configured, so nothing was checked (exit 0, and not "pass").
	VerdictNoGates = "no gates configured"
	VerdictFail    = "fail"  // exit 1: a gate failed
	VerdictError   = "error" // exit 3: a backend could not run, or the run was interrupted
)

// Summary is summary.json.
type Summary struct {
	Schema    string           `json:"schema"`
	Run       RunInfo          `json:"run"`
	Model     ModelSummary     `json:"model"`
	Datasets  []DatasetSummary `json:"datasets"`
	Reference BackendSummary   `json:"reference"`
	Backends  []BackendSummary `json:"backends"`
	Host      *HostTiming      `json:"host,omitempty"`
	Verdict   Verdict          `json:"verdict"`
}

// PromptResult is one line of prompts.jsonl: one backend on one prompt (a
// generate record) or one score chunk. The reference has lines too
// (Reference true), with its digest and no comparison.
type PromptResult struct {
	Backend         string   `json:"backend"`
	Reference       bool     `json:"reference,omitempty"`
	Dataset         string   `json:"dataset"`
	ID              string   `json:"id"`
	Mode            string   `json:"mode"`
	Tokens          int      `json:"tokens"`
	KLDMean         *float64 `json:"kld_mean"`
	KLDMax          *float64 `json:"kld_max"`
	SameTopP        *float64 `json:"same_top_p"`
	PPL             *float64 `json:"ppl"`
	PPLBase         *float64 `json:"ppl_base"`
	NMSE            *float64 `json:"nmse,omitempty"`
	CosineMin       *float64 `json:"cosine_min,omitempty"`
	MaxAbsDiff      *float64 `json:"max_abs_diff,omitempty"`
	NaNCount        int64    `json:"nan_count"`
	InfCount        int64    `json:"inf_count"`
	GreedyMatch     *bool    `json:"greedy_match,omitempty"`
	FirstDivergence *int     `json:"first_divergence,omitempty"`
	ReferenceTokens []int32  `json:"reference_tokens,omitempty"`
	GeneratedTokens []int32  `json:"generated_tokens,omitempty"`
	// The exact digests of the logits rows the backend returned and of the
	// tokens it was fed (package digest).
	*PromptDigest
}

// HostTiming splits the wall time of the accuracy passes (score and
// generate) into the plugins' compute on the critical path and the rest:
// the host decoding rows and comparing them, IPC, and waiting. Backends run
// in lockstep rounds (a score chunk on every backend at once; a generate
// step on the reference, then on the candidates at once; a free-running
// step), so a round costs its slowest backend's compute plus overhead.
type HostTiming struct {
	PassesS  float64 `json:"passes_s"`  // wall time of the score and generate passes
	ComputeS float64 `json:"compute_s"` // Σ over rounds of the slowest call's compute inside its plugin
	DecodeS  float64 `json:"decode_s"`  // the host decoding logits rows (all backends)
	MetricsS float64 `json:"metrics_s"` // the host comparing rows with the reference
	// HostIPCS is PassesS − ComputeS: host work, IPC and waiting;
	// HostIPCShare is its fraction of PassesS. Null when a plugin does not
	// report its compute time.
	HostIPCS     *float64 `json:"host_ipc_s"`
	HostIPCShare *float64 `json:"host_ipc_share"`
	// HostCPUS is the host process's CPU time (user and system, every
	// thread) during the passes: all of its work, on the critical path or
	// not. Where the plugins' threads outnumber the cores, work the host
	// does while they compute slows their compute and is counted in
	// ComputeS, so HostIPCS is then a lower bound of the host's cost; this
	// is the other bound. Null where it is not measured (not Unix).
	HostCPUS *float64 `json:"host_cpu_s,omitempty"`
}

// RunInfo is the provenance of a run.
type RunInfo struct {
	ID             string    `json:"id"`
	Name           string    `json:"name"`
	Spec           string    `json:"spec"`
	Started        time.Time `json:"started"`
	Finished       time.Time `json:"finished"`
	DurationS      float64   `json:"duration_s"`
	EvalrunVersion string    `json:"evalrun_version"`
	GitCommit      string    `json:"git_commit"`
	Host           HostInfo  `json:"host"`
	// EffectiveSpec is the spec as the run used it: environment overrides
	// applied, defaults filled in, paths absolute.
	EffectiveSpec map[string]any `json:"effective_spec,omitempty"`
	// Shard marks one shard of a run (evalrun run --shard), Merged a merge
	// of shards (evalrun merge).
	Shard  *ShardMarker `json:"shard,omitempty"`
	Merged *MergeMarker `json:"merged,omitempty"`
	// Limit is N of evalrun run --limit N when it left records of a dataset
	// out: every figure is the first N records' of each dataset, not a full
	// result.
	Limit int `json:"limit,omitempty"`
}

// HostInfo describes the machine the host ran on.
type HostInfo struct {
	OS       string `json:"os"`
	Arch     string `json:"arch"`
	CPUs     int    `json:"cpus"`
	CPUModel string `json:"cpu_model,omitempty"`
	Hostname string `json:"hostname,omitempty"`
	GoVer    string `json:"go_version"`
}

// ModelSummary describes the reference model file.
type ModelSummary struct {
	Path      string `json:"path"`
	SHA256    string `json:"sha256"`
	Arch      string `json:"arch"`
	NParams   int64  `json:"n_params"`
	NVocab    int    `json:"n_vocab"`
	SizeBytes int64  `json:"size_bytes"`
}

// DatasetSummary describes one prompt set as the host tokenized it.
type DatasetSummary struct {
	Name    string `json:"name"`
	Path    string `json:"path"`
	SHA256  string `json:"sha256,omitempty"`
	Mode    string `json:"mode"`
	Records int    `json:"records"`
	Tokens  int    `json:"tokens"`
	Chunks  int    `json:"chunks,omitempty"` // score mode: chunks of n_ctx
	NCtx    int    `json:"n_ctx,omitempty"`
	Scored  int    `json:"scored_tokens,omitempty"`
}

// BackendSummary is one backend's results.
type BackendSummary struct {
	Name     string         `json:"name"`
	Plugin   string         `json:"plugin"`
	Kind     string         `json:"kind"` // "plugin" or "kld_base"
	Model    string         `json:"model,omitempty"`
	Threads  int            `json:"threads,omitempty"`
	Options  map[string]any `json:"options,omitempty"`
	Status   string         `json:"status"`
	Error    string         `json:"error,omitempty"`
	Warnings []string       `json:"warnings,omitempty"` // the plugin's, from validating its options
	Info     *PluginInfo    `json:"info,omitempty"`
	// PluginSHA256 is the sha256 of the plugin binary the host started
	// ("" for an in-process backend or a kld_base reference).
	PluginSHA256 string       `json:"plugin_sha256,omitempty"`
	Load         *LoadSummary `json:"load,omitempty"`
	Accuracy     *Accuracy    `json:"accuracy,omitempty"`
	Throughput   *Throughput  `json:"throughput,omitempty"`
	Eval         *EvalTiming  `json:"eval,omitempty"`
	// PeakRSSBytes is the plugin process's peak resident set size over the
	// whole run (Linux VmHWM, read before Close); null elsewhere.
	PeakRSSBytes *int64 `json:"peak_rss_bytes,omitempty"`
	// Digest fingerprints every logits row the backend returned and every
	// token it was fed, over the chunks and prompts it completed.
	Digest *RunDigest `json:"digest,omitempty"`
	// Diagnostics are the device's: kernel accounting and, in shadow mode,
	// per-op and per-layer errors (null: the plugin reports none).
	Diagnostics *Diagnostics `json:"diagnostics,omitempty"`
	Gates       []GateResult `json:"gates,omitempty"`
	Pass        bool         `json:"pass"`
	// Cache is the reference's use of the reference-logits cache (spec
	// cache:): score chunks read (hits) and computed (misses).
	Cache *CacheStats `json:"cache,omitempty"`
}

// EvalTiming is where one backend's Eval calls spent their time.
type EvalTiming struct {
	Calls    int     `json:"calls"`
	Rows     int     `json:"rows"`
	CallS    float64 `json:"call_s"`    // from each request to its last row, as the host saw it
	ComputeS float64 `json:"compute_s"` // computing inside the plugin (EvalChunk.compute_ns; 0 if not reported)
	DecodeS  float64 `json:"decode_s"`  // the host decoding the rows
	// SharedRows counts the rows that came through shared memory (the rest
	// came in gRPC messages: EVALRUN_PLUGIN_SHM=off, a plugin that does not
	// map the region, another OS).
	SharedRows int64 `json:"shared_rows"`
}

// PluginInfo is what Describe returned after Load (some plugins only know
// their version and device once a library is loaded).
type PluginInfo = backend.Info

// LoadSummary is what Load reported plus host-side timing.
type LoadSummary struct {
	LoadS   float64 `json:"load_s"`
	WarmupS float64 `json:"warmup_s"`
	HostS   float64 `json:"host_s"` // wall time of the Load call seen by the host
	// MemoryBytes is what the plugin reported: its resident set size right
	// after Load (mapped weights included), the plugin's own measurement.
	MemoryBytes int64 `json:"memory_bytes,omitempty"`
	// PeakRSSBytes is the plugin's peak resident set size up to the end of
	// Load, read by the host (Linux VmHWM); null elsewhere.
	PeakRSSBytes *int64      `json:"peak_rss_bytes,omitempty"`
	Kernels      string      `json:"kernels,omitempty"` // the CPU kernels the plugin's matmuls run
	PlanSummary  string      `json:"plan_summary,omitempty"`
	Plan         []PlanEntry `json:"plan,omitempty"`
}

// PlanEntry says where one named matmul runs.
type PlanEntry = backend.PlanEntry

// Accuracy holds the comparison of a backend's logits with the reference.
// Statistics over scored positions follow llama-perplexity's KL-divergence
// definitions; logit error statistics follow test-backend-ops. Pointers are
// null when the statistic is undefined (e.g. no tokens, or no live reference
// logits when the reference is a kld_base file).
type Accuracy struct {
	Tokens              int      `json:"tokens"`        // positions compared (score + teacher-forced generation)
	ScoredTokens        int      `json:"scored_tokens"` // positions with a next token (KLD, PPL, Δp)
	KLDMean             *float64 `json:"kld_mean"`      // mean KL(ref‖backend)
	KLDMeanErr          *float64 `json:"kld_mean_err"`  // its ± (standard error)
	KLDMax              *float64 `json:"kld_max"`
	KLDP99              *float64 `json:"kld_p99"`
	KLDP999             *float64 `json:"kld_p999"`
	KLDMedian           *float64 `json:"kld_median"`
	SameTopP            *float64 `json:"same_top_p"`     // fraction (0..1) where argmaxes agree
	SameTopPErr         *float64 `json:"same_top_p_err"` // its ±
	RMSDp               *float64 `json:"rms_dp"`         // RMS of Δp, fraction
	RMSDpErr            *float64 `json:"rms_dp_err"`
	PPL                 *float64 `json:"ppl"`      // perplexity of the backend
	PPLErr              *float64 `json:"ppl_err"`  // ±
	PPLBase             *float64 `json:"ppl_base"` // perplexity of the reference
	PPLBaseErr          *float64 `json:"ppl_base_err"`
	PPLRatio            *float64 `json:"ppl_ratio"`
	PPLRatioErr         *float64 `json:"ppl_ratio_err"`
	LnPPLRatio          *float64 `json:"ln_ppl_ratio"`
	LnPPLRatioErr       *float64 `json:"ln_ppl_ratio_err"`
	DeltaPPL            *float64 `json:"delta_ppl"`
	DeltaPPLErr         *float64 `json:"delta_ppl_err"`
	NMSE                *float64 `json:"nmse"`
	CosineMin           *float64 `json:"cosine_min"`
	CosineMean          *float64 `json:"cosine_mean"`
	MaxAbsDiff          *float64 `json:"max_abs_diff"`
	Top5Overlap         *float64 `json:"top5_overlap"`
	NaNCount            int64    `json:"nan_count"`
	InfCount            int64    `json:"inf_count"`
	GreedyMatch         *float64 `json:"greedy_match"`          // fraction of generate prompts whose free-running greedy output equals the reference's
	FirstDivergenceMean *float64 `json:"first_divergence_mean"` // mean index of the first differing generated token (max_new_tokens when none)
	GeneratePrompts     int      `json:"generate_prompts"`
	Complete            bool     `json:"complete"` // every planned position was compared
	LlamaPerplexity     string   `json:"llama_perplexity,omitempty"`
	// Profile is what report.html draws (null for a prompt's line).
	Profile *AccuracyProfile `json:"profile,omitempty"`
}

// AccuracyProfile is the shape behind the accuracy figures: the
// distribution of per-token KLD and KLD and top-1 agreement by position.
type AccuracyProfile struct {
	KLDHistogram *KLDHistogram    `json:"kld_histogram"`
	ByPosition   *PositionProfile `json:"by_position"`
}

// Throughput holds llama-bench style results measured inside the plugin.
type Throughput struct {
	PP *BenchTest `json:"pp,omitempty"`
	TG *BenchTest `json:"tg,omitempty"`
	// Simulated: the plugin's device is simulated (Describe's capability
	// "simulated"), so these are the simulator's speeds on the host CPU.
	Simulated bool `json:"simulated,omitempty"`
}

// Name is the test's llama-bench name, ppN or tgN; "" for none.
func (b *BenchTest) Name() string {
	if b == nil {
		return ""
	}
	if b.NGen > 0 {
		return fmt.Sprintf("tg%d", b.NGen)
	}
	return fmt.Sprintf("pp%d", b.NPrompt)
}

// BenchTest is one llama-bench test (ppN or tgN).
type BenchTest struct {
	NPrompt   int     `json:"n_prompt"`
	NGen      int     `json:"n_gen"`
	AvgNS     uint64  `json:"avg_ns"`
	StddevNS  uint64  `json:"stddev_ns"`
	AvgTS     float64 `json:"avg_ts"`
	StddevTS  float64 `json:"stddev_ts"`
	SamplesNS []int64 `json:"samples_ns"`
	HostS     float64 `json:"host_s"` // wall time of the Bench call seen by the host (includes IPC and warm-up)
	// Stats are the median and the p95 rate of the repetitions, each with
	// its 95 % confidence interval; reports, compare and the speed gates
	// judge the p95 (see speedstat).
	Stats *SpeedStats `json:"stats,omitempty"`
}

// GateResult is one checked gate.
type GateResult struct {
	Name  string   `json:"name"`
	Limit float64  `json:"limit"`
	Value *float64 `json:"value"`
	Pass  bool     `json:"pass"`
	Note  string   `json:"note,omitempty"`
	// Skipped: the gate was not applied (a speed gate on a simulated
	// device); Pass is true and Note says why.
	Skipped bool `json:"skipped,omitempty"`
}

// Verdict is the run's outcome.
type Verdict struct {
	Status   string   `json:"status"`
	ExitCode int      `json:"exit_code"`
	Reasons  []string `json:"reasons,omitempty"`
}

// Describe says what a gate checked and found, for reports.
func (g GateResult) Describe() string {
	if g.Value == nil {
		return fmt.Sprintf("%s (limit %g): %s", g.Name, g.Limit, g.Note)
	}
	if g.Note != "" {
		return fmt.Sprintf("%s: %s", g.Name, g.Note)
	}
	return fmt.Sprintf("%s: %.6g against limit %g", g.Name, *g.Value, g.Limit)
}

// Add sums another's eval calls into e (a merge of shards).
func (e *EvalTiming) Add(o *EvalTiming) {
	e.Calls += o.Calls
	e.Rows += o.Rows
	e.CallS += o.CallS
	e.ComputeS += o.ComputeS
	e.DecodeS += o.DecodeS
	e.SharedRows += o.SharedRows
}

// Add sums another's timings into t (a merge of shards).
func (t *HostTiming) Add(o *HostTiming) {
	switch {
	case *t == HostTiming{} && o.HostCPUS != nil:
		v := *o.HostCPUS
		t.HostCPUS = &v
	case t.HostCPUS != nil && o.HostCPUS != nil:
		*t.HostCPUS += *o.HostCPUS
	default: // a part without it: not known for the whole
		t.HostCPUS = nil
	}
	t.PassesS += o.PassesS
	t.ComputeS += o.ComputeS
	t.DecodeS += o.DecodeS
	t.MetricsS += o.MetricsS
	t.SetHostIPC()
}

// SetHostIPC derives HostIPCS and HostIPCShare (null without compute times).
func (t *HostTiming) SetHostIPC() {
	t.HostIPCS, t.HostIPCShare = nil, nil
	if t.ComputeS > 0 && t.PassesS > 0 {
		hostIPC := t.PassesS - t.ComputeS
		share := hostIPC / t.PassesS
		t.HostIPCS, t.HostIPCShare = &hostIPC, &share
	}
}

// ThisHost describes the machine a run (or a merge) ran on.
func ThisHost() HostInfo {
	name, _ := os.Hostname()
	return HostInfo{OS: runtime.GOOS, Arch: runtime.GOARCH, CPUs: runtime.NumCPU(), CPUModel: CPUModel(), Hostname: name, GoVer: runtime.Version()}
}

// CPUModel names the host's CPU (Linux: /proc/cpuinfo's model name; the
// architecture elsewhere), for telling runs on different machines apart.
func CPUModel() string {
	f, err := os.Open("/proc/cpuinfo")
	if err != nil {
		return runtime.GOARCH
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if k, v, ok := strings.Cut(sc.Text(), ":"); ok && strings.TrimSpace(k) == "model name" {
			return strings.TrimSpace(v)
		}
	}
	return runtime.GOARCH
}

// IndexEntry is one line of index.jsonl, the history of the runs whose
// directories are beside it (the results root).
type IndexEntry struct {
	ID          string    `json:"id"`
	Name        string    `json:"name"`
	Dir         string    `json:"dir"`
	Spec        string    `json:"spec"`
	Started     string    `json:"started"`
	DurationS   float64   `json:"duration_s"`
	GitCommit   string    `json:"git_commit"`
	ModelSHA256 string    `json:"model_sha256"`
	Verdict     string    `json:"verdict"`
	ExitCode    int       `json:"exit_code"`
	Limit       int       `json:"limit,omitempty"` // RunInfo.Limit: not a full result
	Backends    []IndexBE `json:"backends"`
}

// IndexBE is a backend's outcome in an IndexEntry.
type IndexBE struct {
	Name   string `json:"name"`
	Status string `json:"status"`
	Pass   bool   `json:"pass"`
}
