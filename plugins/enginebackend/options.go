package enginebackend

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"sort"
	"strings"

	"github.com/evalrun/evalrun/backend"
	"github.com/evalrun/evalrun/engine"
)

// OptionsParser validates a plugin's own options (the spec's free-form
// object) before the model is opened. The engine's options (numerics,
// kv_cache) are handled by the Backend itself and never reach the parser.
type OptionsParser interface {
	// Names lists the options the plugin accepts.
	Names() []string
	// Parse validates opts, whose keys are all from Names, and returns how
	// to attach the plugin's device once the model is loaded (nil: every
	// matmul on the CPU). Relative paths in opts start at dir (the spec's
	// directory; "" = the working directory). Errors should name the option;
	// warnings (Warner) say what will run but likely not as meant.
	Parse(opts map[string]any, dir string) (attach Attach, warnings []string, err error)
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

func (noOptions) Names() []string                                        { return nil }
func (noOptions) Parse(map[string]any, string) (Attach, []string, error) { return nil, nil, nil }

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

// DeviceOptions decodes the options into an O through O's json tags (the
// tag names are the option names); if *O implements Validator, Validate runs
// after decoding (ResolvePaths first, for a PathResolver). O's zero value, or defaults set by Validate, stand for
// missing options. attach then receives them with the loaded model.
func DeviceOptions[O any](attach func(m *engine.Model, opts *O) (Device, error)) OptionsParser {
	var names []string
	t := reflect.TypeFor[O]()
	if t.Kind() != reflect.Struct {
		panic(fmt.Sprintf("enginebackend.DeviceOptions: %v is not a struct", t))
	}
	for f := range t.Fields() {
		if !f.IsExported() {
			continue
		}
		name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
		switch name {
		case "-":
			continue
		case "":
			name = f.Name
		}
		names = append(names, name)
	}
	sort.Strings(names)
	return deviceOptions[O]{names: names, attach: attach}
}

type deviceOptions[O any] struct {
	names  []string
	attach func(*engine.Model, *O) (Device, error)
}

func (d deviceOptions[O]) Names() []string { return d.names }

func (d deviceOptions[O]) Parse(opts map[string]any, dir string) (Attach, []string, error) {
	v := new(O)
	if len(opts) > 0 {
		js, err := json.Marshal(opts)
		if err != nil {
			return nil, nil, fmt.Errorf("options: %v", err)
		}
		dec := json.NewDecoder(bytes.NewReader(js))
		dec.DisallowUnknownFields()
		if err := dec.Decode(v); err != nil {
			var te *json.UnmarshalTypeError
			if errors.As(err, &te) {
				return nil, nil, fmt.Errorf("option %q: want %s, got JSON %s", te.Field, te.Type, te.Value)
			}
			return nil, nil, fmt.Errorf("options: %v", err)
		}
	}
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

// engineOptions are the options every engine plugin accepts: numerics
// (exact, the default, or ggml) and kv_cache ({key, value}: the KV cache's
// types, f32 by default).
var engineOptions = map[string]bool{"numerics": true, "kv_cache": true, "swa_full": true}

// parseEngineOptions reads the engine's options; errors name the option.
func parseEngineOptions(opts map[string]any) (engine.Options, error) {
	numerics, kv, err := parseNumericsKV(opts)
	o := engine.Options{Numerics: numerics, KVCache: kv}
	if err != nil {
		return o, err
	}
	// swa_full (llama.cpp's name and default for its tools: false, the
	// ring cache llama-perplexity and llama-server use); true: libllama's
	// default context's full-size cache.
	if v, ok := opts["swa_full"]; ok {
		full, isBool := v.(bool)
		if !isBool {
			return o, backend.Errorf(backend.ErrInvalidArgument, "option \"swa_full\": want true or false, got %v", v)
		}
		o.SWAFull = full
	}
	return o, nil
}

func parseNumericsKV(opts map[string]any) (engine.Numerics, engine.KVCache, error) {
	numerics := engine.Exact
	var kv engine.KVCache
	if v, ok := opts["numerics"]; ok {
		s, isString := v.(string)
		if !isString {
			return 0, kv, backend.Errorf(backend.ErrInvalidArgument, "option \"numerics\": want \"exact\" or \"ggml\", got %v", v)
		}
		var err error
		if numerics, err = engine.ParseNumerics(s); err != nil {
			return 0, kv, backend.Errorf(backend.ErrInvalidArgument, "option \"numerics\": %v", err)
		}
	}
	if v, ok := opts["kv_cache"]; ok {
		m, isMap := v.(map[string]any)
		if !isMap {
			return 0, kv, backend.Errorf(backend.ErrInvalidArgument, "option \"kv_cache\": want {key: TYPE, value: TYPE}, got %v", v)
		}
		for k, t := range m {
			s, isString := t.(string)
			switch {
			case k != "key" && k != "value":
				return 0, kv, backend.Errorf(backend.ErrInvalidArgument, "option \"kv_cache\": unknown field %q (want key, value)", k)
			case !isString:
				return 0, kv, backend.Errorf(backend.ErrInvalidArgument, "option \"kv_cache\": %s: want a type name, got %v", k, t)
			case k == "key":
				kv.Key = engine.KVType(strings.ToLower(s))
			default:
				kv.Value = engine.KVType(strings.ToLower(s))
			}
		}
		if err := kv.Validate(); err != nil {
			return 0, kv, backend.Errorf(backend.ErrInvalidArgument, "option \"kv_cache\": %v", err)
		}
	}
	return numerics, kv, nil
}

// splitOptions separates the engine's options from the plugin's, rejecting
// unknown names with the full list of valid ones.
func splitOptions(opts map[string]any, plugin OptionsParser) (engine map[string]any, own map[string]any, err error) {
	valid := map[string]bool{}
	for n := range engineOptions {
		valid[n] = true
	}
	for _, n := range plugin.Names() {
		valid[n] = true
	}
	names := make([]string, 0, len(opts))
	for k := range opts {
		names = append(names, k)
	}
	sort.Strings(names)
	engine, own = map[string]any{}, map[string]any{}
	for _, k := range names {
		switch {
		case engineOptions[k]:
			engine[k] = opts[k]
		case valid[k]:
			own[k] = opts[k]
		default:
			list := make([]string, 0, len(valid))
			for n := range valid {
				list = append(list, n)
			}
			sort.Strings(list)
			return nil, nil, backend.Errorf(backend.ErrInvalidArgument,
				"unknown option %q (valid options: %s)", k, strings.Join(list, ", "))
		}
	}
	return engine, own, nil
}
