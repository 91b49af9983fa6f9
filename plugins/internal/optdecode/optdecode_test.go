package optdecode

import (
	"encoding/json"
	"reflect"
	"strings"
	"testing"
)

type inner struct {
	After *int `json:"after"`
	Bit   int  `json:"bit"`
}

type pluginOptions struct {
	Driver  string   `json:"driver"`
	Cores   *int     `json:"cores"`
	Shadow  bool     `json:"shadow"`
	Scale   float64  `json:"scale"`
	CPUOps  []string `json:"cpu_ops"`
	Mode    any      `json:"mode"`
	Faults  *inner   `json:"faults"`
	Secret  int      `json:"-"`
	derived int
}

type engineOptions struct {
	Numerics *string `json:"numerics"`
	Small    int8    `json:"small"`
	Count    uint    `json:"count"`
}

// fromJSON decodes a spec's options as the host sends them: through JSON.
func fromJSON(t *testing.T, js string) map[string]any {
	t.Helper()
	var m map[string]any
	if err := json.Unmarshal([]byte(js), &m); err != nil {
		t.Fatal(err)
	}
	return m
}

func TestDecodeSetsEveryKindFromJSON(t *testing.T) {
	var p pluginOptions
	var e engineOptions
	err := Decode(fromJSON(t, `{"driver": "sim", "cores": 0, "shadow": true, "scale": 2, "cpu_ops": ["a", "b"],
		"mode": "auto", "faults": {"after": 3, "bit": 31}, "numerics": "ggml", "small": -128, "count": 7}`), &p, &e)
	if err != nil {
		t.Fatal(err)
	}
	want := pluginOptions{Driver: "sim", Cores: new(int), Shadow: true, Scale: 2, CPUOps: []string{"a", "b"}, Mode: "auto", Faults: &inner{After: ptr(3), Bit: 31}}
	if !reflect.DeepEqual(p, want) {
		t.Errorf("plugin options %+v, want %+v", p, want)
	}
	if e.Numerics == nil || *e.Numerics != "ggml" || e.Small != -128 || e.Count != 7 {
		t.Errorf("engine options %+v", e)
	}
}

// A pointer tells an option given as 0 from a missing one; null is missing.
func TestMissingAndNullLeaveZero(t *testing.T) {
	var p pluginOptions
	if err := Decode(fromJSON(t, `{"cores": null, "faults": null, "driver": null}`), &p); err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(p, pluginOptions{}) {
		t.Errorf("null options set %+v", p)
	}
	if err := Decode(nil, &p); err != nil {
		t.Errorf("no options: %v", err)
	}
}

// In-process callers pass Go values: ints, typed slices.
func TestDecodeGoValues(t *testing.T) {
	var p pluginOptions
	if err := Decode(map[string]any{"cores": int64(2), "cpu_ops": []string{"x"}, "faults": map[string]any{"after": uint8(1)}}, &p); err != nil {
		t.Fatal(err)
	}
	if *p.Cores != 2 || p.CPUOps[0] != "x" || *p.Faults.After != 1 {
		t.Errorf("decoded %+v", p)
	}
}

func TestDecodeErrorsNameTheOption(t *testing.T) {
	for _, c := range []struct{ js, want string }{
		{`{"core": 1}`, `unknown option "core" (valid options: cores, count, cpu_ops, driver, faults, mode, numerics, scale, shadow, small)`},
		{`{"Secret": 1}`, `unknown option "Secret"`},
		{`{"derived": 1}`, `unknown option "derived"`},
		{`{"faults": {"after_runs": 1}}`, `unknown option "faults.after_runs" (valid options in "faults": after, bit)`},
		{`{"cores": "3"}`, `option "cores": want an integer, got "3"`},
		{`{"cores": 1.5}`, `option "cores": want an integer, got 1.5`},
		{`{"cores": 1e30}`, `option "cores": 1e+30 does not fit in int`},
		{`{"small": 200}`, `option "small": 200 does not fit in int8`},
		{`{"count": -1}`, `option "count": want a non-negative integer, got -1`},
		{`{"shadow": "yes"}`, `option "shadow": want true or false, got "yes"`},
		{`{"driver": 1}`, `option "driver": want a string, got 1`},
		{`{"numerics": false}`, `option "numerics": want a string, got false`},
		{`{"scale": "2"}`, `option "scale": want a number, got "2"`},
		{`{"cpu_ops": "a"}`, `option "cpu_ops": want a list of strings, got "a"`},
		{`{"cpu_ops": ["a", 2]}`, `option "cpu_ops[1]": want a string, got 2`},
		{`{"faults": 3}`, `option "faults": want an object {after, bit}, got 3`},
		{`{"faults": {"after": "x"}}`, `option "faults.after": want an integer, got "x"`},
		{`{"driver": {"a": 1}}`, `option "driver": want a string, got an object`},
		{`{"shadow": [true]}`, `option "shadow": want true or false, got a list`},
	} {
		var p pluginOptions
		var e engineOptions
		err := Decode(fromJSON(t, c.js), &p, &e)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: err = %v, want %q", c.js, err, c.want)
		}
	}
}

// The first error is the same on every run: keys are decoded in order.
func TestFirstErrorIsStable(t *testing.T) {
	for range 20 {
		var p pluginOptions
		err := Decode(map[string]any{"zz": 1, "cores": "x", "aa": 1}, &p)
		if err == nil || !strings.HasPrefix(err.Error(), `unknown option "aa"`) {
			t.Fatalf("err = %v, want the first key's", err)
		}
	}
}

func TestProgrammingErrorsPanic(t *testing.T) {
	for name, f := range map[string]func(){
		"not a pointer":   func() { Decode(nil, pluginOptions{}) },
		"not a struct":    func() { Decode(nil, new(int)) },
		"declared twice":  func() { Decode(nil, &pluginOptions{}, &pluginOptions{}) },
		"unsupported map": func() { Decode(map[string]any{"M": map[string]any{}}, &struct{ M map[string]int }{}) },
	} {
		func() {
			defer func() {
				if recover() == nil {
					t.Errorf("%s: no panic", name)
				}
			}()
			f()
		}()
	}
}

func ptr(v int) *int { return &v }
