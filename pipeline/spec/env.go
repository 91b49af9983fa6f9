package spec

import (
	"fmt"
	"os"
	"reflect"
	"regexp"
	"slices"
	"strconv"
	"strings"

	"github.com/spf13/viper"
	"go.yaml.in/yaml/v3"
)

// envPrefix starts every override variable: EVALRUN_BENCH_REPS sets bench.reps.
const envPrefix = "EVALRUN"

// OtherEnv lists the EVALRUN_ variables that are not spec keys (read by the
// plugin glue and the plugins; the tests' own variables begin TEST_EVALRUN_,
// outside this namespace).
// Any other EVALRUN_ variable must name a key of the spec: a typo such as
// EVALRUN_BENCH_REP is refused, not ignored.
var OtherEnv = []string{"EVALRUN_PLUGIN", "EVALRUN_PLUGIN_MTLS", "EVALRUN_PLUGIN_SHM", "EVALRUN_PLUGIN_ROWS_FD", "EVALRUN_PLUGIN_HOST_PID", "EVALRUN_PLUGIN_LOG_LEVEL", "EVALRUN_LLAMACPP_LIB_DIR",
	"EVALRUN_LLAMACPP_LOG", "EVALRUN_LLAMACPP_BACKTRACE", "EVALRUN_LLAMACPP_FOREIGN_DIR", "EVALRUN_RKNNRT_FAKE",
	"EVALRUN_SHARDS",  // the number of shards with JOB_COMPLETION_INDEX (package resultsdir)
	"EVALRUN_KERNELS"} // the engine plugins' kernel set (ggml.KernelsEnv)

// envName is the variable for a key path: upper case, '_' for '.' and for
// list indices.
func envName(path string) string {
	return envPrefix + "_" + strings.ToUpper(strings.NewReplacer(".", "_", "[", "_", "]", "").Replace(path))
}

// envKeys calls fn for every key under v that a variable can set: scalars,
// durations, output.formats (a comma-separated list) and, to refuse them,
// plugin options. Items of lists count only if the file has them.
func envKeys(v reflect.Value, path string, fn func(path string, f field, v reflect.Value)) {
	eachField(v, path, func(path string, f field, v reflect.Value) {
		t := f.typ
		if t != durationType && (t.Kind() == reflect.Struct || t.Kind() == reflect.Slice && t.Elem().Kind() == reflect.Struct) {
			return // eachField walks into it
		}
		fn(path, f, v)
	})
}

// applyEnv sets every EVALRUN_ override on the decoded spec. viper reads the
// environment (an empty variable counts as unset); each value is checked as
// a plain YAML scalar of its key's type, as the walk checks the file's.
func applyEnv(s *Spec, w *walker, c *collector) {
	v := viper.New()
	v.SetEnvPrefix(envPrefix)
	v.AutomaticEnv()
	known := slices.Clone(OtherEnv)
	envKeys(reflect.ValueOf(s).Elem(), "", func(path string, f field, fv reflect.Value) {
		name := envName(path)
		known = append(known, name)
		key := strings.ToLower(strings.TrimPrefix(name, envPrefix+"_"))
		if !v.IsSet(key) {
			return
		}
		w.env[path] = name
		raw := v.GetString(key)
		val := &yaml.Node{Kind: yaml.ScalarNode, Value: strings.TrimSpace(raw)}
		switch f.typ.Kind() {
		case reflect.Map:
			c.add(0, path, name, "plugin options cannot be set from the environment")
			return
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
		n := len(c.errs)
		if w.value(val, f.typ, path); len(c.errs) == n {
			fv.Set(reflect.Zero(f.typ)) // a list is replaced, not merged
			if err := val.Decode(fv.Addr().Interface()); err != nil {
				c.add(0, path, name, err.Error())
			}
		}
	})
	for _, kv := range os.Environ() {
		name, val, _ := strings.Cut(kv, "=")
		if strings.HasPrefix(name, envPrefix+"_") && val != "" && !slices.Contains(known, name) {
			unknownEnv(s, c, name, known)
		}
	}
}

var envItemRE = regexp.MustCompile(`^EVALRUN_(DATASETS|BACKENDS)_(\d+)_`)

// unknownEnv reports a variable that names no key: an item the file does
// not have, or a typo.
func unknownEnv(s *Spec, c *collector, name string, known []string) {
	if m := envItemRE.FindStringSubmatch(name); m != nil {
		list := strings.ToLower(m[1])
		elem, n := reflect.TypeFor[Dataset](), len(s.Datasets)
		if list == "backends" {
			elem, n = reflect.TypeFor[Backend](), len(s.Candidates)
		}
		i, _ := strconv.Atoi(m[2])
		found := ""
		envKeys(reflect.New(elem).Elem(), fmt.Sprintf("%s[%d]", list, i), func(path string, _ field, _ reflect.Value) {
			if envName(path) == name {
				found = path
			}
		})
		if found != "" {
			c.add(0, found, name, fmt.Sprintf("the spec has only %d %s entries", n, list))
			return
		}
	}
	msg := "names no spec key (EVALRUN_ + a key path in upper case) and no other evalrun variable"
	if sug := suggest(name, known, 3); sug != "" {
		msg += fmt.Sprintf(" (did you mean %s?)", sug)
	}
	c.add(0, "", name, msg)
}
