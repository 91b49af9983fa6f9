// Package backend is the contract between the evalrun host and its backend
// plugins: a Go interface, the types it carries, and (in this package's other
// files) the gRPC service behind hashicorp/go-plugin that implements it across
// processes. Third parties write plugins against this package, or against
// proto/backend.proto from any language.
package backend

import (
	"context"
	"fmt"
	"slices"
)

// ProtocolVersion is the plugin protocol version negotiated in the go-plugin
// handshake. Bump it on any incompatible change of the service.
const ProtocolVersion = 1

// Backend is what every plugin implements and what the host calls.
type Backend interface {
	// Describe reports the plugin's identity; it needs no model.
	Describe(ctx context.Context) (Info, error)
	// Load opens the model and prepares the device (warm-up included).
	// Unknown or invalid options are errors.
	Load(ctx context.Context, req LoadRequest) (LoadResult, error)
	// Eval feeds tokens into a session and streams the requested logits
	// rows to emit, one position at a time, in order.
	Eval(ctx context.Context, req EvalRequest, emit func(Logits) error) error
	// Bench runs a llama-bench style pp/tg loop timed inside the plugin.
	Bench(ctx context.Context, req BenchRequest) (BenchResult, error)
	// Close releases the model and device.
	Close(ctx context.Context) error
}

// Info identifies a plugin.
type Info struct {
	Name         string   `json:"name"`
	Version      string   `json:"version"`
	Device       string   `json:"device"`
	Capabilities []string `json:"capabilities,omitempty"`
}

// CapabilitySimulated in Describe's capabilities (after Load) says the
// device is simulated: the plugin's timings are the simulator's on the
// host CPU, not the device's, and speed gates do not apply by default.
const CapabilitySimulated = "simulated"

// Simulated reports whether the plugin declared its device simulated.
func (i Info) Simulated() bool { return slices.Contains(i.Capabilities, CapabilitySimulated) }

// LoadRequest opens a model. Options are the plugin's own settings from the
// spec (a JSON object); the plugin validates them.
type LoadRequest struct {
	ModelPath string         `json:"model_path"`
	Threads   int            `json:"threads"`
	NCtx      int            `json:"n_ctx"`
	Options   map[string]any `json:"options,omitempty"`
	// VocabDigest is VocabDigest of the vocabulary the host tokenizes with.
	// The plugin refuses (ErrInvalidArgument) a model whose vocabulary has
	// another digest, so every backend sees the same ids mean the same
	// text. "" skips the check.
	VocabDigest string `json:"vocab_digest,omitempty"`
	// BaseDir is where relative paths in Options start (the spec's
	// directory); "" = the plugin's working directory.
	BaseDir string `json:"base_dir,omitempty"`
}

// Validator is implemented by a Backend that can check a LoadRequest
// without loading anything: its options (and files they name) and what it
// can tell cheaply. The host calls it before any plugin computes. Bad input
// is ErrInvalidArgument naming the option ("option \"type\": ..."); warnings
// are for what will run but likely not as meant. Over gRPC a plugin that
// does not implement it returns ErrUnsupported.
type Validator interface {
	Validate(ctx context.Context, req LoadRequest) (warnings []string, err error)
}

// ModelInfo are facts about the loaded model.
type ModelInfo struct {
	Arch      string `json:"arch"`
	NVocab    int    `json:"n_vocab"`
	NParams   int64  `json:"n_params"`
	NCtxTrain int    `json:"n_ctx_train"`
	NLayer    int    `json:"n_layer"`
	NEmbd     int    `json:"n_embd"`
	FileType  string `json:"file_type,omitempty"`
	// SizeBytes is the tensors' data bytes, as llama.cpp's llama_model_size
	// counts them (not the file's size, which adds the header and padding).
	SizeBytes int64 `json:"size_bytes"`
}

// PlanEntry says where one named matmul runs.
type PlanEntry struct {
	Op     string `json:"op"`     // llama.cpp graph name, e.g. "ffn_up-0"
	Device string `json:"device"` // "npu" or "cpu"
	Shape  string `json:"shape"`  // "T×K×N"
	Reason string `json:"reason,omitempty"`
}

// LoadResult reports what Load did.
type LoadResult struct {
	Model       ModelInfo   `json:"model"`
	Plan        []PlanEntry `json:"plan,omitempty"`
	PlanSummary string      `json:"plan_summary,omitempty"` // e.g. "35 of 36 matmuls on the NPU (fp16)"
	LoadNS      int64       `json:"load_ns"`
	WarmupNS    int64       `json:"warmup_ns"`
	// MemoryBytes is the plugin's resident set size right after Load (mapped
	// weights included), as the plugin measured it.
	MemoryBytes int64 `json:"memory_bytes"`
	// Kernels names the CPU kernel implementation the plugin's matmuls run
	// ("avx512", "avx2", "neon", "generic", a llama.cpp CPU variant); "" = not said.
	Kernels string `json:"kernels,omitempty"`
}

// EvalRequest feeds Tokens into Session at position Pos.
type EvalRequest struct {
	Session string  `json:"session"` // sessions are independent KV caches
	Pos     int     `json:"pos"`     // -1: continue after the last token; otherwise truncate the cache to Pos first (0 = reset)
	Tokens  []int32 `json:"tokens"`
	// Rows whose logits are wanted, by index into Tokens: From..len(Tokens)-1.
	// From = len(Tokens) asks for none; From = 0 for all.
	LogitsFrom int `json:"logits_from"`
	// HiddenRows (indices into Tokens, each >= LogitsFrom) also get their
	// hidden states: Logits.Hidden. A plugin that cannot send none.
	HiddenRows []int `json:"hidden_rows,omitempty"`
}

// Logits is one streamed row.
type Logits struct {
	Index int `json:"index"` // index into EvalRequest.Tokens
	Pos   int `json:"pos"`   // absolute position in the session
	// Values is the full vocabulary row. Inside a plugin it may alias the
	// engine's buffer and is valid only during emit; rows a host receives
	// through Client.Eval are freshly allocated (Client.EvalInto decodes
	// into buffers of the caller's).
	Values []float32 `json:"-"`
	// ComputeNS is how long the plugin has computed in this call up to this
	// row, sending excluded (0 = not measured). Set by the gRPC server.
	ComputeNS int64 `json:"-"`
	// Hidden is, for a row of EvalRequest.HiddenRows, the residual stream
	// after each layer: n_layer rows of n_embd values (nil otherwise). Like
	// Values it may alias the plugin's buffer during emit.
	Hidden []float32 `json:"-"`
}

// Diagnoser is a Backend that reports what it measured about its device
// (the optional Diagnostics call). Client implements it for every plugin
// and returns nil when the plugin does not.
type Diagnoser interface {
	Diagnostics(ctx context.Context) (*Diagnostics, error)
}

// Diagnostics is what a plugin measured about its device since Load.
type Diagnostics struct {
	// Shadow says every offloaded op was also computed on the CPU path on
	// the same inputs; Ops then compares them, one entry per op.
	Shadow bool      `json:"shadow"`
	Ops    []OpError `json:"ops,omitempty"`
	// KernelList is "auto" or the path of the kernel list ("" = the plugin
	// has none); Kernels counts the device calls per kernel, every listed
	// one included (0 calls: it never ran).
	KernelList string      `json:"kernel_list,omitempty"`
	Kernels    []KernelUse `json:"kernels,omitempty"`
}

// OpError is one offloaded op's device output against the CPU path's.
type OpError struct {
	Op        string  `json:"op"` // llama.cpp graph name, e.g. "ffn_up-3"
	Calls     int64   `json:"calls"`
	Elements  int64   `json:"elements"`
	NMSE      float64 `json:"nmse"`    // Σ(device−cpu)²/Σcpu²
	Cosine    float64 `json:"cosine"`  // of the two outputs as vectors
	MaxAbs    float64 `json:"max_abs"` // largest |device−cpu|
	NonFinite int64   `json:"non_finite,omitempty"`
}

// KernelUse is one kernel (name and shape) and its device calls.
type KernelUse struct {
	Name   string `json:"name"`
	Shape  string `json:"shape"` // "T×K×N"
	Listed bool   `json:"listed"`
	Calls  int64  `json:"calls"`
}

// BenchRequest mirrors llama-bench: one test of NPrompt prompt tokens and/or
// NGen generated tokens, Reps timed repetitions after an optional warm-up.
// NDepth tokens are in the KV cache when each repetition's clock starts
// (llama-bench's -d): decoded before it as a prompt, not timed.
type BenchRequest struct {
	NPrompt int   `json:"n_prompt"`
	NGen    int   `json:"n_gen"`
	Reps    int   `json:"reps"`
	Warmup  bool  `json:"warmup"`
	Seed    int64 `json:"seed"`
	NBatch  int   `json:"n_batch"`
	NDepth  int   `json:"n_depth"`
}

// Validate checks a request the way every plugin must refuse it
// (ErrInvalidArgument naming the field).
func (r BenchRequest) Validate() error {
	switch {
	case r.NPrompt < 0 || r.NGen < 0:
		return Errorf(ErrInvalidArgument, "bench: n_prompt %d and n_gen %d must not be negative", r.NPrompt, r.NGen)
	case r.NPrompt == 0 && r.NGen == 0:
		return Errorf(ErrInvalidArgument, "bench: n_prompt and n_gen are both 0")
	case r.Reps < 1:
		return Errorf(ErrInvalidArgument, "bench: reps %d, want at least 1", r.Reps)
	case r.NBatch < 0:
		return Errorf(ErrInvalidArgument, "bench: n_batch %d is negative", r.NBatch)
	case r.NDepth < 0:
		return Errorf(ErrInvalidArgument, "bench: n_depth %d is negative", r.NDepth)
	}
	return nil
}

// DefaultBenchBatch is the prompt chunk size when BenchRequest.NBatch is 0
// (llama-bench's n_batch).
const DefaultBenchBatch = 512

// Batch is the prompt chunk size the request asks for.
func (r BenchRequest) Batch() int {
	if r.NBatch == 0 {
		return DefaultBenchBatch
	}
	return r.NBatch
}

// Positions is how many cache cells the test fills: NDepth + NPrompt + NGen
// (llama-bench's n_ctx for it).
func (r BenchRequest) Positions() int { return r.NDepth + r.NPrompt + r.NGen }

// String names the test as llama-bench does: "pp512", "tg128",
// "pp512+tg128", with " @ d4096" for a depth.
func (r BenchRequest) String() string {
	var name string
	switch {
	case r.NPrompt > 0 && r.NGen > 0:
		name = fmt.Sprintf("pp%d+tg%d", r.NPrompt, r.NGen)
	case r.NPrompt > 0:
		name = fmt.Sprintf("pp%d", r.NPrompt)
	default:
		name = fmt.Sprintf("tg%d", r.NGen)
	}
	if r.NDepth > 0 {
		name += fmt.Sprintf(" @ d%d", r.NDepth)
	}
	return name
}

// BenchResult holds the per-repetition wall times measured inside the plugin.
// NDepth echoes the request's: a plugin that predates it leaves it 0.
type BenchResult struct {
	NPrompt   int     `json:"n_prompt"`
	NGen      int     `json:"n_gen"`
	NDepth    int     `json:"n_depth"`
	SamplesNS []int64 `json:"samples_ns"`
	WarmupNS  int64   `json:"warmup_ns"`
}
