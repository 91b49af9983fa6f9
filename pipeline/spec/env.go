package spec

import (
	"fmt"
	"math"
	"reflect"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/viper"
)

// envPrefix starts every override variable: EVALRUN_BENCH_REPS sets bench.reps.
const envPrefix = "EVALRUN_"

// envKey is one scalar key that an environment variable can set.
type envKey struct {
	name string       // EVALRUN_BACKENDS_0_THREADS
	path string       // backends[0].threads
	typ  reflect.Type // the Go type of the field
}

// envName is the variable for a key path: dots and list indices become '_'.
func envName(path string) string {
	r := strings.NewReplacer(".", "_", "[", "_", "]", "")
	return envPrefix + strings.ToUpper(r.Replace(path))
}

// envKeys lists the settable scalar keys under struct type t. Lists
// contribute one set per item they have in the file (lists[path] items).
// viper's AutomaticEnv only sees keys the file already has (viper#761) and
// hands back untyped strings, so the keys are enumerated from the struct.
func envKeys(t reflect.Type, path string, lists map[string]int) []envKey {
	var out []envKey
	for _, f := range fieldsOf(t) {
		p := join(path, f.key)
		ft := f.typ
		if ft.Kind() == reflect.Pointer {
			ft = ft.Elem()
		}
		switch {
		case ft == durationType:
			out = append(out, envKey{envName(p), p, ft})
		case ft.Kind() == reflect.Struct:
			out = append(out, envKeys(ft, p, lists)...)
		case ft.Kind() == reflect.Slice && ft.Elem().Kind() == reflect.Struct:
			for i := range lists[p] {
				out = append(out, envKeys(ft.Elem(), fmt.Sprintf("%s[%d]", p, i), lists)...)
			}
		case ft.Kind() == reflect.Map:
			// free-form plugin options: not settable from the environment
		default:
			out = append(out, envKey{envName(p), p, ft})
		}
	}
	return out
}

// EnvVars lists the environment variables that override top-level scalar
// keys, with the key each sets (list items add EVALRUN_BACKENDS_<i>_... and
// EVALRUN_DATASETS_<i>_... for the items in the file).
func EnvVars() [][2]string {
	var out [][2]string
	for _, k := range envKeys(specType, "", nil) {
		out = append(out, [2]string{k.name, k.path})
	}
	return out
}

// applyEnv sets every key whose EVALRUN_ variable is set, typed per field.
func applyEnv(v *viper.Viper, w *walker, lookup func(string) (string, bool), c *collector) {
	for _, k := range envKeys(specType, "", w.lists) {
		raw, ok := lookup(k.name)
		if !ok || raw == "" {
			continue // an empty variable counts as unset, as in viper
		}
		val, err := parseEnv(raw, k.typ)
		if err != nil {
			c.add(0, k.path, k.name, fmt.Sprintf("%s (got %q)", err, raw))
			continue
		}
		w.env[k.path] = k.name
		if list, index, rest, ok := splitListPath(k.path); ok {
			setInList(v, list, index, rest, val)
		} else {
			v.Set(k.path, val)
		}
	}
	// An override for an item the file does not have would silently do
	// nothing; catch the likely ones.
	for _, list := range []string{"datasets", "backends"} {
		elem := fieldType(specType, list).Elem()
		for i := w.lists[list]; i < w.lists[list]+8; i++ {
			for _, k := range envKeys(elem, fmt.Sprintf("%s[%d]", list, i), nil) {
				if raw, ok := lookup(k.name); ok && raw != "" {
					c.add(0, k.path, k.name, fmt.Sprintf("the spec has only %d %s entries", w.lists[list], list))
				}
			}
		}
	}
}

func fieldType(t reflect.Type, key string) reflect.Type {
	for _, f := range fieldsOf(t) {
		if f.key == key {
			return f.typ
		}
	}
	return nil
}

// parseEnv converts an environment string to the field's type.
func parseEnv(raw string, t reflect.Type) (any, error) {
	s := strings.TrimSpace(raw)
	if t == durationType {
		d, err := time.ParseDuration(s)
		if err != nil {
			return nil, fmt.Errorf(`want a duration such as "30s"`)
		}
		if d < 0 {
			return nil, fmt.Errorf("must not be negative")
		}
		return d, nil
	}
	switch t.Kind() {
	case reflect.String:
		return raw, nil
	case reflect.Int:
		i, err := strconv.Atoi(s)
		if err != nil {
			return nil, fmt.Errorf("want an integer")
		}
		return i, nil
	case reflect.Float64:
		f, err := strconv.ParseFloat(s, 64)
		if err != nil || math.IsNaN(f) || math.IsInf(f, 0) {
			return nil, fmt.Errorf("want a finite number")
		}
		return f, nil
	case reflect.Bool:
		b, err := strconv.ParseBool(s)
		if err != nil {
			return nil, fmt.Errorf("want true or false")
		}
		return b, nil
	case reflect.Slice: // []string: comma-separated
		var items []any
		for _, part := range strings.Split(s, ",") {
			if part = strings.TrimSpace(part); part != "" {
				items = append(items, part)
			}
		}
		return items, nil
	}
	return nil, fmt.Errorf("cannot be set from the environment")
}

// splitListPath splits "backends[1].gates.nmse_max" into
// ("backends", 1, "gates.nmse_max").
func splitListPath(path string) (list string, index int, rest string, ok bool) {
	open := strings.IndexByte(path, '[')
	end := strings.IndexByte(path, ']')
	if open < 0 || end < open {
		return "", 0, "", false
	}
	index, err := strconv.Atoi(path[open+1 : end])
	if err != nil {
		return "", 0, "", false
	}
	return path[:open], index, strings.TrimPrefix(path[end+1:], "."), true
}

// setInList sets a key inside one item of a list of mappings; viper can
// only override whole values, so the list is rebuilt and set back.
func setInList(v *viper.Viper, list string, index int, rest string, val any) {
	items, _ := v.Get(list).([]any)
	if index >= len(items) {
		return
	}
	m, _ := items[index].(map[string]any)
	if m == nil {
		m = map[string]any{}
		items[index] = m
	}
	keys := strings.Split(rest, ".")
	for _, k := range keys[:len(keys)-1] {
		sub, _ := m[k].(map[string]any)
		if sub == nil {
			sub = map[string]any{}
			m[k] = sub
		}
		m = sub
	}
	m[keys[len(keys)-1]] = val
	v.Set(list, items)
}
