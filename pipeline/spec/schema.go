package spec

import (
	"bytes"
	"cmp"
	"errors"
	"fmt"
	"io"
	"math"
	"reflect"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	"go.yaml.in/yaml/v3"
)

var specType, durationType = reflect.TypeFor[Spec](), reflect.TypeFor[time.Duration]()

type field struct {
	key   string
	index []int
	typ   reflect.Type
	tag   reflect.StructTag
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
				in.index = append([]int{i}, in.index...)
				out = append(out, in)
			}
		} else if key != "" && key != "-" {
			out = append(out, field{key, []int{i}, f.Type, f.Tag})
		}
	}
	return out
}

// walker checks the YAML tree against the Spec struct and records, per key
// path ("backends[0].threads"), where it is, so later checks can point at
// the line.
type walker struct {
	c     *collector
	lines map[string]int    // key path -> line of the key (or list item)
	env   map[string]string // key path -> environment variable that set it
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
	for ; path != ""; path = path[:max(strings.LastIndexAny(path, ".["), 0)] {
		if l, ok := w.lines[path]; ok {
			return l
		}
	}
	return 0
}

func join(path, key string) string {
	if path == "" {
		return key
	}
	return path + "." + key
}

const emptySpec = "empty spec (want a YAML mapping with at least name, model and backends)"

// parseYAML returns the top-level mapping, or nil after reporting why there
// is none.
func parseYAML(data []byte, c *collector) *yaml.Node {
	dec := yaml.NewDecoder(bytes.NewReader(data))
	var doc, next yaml.Node
	err := dec.Decode(&doc)
	if err == nil {
		if err = dec.Decode(&next); err == nil {
			c.add(next.Line, "", "", "more than one YAML document (---); a spec is a single document")
			return nil
		}
	}
	switch {
	case errors.Is(err, io.EOF) && (doc.Kind != yaml.DocumentNode || len(doc.Content) == 0 || isNull(doc.Content[0])):
		c.add(0, "", "", emptySpec)
	case !errors.Is(err, io.EOF):
		addYAMLError(c, err)
	case resolve(doc.Content[0]).Kind != yaml.MappingNode:
		c.add(doc.Content[0].Line, "", "", "the top level must be a mapping of keys (name:, model:, ...), got "+describe(doc.Content[0]))
	case aliasBeyond(&doc, MaxSize) != 0:
		c.add(aliasBeyond(&doc, MaxSize), "", "", fmt.Sprintf("aliases expand the spec beyond %d KiB: not a spec", MaxSize>>10))
	default:
		return resolve(doc.Content[0])
	}
	return nil
}

var yamlLineRE = regexp.MustCompile(`^yaml: line (\d+): (.*)$`)

// parserProblems are yaml.v3's parser (not scanner) errors: it reports
// their line 0-based, and leaves it out when it is 0.
var parserProblems = map[string]bool{
	"did not find expected node content": true, "did not find expected '-' indicator": true,
	"did not find expected key": true, "did not find expected ',' or ']'": true,
	"did not find expected ',' or '}'": true, "found undefined tag handle": true,
	"did not find expected <document start>": true, "found duplicate %YAML directive": true,
	"found duplicate %TAG directive": true, "found incompatible YAML document": true,
}

func addYAMLError(c *collector, err error) {
	msg, line := strings.TrimPrefix(err.Error(), "yaml: "), 0
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

var scalarWords = map[string]string{"!!str": "string", "!!int": "integer", "!!float": "number", "!!bool": "boolean", "!!timestamp": "timestamp"}

func describe(n *yaml.Node) string {
	switch n = resolve(n); {
	case n.Kind == yaml.MappingNode:
		return "a mapping"
	case n.Kind == yaml.SequenceNode:
		return "a list"
	case n.Kind != yaml.ScalarNode:
		return "nothing"
	case n.ShortTag() == "!!null":
		return "null"
	case n.ShortTag() == "!!str":
		return fmt.Sprintf("string %q", n.Value)
	}
	return cmp.Or(scalarWords[n.ShortTag()], n.ShortTag()) + " " + n.Value
}

type pair struct{ key, value *yaml.Node }

// pairs flattens a mapping's key/value pairs, expanding YAML merge keys
// (<<: *anchor) first, so that explicit keys win, and reports an explicit
// key given twice.
func (w *walker) pairs(n *yaml.Node, path string, depth int) (all []pair) {
	var explicit []pair
	seen := map[string]int{}
	for i := 0; i+1 < len(n.Content); i += 2 {
		k, v := n.Content[i], n.Content[i+1]
		if k.Kind == yaml.ScalarNode && k.ShortTag() == "!!merge" && depth < 16 {
			srcs := []*yaml.Node{resolve(v)}
			if srcs[0].Kind == yaml.SequenceNode {
				srcs = srcs[0].Content
			}
			for _, src := range srcs {
				if src = resolve(src); src.Kind == yaml.MappingNode {
					all = append(all, w.pairs(src, path, depth+1)...)
				}
			}
			continue
		}
		if first, dup := seen[k.Value]; dup && k.Kind == yaml.ScalarNode && depth == 0 {
			w.c.add(k.Line, path, "", fmt.Sprintf("duplicate key %q (first on line %d)", k.Value, first))
			continue
		}
		seen[k.Value] = k.Line
		explicit = append(explicit, pair{k, v})
	}
	return append(all, explicit...)
}

func stringKey(p pair) bool { return p.key.Kind == yaml.ScalarNode && p.key.ShortTag() == "!!str" }

// mapping checks a YAML mapping against struct type t.
func (w *walker) mapping(n *yaml.Node, t reflect.Type, path string) {
	fields := fieldsOf(t)
	keys := make([]string, len(fields))
	for i, f := range fields {
		keys[i] = f.key
	}
	for _, p := range w.pairs(n, path, 0) {
		k := p.key
		i := -1
		if stringKey(p) {
			i = slices.Index(keys, k.Value)
		}
		switch {
		case !stringKey(p):
			w.c.add(k.Line, "", "", fmt.Sprintf("unknown key %s in %s (keys are lower-case names)", describe(k), cmp.Or(path, "the top level")))
		case i < 0:
			msg := fmt.Sprintf("unknown key %q", join(path, k.Value))
			if s := suggest(k.Value, keys, 1+min(len(k.Value)/5, 1)); s != "" {
				msg += fmt.Sprintf(" (did you mean %q?)", s)
			}
			w.c.add(k.Line, "", "", msg)
		case isNull(p.value):
			delete(w.lines, join(path, k.Value))
		default:
			w.lines[join(path, k.Value)] = k.Line
			w.value(p.value, fields[i].typ, join(path, k.Value))
		}
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

// value checks one node against the Go type it will be decoded into.
func (w *walker) value(n *yaml.Node, t reflect.Type, path string) {
	n = resolve(n) // aliasBeyond bounded the tree with its aliases expanded
	bad := func(want string) {
		w.c.add(n.Line, path, w.env[path], fmt.Sprintf("want %s, got %s", want, describe(n)))
	}
	tag := n.ShortTag()
	if n.Kind != yaml.ScalarNode {
		tag = ""
	}
	switch kind := t.Kind(); {
	case t == durationType:
		if d, err := time.ParseDuration(n.Value); tag != "!!str" {
			bad(`a duration such as "30s" (a number has no unit)`)
		} else if err != nil {
			bad(`a duration such as "30s", "2m" or "1h30m"`)
		} else if d < 0 {
			w.c.add(n.Line, path, w.env[path], "must not be negative, got "+n.Value)
		}
	case kind == reflect.Pointer:
		w.value(n, t.Elem(), path)
	case (kind == reflect.Struct || kind == reflect.Map) && n.Kind != yaml.MappingNode:
		bad("a mapping of keys")
	case kind == reflect.Struct:
		w.mapping(n, t, path)
	case kind == reflect.Map: // plugin options: free-form, string keys only
		for _, p := range w.pairs(n, path, 0) {
			if !stringKey(p) {
				w.c.add(p.key.Line, path, "", fmt.Sprintf("keys must be strings, got %s", describe(p.key)))
			} else {
				w.lines[path+"."+p.key.Value] = p.key.Line
			}
		}
	case kind == reflect.Slice && n.Kind != yaml.SequenceNode:
		bad("a list")
	case kind == reflect.Slice:
		for i, item := range n.Content {
			ip := fmt.Sprintf("%s[%d]", path, i)
			if isNull(item) {
				w.c.add(item.Line, ip, "", "empty list entry")
				continue
			}
			w.lines[ip] = item.Line
			w.value(item, t.Elem(), ip)
		}
	case kind == reflect.String && tag != "!!str":
		bad("a string (quote it if it looks like a number)")
	case kind == reflect.Bool && tag != "!!bool":
		bad("true or false")
	case kind == reflect.Int:
		var i int
		if tag != "!!int" || n.Decode(&i) != nil {
			bad("an integer")
		}
	case kind == reflect.Float64:
		var f float64
		if tag != "!!int" && tag != "!!float" || n.Decode(&f) != nil {
			bad("a number")
		} else if math.IsNaN(f) || math.IsInf(f, 0) {
			bad("a finite number")
		}
	}
}

// suggest returns the known name closest to an unknown one, if it is
// within limit edits (a different case alone always is).
func suggest(name string, known []string, limit int) string {
	best, bestDist := "", limit+1
	for _, k := range known {
		if strings.EqualFold(k, name) {
			return k
		}
		if d := editDistance(strings.ToLower(name), strings.ToLower(k)); d < bestDist {
			best, bestDist = k, d
		}
	}
	return best
}

func editDistance(a, b string) int {
	prev, cur := make([]int, len(b)+1), make([]int, len(b)+1)
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
