package gguf

import (
	"bytes"
	"errors"
	"math"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/evalrun/evalrun/engine/ggml"
)

// rewrite copies every KV and tensor of f into a new Writer.
func rewrite(t testing.TB, f *File) *Writer {
	t.Helper()
	w := NewWriter()
	for _, kv := range f.KVs {
		if err := w.AddKV(kv.Key, kv.Value); err != nil {
			t.Fatalf("AddKV(%q): %v", kv.Key, err)
		}
	}
	for i := range f.Tensors {
		ti := &f.Tensors[i]
		if err := w.AddTensor(ti.Name, ti.Type, ti.Dims, f.TensorData(ti)); err != nil {
			t.Fatalf("AddTensor(%q): %v", ti.Name, err)
		}
	}
	return w
}

func assertSameFile(t *testing.T, want, got *File) {
	t.Helper()
	if got.Alignment != want.Alignment || got.DataOffset != want.DataOffset {
		t.Errorf("alignment %d, data offset %d; want %d, %d", got.Alignment, got.DataOffset, want.Alignment, want.DataOffset)
	}
	if !reflect.DeepEqual(got.KVs, want.KVs) {
		t.Errorf("KVs differ:\n got %v\nwant %v", got.KVs, want.KVs)
	}
	if len(got.Tensors) != len(want.Tensors) {
		t.Fatalf("%d tensors, want %d", len(got.Tensors), len(want.Tensors))
	}
	for i := range want.Tensors {
		a, b := &want.Tensors[i], &got.Tensors[i]
		if !reflect.DeepEqual(a, b) {
			t.Errorf("tensor %d: got %+v, want %+v", i, b, a)
		}
		if !bytes.Equal(want.TensorData(a), got.TensorData(b)) {
			t.Errorf("tensor %q: data differs", a.Name)
		}
	}
}

func isFormatError(err error, field string) bool {
	var fe *FormatError
	return errors.As(err, &fe) && strings.Contains(fe.Field, field)
}

// everyKV holds one value of every GGUF type, including nested, empty and
// string arrays, as AddKV takes them and as Parse returns them.
var everyKV = []struct {
	key  string
	in   any
	want KV
}{
	{"u8", uint8(200), KV{"u8", TypeUint8, uint8(200)}},
	{"i8", int8(-100), KV{"i8", TypeInt8, int8(-100)}},
	{"u16", uint16(65535), KV{"u16", TypeUint16, uint16(65535)}},
	{"i16", int16(-32768), KV{"i16", TypeInt16, int16(-32768)}},
	{"u32", uint32(4294967295), KV{"u32", TypeUint32, uint32(4294967295)}},
	{"i32", int32(-7), KV{"i32", TypeInt32, int32(-7)}},
	{"f32", float32(-1.5e-7), KV{"f32", TypeFloat32, float32(-1.5e-7)}},
	{"bool.true", true, KV{"bool.true", TypeBool, true}},
	{"bool.false", false, KV{"bool.false", TypeBool, false}},
	{"str", "héllo ▁world", KV{"str", TypeString, "héllo ▁world"}},
	{"str.empty", "", KV{"str.empty", TypeString, ""}},
	{"u64", uint64(1 << 63), KV{"u64", TypeUint64, uint64(1 << 63)}},
	{"i64", int64(math.MinInt64), KV{"i64", TypeInt64, int64(math.MinInt64)}},
	{"f64", math.Pi, KV{"f64", TypeFloat64, math.Pi}},
	{"a.u8", []uint8{0, 1, 255}, KV{"a.u8", TypeArray, Array{TypeUint8, []uint8{0, 1, 255}}}},
	{"a.i8", []int8{-128, 127}, KV{"a.i8", TypeArray, Array{TypeInt8, []int8{-128, 127}}}},
	{"a.u16", []uint16{1, 65535}, KV{"a.u16", TypeArray, Array{TypeUint16, []uint16{1, 65535}}}},
	{"a.i16", []int16{-2, 3}, KV{"a.i16", TypeArray, Array{TypeInt16, []int16{-2, 3}}}},
	{"a.u32", []uint32{7, 4000000000}, KV{"a.u32", TypeArray, Array{TypeUint32, []uint32{7, 4000000000}}}},
	{"a.i32", []int32{-1, 2, 3}, KV{"a.i32", TypeArray, Array{TypeInt32, []int32{-1, 2, 3}}}},
	{"a.f32", []float32{0.5, float32(math.Inf(-1))}, KV{"a.f32", TypeArray, Array{TypeFloat32, []float32{0.5, float32(math.Inf(-1))}}}},
	{"a.bool", []bool{true, false, true}, KV{"a.bool", TypeArray, Array{TypeBool, []bool{true, false, true}}}},
	{"a.str", []string{"a", "", "ü"}, KV{"a.str", TypeArray, Array{TypeString, []string{"a", "", "ü"}}}},
	{"a.u64", []uint64{math.MaxUint64}, KV{"a.u64", TypeArray, Array{TypeUint64, []uint64{math.MaxUint64}}}},
	{"a.i64", []int64{-5, 1 << 40}, KV{"a.i64", TypeArray, Array{TypeInt64, []int64{-5, 1 << 40}}}},
	{"a.f64", []float64{1e300, -0.25}, KV{"a.f64", TypeArray, Array{TypeFloat64, []float64{1e300, -0.25}}}},
	{"a.empty", []uint32{}, KV{"a.empty", TypeArray, Array{TypeUint32, []uint32{}}}},
	{"a.empty.str", []string{}, KV{"a.empty.str", TypeArray, Array{TypeString, []string{}}}},
	{"a.nested", []Array{{TypeInt32, []int32{1, 2}}, {TypeString, []string{"x"}}, {TypeArray, []Array{{TypeBool, []bool{}}}}},
		KV{"a.nested", TypeArray, Array{TypeArray, []Array{{TypeInt32, []int32{1, 2}}, {TypeString, []string{"x"}}, {TypeArray, []Array{{TypeBool, []bool{}}}}}}}},
	{"a.explicit", Array{TypeFloat32, []float32{3}}, KV{"a.explicit", TypeArray, Array{TypeFloat32, []float32{3}}}},
	{"", "empty keys are legal", KV{"", TypeString, "empty keys are legal"}},
}

// testTensor is a tensor of a given type with deterministic content.
type testTensor struct {
	name string
	typ  ggml.Type
	dims []uint64
}

var roundTripTensors = []testTensor{
	{"f32.vec", ggml.F32, []uint64{3}}, // 12 bytes: forces padding
	{"f16.mat", ggml.F16, []uint64{5, 3}},
	{"q8_0", ggml.Q8_0, []uint64{64, 2}},
	{"q4_0.3d", ggml.Q4_0, []uint64{32, 2, 3}},
	{"q4_k.4d", ggml.Q4_K, []uint64{256, 1, 2, 1}},
	{"i8", ggml.I8, []uint64{1}},
	{"bf16", ggml.BF16, []uint64{7}},
}

func tensorBytes(t testing.TB, tt testTensor, seed byte) []byte {
	t.Helper()
	rows := uint64(1)
	for _, d := range tt.dims[1:] {
		rows *= d
	}
	rowBytes, err := ggml.RowBytes(tt.typ, int(tt.dims[0]))
	if err != nil {
		t.Fatal(err)
	}
	b := make([]byte, uint64(rowBytes)*rows)
	for i := range b {
		b[i] = byte(i)*31 + seed
	}
	return b
}

func buildEveryKVFile(t testing.TB, alignment uint64) []byte {
	t.Helper()
	w := NewWriter()
	if alignment != 0 {
		if err := w.SetAlignment(alignment); err != nil {
			t.Fatal(err)
		}
	}
	for _, kv := range everyKV {
		if err := w.AddKV(kv.key, kv.in); err != nil {
			t.Fatalf("AddKV(%q): %v", kv.key, err)
		}
	}
	for i, tt := range roundTripTensors {
		if err := w.AddTensor(tt.name, tt.typ, tt.dims, tensorBytes(t, tt, byte(i))); err != nil {
			t.Fatalf("AddTensor(%q): %v", tt.name, err)
		}
	}
	var buf bytes.Buffer
	n, err := w.WriteTo(&buf)
	if err != nil || n != int64(buf.Len()) {
		t.Fatalf("WriteTo: %d bytes, %v (buffer %d)", n, err, buf.Len())
	}
	return buf.Bytes()
}

func TestRoundTrip(t *testing.T) {
	for _, alignment := range []uint64{0, 1, 8, 64, 4096} {
		data := buildEveryKVFile(t, alignment)
		f, err := Parse(data, "roundtrip.gguf")
		if err != nil {
			t.Fatalf("alignment %d: %v", alignment, err)
		}
		wantAlign := alignment
		var wantKVs []KV
		if alignment == 0 {
			wantAlign = 32
		} else {
			wantKVs = append(wantKVs, KV{alignmentKey, TypeUint32, uint32(alignment)})
		}
		for _, kv := range everyKV {
			wantKVs = append(wantKVs, kv.want)
		}
		if f.Version != 3 || f.Alignment != wantAlign || f.DataOffset%wantAlign != 0 || f.Size != int64(len(data)) {
			t.Errorf("alignment %d: version %d, alignment %d, data offset %d", alignment, f.Version, f.Alignment, f.DataOffset)
		}
		if !reflect.DeepEqual(f.KVs, wantKVs) {
			t.Errorf("alignment %d: KVs differ:\n got %#v\nwant %#v", alignment, f.KVs, wantKVs)
		}
		if len(f.Tensors) != len(roundTripTensors) {
			t.Fatalf("%d tensors", len(f.Tensors))
		}
		for i, tt := range roundTripTensors {
			ti := &f.Tensors[i]
			if ti.Name != tt.name || ti.Type != tt.typ || !reflect.DeepEqual(ti.Dims, tt.dims) || ti.Offset%wantAlign != 0 {
				t.Errorf("alignment %d: tensor %d = %+v, want %+v", alignment, i, ti, tt)
			}
			if !bytes.Equal(f.TensorData(ti), tensorBytes(t, tt, byte(i))) {
				t.Errorf("alignment %d: tensor %q data differs", alignment, tt.name)
			}
		}
		// Writing what was read reproduces the file byte for byte.
		var again bytes.Buffer
		if _, err := rewrite(t, f).WriteTo(&again); err != nil || !bytes.Equal(again.Bytes(), data) {
			t.Errorf("alignment %d: re-written file differs (%v)", alignment, err)
		}
	}
}

func TestNoTensorsNoPadding(t *testing.T) {
	w := NewWriter()
	if err := w.AddKV("general.name", "meta only"); err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	if _, err := w.WriteTo(&buf); err != nil {
		t.Fatal(err)
	}
	f, err := Parse(buf.Bytes(), "meta.gguf")
	if err != nil {
		t.Fatal(err)
	}
	if len(f.Tensors) != 0 || f.DataOffset != uint64(buf.Len()) || buf.Len() != 4+4+8+8+8+12+4+8+9 {
		t.Errorf("%d tensors, data offset %d, %d bytes", len(f.Tensors), f.DataOffset, buf.Len())
	}
}

func TestGetters(t *testing.T) {
	w := NewWriter()
	for _, kv := range []struct {
		key string
		v   any
	}{
		{"neg", int32(-3)}, {"big", uint64(math.MaxUint64)}, {"u8", uint8(9)}, {"f32", float32(0.25)},
		{"flag", true}, {"name", "x"}, {"i64s", []int64{-1, math.MaxInt32}}, {"u32s.big", []uint32{1, math.MaxInt32 + 1}},
		{"u16s", []uint16{65535}}, {"i8s", []int8{-128}}, {"u64s", []uint64{1<<31 - 1}}, {"u64s.big", []uint64{1 << 63}}, {"f64s", []float64{0.5}}, {"strs", []string{"a"}},
	} {
		if err := w.AddKV(kv.key, kv.v); err != nil {
			t.Fatal(err)
		}
	}
	var buf bytes.Buffer
	w.WriteTo(&buf)
	f, err := Parse(buf.Bytes(), "getters.gguf")
	if err != nil {
		t.Fatal(err)
	}
	check := func(what string, got, want any, ok, wantOK bool) {
		t.Helper()
		if ok != wantOK || (ok && !reflect.DeepEqual(got, want)) {
			t.Errorf("%s = %v, %v; want %v, %v", what, got, ok, want, wantOK)
		}
	}
	i, ok := f.Int("neg")
	check("Int(neg)", i, int64(-3), ok, true)
	u, ok := f.Uint("neg")
	check("Uint(neg)", u, uint64(0), ok, false)
	u, ok = f.Uint("big")
	check("Uint(big)", u, uint64(math.MaxUint64), ok, true)
	i, ok = f.Int("big")
	check("Int(big)", i, int64(0), ok, false)
	u, ok = f.Uint("u8")
	check("Uint(u8)", u, uint64(9), ok, true)
	fl, ok := f.Float("f32")
	check("Float(f32)", fl, 0.25, ok, true)
	fl, ok = f.Float("u8")
	check("Float(u8)", fl, 9.0, ok, true)
	_, ok = f.Float("name")
	check("Float(name)", nil, nil, ok, false)
	b, ok := f.Bool("flag")
	check("Bool(flag)", b, true, ok, true)
	_, ok = f.Bool("u8")
	check("Bool(u8)", nil, nil, ok, false)
	s, ok := f.String("name")
	check("String(name)", s, "x", ok, true)
	_, ok = f.String("missing")
	check("String(missing)", nil, nil, ok, false)
	_, ok = f.Uint("name")
	check("Uint(name)", nil, nil, ok, false)
	i32s, ok := f.Int32s("i64s")
	check("Int32s(i64s)", i32s, []int32{-1, math.MaxInt32}, ok, true)
	i32s, ok = f.Int32s("u16s")
	check("Int32s(u16s)", i32s, []int32{65535}, ok, true)
	i32s, ok = f.Int32s("i8s")
	check("Int32s(i8s)", i32s, []int32{-128}, ok, true)
	i32s, ok = f.Int32s("u64s")
	check("Int32s(u64s)", i32s, []int32{math.MaxInt32}, ok, true)
	_, ok = f.Int32s("u64s.big")
	check("Int32s(u64s.big)", nil, nil, ok, false)
	_, ok = f.Int32s("u32s.big")
	check("Int32s(u32s.big)", nil, nil, ok, false)
	_, ok = f.Int32s("strs")
	check("Int32s(strs)", nil, nil, ok, false)
	f32s, ok := f.Float32s("f64s")
	check("Float32s(f64s)", f32s, []float32{0.5}, ok, true)
	_, ok = f.Float32s("strs")
	check("Float32s(strs)", nil, nil, ok, false)
	strs, ok := f.Strings("strs")
	check("Strings(strs)", strs, []string{"a"}, ok, true)
	_, ok = f.Strings("name")
	check("Strings(name)", nil, nil, ok, false)
	kv, ok := f.Get("u8")
	check("Get(u8)", kv, KV{"u8", TypeUint8, uint8(9)}, ok, true)
}

func TestWriterRejects(t *testing.T) {
	w := NewWriter()
	if err := w.AddKV("k", uint32(1)); err != nil {
		t.Fatal(err)
	}
	if err := w.AddTensor("t", ggml.F32, []uint64{2}, make([]byte, 8)); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		what string
		err  error
		want string
	}{
		{"duplicate key", w.AddKV("k", uint32(2)), `duplicate key "k"`},
		{"Go int", w.AddKV("n", 5), "Go int"},
		{"struct", w.AddKV("s", struct{}{}), "unsupported value type"},
		{"mismatched array", w.AddKV("a", Array{TypeInt32, []uint32{1}}), "element type i32"},
		{"bad nested array", w.AddKV("a", []Array{{TypeString, []int8{1}}}), "element 0"},
		{"alignment type", w.AddKV(alignmentKey, uint64(64)), "must be uint32"},
		{"alignment 0", w.SetAlignment(0), "power of two"},
		{"alignment 48", w.AddKV(alignmentKey, uint32(48)), "power of two"},
		{"duplicate tensor", w.AddTensor("t", ggml.F32, []uint64{2}, make([]byte, 8)), `duplicate tensor "t"`},
		{"wrong size", w.AddTensor("u", ggml.F16, []uint64{4, 2}, make([]byte, 15)), "want 16"},
		{"no dims", w.AddTensor("u", ggml.F32, nil, nil), "0 dims"},
		{"5 dims", w.AddTensor("u", ggml.F32, []uint64{1, 1, 1, 1, 1}, make([]byte, 4)), "5 dims"},
		{"zero dim", w.AddTensor("u", ggml.F32, []uint64{4, 0}, nil), "dims[1] is 0"},
		{"unknown type", w.AddTensor("u", ggml.Type(99), []uint64{4}, nil), "unknown type 99"},
		{"partial block", w.AddTensor("u", ggml.Q4_0, []uint64{48}, make([]byte, 27)), "block size"},
		{"long name", w.AddTensor(strings.Repeat("n", 64), ggml.F32, []uint64{1}, make([]byte, 4)), "longer than 63"},
		{"overflow", w.AddTensor("u", ggml.F32, []uint64{1 << 40, 1 << 40}, nil), "overflow"},
	} {
		if c.err == nil || !strings.Contains(c.err.Error(), c.want) {
			t.Errorf("%s: error %v, want it to mention %q", c.what, c.err, c.want)
		}
	}
	// Rejected calls leave the writer unchanged.
	var buf bytes.Buffer
	w.WriteTo(&buf)
	f, err := Parse(buf.Bytes(), "after-rejects")
	if err != nil || len(f.KVs) != 1 || len(f.Tensors) != 1 || f.Alignment != 32 {
		t.Fatalf("after rejects: %v, %d KVs, %d tensors", err, len(f.KVs), len(f.Tensors))
	}
}

func TestSetAlignmentReplacesKV(t *testing.T) {
	w := NewWriter()
	w.AddKV("a", "x")
	w.SetAlignment(16)
	w.AddKV("b", "y")
	w.SetAlignment(128)
	w.AddTensor("t", ggml.F32, []uint64{3}, make([]byte, 12))
	var buf bytes.Buffer
	w.WriteTo(&buf)
	f, err := Parse(buf.Bytes(), "align")
	if err != nil {
		t.Fatal(err)
	}
	if f.Alignment != 128 || len(f.KVs) != 3 || f.KVs[1].Key != alignmentKey || f.DataOffset%128 != 0 || buf.Len() != int(f.DataOffset)+128 {
		t.Errorf("alignment %d, KVs %v, data offset %d, size %d", f.Alignment, f.KVs, f.DataOffset, buf.Len())
	}
}

func TestWriteFile(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "out.gguf")
	if err := os.WriteFile(path, []byte("old content"), 0o644); err != nil {
		t.Fatal(err)
	}
	src := openModel(t, "stories260K-q8_0.gguf")
	if err := rewrite(t, src).WriteFile(path); err != nil {
		t.Fatal(err)
	}
	f, err := Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	assertSameFile(t, src, f)
	entries, _ := os.ReadDir(dir)
	if len(entries) != 1 {
		t.Errorf("directory holds %d entries after WriteFile, want only out.gguf", len(entries))
	}
	if st, _ := os.Stat(path); st.Mode().Perm() != 0o644 {
		t.Errorf("mode %v", st.Mode())
	}
	if err := NewWriter().WriteFile(filepath.Join(dir, "no", "such", "dir.gguf")); err == nil {
		t.Error("WriteFile into a missing directory succeeded")
	}
}

// TestEvictKeepsData: evicted pages of a mapped file read back unchanged.
func TestEvictKeepsData(t *testing.T) {
	path := filepath.Join(t.TempDir(), "big.gguf")
	w := NewWriter()
	data := make([]byte, 1<<20)
	for i := range data {
		data[i] = byte(i * 7)
	}
	if err := w.AddTensor("t", ggml.F32, []uint64{1 << 18}, data); err != nil {
		t.Fatal(err)
	}
	if err := w.WriteFile(path); err != nil {
		t.Fatal(err)
	}
	for _, open := range []func(string) (*File, error){Open, OpenCopy} {
		f, err := open(path)
		if err != nil {
			t.Fatal(err)
		}
		ti, _ := f.Tensor("t")
		view := f.TensorData(ti)
		f.Evict(view)      // a copy's pages would be discarded, not read again
		f.Evict(view[:10]) // less than a page: nothing to do
		if !bytes.Equal(view, data) {
			t.Fatalf("copied %v: data changed after Evict", f.Copied())
		}
		f.Close()
	}
}

// ArchContext reads the two facts every model file has, whatever its
// architecture, and names the key at fault.
func TestArchContext(t *testing.T) {
	for _, c := range []struct {
		kvs  map[string]any
		want string
	}{
		{map[string]any{"general.architecture": "gemma3", "gemma3.context_length": uint32(8192)}, ""},
		{map[string]any{"gemma3.context_length": uint32(8192)}, "general.architecture: missing"},
		{map[string]any{"general.architecture": "gemma3"}, "gemma3.context_length: missing"},
		{map[string]any{"general.architecture": "phi3", "phi3.context_length": uint32(0)}, "phi3.context_length: value 0 out of range"},
		{map[string]any{"general.architecture": "phi3", "phi3.context_length": "long"}, "phi3.context_length: missing or not a non-negative integer"},
	} {
		w := NewWriter()
		for _, k := range []string{"general.architecture", "gemma3.context_length", "phi3.context_length"} {
			if v, ok := c.kvs[k]; ok {
				if err := w.AddKV(k, v); err != nil {
					t.Fatal(err)
				}
			}
		}
		path := filepath.Join(t.TempDir(), "m.gguf")
		if err := w.WriteFile(path); err != nil {
			t.Fatal(err)
		}
		f, err := Open(path)
		if err != nil {
			t.Fatal(err)
		}
		arch, n, err := f.ArchContext()
		f.Close()
		switch {
		case c.want == "" && (err != nil || arch != "gemma3" || n != 8192):
			t.Errorf("%v: %q %d %v", c.kvs, arch, n, err)
		case c.want != "" && (err == nil || !strings.Contains(err.Error(), c.want) || !strings.Contains(err.Error(), path)):
			t.Errorf("%v: %v, want %q naming the file", c.kvs, err, c.want)
		}
	}
}
