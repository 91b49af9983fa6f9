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
)

// OptionsParser validates a plugin's own options (the spec's free-form
// object). The engine's option "numerics" is handled by the Backend itself and
// never reaches the parser.
type OptionsParser interface {
	// Names lists the options the plugin accepts.
	Names() []string
	// Parse validates opts, whose keys are all from Names, and returns the
	// parsed form that Config.MatMul receives. Errors should name the option.
	Parse(opts map[string]any) (any, error)
}

// NoOptions accepts no options of the plugin's own.
func NoOptions() OptionsParser { return noOptions{} }

type noOptions struct{}

func (noOptions) Names() []string                   { return nil }
func (noOptions) Parse(map[string]any) (any, error) { return nil, nil }

// Validator is implemented by option structs that check their values as a
// whole after decoding.
type Validator interface{ Validate() error }

// JSONOptions decodes the options into a *T through T's json tags (the tag
// names are the option names); if *T implements Validator, Validate runs
// after decoding. T's zero value, or defaults set by Validate, stand for
// missing options.
func JSONOptions[T any]() OptionsParser {
	var names []string
	t := reflect.TypeFor[T]()
	if t.Kind() != reflect.Struct {
		panic(fmt.Sprintf("enginebackend.JSONOptions: %v is not a struct", t))
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
	return jsonOptions[T]{names: names}
}

type jsonOptions[T any] struct{ names []string }

func (j jsonOptions[T]) Names() []string { return j.names }

func (j jsonOptions[T]) Parse(opts map[string]any) (any, error) {
	v := new(T)
	if len(opts) > 0 {
		js, err := json.Marshal(opts)
		if err != nil {
			return nil, fmt.Errorf("options: %v", err)
		}
		dec := json.NewDecoder(bytes.NewReader(js))
		dec.DisallowUnknownFields()
		if err := dec.Decode(v); err != nil {
			var te *json.UnmarshalTypeError
			if errors.As(err, &te) {
				return nil, fmt.Errorf("option %q: want %s, got JSON %s", te.Field, te.Type, te.Value)
			}
			return nil, fmt.Errorf("options: %v", err)
		}
	}
	if val, ok := any(v).(Validator); ok {
		if err := val.Validate(); err != nil {
			return nil, err
		}
	}
	return v, nil
}

// engineOptions are the options every engine plugin accepts.
type engineOptions struct {
	Numerics string `json:"numerics"` // exact (default) | ggml
}

// splitOptions separates the engine's options from the plugin's, rejecting
// unknown names with the full list of valid ones.
func splitOptions(opts map[string]any, plugin OptionsParser) (engine map[string]any, own map[string]any, err error) {
	valid := map[string]bool{"numerics": true}
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
		case k == "numerics":
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
