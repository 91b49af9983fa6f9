package gguf

import (
	"bufio"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math"
	"math/bits"

	"github.com/evalrun/evalrun/engine/ggml"
	"github.com/evalrun/evalrun/internal/atomicfile"
)

// Writer builds a GGUF version 3 file. KVs and tensors are written in the
// order they were added. Tensor data slices are kept by reference and must
// not change until the file is written.
type Writer struct {
	alignment uint64
	kvs       []KV
	kvIndex   map[string]int
	tensors   []TensorInfo
	data      [][]byte
	tIndex    map[string]int
}

// NewWriter returns an empty writer with the default alignment of 32.
func NewWriter() *Writer {
	return &Writer{alignment: defaultAlignment, kvIndex: map[string]int{}, tIndex: map[string]int{}}
}

// SetAlignment sets the data alignment (a power of two that fits in u32) and
// records it as the general.alignment KV, replacing an earlier one.
func (w *Writer) SetAlignment(n uint64) error {
	if n == 0 || n&(n-1) != 0 || n > math.MaxUint32 {
		return fmt.Errorf("gguf: alignment %d is not a power of two in u32 range", n)
	}
	w.alignment = n
	kv := KV{Key: alignmentKey, Type: TypeUint32, Value: uint32(n)}
	if i, ok := w.kvIndex[alignmentKey]; ok {
		w.kvs[i] = kv
		return nil
	}
	w.kvIndex[alignmentKey] = len(w.kvs)
	w.kvs = append(w.kvs, kv)
	return nil
}

// AddKV adds a metadata value, its GGUF type inferred from the Go type:
// uint8, int8, uint16, int16, uint32, int32, float32, bool, string, uint64,
// int64, float64, a slice of one of those (an array), Array, or []Array (an
// array of arrays). Go int is refused because its GGUF width would be a
// guess. A repeated key is an error; general.alignment must be a u32 power
// of two and also sets the alignment.
func (w *Writer) AddKV(key string, value any) error {
	if _, dup := w.kvIndex[key]; dup {
		return fmt.Errorf("gguf: duplicate key %q", key)
	}
	t, v, err := inferValue(value, 0)
	if err != nil {
		return fmt.Errorf("gguf: key %q: %w", key, err)
	}
	if key == alignmentKey {
		a, ok := v.(uint32)
		if !ok {
			return fmt.Errorf("gguf: %s must be uint32, got %s", alignmentKey, t)
		}
		return w.SetAlignment(uint64(a))
	}
	w.kvIndex[key] = len(w.kvs)
	w.kvs = append(w.kvs, KV{Key: key, Type: t, Value: v})
	return nil
}

// inferValue maps a Go value to its GGUF type and the canonical stored form
// (plain slices become Array).
func inferValue(value any, depth int) (ValueType, any, error) {
	switch v := value.(type) {
	case uint8:
		return TypeUint8, v, nil
	case int8:
		return TypeInt8, v, nil
	case uint16:
		return TypeUint16, v, nil
	case int16:
		return TypeInt16, v, nil
	case uint32:
		return TypeUint32, v, nil
	case int32:
		return TypeInt32, v, nil
	case float32:
		return TypeFloat32, v, nil
	case bool:
		return TypeBool, v, nil
	case string:
		return TypeString, v, nil
	case uint64:
		return TypeUint64, v, nil
	case int64:
		return TypeInt64, v, nil
	case float64:
		return TypeFloat64, v, nil
	case Array:
		if err := checkArray(v, depth+1); err != nil {
			return 0, nil, err
		}
		return TypeArray, v, nil
	case int:
		return 0, nil, errors.New("Go int has no fixed GGUF type; use int32, int64, uint32 or uint64")
	}
	elem, ok := sliceElemType(value)
	if !ok {
		return 0, nil, fmt.Errorf("unsupported value type %T", value)
	}
	a := Array{Elem: elem, Values: value}
	if err := checkArray(a, depth+1); err != nil {
		return 0, nil, err
	}
	return TypeArray, a, nil
}

// sliceElemType is the GGUF element type of a supported slice.
func sliceElemType(values any) (ValueType, bool) {
	switch values.(type) {
	case []uint8:
		return TypeUint8, true
	case []int8:
		return TypeInt8, true
	case []uint16:
		return TypeUint16, true
	case []int16:
		return TypeInt16, true
	case []uint32:
		return TypeUint32, true
	case []int32:
		return TypeInt32, true
	case []float32:
		return TypeFloat32, true
	case []bool:
		return TypeBool, true
	case []string:
		return TypeString, true
	case []uint64:
		return TypeUint64, true
	case []int64:
		return TypeInt64, true
	case []float64:
		return TypeFloat64, true
	case []Array:
		return TypeArray, true
	}
	return 0, false
}

// checkArray verifies that Values matches Elem, recursively, within the
// nesting depth the reader accepts.
func checkArray(a Array, depth int) error {
	if depth > maxArrayDepth {
		return fmt.Errorf("arrays nested deeper than %d levels", maxArrayDepth)
	}
	elem, ok := sliceElemType(a.Values)
	if !ok {
		return fmt.Errorf("array values of type %T are not a supported slice", a.Values)
	}
	if elem != a.Elem {
		return fmt.Errorf("array declares element type %s but holds %T", a.Elem, a.Values)
	}
	if nested, ok := a.Values.([]Array); ok {
		for i, n := range nested {
			if err := checkArray(n, depth+1); err != nil {
				return fmt.Errorf("element %d: %w", i, err)
			}
		}
	}
	return nil
}

// AddTensor adds a tensor; dims[0] is the row length, and data must hold
// exactly RowBytes(t, dims[0]) × dims[1] × dims[2] × dims[3] bytes.
func (w *Writer) AddTensor(name string, t ggml.Type, dims []uint64, data []byte) error {
	if len(name) > maxNameLen {
		return fmt.Errorf("gguf: tensor name %q is longer than %d bytes", name, maxNameLen)
	}
	if _, dup := w.tIndex[name]; dup {
		return fmt.Errorf("gguf: duplicate tensor %q", name)
	}
	if len(dims) < 1 || len(dims) > maxDims {
		return fmt.Errorf("gguf: tensor %q: %d dims, want 1..%d", name, len(dims), maxDims)
	}
	if !t.Known() {
		return fmt.Errorf("gguf: tensor %q: unknown type %d", name, uint32(t))
	}
	rows := uint64(1)
	for i, d := range dims {
		if d == 0 {
			return fmt.Errorf("gguf: tensor %q: dims[%d] is 0", name, i)
		}
		if i > 0 {
			if hi, lo := bits.Mul64(rows, d); hi != 0 || lo > math.MaxInt64 {
				return fmt.Errorf("gguf: tensor %q: element count overflows", name)
			}
			rows *= d
		}
	}
	if dims[0] > math.MaxInt64 {
		return fmt.Errorf("gguf: tensor %q: row length %d overflows", name, dims[0])
	}
	rowBytes, err := ggml.RowBytes(t, int(dims[0]))
	if err != nil {
		return fmt.Errorf("gguf: tensor %q: %w", name, err)
	}
	hi, size := bits.Mul64(uint64(rowBytes), rows)
	if hi != 0 || size > math.MaxInt64 {
		return fmt.Errorf("gguf: tensor %q: byte size overflows", name)
	}
	if uint64(len(data)) != size {
		return fmt.Errorf("gguf: tensor %q: %d bytes of data, want %d (%d rows of %d bytes)", name, len(data), size, rows, rowBytes)
	}
	w.tIndex[name] = len(w.tensors)
	w.tensors = append(w.tensors, TensorInfo{Name: name, Dims: append([]uint64(nil), dims...), Type: t, Size: size})
	w.data = append(w.data, data)
	return nil
}

func pad(n, align uint64) uint64 { return (n + align - 1) / align * align }

// WriteTo writes the file: header, KVs, tensor infos, padding, then each
// tensor's data padded to the alignment (as gguf.cpp does).
func (w *Writer) WriteTo(out io.Writer) (int64, error) {
	le := binary.LittleEndian
	var h []byte
	h = append(h, magic...)
	h = le.AppendUint32(h, 3)
	h = le.AppendUint64(h, uint64(len(w.tensors)))
	h = le.AppendUint64(h, uint64(len(w.kvs)))
	for _, kv := range w.kvs {
		h = appendString(h, kv.Key)
		h = le.AppendUint32(h, uint32(kv.Type))
		h = appendValue(h, kv.Type, kv.Value)
	}
	offset := uint64(0)
	for i := range w.tensors {
		ti := &w.tensors[i]
		ti.Offset = offset
		h = appendString(h, ti.Name)
		h = le.AppendUint32(h, uint32(len(ti.Dims)))
		for _, d := range ti.Dims {
			h = le.AppendUint64(h, d)
		}
		h = le.AppendUint32(h, uint32(ti.Type))
		h = le.AppendUint64(h, ti.Offset)
		offset += pad(ti.Size, w.alignment)
	}
	if len(w.tensors) > 0 {
		h = append(h, make([]byte, pad(uint64(len(h)), w.alignment)-uint64(len(h)))...)
	}

	n, err := out.Write(h)
	total := int64(n)
	if err != nil {
		return total, err
	}
	zeros := make([]byte, w.alignment)
	for i, data := range w.data {
		n, err := out.Write(data)
		total += int64(n)
		if err != nil {
			return total, err
		}
		size := w.tensors[i].Size
		n, err = out.Write(zeros[:pad(size, w.alignment)-size])
		total += int64(n)
		if err != nil {
			return total, err
		}
	}
	return total, nil
}

// WriteFile writes the file atomically (package atomicfile): a reader sees
// the old file or the whole new one, and a failed write leaves nothing.
func (w *Writer) WriteFile(path string) error {
	f, err := atomicfile.Create(path)
	if err != nil {
		return err
	}
	bw := bufio.NewWriterSize(f, 1<<20)
	if _, err = w.WriteTo(bw); err == nil {
		err = bw.Flush()
	}
	if err != nil {
		f.Abort()
		return fmt.Errorf("%s: %w", path, err)
	}
	return f.Commit()
}

func appendString(b []byte, s string) []byte {
	b = binary.LittleEndian.AppendUint64(b, uint64(len(s)))
	return append(b, s...)
}

// appendValue encodes a value already checked by inferValue.
func appendValue(b []byte, t ValueType, v any) []byte {
	le := binary.LittleEndian
	switch t {
	case TypeUint8:
		return append(b, v.(uint8))
	case TypeInt8:
		return append(b, byte(v.(int8)))
	case TypeUint16:
		return le.AppendUint16(b, v.(uint16))
	case TypeInt16:
		return le.AppendUint16(b, uint16(v.(int16)))
	case TypeUint32:
		return le.AppendUint32(b, v.(uint32))
	case TypeInt32:
		return le.AppendUint32(b, uint32(v.(int32)))
	case TypeFloat32:
		return le.AppendUint32(b, math.Float32bits(v.(float32)))
	case TypeBool:
		if v.(bool) {
			return append(b, 1)
		}
		return append(b, 0)
	case TypeString:
		return appendString(b, v.(string))
	case TypeUint64:
		return le.AppendUint64(b, v.(uint64))
	case TypeInt64:
		return le.AppendUint64(b, uint64(v.(int64)))
	case TypeFloat64:
		return le.AppendUint64(b, math.Float64bits(v.(float64)))
	case TypeArray:
		return appendArray(b, v.(Array))
	}
	panic(fmt.Sprintf("gguf: unchecked value type %d", t)) // inferValue guarantees a valid type
}

func appendArray(b []byte, a Array) []byte {
	le := binary.LittleEndian
	b = le.AppendUint32(b, uint32(a.Elem))
	b = le.AppendUint64(b, uint64(a.Len()))
	switch v := a.Values.(type) {
	case []uint8:
		return append(b, v...)
	case []int8:
		for _, x := range v {
			b = append(b, byte(x))
		}
	case []uint16:
		for _, x := range v {
			b = le.AppendUint16(b, x)
		}
	case []int16:
		for _, x := range v {
			b = le.AppendUint16(b, uint16(x))
		}
	case []uint32:
		for _, x := range v {
			b = le.AppendUint32(b, x)
		}
	case []int32:
		for _, x := range v {
			b = le.AppendUint32(b, uint32(x))
		}
	case []float32:
		for _, x := range v {
			b = le.AppendUint32(b, math.Float32bits(x))
		}
	case []bool:
		for _, x := range v {
			b = appendValue(b, TypeBool, x)
		}
	case []string:
		for _, x := range v {
			b = appendString(b, x)
		}
	case []uint64:
		for _, x := range v {
			b = le.AppendUint64(b, x)
		}
	case []int64:
		for _, x := range v {
			b = le.AppendUint64(b, uint64(x))
		}
	case []float64:
		for _, x := range v {
			b = le.AppendUint64(b, math.Float64bits(x))
		}
	case []Array:
		for _, x := range v {
			b = appendArray(b, x)
		}
	}
	return b
}
