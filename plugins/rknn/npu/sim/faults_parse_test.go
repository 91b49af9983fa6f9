package sim

import (
	"fmt"
	"math"
	"reflect"
	"sort"
	"strings"
)

// ParseFaults and its helpers read faults from a map, as the tests state
// them; the rknn plugin has its own fault options (plugins/rknn/faults.go).

// faultKeys maps normalized option names to fields.
var faultKeys = map[string]func(*Faults) *int{
	"crashafterruns":   func(f *Faults) *int { return &f.CrashAfterRuns },
	"hangafterruns":    func(f *Faults) *int { return &f.HangAfterRuns },
	"nanafterruns":     func(f *Faults) *int { return &f.NaNAfterRuns },
	"infafterruns":     func(f *Faults) *int { return &f.InfAfterRuns },
	"bitflipafterruns": func(f *Faults) *int { return &f.BitFlipAfterRuns },
	"bitflipbit":       func(f *Faults) *int { return &f.BitFlipBit },
}

// normalizeKey makes crash_after_runs, crash-after-runs, CrashAfterRuns and
// viper's lower-cased crashafterruns the same key.
func normalizeKey(k string) string {
	return strings.ToLower(strings.NewReplacer("_", "", "-", "").Replace(k))
}

// ParseFaults reads faults from plugin options, e.g.
// {"crash_after_runs": 3, "bitflip_after_runs": 1, "bitflip_bit": 30}.
// Unknown keys, non-integer or negative values are errors naming the key.
func ParseFaults(opts map[string]any) (Faults, error) {
	var f Faults
	keys := make([]string, 0, len(opts))
	for k := range opts {
		keys = append(keys, k)
	}
	sort.Strings(keys) // deterministic first error
	for _, k := range keys {
		field, ok := faultKeys[normalizeKey(k)]
		if !ok {
			return Faults{}, fmt.Errorf("sim faults: unknown key %q (known: crash_after_runs, hang_after_runs, nan_after_runs, inf_after_runs, bitflip_after_runs, bitflip_bit)", k)
		}
		v, err := toInt(opts[k])
		if err != nil {
			return Faults{}, fmt.Errorf("sim faults: %s: %v", k, err)
		}
		if v < 0 {
			return Faults{}, fmt.Errorf("sim faults: %s: %d must be >= 0", k, v)
		}
		*field(&f) = v
	}
	if f.BitFlipBit > 31 {
		return Faults{}, fmt.Errorf("sim faults: bitflip_bit: %d outside 0..31", f.BitFlipBit)
	}
	return f, nil
}

// toInt accepts any integer kind and integral floats (JSON numbers).
func toInt(v any) (int, error) {
	rv := reflect.ValueOf(v)
	switch rv.Kind() {
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		i := rv.Int()
		if i > math.MaxInt32 || i < math.MinInt32 {
			return 0, fmt.Errorf("%d out of range", i)
		}
		return int(i), nil
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64, reflect.Uintptr:
		u := rv.Uint()
		if u > math.MaxInt32 {
			return 0, fmt.Errorf("%d out of range", u)
		}
		return int(u), nil
	case reflect.Float32, reflect.Float64:
		x := rv.Float()
		if x != math.Trunc(x) || math.Abs(x) > math.MaxInt32 {
			return 0, fmt.Errorf("%v is not an integer", x)
		}
		return int(x), nil
	}
	return 0, fmt.Errorf("want an integer, got %T (%v)", v, v)
}
