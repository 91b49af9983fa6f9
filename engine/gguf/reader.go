package gguf

import (
	"encoding/binary"
	"fmt"
	"math"
	"math/bits"
	"sort"

	"github.com/evalrun/evalrun/engine/ggml"
)

const (
	magic            = "GGUF"
	defaultAlignment = 32
	alignmentKey     = "general.alignment"
	maxNameLen       = 63 // GGML_MAX_NAME is 64 including the NUL
	maxDims          = 4  // GGML_MAX_DIMS
	maxArrayDepth    = 8  // nested arrays deeper than this are refused

	// Smallest possible encodings, used to bound counts by the bytes left
	// before anything is allocated.
	minKVBytes         = 8 + 4 + 1         // empty key, type, 1-byte value
	minTensorInfoBytes = 8 + 4 + 8 + 4 + 8 // empty name, n_dims, one dim, type, offset
	minStringBytes     = 8                 // length prefix
	minArrayBytes      = 4 + 8             // element type, count
)

// reader is a bounds-checked cursor over the file bytes. Its methods return
// ok=false instead of reading past the end; callers turn that into a
// FormatError naming their field.
type reader struct {
	data []byte
	pos  int
	file string
}

func (r *reader) left() int { return len(r.data) - r.pos }

func (r *reader) errorf(offset int, field, format string, args ...any) error {
	return &FormatError{File: r.file, Field: field, Offset: int64(offset), Msg: fmt.Sprintf(format, args...)}
}

func (r *reader) truncated(offset int, field string, need int) error {
	return r.errorf(offset, field, "unexpected end of file: need %d bytes, %d left", need, len(r.data)-offset)
}

func (r *reader) u32() (uint32, bool) {
	if r.left() < 4 {
		return 0, false
	}
	v := binary.LittleEndian.Uint32(r.data[r.pos:])
	r.pos += 4
	return v, true
}

func (r *reader) u64() (uint64, bool) {
	if r.left() < 8 {
		return 0, false
	}
	v := binary.LittleEndian.Uint64(r.data[r.pos:])
	r.pos += 8
	return v, true
}

// readU32 and readU64 read a field or fail with an error naming it.
func (r *reader) readU32(field string) (uint32, error) {
	start := r.pos
	v, ok := r.u32()
	if !ok {
		return 0, r.truncated(start, field, 4)
	}
	return v, nil
}

func (r *reader) readU64(field string) (uint64, error) {
	start := r.pos
	v, ok := r.u64()
	if !ok {
		return 0, r.truncated(start, field, 8)
	}
	return v, nil
}

// str reads a length-prefixed string; msg describes the failure.
func (r *reader) str() (s string, msg string) {
	start := r.pos
	n, ok := r.u64()
	if !ok {
		return "", fmt.Sprintf("unexpected end of file: need 8 bytes for the string length, %d left", r.left())
	}
	if n > uint64(r.left()) {
		r.pos = start
		return "", fmt.Sprintf("string length %d exceeds the %d bytes left in the file", n, r.left()-8)
	}
	s = string(r.data[r.pos : r.pos+int(n)])
	r.pos += int(n)
	return s, ""
}

func (r *reader) readString(field string) (string, error) {
	start := r.pos
	s, msg := r.str()
	if msg != "" {
		return "", r.errorf(start, field, "%s", msg)
	}
	return s, nil
}

// Parse parses a GGUF file held in data; name is used in error messages and
// as File.Path. The returned File keeps data for TensorData.
func Parse(data []byte, name string) (*File, error) {
	r := &reader{data: data, file: name}
	f := &File{Path: name, Size: int64(len(data)), data: data, Alignment: defaultAlignment}

	if len(data) < len(magic) {
		return nil, r.errorf(0, "magic", "file of %d bytes is too short to be GGUF", len(data))
	}
	if string(data[:4]) != magic {
		return nil, r.errorf(0, "magic", "%q is not %q; not a GGUF file", data[:4], magic)
	}
	r.pos = 4

	version, err := r.readU32("version")
	if err != nil {
		return nil, err
	}
	switch {
	case version == 2 || version == 3:
	case version == 1:
		return nil, r.errorf(4, "version", "GGUF version 1 is not supported (only versions 2 and 3)")
	case bits.ReverseBytes32(version) == 2 || bits.ReverseBytes32(version) == 3:
		return nil, r.errorf(4, "version", "version %d looks like a big-endian file, which is not supported", version)
	default:
		return nil, r.errorf(4, "version", "GGUF version %d is not supported (only versions 2 and 3)", version)
	}
	f.Version = version

	nTensors, err := r.readU64("tensor_count")
	if err != nil {
		return nil, err
	}
	if nTensors > uint64(r.left()/minTensorInfoBytes) {
		return nil, r.errorf(8, "tensor_count", "%d tensors need at least %d bytes each but only %d bytes are left", nTensors, minTensorInfoBytes, r.left())
	}
	nKV, err := r.readU64("kv_count")
	if err != nil {
		return nil, err
	}
	if budget := r.left() - int(nTensors)*minTensorInfoBytes; budget < 0 || nKV > uint64(budget/minKVBytes) {
		return nil, r.errorf(16, "kv_count", "%d key/values need at least %d bytes each but only %d bytes are left", nKV, minKVBytes, max(budget, 0))
	}

	if err := r.readKVs(f, int(nKV)); err != nil {
		return nil, err
	}
	if err := r.readTensorInfos(f, int(nTensors)); err != nil {
		return nil, err
	}
	return f, nil
}

func (r *reader) readKVs(f *File, n int) error {
	f.KVs = make([]KV, 0, n)
	f.kvIndex = make(map[string]int, n)
	for i := range n {
		keyStart := r.pos
		key, err := r.readString(fmt.Sprintf("kv[%d].key", i))
		if err != nil {
			return err
		}
		field := fmt.Sprintf("kv[%d] (%q)", i, key)
		if j, dup := f.kvIndex[key]; dup {
			return r.errorf(keyStart, field+".key", "duplicate key (first defined by kv[%d])", j)
		}
		typeStart := r.pos
		t, err := r.readU32(field + ".type")
		if err != nil {
			return err
		}
		vt := ValueType(t)
		if !vt.valid() {
			return r.errorf(typeStart, field+".type", "unknown value type %d", t)
		}
		valueStart := r.pos
		v, err := r.value(vt, field+".value", 0)
		if err != nil {
			return err
		}
		if key == alignmentKey {
			a, ok := v.(uint32)
			if !ok {
				return r.errorf(typeStart, field+".type", "%s must be of type u32, not %s", alignmentKey, vt)
			}
			if a == 0 || a&(a-1) != 0 {
				return r.errorf(valueStart, field+".value", "alignment %d is not a power of two", a)
			}
			f.Alignment = uint64(a)
		}
		f.kvIndex[key] = len(f.KVs)
		f.KVs = append(f.KVs, KV{Key: key, Type: vt, Value: v})
	}
	return nil
}

// value reads one value of type t; depth counts enclosing arrays.
func (r *reader) value(t ValueType, field string, depth int) (any, error) {
	start := r.pos
	if t == TypeString {
		return r.readString(field)
	}
	if t == TypeArray {
		return r.array(field, depth+1)
	}
	size := fixedSizes[t]
	if r.left() < size {
		return nil, r.truncated(start, field, size)
	}
	b := r.data[r.pos : r.pos+size]
	r.pos += size
	switch t {
	case TypeUint8:
		return b[0], nil
	case TypeInt8:
		return int8(b[0]), nil
	case TypeUint16:
		return binary.LittleEndian.Uint16(b), nil
	case TypeInt16:
		return int16(binary.LittleEndian.Uint16(b)), nil
	case TypeUint32:
		return binary.LittleEndian.Uint32(b), nil
	case TypeInt32:
		return int32(binary.LittleEndian.Uint32(b)), nil
	case TypeFloat32:
		return math.Float32frombits(binary.LittleEndian.Uint32(b)), nil
	case TypeBool:
		if b[0] > 1 {
			return nil, r.errorf(start, field, "bool value %d is neither 0 nor 1", b[0])
		}
		return b[0] == 1, nil
	case TypeUint64:
		return binary.LittleEndian.Uint64(b), nil
	case TypeInt64:
		return int64(binary.LittleEndian.Uint64(b)), nil
	case TypeFloat64:
		return math.Float64frombits(binary.LittleEndian.Uint64(b)), nil
	}
	return nil, r.errorf(start, field, "unknown value type %d", uint32(t))
}

func (r *reader) array(field string, depth int) (Array, error) {
	if depth > maxArrayDepth {
		return Array{}, r.errorf(r.pos, field, "arrays nested deeper than %d levels", maxArrayDepth)
	}
	typeStart := r.pos
	et, err := r.readU32(field + ".type")
	if err != nil {
		return Array{}, err
	}
	elem := ValueType(et)
	if !elem.valid() {
		return Array{}, r.errorf(typeStart, field+".type", "unknown array element type %d", et)
	}
	countStart := r.pos
	count, err := r.readU64(field + ".count")
	if err != nil {
		return Array{}, err
	}
	minSize := fixedSizes[elem]
	switch elem {
	case TypeString:
		minSize = minStringBytes
	case TypeArray:
		minSize = minArrayBytes
	}
	if count > uint64(r.left()/minSize) {
		return Array{}, r.errorf(countStart, field+".count", "array of %d %s needs at least %d bytes each but only %d bytes are left", count, elem, minSize, r.left())
	}
	n := int(count)
	a := Array{Elem: elem}
	switch elem {
	case TypeString:
		v := make([]string, n)
		for i := range v {
			start := r.pos
			s, msg := r.str()
			if msg != "" {
				return Array{}, r.errorf(start, fmt.Sprintf("%s[%d]", field, i), "%s", msg)
			}
			v[i] = s
		}
		a.Values = v
	case TypeArray:
		v := make([]Array, n)
		for i := range v {
			if v[i], err = r.array(fmt.Sprintf("%s[%d]", field, i), depth+1); err != nil {
				return Array{}, err
			}
		}
		a.Values = v
	default:
		// The count check above guarantees the bytes are there.
		b := r.data[r.pos : r.pos+n*minSize]
		values, err := r.decodeFixed(elem, b, n, field)
		if err != nil {
			return Array{}, err
		}
		r.pos += n * minSize
		a.Values = values
	}
	return a, nil
}

// decodeFixed decodes n little-endian values of fixed-size type t from b.
func (r *reader) decodeFixed(t ValueType, b []byte, n int, field string) (any, error) {
	le := binary.LittleEndian
	switch t {
	case TypeUint8:
		v := make([]uint8, n)
		copy(v, b)
		return v, nil
	case TypeInt8:
		v := make([]int8, n)
		for i := range v {
			v[i] = int8(b[i])
		}
		return v, nil
	case TypeBool:
		v := make([]bool, n)
		for i := range v {
			if b[i] > 1 {
				return nil, r.errorf(r.pos+i, fmt.Sprintf("%s[%d]", field, i), "bool value %d is neither 0 nor 1", b[i])
			}
			v[i] = b[i] == 1
		}
		return v, nil
	case TypeUint16:
		v := make([]uint16, n)
		for i := range v {
			v[i] = le.Uint16(b[2*i:])
		}
		return v, nil
	case TypeInt16:
		v := make([]int16, n)
		for i := range v {
			v[i] = int16(le.Uint16(b[2*i:]))
		}
		return v, nil
	case TypeUint32:
		v := make([]uint32, n)
		for i := range v {
			v[i] = le.Uint32(b[4*i:])
		}
		return v, nil
	case TypeInt32:
		v := make([]int32, n)
		for i := range v {
			v[i] = int32(le.Uint32(b[4*i:]))
		}
		return v, nil
	case TypeFloat32:
		v := make([]float32, n)
		for i := range v {
			v[i] = math.Float32frombits(le.Uint32(b[4*i:]))
		}
		return v, nil
	case TypeUint64:
		v := make([]uint64, n)
		for i := range v {
			v[i] = le.Uint64(b[8*i:])
		}
		return v, nil
	case TypeInt64:
		v := make([]int64, n)
		for i := range v {
			v[i] = int64(le.Uint64(b[8*i:]))
		}
		return v, nil
	case TypeFloat64:
		v := make([]float64, n)
		for i := range v {
			v[i] = math.Float64frombits(le.Uint64(b[8*i:]))
		}
		return v, nil
	}
	return nil, r.errorf(r.pos, field, "unknown value type %d", uint32(t))
}

func (r *reader) readTensorInfos(f *File, n int) error {
	f.Tensors = make([]TensorInfo, n)
	f.tIndex = make(map[string]int, n)
	offsetPos := make([]int, n) // where each offset field starts, for errors
	for i := range n {
		ti := &f.Tensors[i]
		nameStart := r.pos
		name, err := r.readString(fmt.Sprintf("tensor_infos[%d].name", i))
		if err != nil {
			return err
		}
		if len(name) > maxNameLen {
			return r.errorf(nameStart, fmt.Sprintf("tensor_infos[%d].name", i), "name of %d bytes is longer than the %d ggml allows", len(name), maxNameLen)
		}
		field := func(sub string) string { return fmt.Sprintf("tensor_infos[%d].%s (%q)", i, sub, name) }
		if j, dup := f.tIndex[name]; dup {
			return r.errorf(nameStart, field("name"), "duplicate tensor name (first defined by tensor_infos[%d])", j)
		}
		ti.Name = name

		nDimsStart := r.pos
		nDims, err := r.readU32(field("n_dims"))
		if err != nil {
			return err
		}
		if nDims < 1 || nDims > maxDims {
			return r.errorf(nDimsStart, field("n_dims"), "n_dims %d is not in 1..%d", nDims, maxDims)
		}
		dimsStart := r.pos
		ti.Dims = make([]uint64, nDims)
		nElements := uint64(1)
		for j := range ti.Dims {
			dimStart := r.pos
			d, err := r.readU64(field(fmt.Sprintf("dims[%d]", j)))
			if err != nil {
				return err
			}
			if d == 0 {
				return r.errorf(dimStart, field(fmt.Sprintf("dims[%d]", j)), "dimension 0 is not allowed")
			}
			if hi, lo := bits.Mul64(nElements, d); hi != 0 || lo > math.MaxInt64 {
				return r.errorf(dimStart, field(fmt.Sprintf("dims[%d]", j)), "dimension %d makes the element count overflow int64", d)
			}
			nElements *= d
			ti.Dims[j] = d
		}

		typeStart := r.pos
		t, err := r.readU32(field("type"))
		if err != nil {
			return err
		}
		ti.Type = ggml.Type(t)
		if !ti.Type.Known() {
			return r.errorf(typeStart, field("type"), "unknown tensor type %d", t)
		}
		ne0 := ti.Dims[0]
		blockSize, typeSize := uint64(ti.Type.BlockSize()), uint64(ti.Type.TypeSize())
		if ne0%blockSize != 0 {
			return r.errorf(dimsStart, field("dims[0]"), "row length %d is not a multiple of the %s block size %d", ne0, ti.Type, blockSize)
		}
		hi, size := bits.Mul64(nElements/blockSize, typeSize)
		if hi != 0 || size > math.MaxInt64 {
			return r.errorf(dimsStart, field("dims"), "tensor byte size overflows")
		}
		ti.Size = size

		offsetPos[i] = r.pos
		if ti.Offset, err = r.readU64(field("offset")); err != nil {
			return err
		}
		f.tIndex[name] = i
	}

	end := uint64(r.pos)
	f.DataOffset = end
	if n > 0 {
		f.DataOffset = (end + f.Alignment - 1) / f.Alignment * f.Alignment
	}
	return r.checkTensorLayout(f, offsetPos)
}

// checkTensorLayout requires every tensor to be aligned, inside the file and
// not to overlap another one.
func (r *reader) checkTensorLayout(f *File, offsetPos []int) error {
	fileSize := uint64(len(r.data))
	for i := range f.Tensors {
		ti := &f.Tensors[i]
		field := fmt.Sprintf("tensor_infos[%d].offset (%q)", i, ti.Name)
		if ti.Offset%f.Alignment != 0 {
			return r.errorf(offsetPos[i], field, "offset %d is not a multiple of the alignment %d", ti.Offset, f.Alignment)
		}
		if f.DataOffset > fileSize || ti.Offset > fileSize-f.DataOffset || ti.Size > fileSize-f.DataOffset-ti.Offset {
			return r.errorf(offsetPos[i], field, "data [%d, +%d bytes) at absolute offset %d runs past the end of the %d-byte file",
				ti.Offset, ti.Size, f.DataOffset+ti.Offset, fileSize)
		}
	}
	order := make([]int, len(f.Tensors))
	for i := range order {
		order[i] = i
	}
	sort.Slice(order, func(a, b int) bool { return f.Tensors[order[a]].Offset < f.Tensors[order[b]].Offset })
	for k := 1; k < len(order); k++ {
		prev, cur := &f.Tensors[order[k-1]], &f.Tensors[order[k]]
		if prev.Offset+prev.Size > cur.Offset {
			i := order[k]
			return r.errorf(offsetPos[i], fmt.Sprintf("tensor_infos[%d].offset (%q)", i, cur.Name),
				"data at offset %d overlaps tensor %q at [%d, %d)", cur.Offset, prev.Name, prev.Offset, prev.Offset+prev.Size)
		}
	}
	return nil
}
