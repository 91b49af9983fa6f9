package enginebackend

import (
	"fmt"
	"reflect"
	"strings"

	"github.com/evalrun/evalrun/backend"
	"github.com/evalrun/evalrun/engine"
)

// OptionsParser is a plugin's own options (the spec's free-form object,
// beside the engine's numerics, kv_cache and swa_full, which the Backend
// handles itself): NoOptions, or DeviceOptions with the plugin's option
// struct. Both are checked before the model is opened.
type OptionsParser interface {
	// newOptions returns a pointer to a zero option struct for
	// optdecode.Decode, nil if the plugin has no options.
	newOptions() any
	// prepare checks the decoded options (relative paths start at dir, the
	// spec's directory; "" = the working directory) and returns how to
	// attach the plugin's device once the model is loaded (nil: every
	// matmul on the CPU) and the options' warnings (Warner).
	prepare(opts any, dir string) (attach Attach, warnings []string, err error)
}

// Attach creates a plugin's device for a loaded model.
type Attach func(m *engine.Model) (Device, error)

// Device is what a plugin attaches to a loaded model: a matmul that claims
// some ops and hands the others to m.CPUMatMul(), the plan saying where each
// op runs, and the device resources Close releases.
type Device interface {
	engine.MatMuler
	// Plan lists where every matmul runs and sums it up in one line.
	Plan() ([]backend.PlanEntry, string)
	Close() error
}

// Simulator is a Device that may be a simulation of the hardware: when
// Simulated is true, Describe lists backend.CapabilitySimulated after Load,
// so the host labels the plugin's throughput simulated.
type Simulator interface{ Simulated() bool }

// Armer is a Device with injected faults: Arm is called once Load's
// warm-up has run, so fault counts start at the first call after Load.
type Armer interface{ Arm() }

// NoOptions accepts no options of the plugin's own.
func NoOptions() OptionsParser { return noOptions{} }

type noOptions struct{}

func (noOptions) newOptions() any                               { return nil }
func (noOptions) prepare(any, string) (Attach, []string, error) { return nil, nil, nil }

// Validator is implemented by option structs that check their values as a
// whole after decoding.
type Validator interface{ Validate() error }

// Warner is implemented by option structs that can tell, once validated,
// that the options will run but likely not as meant (a kernel list that
// offloads nothing); the host prints the warnings before anything runs.
type Warner interface{ Warnings() []string }

// PathResolver is implemented by option structs with file options: before
// Validate, ResolvePaths makes relative ones start at dir.
type PathResolver interface{ ResolvePaths(dir string) }

// DeviceOptions decodes the options into an O with optdecode (the json tag
// names are the option names); if *O implements Validator, Validate runs
// after decoding (ResolvePaths first, for a PathResolver). O's zero value,
// or defaults set by Validate, stand for missing options. attach then
// receives them with the loaded model.
func DeviceOptions[O any](attach func(m *engine.Model, opts *O) (Device, error)) OptionsParser {
	if t := reflect.TypeFor[O](); t.Kind() != reflect.Struct {
		panic(fmt.Sprintf("enginebackend.DeviceOptions: %v is not a struct", t))
	}
	return deviceOptions[O]{attach: attach}
}

type deviceOptions[O any] struct {
	attach func(*engine.Model, *O) (Device, error)
}

func (deviceOptions[O]) newOptions() any { return new(O) }

func (d deviceOptions[O]) prepare(opts any, dir string) (Attach, []string, error) {
	v := opts.(*O)
	if r, ok := any(v).(PathResolver); ok && dir != "" {
		r.ResolvePaths(dir)
	}
	if val, ok := any(v).(Validator); ok {
		if err := val.Validate(); err != nil {
			return nil, nil, err
		}
	}
	var warnings []string
	if w, ok := any(v).(Warner); ok {
		warnings = w.Warnings()
	}
	return func(m *engine.Model) (Device, error) { return d.attach(m, v) }, warnings, nil
}

// engineOptions are the options every engine plugin accepts, decoded
// beside the plugin's own.
type engineOptions struct {
	// Numerics: exact (the default) or ggml.
	Numerics *string `json:"numerics"`
	// KVCache: the KV cache's types, f32 by default.
	KVCache *struct {
		Key   string `json:"key"`
		Value string `json:"value"`
	} `json:"kv_cache"`
	// SWAFull (llama.cpp's name and default for its tools: false, the ring
	// cache llama-perplexity and llama-server use); true: libllama's
	// default context's full-size cache.
	SWAFull bool `json:"swa_full"`
	// Weights: auto (the default), mmap or copy (engine.WeightsLoad).
	Weights *string `json:"weights"`
}

// engine checks the values; errors name the option.
func (e *engineOptions) engine() (engine.Options, error) {
	o := engine.Options{Numerics: engine.Exact, SWAFull: e.SWAFull}
	if e.Numerics != nil {
		n, err := engine.ParseNumerics(*e.Numerics)
		if err != nil {
			return o, backend.Errorf(backend.ErrInvalidArgument, "option \"numerics\": %v", err)
		}
		o.Numerics = n
	}
	if e.Weights != nil {
		w, err := engine.ParseWeightsLoad(*e.Weights)
		if err != nil {
			return o, backend.Errorf(backend.ErrInvalidArgument, "option \"weights\": %v", err)
		}
		o.Weights = w
	}
	if kv := e.KVCache; kv != nil {
		o.KVCache = engine.KVCache{Key: engine.KVType(strings.ToLower(kv.Key)), Value: engine.KVType(strings.ToLower(kv.Value))}
		if err := o.KVCache.Validate(); err != nil {
			return o, backend.Errorf(backend.ErrInvalidArgument, "option \"kv_cache\": %v", err)
		}
	}
	return o, nil
}
