package npu

import (
	"encoding/binary"
	"fmt"
	"math"
	"unsafe"
)

// Elem is a Go element type the packers read and write:
//   - float32: FP32 tensors, or FP16/BF16 tensors (rounded to nearest even);
//   - uint16: raw FP16/BF16 bits;
//   - int8, int16, int32: integer tensors (INT4, INT8, INT16, INT32), range-checked.
//
// Floats never go into integer tensors (quantize first) and integers never
// into float tensors.
type Elem interface {
	float32 | uint16 | int8 | int16 | int32
}

// PackA writes the rows×cols row-major matrix src (rows ≤ M, cols ≤ K) into
// dst in A's layout and type. Every slot outside src (K or M padding, native
// atom padding) is zero. len(dst) must be ≥ the A size.
func PackA[T Elem](info *MatmulInfo, src []T, rows, cols int, dst []byte) error {
	return pack("npu.PackA", info, "A", src, 0, rows, cols, false, true, dst)
}

// PackARows is PackA for the rows [r0, r0+rows) only (src holds just
// them), leaving the rest of dst as it is: the caller clears dst once, and
// several threads can pack a prefill's rows side by side.
func PackARows[T Elem](info *MatmulInfo, src []T, r0, rows, cols int, dst []byte) error {
	return pack("npu.PackARows", info, "A", src, r0, rows, cols, false, false, dst)
}

// PackB writes the k×n row-major matrix src (k ≤ K, n ≤ N) into dst in B's
// layout (norm, tp_norm or native with K>8192 segmentation) and type.
func PackB[T Elem](info *MatmulInfo, src []T, k, n int, dst []byte) error {
	return pack("npu.PackB", info, "B", src, 0, k, n, false, true, dst)
}

// PackBT is PackB for a transposed source: src is n×k row-major, i.e. N
// weight rows of K elements as a model stores them.
func PackBT[T Elem](info *MatmulInfo, src []T, n, k int, dst []byte) error {
	return pack("npu.PackBT", info, "B", src, 0, n, k, true, true, dst)
}

// PackBTRows is PackBT for the weight rows [n0, n0+n) only, leaving the rest
// of dst as it is, so a large weight is converted a block of rows at a time
// instead of through a whole-matrix temporary. The caller clears dst once
// before the first block (the padding must be zero).
func PackBTRows[T Elem](info *MatmulInfo, src []T, n0, n, k int, dst []byte) error {
	return pack("npu.PackBTRows", info, "B", src, n0, n, k, true, false, dst)
}

// PackC writes a rows×cols row-major matrix into C's layout (for tests and
// fakes of the device).
func PackC[T Elem](info *MatmulInfo, src []T, rows, cols int, dst []byte) error {
	return pack("npu.PackC", info, "C", src, 0, rows, cols, false, true, dst)
}

// UnpackA reads the top-left rows×cols of A from src into dst (row-major).
func UnpackA[T Elem](info *MatmulInfo, src []byte, dst []T, rows, cols int) error {
	return unpack("npu.UnpackA", info, "A", src, dst, rows, cols, cols)
}

// UnpackB reads the top-left k×n of B (logical K×N) into dst (row-major).
func UnpackB[T Elem](info *MatmulInfo, src []byte, dst []T, k, n int) error {
	return unpack("npu.UnpackB", info, "B", src, dst, k, n, n)
}

// UnpackC reads the top-left rows×cols of C from src into dst (row-major):
// the gather step after a run.
func UnpackC[T Elem](info *MatmulInfo, src []byte, dst []T, rows, cols int) error {
	return unpack("npu.UnpackC", info, "C", src, dst, rows, cols, cols)
}

// UnpackCStrided is UnpackC into rows ld elements apart (ld ≥ cols): one
// core's columns written straight into the whole output matrix.
func UnpackCStrided[T Elem](info *MatmulInfo, src []byte, dst []T, rows, cols, ld int) error {
	return unpack("npu.UnpackCStrided", info, "C", src, dst, rows, cols, ld)
}

// shapeFor validates the caller's matrix against the operand and buffers.
func shapeFor(fn string, o Operand, rows, cols int, transposed bool, nSrc, nBuf int) error {
	maxR, maxC := o.Rows, o.Cols
	if transposed {
		maxR, maxC = o.Cols, o.Rows
	}
	if rows < 0 || cols < 0 || rows > maxR || cols > maxC {
		return paramErr(fn, "%s: matrix %d×%d does not fit the created %d×%d", o.Name, rows, cols, maxR, maxC)
	}
	if nSrc < rows*cols {
		return paramErr(fn, "%s: matrix slice has %d elements, %d×%d needs %d", o.Name, nSrc, rows, cols, rows*cols)
	}
	if nBuf < o.Size() {
		return paramErr(fn, "%s: buffer has %d bytes, layout needs %d", o.Name, nBuf, o.Size())
	}
	return nil
}

// pack writes src's rows as the operand's rows [r0, r0+rows) (columns, when
// transposed), clearing the whole buffer first unless it packs one block of
// several into a buffer the caller cleared.
func pack[T Elem](fn string, info *MatmulInfo, name string, src []T, r0, rows, cols int, transposed, clearAll bool, dst []byte) error {
	o, err := OperandOf(info, name)
	if err != nil {
		return err
	}
	if r0 < 0 {
		return paramErr(fn, "%s: first row %d is negative", o.Name, r0)
	}
	if err := shapeFor(fn, o, r0+rows, cols, transposed, r0*cols+len(src), len(dst)); err != nil {
		return err
	}
	put, err := putter(fn, o, src, dst)
	if err != nil {
		return err
	}
	if clearAll {
		clear(dst[:o.Size()])
	}
	if packAtoms(o, src, r0, rows, cols, transposed, dst) {
		return nil
	}
	for r := 0; r < rows; r++ {
		for c := 0; c < cols; {
			lr, lc := r0+r, c
			if transposed {
				lr, lc = c, r0+r
			}
			n := min(o.Contiguous(lr, lc, transposed), cols-c)
			if at, err := put(o.Offset(lr, lc), r*cols+c, n); err != nil {
				if transposed {
					lr += at
				} else {
					lc += at
				}
				return paramErr(fn, "%s[%d,%d]: %v", o.Name, lr, lc, err)
			}
			c += n
		}
	}
	return nil
}

func unpack[T Elem](fn string, info *MatmulInfo, name string, src []byte, dst []T, rows, cols, ld int) error {
	o, err := OperandOf(info, name)
	if err != nil {
		return err
	}
	if ld < cols {
		return paramErr(fn, "%s: row stride %d below the %d columns", o.Name, ld, cols)
	}
	if err := shapeFor(fn, o, rows, cols, false, rows*cols, len(src)); err != nil {
		return err
	}
	if rows > 0 && len(dst) < (rows-1)*ld+cols {
		return paramErr(fn, "%s: matrix slice has %d elements, %d rows of %d with stride %d need %d", o.Name, len(dst), rows, cols, ld, (rows-1)*ld+cols)
	}
	if d32, ok := words(o, dst); ok && o.Layout == LayoutNative && o.Name != "B" && littleEndian {
		// The gather after every run: 32-bit C in atoms of o.Sub (4)
		// columns, copied without a call per atom.
		// Four rows at a time: the destination is written in row order
		// (it is often fresh memory, and wide), and each source cache line
		// (four rows' atoms) is read once.
		s32 := unsafe.Slice((*uint32)(unsafe.Pointer(&src[0])), o.Size()/4)
		if o.Rows == 1 { // a decode step's C: one row (or none), atoms in order
			copy(d32[:rows*cols], s32[:rows*cols])
			return nil
		}
		for r0 := 0; r0 < rows; r0 += 4 {
			r1 := min(r0+4, rows)
			for c0 := 0; c0 < cols; c0 += o.Sub {
				atoms := s32[(c0/o.Sub)*o.Rows*o.Sub:]
				if c0+4 <= cols && o.Sub == 4 {
					for r := r0; r < r1; r++ {
						*(*[4]uint32)(d32[r*ld+c0:]) = *(*[4]uint32)(atoms[r*4:])
					}
					continue
				}
				w := min(o.Sub, cols-c0)
				for r := r0; r < r1; r++ {
					copy(d32[r*ld+c0:r*ld+c0+w], atoms[r*o.Sub:r*o.Sub+w])
				}
			}
		}
		return nil
	}
	get, err := getter(fn, o, src, dst)
	if err != nil {
		return err
	}
	for r := 0; r < rows; r++ {
		for c := 0; c < cols; {
			n := min(o.Contiguous(r, c, false), cols-c)
			get(o.Offset(r, c), r*ld+c, n)
			c += n
		}
	}
	return nil
}

// packAtoms is pack's path for the activations of every prefill call: a
// native A (or C) of several rows from float32 into fp16, or from int8 into
// int8, written a row at a time (one bulk conversion, then 16-byte atoms
// to their places [cols/Sub][Rows][Sub]) instead of one conversion call per
// 8-element atom, whose call overhead would dominate (measured:
// docs/design-notes.md). It reports whether it packed.
func packAtoms[T Elem](o Operand, src []T, r0, rows, cols int, transposed bool, dst []byte) bool {
	if o.Layout != LayoutNative || o.Name == "B" || transposed || o.Rows < 2 || !littleEndian || o.Sub != 8 && o.Sub != 16 {
		return false
	}
	var fillRow func(r int) // src's row r into row, in the operand's type
	var row []byte
	switch s := any(src).(type) {
	case []float32:
		if o.Type != TensorFloat16 || o.Sub != 8 {
			return false
		}
		h := make([]uint16, cols)
		row = unsafe.Slice((*byte)(unsafe.Pointer(unsafe.SliceData(h))), 2*cols)
		fillRow = func(r int) { F32sToF16(h, s[r*cols:(r+1)*cols]) }
	case []int8:
		if o.Type != TensorInt8 || o.Sub != 16 {
			return false
		}
		row = make([]byte, cols)
		fillRow = func(r int) {
			for i, v := range s[r*cols : (r+1)*cols] {
				row[i] = byte(v)
			}
		}
	default:
		return false
	}
	const atom = 16 // bytes
	for r := range rows {
		fillRow(r)
		at := (r0 + r) * atom
		c := 0
		for ; c+atom <= len(row); c += atom {
			*(*[atom]byte)(dst[at:]) = *(*[atom]byte)(row[c:])
			at += o.Rows * atom
		}
		if c < len(row) { // a last partial atom: its padding stays zero
			copy(dst[at:at+atom], row[c:])
		}
	}
	return true
}

type rangeError struct {
	v      int64
	t      TensorType
	lo, hi int64
}

func (e rangeError) Error() string {
	return fmt.Sprintf("value %d out of range for %s [%d,%d]", e.v, e.t, e.lo, e.hi)
}

func intRange(t TensorType) (lo, hi int64, ok bool) {
	switch t {
	case TensorInt4:
		return -8, 7, true
	case TensorInt8:
		return math.MinInt8, math.MaxInt8, true
	case TensorInt16:
		return math.MinInt16, math.MaxInt16, true
	case TensorInt32:
		return math.MinInt32, math.MaxInt32, true
	}
	return 0, 0, false
}

// putInt stores an in-range integer at element offset off.
func putInt(dst []byte, t TensorType, off int, v int64) {
	switch t {
	case TensorInt4:
		b := &dst[off/2]
		if off%2 == 0 {
			*b = *b&0xf0 | byte(v)&0x0f
		} else {
			*b = *b&0x0f | byte(v)<<4
		}
	case TensorInt8:
		dst[off] = byte(v)
	case TensorInt16:
		binary.LittleEndian.PutUint16(dst[2*off:], uint16(v))
	case TensorInt32:
		binary.LittleEndian.PutUint32(dst[4*off:], uint32(v))
	}
}

// getInt loads an integer element (int4 sign-extended).
func getInt(src []byte, t TensorType, off int) int64 {
	switch t {
	case TensorInt4:
		b := src[off/2]
		if off%2 == 1 {
			b >>= 4
		}
		return int64(int8(b<<4) >> 4)
	case TensorInt8:
		return int64(int8(src[off]))
	case TensorInt16:
		return int64(int16(binary.LittleEndian.Uint16(src[2*off:])))
	case TensorInt32:
		return int64(int32(binary.LittleEndian.Uint32(src[4*off:])))
	}
	return 0
}

func mismatch(fn string, o Operand, goType string) error {
	return paramErr(fn, "%s is %s: cannot convert %s values (floats need a float tensor, integers an integer tensor)", o.Name, o.Type, goType)
}

// putter returns put(off, i, n): src[i:i+n] into the n consecutive layout
// slots from element offset off; on a range error, the index within the run.
func putter[T Elem](fn string, o Operand, src []T, dst []byte) (func(off, i, n int) (int, error), error) {
	switch s := any(src).(type) {
	case []float32:
		switch o.Type {
		case TensorFloat16:
			return func(off, i, n int) (int, error) {
				if h, ok := HalvesOf(dst[2*off : 2*(off+n)]); ok {
					F32sToF16(h, s[i:i+n])
					return 0, nil
				}
				for j := range n {
					binary.LittleEndian.PutUint16(dst[2*(off+j):], F32ToF16(s[i+j]))
				}
				return 0, nil
			}, nil
		case TensorBFloat16:
			return func(off, i, n int) (int, error) {
				for j := range n {
					binary.LittleEndian.PutUint16(dst[2*(off+j):], F32ToBF16(s[i+j]))
				}
				return 0, nil
			}, nil
		case TensorFloat32:
			return func(off, i, n int) (int, error) {
				for j := range n {
					binary.LittleEndian.PutUint32(dst[4*(off+j):], math.Float32bits(s[i+j]))
				}
				return 0, nil
			}, nil
		}
		return nil, mismatch(fn, o, "float32")
	case []uint16:
		if o.Type != TensorFloat16 && o.Type != TensorBFloat16 {
			return nil, mismatch(fn, o, "uint16 (raw half-float bits)")
		}
		return func(off, i, n int) (int, error) {
			for j := range n {
				binary.LittleEndian.PutUint16(dst[2*(off+j):], s[i+j])
			}
			return 0, nil
		}, nil
	case []int8:
		if o.Type == TensorInt8 { // every int8 fits: a copy
			return func(off, i, n int) (int, error) {
				for j, v := range s[i : i+n] {
					dst[off+j] = byte(v)
				}
				return 0, nil
			}, nil
		}
		return intPutter(fn, o, dst, "int8", func(i int) int64 { return int64(s[i]) })
	case []int16:
		return intPutter(fn, o, dst, "int16", func(i int) int64 { return int64(s[i]) })
	case []int32:
		return intPutter(fn, o, dst, "int32", func(i int) int64 { return int64(s[i]) })
	}
	panic("unreachable: Elem type set")
}

func intPutter(fn string, o Operand, dst []byte, goType string, at func(i int) int64) (func(off, i, n int) (int, error), error) {
	lo, hi, ok := intRange(o.Type)
	if !ok {
		return nil, mismatch(fn, o, goType)
	}
	return func(off, i, n int) (int, error) {
		for j := range n {
			v := at(i + j)
			if v < lo || v > hi {
				return j, rangeError{v, o.Type, lo, hi}
			}
			putInt(dst, o.Type, off+j, v)
		}
		return 0, nil
	}, nil
}

// getter returns get(off, i, n): the n consecutive layout slots from
// element offset off into dst[i:i+n].
func getter[T Elem](fn string, o Operand, src []byte, dst []T) (func(off, i, n int), error) {
	switch d := any(dst).(type) {
	case []float32:
		switch o.Type {
		case TensorFloat16:
			return func(off, i, n int) {
				for j := range n {
					d[i+j] = F16ToF32(binary.LittleEndian.Uint16(src[2*(off+j):]))
				}
			}, nil
		case TensorBFloat16:
			return func(off, i, n int) {
				for j := range n {
					d[i+j] = BF16ToF32(binary.LittleEndian.Uint16(src[2*(off+j):]))
				}
			}, nil
		case TensorFloat32:
			return func(off, i, n int) {
				b := src[4*off : 4*(off+n)]
				for j := range d[i : i+n] {
					d[i+j] = math.Float32frombits(binary.LittleEndian.Uint32(b[4*j:]))
				}
			}, nil
		}
		return nil, mismatch(fn, o, "float32")
	case []uint16:
		if o.Type != TensorFloat16 && o.Type != TensorBFloat16 {
			return nil, mismatch(fn, o, "uint16 (raw half-float bits)")
		}
		return func(off, i, n int) {
			for j := range n {
				d[i+j] = binary.LittleEndian.Uint16(src[2*(off+j):])
			}
		}, nil
	case []int8:
		if o.Type != TensorInt4 && o.Type != TensorInt8 {
			return nil, mismatch(fn, o, "int8")
		}
		return func(off, i, n int) {
			for j := range n {
				d[i+j] = int8(getInt(src, o.Type, off+j))
			}
		}, nil
	case []int16:
		if o.Type != TensorInt4 && o.Type != TensorInt8 && o.Type != TensorInt16 {
			return nil, mismatch(fn, o, "int16")
		}
		return func(off, i, n int) {
			for j := range n {
				d[i+j] = int16(getInt(src, o.Type, off+j))
			}
		}, nil
	case []int32:
		if _, _, ok := intRange(o.Type); !ok {
			return nil, mismatch(fn, o, "int32")
		}
		if o.Type == TensorInt32 {
			return func(off, i, n int) {
				b := src[4*off : 4*(off+n)]
				for j := range d[i : i+n] {
					d[i+j] = int32(binary.LittleEndian.Uint32(b[4*j:]))
				}
			}, nil
		}
		return func(off, i, n int) {
			for j := range n {
				d[i+j] = int32(getInt(src, o.Type, off+j))
			}
		}, nil
	}
	panic("unreachable: Elem type set")
}

// words views dst as 32-bit words when it holds o's 32-bit values
// unconverted (float32 from FP32, int32 from INT32).
func words[T Elem](o Operand, dst []T) ([]uint32, bool) {
	if len(dst) == 0 {
		return nil, false
	}
	switch d := any(dst).(type) {
	case []float32:
		if o.Type == TensorFloat32 {
			return unsafe.Slice((*uint32)(unsafe.Pointer(&d[0])), len(d)), true
		}
	case []int32:
		if o.Type == TensorInt32 {
			return unsafe.Slice((*uint32)(unsafe.Pointer(&d[0])), len(d)), true
		}
	}
	return nil, false
}

// littleEndian: the layouts' 16-bit values can be written through a
// []uint16 view of the buffer.
var littleEndian = binary.NativeEndian.Uint16([]byte{1, 0}) == 1
