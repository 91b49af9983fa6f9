package spec

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"math"
	"reflect"
	"regexp"
	"strconv"
	"strings"
	"time"

	"go.yaml.in/yaml/v3"
)

// The YAML is checked against the Spec struct before yaml.v3 decodes it:
// the decoder would turn 2.5 into 2 for an int, "yes" into true and 12
// into "12", and its errors name Go types, not keys. The walk below reports
// unknown keys, wrong types and duplicate keys with the line they are on
// (environment overrides are in the tree by then, with line 0).

var specType = reflect.TypeFor[Spec]()

var durationType = reflect.TypeFor[time.Duration]()

type field struct {
	key   string
	index []int
	typ   reflect.Type
}

// fieldsOf lists the yaml keys of a struct type, in field order, with the
// fields of inline structs in their place.
func fieldsOf(t reflect.Type) []field {
	var out []field
	for i := range t.NumField() {
		f := t.Field(i)
		key, opts, _ := strings.Cut(f.Tag.Get("yaml"), ",")
		if opts == "inline" {
			for _, in := range fieldsOf(f.Type) {
				out = append(out, field{key: in.key, index: append([]int{i}, in.index...), typ: in.typ})
			}
			continue
		}
		if key == "" || key == "-" {
			continue
		}
		out = append(out, field{key: key, index: []int{i}, typ: f.Type})
	}
	return out
}

// walker records, per key path ("backends[0].threads"), where it is in the
// file, so later checks can point at the line.
type walker struct {
	c     *collector
	lines map[string]int    // key path -> line of the key (or list item)
	env   map[string]string // key path -> environment variable that set it
	nodes int               // nodes visited; aliases can make a small file huge
}

// maxNodes bounds the walk: a few aliases nested in each other ("billion
// laughs") would otherwise expand exponentially.
const maxNodes = 100_000

// visit counts a node and reports false once the file is too large to walk.
func (w *walker) visit(n *yaml.Node) bool {
	w.nodes++
	if w.nodes == maxNodes {
		w.c.add(n.Line, "", "", fmt.Sprintf("too many values (over %d, counting aliases expanded)", maxNodes))
	}
	return w.nodes < maxNodes
}

func newWalker(c *collector) *walker {
	return &walker{c: c, lines: map[string]int{}, env: map[string]string{}}
}

// has reports whether a key was given, in the file or the environment.
func (w *walker) has(path string) bool {
	_, inFile := w.lines[path]
	_, inEnv := w.env[path]
	return inFile || inEnv
}

// line is the line of a key path, or of its nearest ancestor in the file.
func (w *walker) line(path string) int {
	for path != "" {
		if l, ok := w.lines[path]; ok {
			return l
		}
		path = parentPath(path)
	}
	return 0
}

func parentPath(path string) string {
	i := strings.LastIndexAny(path, ".[")
	if i < 0 {
		return ""
	}
	return path[:i]
}

func join(path, key string) string {
	if path == "" {
		return key
	}
	return path + "." + key
}

var yamlLineRE = regexp.MustCompile(`^yaml: line (\d+): (.*)$`)

// parseYAML returns the top-level mapping, or nil after reporting why there
// is none.
func parseYAML(data []byte, c *collector) *yaml.Node {
	dec := yaml.NewDecoder(bytes.NewReader(data))
	var doc yaml.Node
	if err := dec.Decode(&doc); err != nil {
		if errors.Is(err, io.EOF) {
			c.add(0, "", "", "empty spec (want a YAML mapping with at least name, model and backends)")
		} else {
			addYAMLError(c, err)
		}
		return nil
	}
	var next yaml.Node
	if err := dec.Decode(&next); err == nil {
		c.add(next.Line, "", "", "more than one YAML document (---); a spec is a single document")
		return nil
	} else if !errors.Is(err, io.EOF) {
		addYAMLError(c, err)
		return nil
	}
	if doc.Kind != yaml.DocumentNode || len(doc.Content) == 0 || isNull(doc.Content[0]) {
		c.add(0, "", "", "empty spec (want a YAML mapping with at least name, model and backends)")
		return nil
	}
	root := resolve(doc.Content[0])
	if root.Kind != yaml.MappingNode {
		c.add(root.Line, "", "", "the top level must be a mapping of keys (name:, model:, ...), got "+describe(root))
		return nil
	}
	return root
}

// parserProblems are yaml.v3's parser (not scanner) errors: it reports
// their line 0-based, and leaves it out when it is 0.
var parserProblems = map[string]bool{
	"did not find expected node content":     true,
	"did not find expected '-' indicator":    true,
	"did not find expected key":              true,
	"did not find expected ',' or ']'":       true,
	"did not find expected ',' or '}'":       true,
	"found undefined tag handle":             true,
	"did not find expected <document start>": true,
	"found duplicate %YAML directive":        true,
	"found duplicate %TAG directive":         true,
	"found incompatible YAML document":       true,
}

func addYAMLError(c *collector, err error) {
	msg := strings.TrimPrefix(err.Error(), "yaml: ")
	line := 0
	if m := yamlLineRE.FindStringSubmatch(err.Error()); m != nil {
		line, _ = strconv.Atoi(m[1])
		msg = m[2]
	}
	if parserProblems[msg] {
		line++
	}
	c.add(line, "", "", "invalid YAML: "+msg)
}

// resolve follows aliases (*anchor) to the node they name.
func resolve(n *yaml.Node) *yaml.Node {
	for i := 0; n.Kind == yaml.AliasNode && n.Alias != nil && i < 64; i++ {
		n = n.Alias
	}
	return n
}

func isNull(n *yaml.Node) bool {
	n = resolve(n)
	return n.Kind == yaml.ScalarNode && n.ShortTag() == "!!null"
}

func describe(n *yaml.Node) string {
	n = resolve(n)
	switch n.Kind {
	case yaml.MappingNode:
		return "a mapping"
	case yaml.SequenceNode:
		return "a list"
	case yaml.ScalarNode:
		switch n.ShortTag() {
		case "!!str":
			return fmt.Sprintf("string %q", n.Value)
		case "!!int":
			return "integer " + n.Value
		case "!!float":
			return "number " + n.Value
		case "!!bool":
			return "boolean " + n.Value
		case "!!null":
			return "null"
		case "!!timestamp":
			return "timestamp " + n.Value
		}
		return n.ShortTag() + " " + n.Value
	}
	return "nothing"
}

type pair struct{ key, value *yaml.Node }

// pairs flattens a mapping's key/value pairs, expanding YAML merge keys
// (<<: *anchor); explicit keys come after merged ones and so win.
func pairs(n *yaml.Node, depth int) (merged, explicit []pair) {
	for i := 0; i+1 < len(n.Content); i += 2 {
		k, v := n.Content[i], n.Content[i+1]
		if k.Kind == yaml.ScalarNode && k.ShortTag() == "!!merge" && depth < 16 {
			v = resolve(v)
			srcs := []*yaml.Node{v}
			if v.Kind == yaml.SequenceNode {
				srcs = v.Content
			}
			for _, src := range srcs {
				if src = resolve(src); src.Kind == yaml.MappingNode {
					m, e := pairs(src, depth+1)
					merged = append(merged, m...)
					merged = append(merged, e...)
				}
			}
			continue
		}
		explicit = append(explicit, pair{k, v})
	}
	return merged, explicit
}

// mapping checks a YAML mapping against struct type t.
func (w *walker) mapping(n *yaml.Node, t reflect.Type, path string) {
	fields := fieldsOf(t)
	byKey := map[string]field{}
	for _, f := range fields {
		byKey[f.key] = f
	}
	merged, explicit := pairs(n, 0)
	seen := map[string]int{}
	for _, p := range explicit {
		if p.key.Kind == yaml.ScalarNode {
			if first, dup := seen[p.key.Value]; dup {
				w.c.add(p.key.Line, "", "", fmt.Sprintf("duplicate key %q (first on line %d)", join(path, p.key.Value), first))
				continue
			}
			seen[p.key.Value] = p.key.Line
		}
	}
	for _, p := range append(merged, explicit...) {
		k := p.key
		if k.Kind != yaml.ScalarNode || k.ShortTag() != "!!str" {
			w.c.add(k.Line, "", "", fmt.Sprintf("unknown key %s in %s (keys are lower-case names)", describe(k), orTop(path)))
			continue
		}
		f, ok := byKey[k.Value]
		if !ok {
			msg := fmt.Sprintf("unknown key %q", join(path, k.Value))
			if s := suggest(k.Value, fields); s != "" {
				msg += fmt.Sprintf(" (did you mean %q?)", s)
			}
			w.c.add(k.Line, "", "", msg)
			continue
		}
		child := join(path, k.Value)
		if isNull(p.value) {
			delete(w.lines, child)
			continue
		}
		w.lines[child] = k.Line
		w.value(p.value, f.typ, child)
	}
	// "key:" with nothing after it reads as absent: the decoder would
	// otherwise zero the field and its default.
	kept := n.Content[:0]
	for i := 0; i+1 < len(n.Content); i += 2 {
		if !isNull(n.Content[i+1]) {
			kept = append(kept, n.Content[i], n.Content[i+1])
		}
	}
	n.Content = kept
}

func orTop(path string) string {
	if path == "" {
		return "the top level"
	}
	return path
}

// value checks one node against the Go type it will be decoded into.
func (w *walker) value(n *yaml.Node, t reflect.Type, path string) {
	n = resolve(n)
	if !w.visit(n) {
		return
	}
	bad := func(want string) {
		w.c.add(n.Line, path, w.env[path], fmt.Sprintf("want %s, got %s", want, describe(n)))
	}
	if t == durationType {
		if n.Kind != yaml.ScalarNode || n.ShortTag() != "!!str" {
			bad(`a duration such as "30s" (a number has no unit)`)
		} else if d, err := time.ParseDuration(n.Value); err != nil {
			bad(`a duration such as "30s", "2m" or "1h30m"`)
		} else if d < 0 {
			w.c.add(n.Line, path, w.env[path], "must not be negative, got "+n.Value)
		}
		return
	}
	switch t.Kind() {
	case reflect.Struct:
		if n.Kind != yaml.MappingNode {
			bad("a mapping of keys")
			return
		}
		w.mapping(n, t, path)
	case reflect.Slice:
		if n.Kind != yaml.SequenceNode {
			bad("a list")
			return
		}
		for i, item := range n.Content {
			ip := fmt.Sprintf("%s[%d]", path, i)
			if isNull(item) {
				w.c.add(item.Line, ip, "", "empty list entry")
				continue
			}
			w.lines[ip] = item.Line
			w.value(item, t.Elem(), ip)
		}
	case reflect.Map:
		if n.Kind != yaml.MappingNode {
			bad("a mapping of keys")
			return
		}
		w.freeKeys(n, path)
	case reflect.Pointer:
		w.value(n, t.Elem(), path)
	case reflect.String:
		if n.Kind != yaml.ScalarNode || n.ShortTag() != "!!str" {
			bad("a string (quote it if it looks like a number)")
		}
	case reflect.Bool:
		if n.Kind != yaml.ScalarNode || n.ShortTag() != "!!bool" {
			bad("true or false")
		}
	case reflect.Int:
		var i int
		if n.Kind != yaml.ScalarNode || n.ShortTag() != "!!int" || n.Decode(&i) != nil {
			bad("an integer")
		}
	case reflect.Float64:
		var f float64
		tag := n.ShortTag()
		if n.Kind != yaml.ScalarNode || (tag != "!!int" && tag != "!!float") || n.Decode(&f) != nil {
			bad("a number")
		} else if math.IsNaN(f) || math.IsInf(f, 0) {
			bad("a finite number")
		}
	default:
		w.c.add(n.Line, path, "", "internal error: no check for Go type "+t.String())
	}
}

// freeKeys checks that a free-form map (plugin options) can travel as
// JSON, string keys only and no key twice, and records where each key is.
func (w *walker) freeKeys(n *yaml.Node, path string) {
	merged, explicit := pairs(n, 0)
	seen := map[string]int{}
	for _, p := range explicit {
		if first, dup := seen[p.key.Value]; dup && p.key.Kind == yaml.ScalarNode {
			w.c.add(p.key.Line, path, "", fmt.Sprintf("duplicate key %q (first on line %d)", p.key.Value, first))
		}
		seen[p.key.Value] = p.key.Line
	}
	for _, p := range append(merged, explicit...) {
		if p.key.Kind != yaml.ScalarNode || p.key.ShortTag() != "!!str" {
			w.c.add(p.key.Line, path, "", fmt.Sprintf("keys must be strings, got %s", describe(p.key)))
			continue
		}
		w.lines[path+"."+p.key.Value] = p.key.Line
	}
}

// suggest returns the known key closest to an unknown one, if it is close.
func suggest(key string, fields []field) string {
	best, bestDist := "", 1<<30
	for _, f := range fields {
		if strings.EqualFold(f.key, key) {
			return f.key
		}
		d := editDistance(strings.ToLower(key), f.key)
		if d < bestDist {
			best, bestDist = f.key, d
		}
	}
	limit := 2
	if len(key) <= 4 {
		limit = 1
	}
	if bestDist <= limit {
		return best
	}
	return ""
}

func editDistance(a, b string) int {
	prev := make([]int, len(b)+1)
	cur := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
		}
		prev, cur = cur, prev
	}
	return prev[len(b)]
}
