package llamaplugin

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/evalrun/evalrun/backend"
	"github.com/evalrun/evalrun/engine/ggml"
	"github.com/evalrun/evalrun/plugins/internal/optdecode"
	"github.com/evalrun/evalrun/plugins/llamacpp/llama"
)

// LibDirEnv overrides the default library directory.
const LibDirEnv = "EVALRUN_LLAMACPP_LIB_DIR"

// InstallDir is where `make llamacpp` unpacks the pinned npm libraries,
// relative to the repository (and so to bin/..).
const InstallDir = "third_party/llamacpp/v0.5.0"

// Options are the plugin's options from the spec.
type Options struct {
	LibDir    string `json:"lib_dir"`    // a directory with libllama and the ggml libraries
	Threads   int    `json:"threads"`    // 0: LoadRequest.Threads
	FlashAttn any    `json:"flash_attn"` // off (default), on, auto; or a bool
	KVType    string `json:"kv_type"`    // f32 (default), f16, bf16, q8_0, q4_0, q4_1, q5_0, q5_1, iq4_nl
	// SWAFull is llama_context_params' swa_full, default false as
	// llama.cpp's tools set it (the ring cache llama-perplexity uses); true
	// is libllama's own default, a full-size cache.
	SWAFull    bool     `json:"swa_full"`
	CPUVariant string   `json:"cpu_variant"` // load only libggml-cpu-<variant>.so
	NGPULayers *int     `json:"n_gpu_layers"`
	Devices    []string `json:"devices"`
	// FaultAbortAfter > 0 makes Eval call N+1 drive libllama into its own
	// GGML_ASSERT (a KV-cache call on a sequence the context does not
	// have): a real abort inside the library, to test that the host
	// reports the plugin as crashed.
	FaultAbortAfter int `json:"fault_abort_after"`

	flashAttn int32
	kvType    int32
}

// kvTypes are the ggml types llama.cpp accepts for its KV cache.
var kvTypes = []string{"f32", "f16", "bf16", "q8_0", "q4_0", "q4_1", "q5_0", "q5_1", "iq4_nl"}

// parseOptions validates the spec's options; errors name the option.
func parseOptions(opts map[string]any) (*Options, error) {
	o := &Options{}
	if err := optdecode.Decode(opts, o); err != nil {
		return nil, backend.Errorf(backend.ErrInvalidArgument, "%v", err)
	}
	bad := func(format string, args ...any) error {
		return backend.Errorf(backend.ErrInvalidArgument, format, args...)
	}
	switch v := o.FlashAttn; v {
	case nil, false, "off":
		o.flashAttn = llama.FlashAttnOff
	case true, "on":
		o.flashAttn = llama.FlashAttnOn
	case "auto":
		o.flashAttn = llama.FlashAttnAuto
	default:
		return nil, bad("option \"flash_attn\": %v, want off, on or auto", v)
	}
	if o.KVType == "" {
		o.KVType = "f32"
	}
	o.KVType = strings.ToLower(o.KVType)
	known := false
	for _, t := range kvTypes {
		known = known || t == o.KVType
	}
	t, err := ggml.ParseType(o.KVType)
	if !known || err != nil {
		return nil, bad("option \"kv_type\": %q, want one of %s", o.KVType, strings.Join(kvTypes, ", "))
	}
	o.kvType = int32(t)
	if o.Threads < 0 {
		return nil, bad("option \"threads\": %d is negative", o.Threads)
	}
	if o.FaultAbortAfter < 0 {
		return nil, bad("option \"fault_abort_after\": %d is negative", o.FaultAbortAfter)
	}
	if o.NGPULayers != nil && *o.NGPULayers < -1 {
		return nil, bad("option \"n_gpu_layers\": %d, want -1 (all) or more", *o.NGPULayers)
	}
	for i, d := range o.Devices {
		if d == "" {
			return nil, bad("option \"devices\": entry %d is empty", i)
		}
	}
	if strings.ContainsAny(o.CPUVariant, "/\\") {
		return nil, bad("option \"cpu_variant\": %q is a name such as zen4 or haswell, not a path", o.CPUVariant)
	}
	return o, nil
}

// resolveLibDir picks the library directory: the option, else the
// environment, else the one `make llamacpp` installs beside the plugin's
// bin/ directory (or the repository when run from a test).
func resolveLibDir(opt string) (string, error) {
	if opt != "" {
		return opt, nil
	}
	if env := os.Getenv(LibDirEnv); env != "" {
		return env, nil
	}
	var tried []string
	if exe, err := os.Executable(); err == nil {
		if real, err := filepath.EvalSymlinks(exe); err == nil {
			exe = real
		}
		d := filepath.Join(filepath.Dir(exe), "..", filepath.FromSlash(InstallDir))
		if isDir(d) {
			return filepath.Clean(d), nil
		}
		tried = append(tried, filepath.Clean(d))
	}
	return "", backend.Errorf(backend.ErrInvalidArgument,
		"no llama.cpp libraries: looked in %s; run `make llamacpp`, set option lib_dir or %s to a directory with libllama and the ggml libraries",
		strings.Join(tried, ", "), LibDirEnv)
}

func isDir(p string) bool {
	st, err := os.Stat(p)
	return err == nil && st.IsDir()
}

// RepoLibDir finds InstallDir from a directory inside the repository (for
// tests): the nearest ancestor holding it.
func RepoLibDir(from string) (string, bool) {
	dir, err := filepath.Abs(from)
	if err != nil {
		return "", false
	}
	for {
		d := filepath.Join(dir, filepath.FromSlash(InstallDir))
		if isDir(d) {
			return d, true
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", false
		}
		dir = parent
	}
}

func describeOptions(o *Options) string {
	fa := map[int32]string{llama.FlashAttnOff: "off", llama.FlashAttnOn: "on", llama.FlashAttnAuto: "auto"}[o.flashAttn]
	if o.SWAFull {
		return fmt.Sprintf("flash_attn %s, kv %s, swa_full on", fa, o.KVType)
	}
	return fmt.Sprintf("flash_attn %s, kv %s", fa, o.KVType)
}
