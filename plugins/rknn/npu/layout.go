package npu

import (
	"fmt"
	"math"
)

// Operand is the memory geometry of A, B or C for one MatmulInfo
// (docs rknn-npu.md §5). Rows×Cols is the logical matrix: A is M×K, B is K×N,
// C is M×N. Offsets are in elements; int4 elements pack two per byte, low
// nibble first.
type Operand struct {
	Name       string // "A", "B" or "C"
	Type       TensorType
	Layout     Layout
	Rows, Cols int
	Sub        int // native only: subK for A, subN for B and C
}

// SubK is the K atom of native B.
const SubK = 32

func cdiv(a, b int) int { return (a + b - 1) / b }

func paramErr(fn, format string, args ...any) error {
	return &Error{Func: fn, Code: ErrParamInvalid, Msg: fmt.Sprintf(format, args...)}
}

// OperandOf returns the geometry of operand name ("A", "B" or "C").
// It checks only what the geometry needs (positive sizes, known type and
// layouts); the device rules (alignment, max K, supported types) belong to the
// driver.
func OperandOf(info *MatmulInfo, name string) (Operand, error) {
	const fn = "npu.OperandOf"
	if info == nil {
		return Operand{}, paramErr(fn, "nil matmul info")
	}
	if info.M <= 0 || info.K <= 0 || info.N <= 0 {
		return Operand{}, paramErr(fn, "M, K, N must be > 0, got M=%d K=%d N=%d", info.M, info.K, info.N)
	}
	ta, tb, tc, ok := info.Type.Tensors()
	if !ok {
		return Operand{}, paramErr(fn, "unknown matmul type %d", info.Type)
	}
	M, K, N := int(info.M), int(info.K), int(info.N)
	var o Operand
	switch name {
	case "A":
		o = Operand{Name: "A", Type: ta, Layout: info.ACLayout, Rows: M, Cols: K}
		switch info.ACLayout {
		case LayoutNorm:
		case LayoutNative:
			o.Sub = 128 / ta.Bits() // one 16-byte atom of K
		default:
			return Operand{}, paramErr(fn, "AC_layout %d invalid (0 norm, 1 native)", info.ACLayout)
		}
	case "B":
		o = Operand{Name: "B", Type: tb, Layout: info.BLayout, Rows: K, Cols: N}
		switch info.BLayout {
		case LayoutNorm, LayoutTPNorm:
		case LayoutNative:
			o.Sub = 256 / tb.Bits() // fp16 16, int8 32, int4 64
		default:
			return Operand{}, paramErr(fn, "B_layout %d invalid (0 norm, 1 native, 2 tp_norm)", info.BLayout)
		}
	case "C":
		o = Operand{Name: "C", Type: tc, Layout: info.ACLayout, Rows: M, Cols: N}
		switch info.ACLayout {
		case LayoutNorm:
		case LayoutNative:
			o.Sub = 128 / tc.Bits()
		default:
			return Operand{}, paramErr(fn, "AC_layout %d invalid (0 norm, 1 native)", info.ACLayout)
		}
	default:
		return Operand{}, paramErr(fn, "operand %q: want A, B or C", name)
	}
	if o.Size() > math.MaxUint32 {
		return Operand{}, paramErr(fn, "%s: %d bytes exceeds the 32-bit size field", name, o.Size())
	}
	return o, nil
}

// Attrs computes the io attributes a create fills for info (names, dims,
// sizes, types). For B native with K > 8192 the dims are
// [N/subN, ceil(K/32), subN, 32]: the T segments are concatenated along the
// second axis, so the size equals that of the unsegmented layout.
func Attrs(info *MatmulInfo) (IOAttr, error) {
	var io IOAttr
	for _, p := range []struct {
		name string
		attr *TensorAttr
	}{{"A", &io.A}, {"B", &io.B}, {"C", &io.C}} {
		o, err := OperandOf(info, p.name)
		if err != nil {
			return IOAttr{}, err
		}
		*p.attr = o.Attr()
	}
	return io, nil
}

// Dims are the attr dims of the operand in its layout.
func (o Operand) Dims() []uint32 {
	d, n := o.dims()
	u := make([]uint32, n)
	for i := range u {
		u[i] = uint32(d[i])
	}
	return u
}

// dims are Dims without an allocation (Size runs on every pack and gather).
func (o Operand) dims() (d [4]int, n int) {
	switch {
	case o.Name == "B" && o.Layout == LayoutTPNorm:
		return [4]int{o.Cols, o.Rows}, 2
	case o.Layout == LayoutNorm:
		return [4]int{o.Rows, o.Cols}, 2
	case o.Name == "B":
		return [4]int{cdiv(o.Cols, o.Sub), cdiv(o.Rows, SubK), o.Sub, SubK}, 4
	default: // A or C native
		return [4]int{cdiv(o.Cols, o.Sub), o.Rows, o.Sub}, 3
	}
}

// Elems is the number of element slots (padding included).
func (o Operand) Elems() int {
	d, n := o.dims()
	e := 1
	for _, v := range d[:n] {
		e *= v
	}
	return e
}

// Size is the buffer size in bytes.
func (o Operand) Size() int { return (o.Elems()*o.Type.Bits() + 7) / 8 }

// Attr is the TensorAttr of the operand.
func (o Operand) Attr() TensorAttr {
	return TensorAttr{Name: o.Name, Dims: o.Dims(), Size: uint32(o.Size()), Type: o.Type}
}

// Contiguous is how many elements, starting at logical (r, c) and stepping
// along the rows (alongRows) or the columns, sit at consecutive offsets
// (at least 1): the packers convert such runs in bulk.
func (o Operand) Contiguous(r, c int, alongRows bool) int {
	switch {
	case o.Name == "B" && o.Layout == LayoutTPNorm:
		if alongRows {
			return o.Rows - r
		}
	case o.Layout == LayoutNorm:
		if !alongRows {
			return o.Cols - c
		}
	case o.Name == "A" || o.Name == "C":
		switch {
		case alongRows:
		case o.Rows == 1: // one row: its atoms follow each other
			return o.Cols - c
		default:
			return min(o.Sub-c%o.Sub, o.Cols-c)
		}
	default: // B native: K atoms of 32 within a segment
		if alongRows {
			return min(SubK-r%BSegmentK%SubK, o.Rows-r)
		}
	}
	return 1
}

// Offset is the element offset of logical element (r, c): A (m,k), B (k,n),
// C (m,n). Formulas of docs rknn-npu.md §5.
func (o Operand) Offset(r, c int) int {
	switch {
	case o.Name == "B" && o.Layout == LayoutTPNorm:
		return c*o.Rows + r // B^T stored [N,K]
	case o.Layout == LayoutNorm:
		return r*o.Cols + c
	case o.Name == "A": // [K/subK, M, subK]
		return (c/o.Sub)*o.Rows*o.Sub + r*o.Sub + c%o.Sub
	case o.Name == "C": // [N/subN, M, subN]
		return (c/o.Sub)*o.Rows*o.Sub + r*o.Sub + c%o.Sub
	}
	// B native [N/subN, K/32, subN, 32], K split in segments of 8192.
	k, n := r, c
	seg := k / BSegmentK
	kk := k - seg*BSegmentK
	segK := min(BSegmentK, o.Rows-seg*BSegmentK)
	k1 := cdiv(segK, SubK)
	n1 := cdiv(o.Cols, o.Sub)
	return seg*n1*o.Sub*BSegmentK + ((n/o.Sub)*k1+kk/SubK)*o.Sub*SubK + (n%o.Sub)*SubK + kk%SubK
}
