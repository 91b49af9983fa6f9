// Package kernels reads and writes the kernel list of the llama.cpp RKNN
// backend (mat_kernel_size.json): the named matmul shapes it may offload to
// the NPU. Shapes are in math orientation (X·W): "src0" is the activations
// T×K (row = T tokens, col = K), "src1" the weights K×N.
package kernels

import (
	"bytes"
	"cmp"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"

	"github.com/evalrun/evalrun/engine"
	"github.com/evalrun/evalrun/internal/atomicfile"
	"github.com/evalrun/evalrun/internal/userfile"
)

// Shape is one matrix's size.
type Shape struct {
	Row int `json:"row"`
	Col int `json:"col"`
}

// Pair is one offloadable matmul: activations Src0 (T×K) times weights Src1
// (K×N), for the graph node Name ("ffn_up-0", "result_output").
type Pair struct {
	Src0 Shape  `json:"src0"`
	Src1 Shape  `json:"src1"`
	Name string `json:"name"`
}

// T, K and N are the matmul dimensions of the pair.
func (p Pair) T() int { return p.Src0.Row }
func (p Pair) K() int { return p.Src0.Col }
func (p Pair) N() int { return p.Src1.Col }

// Shape is "T×K×N", the form plan entries use.
func (p Pair) Shape() string { return fmt.Sprintf("%d×%d×%d", p.T(), p.K(), p.N()) }

// NewPair builds the pair of a matmul of T tokens, K inputs and N outputs.
func NewPair(name string, T, K, N int) Pair {
	return Pair{Src0: Shape{Row: T, Col: K}, Src1: Shape{Row: K, Col: N}, Name: name}
}

// List is the file's content.
type List struct {
	Pairs []Pair `json:"pairs"`
}

// Match reports whether the list allows the matmul: like the seed backend's
// supports_op, some pair must have this name and exactly this shape.
func (l List) Match(name string, T, K, N int) bool {
	for _, p := range l.Pairs {
		if p.Name == name && p.Src0.Row == T && p.Src0.Col == K && p.Src1.Row == K && p.Src1.Col == N {
			return true
		}
	}
	return false
}

// Validate checks every pair; errors start with file and name the entry:
// `kernels.json: pairs[3] ("ffn_up-0"): src0.col 2048 != src1.row 4096`.
func (l List) Validate(file string) error {
	seen := map[Pair]int{}
	for i, p := range l.Pairs {
		where := fmt.Sprintf("%s: pairs[%d] (%q)", file, i, p.Name)
		if p.Name == "" {
			return fmt.Errorf("%s: pairs[%d]: missing name", file, i)
		}
		for _, f := range []struct {
			field string
			v     int
		}{{"src0.row", p.Src0.Row}, {"src0.col", p.Src0.Col}, {"src1.row", p.Src1.Row}, {"src1.col", p.Src1.Col}} {
			if f.v <= 0 {
				return fmt.Errorf("%s: %s %d must be > 0", where, f.field, f.v)
			}
		}
		if p.Src0.Col != p.Src1.Row {
			return fmt.Errorf("%s: src0.col %d != src1.row %d", where, p.Src0.Col, p.Src1.Row)
		}
		if j, dup := seen[p]; dup {
			return fmt.Errorf("%s: duplicate of pairs[%d] (same name and shape %s)", where, j, p.Shape())
		}
		seen[p] = i
	}
	return nil
}

// Parse decodes and validates a kernel list; file names it in errors.
// Syntax errors carry line and column; unknown fields are errors (a typo
// would otherwise silently drop a size).
func Parse(data []byte, file string) (List, error) {
	var top struct {
		Pairs *[]json.RawMessage `json:"pairs"`
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&top); err != nil {
		return List{}, jsonErr(file, "", data, 0, err)
	}
	if dec.More() {
		return List{}, fmt.Errorf("%s: %s: unexpected data after the JSON object", file, lineCol(data, dec.InputOffset()))
	}
	if top.Pairs == nil {
		return List{}, fmt.Errorf("%s: missing \"pairs\" array", file)
	}
	l := List{Pairs: make([]Pair, len(*top.Pairs))}
	var cursor int64 // entries appear in order: search each after the last
	for i, raw := range *top.Pairs {
		at := rawOffset(data, raw, cursor)
		cursor = at + int64(len(raw))
		d := json.NewDecoder(bytes.NewReader(raw))
		d.DisallowUnknownFields()
		if err := d.Decode(&l.Pairs[i]); err != nil {
			return List{}, jsonErr(file, fmt.Sprintf("pairs[%d]", i), data, at, err)
		}
	}
	if err := l.Validate(file); err != nil {
		return List{}, err
	}
	return l, nil
}

// MaxFileSize bounds a kernel list file (a real one is a few KB).
const MaxFileSize = 16 << 20

// Load reads and parses a kernel list file (a regular file of at most
// MaxFileSize bytes: a FIFO or a device is refused, not read).
func Load(path string) (List, error) {
	data, err := userfile.ReadFile(path, MaxFileSize)
	if err != nil {
		return List{}, err
	}
	return Parse(data, path)
}

// WriteTo writes the list as JSON, one pair per line, in the seed's field
// order (src0, src1, name).
func (l List) WriteTo(w io.Writer) (int64, error) {
	var b bytes.Buffer
	b.WriteString("{\"pairs\":[")
	for i, p := range l.Pairs {
		js, err := json.Marshal(p)
		if err != nil {
			return 0, err
		}
		if i > 0 {
			b.WriteByte(',')
		}
		b.WriteString("\n  ")
		b.Write(js)
	}
	if len(l.Pairs) > 0 {
		b.WriteString("\n")
	}
	b.WriteString("]}\n")
	return b.WriteTo(w)
}

// WriteFile writes the list to path atomically (package atomicfile).
func (l List) WriteFile(path string) error {
	if err := l.Validate(path); err != nil {
		return err
	}
	var b bytes.Buffer
	if _, err := l.WriteTo(&b); err != nil {
		return err
	}
	return atomicfile.WriteFile(path, b.Bytes())
}

// OpNames are the base names of the engine's weight matmuls, in graph order.
var OpNames = engine.MatMulOpNames()

// CheckOps rejects op filters that name no matmul of the engine's graphs.
func CheckOps(ops []string) error {
	for _, o := range ops {
		known := false
		for _, n := range OpNames {
			known = known || o == n
		}
		if !known {
			return fmt.Errorf("unknown op %q (known: %s)", o, strings.Join(OpNames, ", "))
		}
	}
	return nil
}

// BaseName strips the layer suffix: "ffn_up-0" -> "ffn_up".
func BaseName(name string) string {
	if i := strings.LastIndexByte(name, '-'); i > 0 {
		digits := name[i+1:]
		if digits != "" && strings.Trim(digits, "0123456789") == "" {
			return name[:i]
		}
	}
	return name
}

// ForModel lists every weight matmul the model runs for each batch size in
// tokens (all rows requesting logits, as a perplexity batch), optionally only
// those whose op is in ops (base names: "ffn_up", "result_output", ...).
func ForModel(m *engine.Model, tokens []int, ops []string) List {
	batches := make([]Batch, len(tokens))
	for i, t := range tokens {
		batches[i] = Batch{Tokens: t, Outputs: t}
	}
	return ForBatches(m, batches, ops)
}

// Batch is a forward pass of Tokens tokens of which Outputs (the last ones)
// have logits: the last layer's FFN and the output head run on Outputs
// rows only.
type Batch struct{ Tokens, Outputs int }

// ForBatches lists the weight matmuls of m (those of ops, all if empty) for
// each forward pass, each shape once, in pass order.
func ForBatches(m *engine.Model, batches []Batch, ops []string) List {
	var l List
	seen := map[Pair]bool{}
	for _, b := range batches {
		for _, op := range m.MatMulOpsOutputs(b.Tokens, b.Outputs) {
			if !opSelected(op.Name, ops) {
				continue
			}
			p := NewPair(op.Name, op.T, op.K, op.N)
			if !seen[p] { // a repeated shape adds nothing
				seen[p] = true
				l.Pairs = append(l.Pairs, p)
			}
		}
	}
	return l
}

func opSelected(name string, ops []string) bool {
	if len(ops) == 0 {
		return true
	}
	base := BaseName(name)
	for _, o := range ops {
		if o == base || o == name {
			return true
		}
	}
	return false
}

// jsonErr turns a decoder error into "file: [entry: ]line L, column C: msg".
// base is the offset of the decoded fragment inside data.
func jsonErr(file, entry string, data []byte, base int64, err error) error {
	prefix := file + ": "
	if entry != "" {
		prefix += entry + ": "
	}
	var se *json.SyntaxError
	var te *json.UnmarshalTypeError
	switch {
	case errors.As(err, &se):
		return fmt.Errorf("%s%s: %v", prefix, lineCol(data, base+se.Offset-1), se)
	case errors.As(err, &te):
		field := te.Field
		if field == "" {
			field = "value"
		}
		return fmt.Errorf("%s%s: %s: want %s, got JSON %s", prefix, lineCol(data, base+te.Offset), field, te.Type, te.Value)
	case errors.Is(err, io.EOF):
		return fmt.Errorf("%sempty input (want {\"pairs\":[...]})", prefix)
	case errors.Is(err, io.ErrUnexpectedEOF):
		return fmt.Errorf("%s%s: unexpected end of input", prefix, lineCol(data, int64(len(data))))
	}
	// Unknown fields: the decoder gives no offset; the entry names the place.
	return fmt.Errorf("%s%s", prefix, strings.TrimPrefix(err.Error(), "json: "))
}

// lineCol formats a byte offset as 1-based line and column.
func lineCol(data []byte, off int64) string {
	off = min(max(off, 0), int64(len(data)))
	line := 1 + bytes.Count(data[:off], []byte{'\n'})
	col := off - int64(bytes.LastIndexByte(data[:off], '\n'))
	return fmt.Sprintf("line %d, column %d", line, col)
}

// rawOffset finds where a RawMessage (a copy, not a subslice of data) sits in
// data at or after from: the decoder keeps its bytes verbatim.
func rawOffset(data, raw []byte, from int64) int64 {
	if i := bytes.Index(data[from:], raw); i >= 0 {
		return from + int64(i)
	}
	return from
}

// Passes splits Eval calls into the forward passes an engine plugin decodes
// them in (at most evalBatch tokens each, a call's logit rows falling in its
// last passes), each pass once, smallest first.
func Passes(evals []Batch, evalBatch int) []Batch {
	var out []Batch
	for _, e := range evals {
		from := e.Tokens - e.Outputs // first row with logits
		for lo := 0; lo < e.Tokens; lo += evalBatch {
			hi := min(lo+evalBatch, e.Tokens)
			if b := (Batch{hi - lo, hi - max(lo, min(from, hi))}); !slices.Contains(out, b) {
				out = append(out, b)
			}
		}
	}
	slices.SortFunc(out, func(a, b Batch) int { return cmp.Or(a.Tokens-b.Tokens, a.Outputs-b.Outputs) })
	return out
}
