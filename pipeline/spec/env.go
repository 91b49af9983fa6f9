package spec

import (
	"fmt"
	"reflect"
	"strconv"
	"strings"

	"github.com/spf13/viper"
	"go.yaml.in/yaml/v3"
)

// envPrefix starts every override variable: EVALRUN_BENCH_REPS sets bench.reps.
const envPrefix = "EVALRUN"

// envKey is a scalar key an environment variable can set.
type envKey struct {
	path string       // "backends[0].threads"
	kind reflect.Kind // of its field
}

// envKeys lists the keys under struct type t that an environment variable
// can set. A list contributes the keys of each item the file has
// (items(path)). viper's AutomaticEnv only finds keys it is asked for
// (viper#761), so they are enumerated from the struct.
func envKeys(t reflect.Type, path string, items func(list string) int) []envKey {
	var out []envKey
	for _, f := range fieldsOf(t) {
		p := join(path, f.key)
		ft := f.typ
		if ft.Kind() == reflect.Pointer {
			ft = ft.Elem()
		}
		switch {
		case ft == durationType || ft.Kind() != reflect.Struct && ft.Kind() != reflect.Slice && ft.Kind() != reflect.Map:
			out = append(out, envKey{p, ft.Kind()})
		case ft.Kind() == reflect.Struct:
			out = append(out, envKeys(ft, p, items)...)
		case ft.Kind() == reflect.Slice && ft.Elem().Kind() == reflect.Struct:
			for i := range items(p) {
				out = append(out, envKeys(ft.Elem(), fmt.Sprintf("%s[%d]", p, i), items)...)
			}
		case ft.Kind() == reflect.Slice: // output.formats: a comma-separated list
			out = append(out, envKey{p, reflect.Slice})
		}
		// maps (plugin options) cannot be set from the environment
	}
	return out
}

// envName is the variable for a key path: upper case, '_' for '.' and for
// list indices.
func envName(path string) string {
	return envPrefix + "_" + strings.ToUpper(strings.NewReplacer(".", "_", "[", "_", "]", "").Replace(path))
}

// applyEnv writes every EVALRUN_ override into the YAML tree, as a plain
// scalar (a list for output.formats) that the walk then checks like any
// value of the file. viper reads the environment; an empty variable counts
// as unset, as in viper.
func applyEnv(root *yaml.Node, w *walker, c *collector) {
	v := viper.New()
	v.SetEnvPrefix(envPrefix)
	v.SetEnvKeyReplacer(strings.NewReplacer(".", "_"))
	v.AutomaticEnv()
	viperKey := func(path string) string {
		return strings.ToLower(strings.NewReplacer("[", ".", "]", "").Replace(path))
	}
	items := func(list string) int {
		if n := lookup(root, list); n != nil && n.Kind == yaml.SequenceNode {
			return len(n.Content)
		}
		return 0
	}
	for _, k := range envKeys(specType, "", items) {
		if !v.IsSet(viperKey(k.path)) {
			continue
		}
		raw := v.GetString(viperKey(k.path))
		// A plain scalar: the walk resolves "2" to an integer, "true" to a
		// boolean; a string field takes the text as it is.
		val := &yaml.Node{Kind: yaml.ScalarNode, Value: strings.TrimSpace(raw)}
		switch k.kind {
		case reflect.String:
			val.Tag, val.Value = "!!str", raw
		case reflect.Slice:
			val = &yaml.Node{Kind: yaml.SequenceNode}
			for _, part := range strings.Split(raw, ",") {
				if part = strings.TrimSpace(part); part != "" {
					val.Content = append(val.Content, &yaml.Node{Kind: yaml.ScalarNode, Tag: "!!str", Value: part})
				}
			}
		}
		w.env[k.path] = envName(k.path)
		set(root, k.path, val)
	}
	// An override for an item the file does not have would silently do
	// nothing; catch the likely ones.
	for _, list := range []string{"datasets", "backends"} {
		n := items(list)
		elem := reflect.TypeFor[Dataset]()
		if list == "backends" {
			elem = reflect.TypeFor[Backend]()
		}
		for i := n; i < n+8; i++ {
			for _, k := range envKeys(elem, fmt.Sprintf("%s[%d]", list, i), nil) {
				if v.IsSet(viperKey(k.path)) {
					c.add(0, k.path, envName(k.path), fmt.Sprintf("the spec has only %d %s entries", n, list))
				}
			}
		}
	}
}

// lookup returns the node at a key path, or nil.
func lookup(n *yaml.Node, path string) *yaml.Node {
	for _, part := range splitPath(path) {
		n = child(resolve(n), part, false)
		if n == nil {
			return nil
		}
	}
	return n
}

// set replaces (or adds) the value at a key path, making the mappings on
// the way; list items must exist.
func set(root *yaml.Node, path string, val *yaml.Node) {
	parts := splitPath(path)
	n := root
	for _, part := range parts[:len(parts)-1] {
		if n = child(resolve(n), part, true); n == nil {
			return
		}
	}
	n = resolve(n)
	last := parts[len(parts)-1]
	for i := 0; i+1 < len(n.Content); i += 2 {
		if n.Content[i].Value == last {
			n.Content[i+1] = val
			return
		}
	}
	n.Content = append(n.Content, &yaml.Node{Kind: yaml.ScalarNode, Value: last}, val)
}

// child is the value of key (or item "[i]") in n; create adds a missing key
// as an empty mapping.
func child(n *yaml.Node, part string, create bool) *yaml.Node {
	if i, err := strconv.Atoi(strings.Trim(part, "[]")); err == nil && strings.HasPrefix(part, "[") {
		if n.Kind == yaml.SequenceNode && i < len(n.Content) {
			return n.Content[i]
		}
		return nil
	}
	if n.Kind != yaml.MappingNode {
		return nil
	}
	m := &yaml.Node{Kind: yaml.MappingNode}
	for i := len(n.Content) - 2; i >= 0; i -= 2 { // the last of duplicate keys wins
		if n.Content[i].Value == part {
			if create && isNull(n.Content[i+1]) { // "gates:" with nothing yet
				n.Content[i+1] = m
			}
			return n.Content[i+1]
		}
	}
	if !create {
		return nil
	}
	n.Content = append(n.Content, &yaml.Node{Kind: yaml.ScalarNode, Value: part}, m)
	return m
}

// splitPath splits "backends[1].gates.nmse_max" into "backends", "[1]",
// "gates", "nmse_max".
func splitPath(path string) []string {
	return strings.FieldsFunc(strings.ReplaceAll(path, "[", ".["), func(r rune) bool { return r == '.' })
}
