// Package npu mirrors the RKNN matmul API of the Rockchip RK3588 NPU
// (rknn_matmul_api.h, SDK v2.x) as a Go interface, so the offload code drives
// the simulator and the real librknnrt through the same calls.
package npu

import (
	"fmt"
	"sync/atomic"
)

// MatmulType is rknn_matmul_type: the A, B and C element types of one kernel.
type MatmulType int32

const (
	Float16MMFloat16ToFloat32 MatmulType = 1
	Int8MMInt8ToInt32         MatmulType = 2
	Int8MMInt8ToInt8          MatmulType = 3
	Float16MMFloat16ToFloat16 MatmulType = 4
	Float16MMInt8ToFloat32    MatmulType = 5
	Float16MMInt8ToFloat16    MatmulType = 6
	Float16MMInt4ToFloat32    MatmulType = 7
	Float16MMInt4ToFloat16    MatmulType = 8
	Int8MMInt8ToFloat32       MatmulType = 9
	Int4MMInt4ToInt16         MatmulType = 10
	Int8MMInt4ToInt32         MatmulType = 11
	Float16MMInt4ToBFloat16   MatmulType = 12
	Int8MMInt4ToFloat16       MatmulType = 15
)

// Layout is rknn_matmul_layout.
type Layout int16

const (
	LayoutNorm   Layout = 0
	LayoutNative Layout = 1
	LayoutTPNorm Layout = 2 // B only: B^T stored [N,K] row-major
)

// TensorType is rknn_tensor_type.
type TensorType uint32

const (
	TensorFloat32  TensorType = 0
	TensorFloat16  TensorType = 1
	TensorInt8     TensorType = 2
	TensorUint8    TensorType = 3
	TensorInt16    TensorType = 4
	TensorUint16   TensorType = 5
	TensorInt32    TensorType = 6
	TensorUint32   TensorType = 7
	TensorInt64    TensorType = 8
	TensorBool     TensorType = 9
	TensorInt4     TensorType = 10
	TensorBFloat16 TensorType = 11
)

// QuantType is rknn_matmul_quant_type.
type QuantType int16

const (
	QuantPerLayerSym    QuantType = 0
	QuantPerLayerAsym   QuantType = 1
	QuantPerChannelSym  QuantType = 2
	QuantPerChannelAsym QuantType = 3
	QuantPerGroupSym    QuantType = 4
	QuantPerGroupAsym   QuantType = 5
)

// CoreMask is rknn_core_mask.
type CoreMask uint32

const (
	CoreAuto   CoreMask = 0
	Core0      CoreMask = 1
	Core1      CoreMask = 2
	Core2      CoreMask = 4
	Core0_1    CoreMask = 3
	Core0_1_2  CoreMask = 7
	CoreAll    CoreMask = 0xffff
	MaxCores            = 3
	MaxK                = 10240 // RK3588, SDK v2.3.2
	BSegmentK           = 8192  // B native layout splits K into segments of this size
	KAlign              = 32
	MaxDims             = 16
	MaxNameLen          = 256
)

// MatmulInfo is rknn_matmul_info.
type MatmulInfo struct {
	M, K, N       int32
	Type          MatmulType
	BLayout       Layout
	BQuantType    QuantType
	ACLayout      Layout
	ACQuantType   QuantType
	IommuDomainID int32
	GroupSize     int16
}

// TensorAttr is rknn_matmul_tensor_attr. Name is "A", "B" or "C".
type TensorAttr struct {
	Name string
	Dims []uint32
	Size uint32 // bytes
	Type TensorType
}

// IOAttr is rknn_matmul_io_attr, filled by Create.
type IOAttr struct{ A, B, C TensorAttr }

// QuantParams is rknn_quant_params; Name selects "A", "B" or "C".
type QuantParams struct {
	Name  string
	Scale []float32
	ZP    []int32
}

// Mem is an NPU-visible buffer (rknn_tensor_mem); Bytes is its CPU view.
type Mem interface {
	Bytes() []byte
	Size() int
}

// Driver creates matmul contexts (rknn_matmul_create).
type Driver interface {
	Name() string
	Create(info *MatmulInfo) (Context, IOAttr, error)
	Stats() Stats
}

// CoreRunner is a driver that runs the contexts of one matmul's cores
// together, as the NPU's cores run at once (the simulator hands their work
// to the host's threads as one job instead of one per core). Each context
// gets what its own Run would have given it; errs[i] is ctxs[i]'s. An
// optional interface: librknnrt has no such call.
type CoreRunner interface {
	RunCores(ctxs []Context) (errs []error)
}

// Context is one rknn_matmul_ctx.
type Context interface {
	CreateMem(size int) (Mem, error)        // rknn_create_mem
	DestroyMem(m Mem) error                 // rknn_destroy_mem
	SetIOMem(m Mem, attr *TensorAttr) error // rknn_matmul_set_io_mem
	SetCoreMask(mask CoreMask) error        // rknn_matmul_set_core_mask
	SetQuantParams(p *QuantParams) error    // rknn_matmul_set_quant_params
	Run() error                             // rknn_matmul_run (blocking)
	Destroy() error                         // rknn_matmul_destroy
}

// Stats counts what a driver did, for reports.
type Stats struct {
	Runs     int64
	BytesIn  int64 // A and B bytes read per run
	BytesOut int64 // C bytes written
	MACs     int64 // M*K*N per run (unpadded)
}

// Counters accumulate a driver's Stats; safe for concurrent runs.
type Counters struct {
	runs, bytesIn, bytesOut, macs atomic.Int64
}

// Count adds one completed run of a context with info and attrs.
func (c *Counters) Count(info *MatmulInfo, attrs *IOAttr) {
	c.runs.Add(1)
	c.bytesIn.Add(int64(attrs.A.Size) + int64(attrs.B.Size))
	c.bytesOut.Add(int64(attrs.C.Size))
	c.macs.Add(int64(info.M) * int64(info.K) * int64(info.N))
}

// Stats returns the counts so far.
func (c *Counters) Stats() Stats {
	return Stats{Runs: c.runs.Load(), BytesIn: c.bytesIn.Load(), BytesOut: c.bytesOut.Load(), MACs: c.macs.Load()}
}

// RKNN error codes (rknn_api.h).
const (
	ErrFail              = -1
	ErrTimeout           = -2
	ErrDeviceUnavailable = -3
	ErrMallocFail        = -4
	ErrParamInvalid      = -5
	ErrModelInvalid      = -6
	ErrCtxInvalid        = -7
	ErrInputInvalid      = -8
	ErrOutputInvalid     = -9
	ErrDeviceUnmatch     = -10
)

// Error is a failed RKNN call: the function, its return code and why.
type Error struct {
	Func string
	Code int
	Msg  string
}

func (e *Error) Error() string {
	return fmt.Sprintf("%s: %s (RKNN error %d)", e.Func, e.Msg, e.Code)
}
