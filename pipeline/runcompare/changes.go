package runcompare

import (
	"fmt"
	"slices"
	"sort"
	"strings"

	"github.com/evalrun/evalrun/pipeline/summary"
)

// Change is one difference between the two runs' setups: what triage asks
// first ("what changed?"), before any statistic.
type Change struct {
	What string `json:"what"` // "spec backends[npu-int8].options.type", "plugin npu-int8 sha256", "evalrun"
	Base string `json:"base"` // "" when the base run has none
	New  string `json:"new"`
}

// changes lists how new's setup differs from base's: the effective specs
// (environment overrides and defaults applied), the plugins each backend
// ran (version, device, binary sha256, CPU kernels), the model and dataset
// digests, evalrun's version and the machine. The spec's differences come
// first, in key order.
func changes(base, new *summary.Summary) []Change {
	var out []Change
	add := func(what, b, n string) {
		if b != n {
			out = append(out, Change{What: what, Base: b, New: n})
		}
	}
	bs, ns := flatten(base.Run.EffectiveSpec), flatten(new.Run.EffectiveSpec)
	for _, k := range sortedKeys(bs, ns) {
		if isRunPath(k) {
			continue
		}
		add("spec "+k, bs[k], ns[k])
	}
	newBackends := map[string]summary.BackendSummary{}
	for _, b := range backendsOf(new) {
		newBackends[b.Name] = b
	}
	for _, bb := range backendsOf(base) {
		nb, ok := newBackends[bb.Name]
		if !ok {
			continue // the spec's difference says so
		}
		bi, ni := info(bb), info(nb)
		add("plugin "+bb.Name, bi.Name+" "+bi.Version, ni.Name+" "+ni.Version)
		add("plugin "+bb.Name+" device", bi.Device, ni.Device)
		add("plugin "+bb.Name+" sha256", short(bb.PluginSHA256), short(nb.PluginSHA256))
		add("plugin "+bb.Name+" kernels", kernels(bb), kernels(nb))
	}
	add("model sha256", short(base.Model.SHA256), short(new.Model.SHA256))
	bd, nd := datasets(base), datasets(new)
	for _, k := range sortedKeys(bd, nd) {
		add("dataset "+k+" sha256", short(bd[k]), short(nd[k]))
	}
	add("evalrun", version(base.Run), version(new.Run))
	add("machine", machine(base.Run.Host), machine(new.Run.Host))
	return out
}

func backendsOf(s *summary.Summary) []summary.BackendSummary {
	return append([]summary.BackendSummary{s.Reference}, s.Backends...)
}

func info(b summary.BackendSummary) summary.PluginInfo {
	if b.Info == nil {
		return summary.PluginInfo{}
	}
	return *b.Info
}

func kernels(b summary.BackendSummary) string {
	if b.Load == nil {
		return ""
	}
	return b.Load.Kernels
}

func datasets(s *summary.Summary) map[string]string {
	out := map[string]string{}
	for _, d := range s.Datasets {
		out[d.Name] = d.SHA256
	}
	return out
}

func version(r summary.RunInfo) string {
	return strings.TrimSpace(r.EvalrunVersion + " " + r.GitCommit)
}

func machine(h summary.HostInfo) string {
	return fmt.Sprintf("%s, %d CPUs, %s/%s", h.CPUModel, h.CPUs, h.OS, h.Arch)
}

// short is a digest's first 12 hex digits: enough to tell two apart.
func short(sha string) string {
	if len(sha) > 12 {
		return sha[:12]
	}
	return sha
}

// isRunPath reports whether a spec key names where this run writes rather
// than what it computes.
func isRunPath(key string) bool {
	return strings.HasPrefix(key, "output.dir") || key == "name"
}

// flatten turns a spec into key paths ("gates.kld_mean_max",
// "backends[npu-int8].options.type") and printed values; a list of
// objects with a name is keyed by the names, so that reordering or adding
// a backend does not shift every key after it.
func flatten(v any) map[string]string {
	out := map[string]string{}
	var walk func(prefix string, v any)
	walk = func(prefix string, v any) {
		switch v := v.(type) {
		case map[string]any:
			for k, x := range v {
				walk(join(prefix, k), x)
			}
		case []any:
			for i, x := range v {
				key := fmt.Sprintf("%s[%d]", prefix, i)
				if m, ok := x.(map[string]any); ok {
					if name, ok := m["name"].(string); ok && name != "" {
						key = fmt.Sprintf("%s[%s]", prefix, name)
					}
				}
				walk(key, x)
			}
		case nil:
		default:
			out[prefix] = fmt.Sprint(v)
		}
	}
	walk("", v)
	return out
}

func join(prefix, key string) string {
	if prefix == "" {
		return key
	}
	return prefix + "." + key
}

func sortedKeys(a, b map[string]string) []string {
	var keys []string
	for k := range a {
		keys = append(keys, k)
	}
	for k := range b {
		if _, ok := a[k]; !ok {
			keys = append(keys, k)
		}
	}
	sort.Strings(keys)
	return slices.Compact(keys)
}
