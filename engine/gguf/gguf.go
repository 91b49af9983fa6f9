// Package gguf reads and writes GGUF model files (versions 2 and 3): the
// metadata key/values, the tensor infos and a read-only view of the tensor
// data. Every field is validated before use, so a damaged or hostile file
// yields a *FormatError naming the field and byte offset, never a panic or
// an allocation larger than the file.
package gguf

import (
	"fmt"
	"math"

	"github.com/evalrun/evalrun/engine/ggml"
)

// ValueType is the GGUF metadata value type id.
type ValueType uint32

// The GGUF metadata value types (gguf.h enum gguf_type).
const (
	TypeUint8   ValueType = 0
	TypeInt8    ValueType = 1
	TypeUint16  ValueType = 2
	TypeInt16   ValueType = 3
	TypeUint32  ValueType = 4
	TypeInt32   ValueType = 5
	TypeFloat32 ValueType = 6
	TypeBool    ValueType = 7
	TypeString  ValueType = 8
	TypeArray   ValueType = 9
	TypeUint64  ValueType = 10
	TypeInt64   ValueType = 11
	TypeFloat64 ValueType = 12
)

var valueTypeNames = [...]string{"u8", "i8", "u16", "i16", "u32", "i32", "f32", "bool", "string", "array", "u64", "i64", "f64"}

// fixedSizes is the encoded size of the fixed-size value types (0 for
// string and array, whose size depends on their content).
var fixedSizes = [...]int{1, 1, 2, 2, 4, 4, 4, 1, 0, 0, 8, 8, 8}

func (t ValueType) valid() bool { return t <= TypeFloat64 }

func (t ValueType) String() string {
	if t.valid() {
		return valueTypeNames[t]
	}
	return fmt.Sprintf("gguf_type(%d)", uint32(t))
}

// Array is an array metadata value. Values is a typed slice matching Elem:
// []uint8, []int8, []uint16, []int16, []uint32, []int32, []float32, []bool,
// []string, []uint64, []int64, []float64, or []Array when Elem is TypeArray.
type Array struct {
	Elem   ValueType
	Values any
}

// Len is the number of elements of the array (0 if Values is not a
// supported slice type).
func (a Array) Len() int {
	switch v := a.Values.(type) {
	case []uint8:
		return len(v)
	case []int8:
		return len(v)
	case []uint16:
		return len(v)
	case []int16:
		return len(v)
	case []uint32:
		return len(v)
	case []int32:
		return len(v)
	case []float32:
		return len(v)
	case []bool:
		return len(v)
	case []string:
		return len(v)
	case []uint64:
		return len(v)
	case []int64:
		return len(v)
	case []float64:
		return len(v)
	case []Array:
		return len(v)
	}
	return 0
}

// KV is one metadata key/value pair. Value has the Go type matching Type:
// uint8, int8, uint16, int16, uint32, int32, float32, bool, string, uint64,
// int64, float64, or Array.
type KV struct {
	Key   string
	Type  ValueType
	Value any
}

// TensorInfo describes one tensor. Dims[0] is the contiguous row length
// (ggml's ne[0]); Offset is relative to File.DataOffset.
type TensorInfo struct {
	Name   string
	Dims   []uint64
	Type   ggml.Type
	Offset uint64
	Size   uint64
}

// NElements is the number of elements of the tensor.
func (ti *TensorInfo) NElements() uint64 {
	n := uint64(1)
	for _, d := range ti.Dims {
		n *= d
	}
	return n
}

// NParams is the number of weights in the file (every tensor's elements).
func (f *File) NParams() uint64 {
	var n uint64
	for i := range f.Tensors {
		n += f.Tensors[i].NElements()
	}
	return n
}

// File is a parsed GGUF file. Tensor data is read through TensorData, a view
// of the underlying bytes (a read-only mapping for Open).
type File struct {
	Path       string
	Version    uint32
	Alignment  uint64
	KVs        []KV
	Tensors    []TensorInfo
	DataOffset uint64 // absolute byte offset of the tensor data section
	Size       int64  // file size in bytes

	data    []byte
	unmap   func() error
	copied  bool // OpenCopy's memory, not a mapping of the file
	kvIndex map[string]int
	tIndex  map[string]int
}

// FormatError reports a malformed file: the field that is wrong and the
// byte offset where it starts.
type FormatError struct {
	File   string
	Field  string
	Offset int64
	Msg    string
}

func (e *FormatError) Error() string {
	return fmt.Sprintf("%s: %s at byte %d: %s", e.File, e.Field, e.Offset, e.Msg)
}

// Copied reports whether the tensor data is a copy in memory of the
// process's own (OpenCopy) rather than a mapping of the file.
func (f *File) Copied() bool { return f.copied }

// Close releases the file mapping. Tensor data views are invalid afterwards;
// metadata (KVs, tensor infos) stays usable.
func (f *File) Close() error {
	f.data = nil
	if f.unmap == nil {
		return nil
	}
	unmap := f.unmap
	f.unmap = nil
	return unmap()
}

// TensorData is the tensor's bytes, a view into the file (read-only when
// the file was opened with Open). It returns nil after Close or for a
// TensorInfo whose range is outside the file.
func (f *File) TensorData(ti *TensorInfo) []byte {
	start := f.DataOffset + ti.Offset
	end := start + ti.Size
	if start < f.DataOffset || end < start || end > uint64(len(f.data)) {
		return nil
	}
	return f.data[start:end:end]
}

// Tensor looks up a tensor by name.
func (f *File) Tensor(name string) (*TensorInfo, bool) {
	i, ok := f.tIndex[name]
	if !ok {
		return nil, false
	}
	return &f.Tensors[i], true
}

// Get looks up a metadata key.
func (f *File) Get(key string) (KV, bool) {
	i, ok := f.kvIndex[key]
	if !ok {
		return KV{}, false
	}
	return f.KVs[i], true
}

// String returns a string value.
func (f *File) String(key string) (string, bool) {
	kv, ok := f.Get(key)
	if !ok {
		return "", false
	}
	s, ok := kv.Value.(string)
	return s, ok
}

// Bool returns a bool value.
func (f *File) Bool(key string) (bool, bool) {
	kv, ok := f.Get(key)
	if !ok {
		return false, false
	}
	b, ok := kv.Value.(bool)
	return b, ok
}

// Uint returns an integer value of any integer type if it is non-negative.
func (f *File) Uint(key string) (uint64, bool) {
	kv, ok := f.Get(key)
	if !ok {
		return 0, false
	}
	return toUint64(kv.Value)
}

// Int returns an integer value of any integer type if it fits in int64.
func (f *File) Int(key string) (int64, bool) {
	kv, ok := f.Get(key)
	if !ok {
		return 0, false
	}
	return toInt64(kv.Value)
}

// Float returns a float32 or float64 value (integers are converted too).
func (f *File) Float(key string) (float64, bool) {
	kv, ok := f.Get(key)
	if !ok {
		return 0, false
	}
	switch v := kv.Value.(type) {
	case float32:
		return float64(v), true
	case float64:
		return v, true
	}
	if i, ok := toInt64(kv.Value); ok {
		return float64(i), true
	}
	if u, ok := toUint64(kv.Value); ok {
		return float64(u), true
	}
	return 0, false
}

// Strings returns a string array.
func (f *File) Strings(key string) ([]string, bool) {
	a, ok := f.array(key)
	if !ok {
		return nil, false
	}
	s, ok := a.Values.([]string)
	return s, ok
}

// Float32s returns a float32 array (a float64 array is converted).
func (f *File) Float32s(key string) ([]float32, bool) {
	a, ok := f.array(key)
	if !ok {
		return nil, false
	}
	switch v := a.Values.(type) {
	case []float32:
		return v, true
	case []float64:
		out := make([]float32, len(v))
		for i, x := range v {
			out[i] = float32(x)
		}
		return out, true
	}
	return nil, false
}

// Int32s returns an integer array of any integer element type, converted to
// int32; it fails if any element is out of the int32 range.
func (f *File) Int32s(key string) ([]int32, bool) {
	a, ok := f.array(key)
	if !ok {
		return nil, false
	}
	if v, ok := a.Values.([]int32); ok {
		return v, true
	}
	n := a.Len()
	if !isIntegerType(a.Elem) {
		return nil, false
	}
	out := make([]int32, n)
	for i := range n {
		x, ok := intElem(a.Values, i)
		if !ok || x < math.MinInt32 || x > math.MaxInt32 {
			return nil, false
		}
		out[i] = int32(x)
	}
	return out, true
}

func (f *File) array(key string) (Array, bool) {
	kv, ok := f.Get(key)
	if !ok {
		return Array{}, false
	}
	a, ok := kv.Value.(Array)
	return a, ok
}

func isIntegerType(t ValueType) bool {
	switch t {
	case TypeUint8, TypeInt8, TypeUint16, TypeInt16, TypeUint32, TypeInt32, TypeUint64, TypeInt64:
		return true
	}
	return false
}

// intElem returns element i of an integer slice as int64 (false if a u64
// element does not fit).
func intElem(values any, i int) (int64, bool) {
	switch v := values.(type) {
	case []uint8:
		return int64(v[i]), true
	case []int8:
		return int64(v[i]), true
	case []uint16:
		return int64(v[i]), true
	case []int16:
		return int64(v[i]), true
	case []uint32:
		return int64(v[i]), true
	case []int32:
		return int64(v[i]), true
	case []int64:
		return v[i], true
	case []uint64:
		if v[i] > math.MaxInt64 {
			return 0, false
		}
		return int64(v[i]), true
	}
	return 0, false
}

func toInt64(v any) (int64, bool) {
	switch x := v.(type) {
	case uint8:
		return int64(x), true
	case int8:
		return int64(x), true
	case uint16:
		return int64(x), true
	case int16:
		return int64(x), true
	case uint32:
		return int64(x), true
	case int32:
		return int64(x), true
	case int64:
		return x, true
	case uint64:
		if x > math.MaxInt64 {
			return 0, false
		}
		return int64(x), true
	}
	return 0, false
}

func toUint64(v any) (uint64, bool) {
	if x, ok := v.(uint64); ok {
		return x, true
	}
	i, ok := toInt64(v)
	if !ok || i < 0 {
		return 0, false
	}
	return uint64(i), true
}

// ArchContext returns general.architecture and ARCH.context_length, the
// facts llama.cpp reads from every model file whatever its architecture:
// a host that does not compute the model itself (the llamacpp plugin
// does) still needs them to plan a run.
func (f *File) ArchContext() (arch string, nCtxTrain int, err error) {
	arch, ok := f.String("general.architecture")
	if !ok || arch == "" {
		return "", 0, fmt.Errorf("%s: metadata general.architecture: missing or not a string", f.Path)
	}
	key := arch + ".context_length"
	n, ok := f.Uint(key)
	switch {
	case !ok:
		return arch, 0, fmt.Errorf("%s: metadata %s: missing or not a non-negative integer", f.Path, key)
	case n == 0 || n > 1<<24:
		return arch, 0, fmt.Errorf("%s: metadata %s: value %d out of range [1, %d]", f.Path, key, n, 1<<24)
	}
	return arch, int(n), nil
}
