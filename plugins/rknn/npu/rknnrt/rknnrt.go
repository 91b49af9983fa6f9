//go:build rknpu && cgo

// Package rknnrt drives the real RK3588 NPU through librknnrt.so (cgo, build
// tag rknpu), using our own ABI-compatible declarations in rknn_abi.h.
// Link search paths can be added with CGO_LDFLAGS=-L<dir>.
package rknnrt

/*
#cgo LDFLAGS: -lrknnrt
#include <stdlib.h>
#include <string.h>
#include "rknn_abi.h"
*/
import "C"

import (
	"fmt"
	"sync"
	"unsafe"

	"github.com/evalrun/evalrun/plugins/rknn/npu"
)

// Driver is the hardware NPU.
type Driver struct {
	count npu.Counters
}

var _ npu.Driver = (*Driver)(nil)

// New returns the librknnrt driver. Contexts are only checked at Create.
func New() (npu.Driver, error) { return &Driver{}, nil }

// Name identifies the driver in reports.
func (d *Driver) Name() string { return "rknnrt" }

// Stats counts completed runs.
func (d *Driver) Stats() npu.Stats {
	return d.count.Stats()
}

func rkErr(fn string, rc C.int, format string, args ...any) error {
	msg := npu.ErrorName(int(rc))
	if format != "" {
		msg = fmt.Sprintf(format, args...) + " (" + msg + ")"
	}
	return &npu.Error{Func: fn, Code: int(rc), Msg: msg}
}

func goAttr(a *C.rknn_matmul_tensor_attr) npu.TensorAttr {
	n := min(int(a.n_dims), npu.MaxDims)
	dims := make([]uint32, n)
	for i := range dims {
		dims[i] = uint32(a.dims[i])
	}
	return npu.TensorAttr{
		Name: C.GoString(&a.name[0]),
		Dims: dims,
		Size: uint32(a.size),
		Type: npu.TensorType(a._type),
	}
}

func cAttr(a *npu.TensorAttr, out *C.rknn_matmul_tensor_attr) error {
	if len(a.Name) >= npu.MaxNameLen || len(a.Dims) > npu.MaxDims {
		return fmt.Errorf("attr %q: name longer than %d or more than %d dims", a.Name, npu.MaxNameLen-1, npu.MaxDims)
	}
	*out = C.rknn_matmul_tensor_attr{}
	for i := 0; i < len(a.Name); i++ {
		out.name[i] = C.char(a.Name[i])
	}
	out.n_dims = C.uint32_t(len(a.Dims))
	for i, d := range a.Dims {
		out.dims[i] = C.uint32_t(d)
	}
	out.size = C.uint32_t(a.Size)
	out._type = C.rknn_tensor_type(a.Type)
	return nil
}

// Create calls rknn_matmul_create.
func (d *Driver) Create(info *npu.MatmulInfo) (npu.Context, npu.IOAttr, error) {
	const fn = "rknn_matmul_create"
	if info == nil {
		return nil, npu.IOAttr{}, rkErr(fn, npu.ErrParamInvalid, "nil matmul info")
	}
	ci := C.rknn_matmul_info{
		M: C.int32_t(info.M), K: C.int32_t(info.K), N: C.int32_t(info.N),
		_type:           C.rknn_matmul_type(info.Type),
		B_layout:        C.int16_t(info.BLayout),
		B_quant_type:    C.int16_t(info.BQuantType),
		AC_layout:       C.int16_t(info.ACLayout),
		AC_quant_type:   C.int16_t(info.ACQuantType),
		iommu_domain_id: C.int32_t(info.IommuDomainID),
		group_size:      C.int16_t(info.GroupSize),
	}
	var io C.rknn_matmul_io_attr
	var h C.rknn_matmul_ctx
	if rc := C.rknn_matmul_create(&h, &ci, &io); rc != 0 {
		return nil, npu.IOAttr{}, rkErr(fn, rc, "M=%d K=%d N=%d type=%s B_layout=%s AC_layout=%s",
			info.M, info.K, info.N, info.Type, info.BLayout, info.ACLayout)
	}
	attrs := npu.IOAttr{A: goAttr(&io.A), B: goAttr(&io.B), C: goAttr(&io.C)}
	return &Context{drv: d, h: h, info: *info, attrs: attrs}, attrs, nil
}

// Mem is an rknn_create_mem buffer; Bytes views its virt_addr.
type Mem struct {
	p   *C.rknn_tensor_mem
	buf []byte
}

// Bytes is the CPU view (nil after DestroyMem).
func (m *Mem) Bytes() []byte { return m.buf }

// Size is the buffer size in bytes.
func (m *Mem) Size() int { return len(m.buf) }

// Context is one rknn_matmul_ctx. Calls are serialized; after Destroy the
// handle is never passed to the library again.
type Context struct {
	drv   *Driver
	h     C.rknn_matmul_ctx
	info  npu.MatmulInfo
	attrs npu.IOAttr

	mu        sync.Mutex
	destroyed bool
}

var _ npu.Context = (*Context)(nil)

func (c *Context) lock(fn string) error {
	c.mu.Lock()
	if c.destroyed {
		c.mu.Unlock()
		return rkErr(fn, npu.ErrCtxInvalid, "context destroyed")
	}
	return nil
}

// locked runs f with the context locked and alive.
func (c *Context) locked(fn string, f func() error) error {
	if err := c.lock(fn); err != nil {
		return err
	}
	defer c.mu.Unlock()
	return f()
}

// rcErr is rkErr for a failed call (rc != 0), nil for success.
func rcErr(fn string, rc C.int, format string, args ...any) error {
	if rc == 0 {
		return nil
	}
	return rkErr(fn, rc, format, args...)
}

func ownMem(fn string, m npu.Mem) (*Mem, error) {
	rm, ok := m.(*Mem)
	if !ok || rm == nil {
		return nil, rkErr(fn, npu.ErrParamInvalid, "mem %T was not created by rknn_create_mem", m)
	}
	if rm.p == nil {
		return nil, rkErr(fn, npu.ErrParamInvalid, "mem was destroyed")
	}
	return rm, nil
}

// CreateMem calls rknn_create_mem.
func (c *Context) CreateMem(size int) (npu.Mem, error) {
	const fn = "rknn_create_mem"
	if err := c.lock(fn); err != nil {
		return nil, err
	}
	defer c.mu.Unlock()
	if size <= 0 || uint64(size) > 0xffffffff {
		return nil, rkErr(fn, npu.ErrParamInvalid, "size %d out of range", size)
	}
	p := C.rknn_create_mem(C.rknn_context(c.h), C.uint32_t(size))
	if p == nil || p.virt_addr == nil {
		return nil, rkErr(fn, npu.ErrMallocFail, "%d bytes", size)
	}
	return &Mem{p: p, buf: unsafe.Slice((*byte)(p.virt_addr), int(p.size))}, nil
}

// DestroyMem calls rknn_destroy_mem.
func (c *Context) DestroyMem(m npu.Mem) error {
	const fn = "rknn_destroy_mem"
	if err := c.lock(fn); err != nil {
		return err
	}
	defer c.mu.Unlock()
	rm, err := ownMem(fn, m)
	if err != nil {
		return err
	}
	if rc := C.rknn_destroy_mem(C.rknn_context(c.h), rm.p); rc != 0 {
		return rkErr(fn, rc, "")
	}
	rm.p, rm.buf = nil, nil
	return nil
}

// SetIOMem calls rknn_matmul_set_io_mem.
func (c *Context) SetIOMem(m npu.Mem, attr *npu.TensorAttr) error {
	const fn = "rknn_matmul_set_io_mem"
	if err := c.lock(fn); err != nil {
		return err
	}
	defer c.mu.Unlock()
	rm, err := ownMem(fn, m)
	if err != nil {
		return err
	}
	if attr == nil {
		return rkErr(fn, npu.ErrParamInvalid, "nil tensor attr")
	}
	var ca C.rknn_matmul_tensor_attr
	if err := cAttr(attr, &ca); err != nil {
		return rkErr(fn, npu.ErrParamInvalid, "%v", err)
	}
	if rc := C.rknn_matmul_set_io_mem(c.h, rm.p, &ca); rc != 0 {
		return rkErr(fn, rc, "%s: mem %d bytes, attr size %d", attr.Name, rm.Size(), attr.Size)
	}
	return nil
}

// SetCoreMask calls rknn_matmul_set_core_mask.
func (c *Context) SetCoreMask(mask npu.CoreMask) error {
	const fn = "rknn_matmul_set_core_mask"
	return c.locked(fn, func() error {
		return rcErr(fn, C.rknn_matmul_set_core_mask(c.h, C.rknn_core_mask(mask)), "mask %#x", uint32(mask))
	})
}

// SetQuantParams calls rknn_matmul_set_quant_params. The arrays are copied
// to C memory for the call (cgo forbids Go pointers inside the struct).
func (c *Context) SetQuantParams(p *npu.QuantParams) error {
	const fn = "rknn_matmul_set_quant_params"
	if err := c.lock(fn); err != nil {
		return err
	}
	defer c.mu.Unlock()
	if p == nil {
		return rkErr(fn, npu.ErrParamInvalid, "nil quant params")
	}
	if len(p.Name) >= npu.MaxNameLen {
		return rkErr(fn, npu.ErrParamInvalid, "name longer than %d", npu.MaxNameLen-1)
	}
	var cp C.rknn_quant_params
	for i := 0; i < len(p.Name); i++ {
		cp.name[i] = C.char(p.Name[i])
	}
	if n := len(p.Scale); n > 0 {
		cp.scale = (*C.float)(C.malloc(C.size_t(4 * n)))
		defer C.free(unsafe.Pointer(cp.scale))
		copy(unsafe.Slice((*float32)(unsafe.Pointer(cp.scale)), n), p.Scale)
		cp.scale_len = C.int32_t(n)
	}
	if n := len(p.ZP); n > 0 {
		cp.zp = (*C.int32_t)(C.malloc(C.size_t(4 * n)))
		defer C.free(unsafe.Pointer(cp.zp))
		copy(unsafe.Slice((*int32)(unsafe.Pointer(cp.zp)), n), p.ZP)
		cp.zp_len = C.int32_t(n)
	}
	if rc := C.rknn_matmul_set_quant_params(c.h, &cp); rc != 0 {
		return rkErr(fn, rc, "%s: scale_len %d, zp_len %d", p.Name, len(p.Scale), len(p.ZP))
	}
	return nil
}

// Run calls rknn_matmul_run (blocking).
func (c *Context) Run() error {
	const fn = "rknn_matmul_run"
	return c.locked(fn, func() error {
		if rc := C.rknn_matmul_run(c.h); rc != 0 {
			return rkErr(fn, rc, "M=%d K=%d N=%d type=%s", c.info.M, c.info.K, c.info.N, c.info.Type)
		}
		c.drv.count.Count(&c.info, &c.attrs)
		return nil
	})
}

// Destroy calls rknn_matmul_destroy; later calls fail with ErrCtxInvalid.
func (c *Context) Destroy() error {
	const fn = "rknn_matmul_destroy"
	return c.locked(fn, func() error {
		c.destroyed = true // the handle is gone even if the library complains
		return rcErr(fn, C.rknn_matmul_destroy(c.h), "")
	})
}
