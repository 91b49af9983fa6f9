package sim

import (
	"math"
	"runtime"
	"sync"
	"sync/atomic"

	"github.com/evalrun/evalrun/plugins/rknn/npu"
)

// Mem is a simulated NPU buffer: plain Go memory.
type Mem struct {
	buf   []byte
	freed *atomic.Bool // shared with the cleanup that unmaps a leaked buffer
}

// Bytes is the CPU view of the buffer.
func (m *Mem) Bytes() []byte { return m.buf }

// Size is the buffer size in bytes.
func (m *Mem) Size() int { return len(m.buf) }

// perLayer is one operand's per-layer quantization.
type perLayer struct {
	scale float32
	zp    int32
}

// Context is one simulated rknn_matmul_ctx. Its methods may be called from
// several goroutines; runs of one context are serialized.
type Context struct {
	drv   *Driver
	info  npu.MatmulInfo
	attrs npu.IOAttr

	mu        sync.Mutex
	destroyed bool
	a, b, c   *Mem
	mask      npu.CoreMask
	quant     [3]perLayer // A, B, C

}

var _ npu.Context = (*Context)(nil)

func defaultQuant() [3]perLayer {
	// RT: scale 1.0, zero point 0 if set_quant_params is never called.
	return [3]perLayer{{1, 0}, {1, 0}, {1, 0}}
}

// Info is the MatmulInfo the context was created with.
func (c *Context) Info() npu.MatmulInfo { return c.info }

// CoreMask is the mask last set (CoreAuto by default).
func (c *Context) CoreMask() npu.CoreMask {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.mask
}

func (c *Context) alive(fn string) error {
	if c.destroyed {
		return rkErr(fn, npu.ErrCtxInvalid, "context destroyed")
	}
	return nil
}

// ownMem is m as this driver's buffer, for a call fn on a live context
// (c.mu held).
func (c *Context) ownMem(fn string, m npu.Mem) (*Mem, error) {
	if err := c.alive(fn); err != nil {
		return nil, err
	}
	sm, ok := m.(*Mem)
	if !ok || sm == nil {
		return nil, rkErr(fn, npu.ErrParamInvalid, "mem %T was not created by this driver", m)
	}
	return sm, nil
}

// CreateMem allocates a buffer of size bytes (rknn_create_mem).
func (c *Context) CreateMem(size int) (npu.Mem, error) {
	const fn = "rknn_create_mem"
	c.mu.Lock()
	defer c.mu.Unlock()
	if err := c.alive(fn); err != nil {
		return nil, err
	}
	if size <= 0 || size > math.MaxUint32 {
		return nil, rkErr(fn, npu.ErrParamInvalid, "size %d out of range (1..%d)", size, uint32(math.MaxUint32))
	}
	buf, err := allocDevice(size)
	if err != nil {
		return nil, rkErr(fn, npu.ErrMallocFail, "%d bytes: %v", size, err)
	}
	m := &Mem{buf: buf, freed: new(atomic.Bool)}
	// A buffer its owner never destroyed is unmapped when the Mem is
	// collected (the real runtime frees it with the context).
	runtime.AddCleanup(m, func(freed *atomic.Bool) {
		if !freed.Swap(true) {
			freeDevice(buf)
		}
	}, m.freed)
	return m, nil
}

// DestroyMem frees a buffer; a context still bound to it fails its next run.
func (c *Context) DestroyMem(m npu.Mem) error {
	const fn = "rknn_destroy_mem"
	c.mu.Lock()
	defer c.mu.Unlock()
	sm, err := c.ownMem(fn, m)
	if err != nil {
		return err
	}
	if sm.freed.Swap(true) {
		return rkErr(fn, npu.ErrParamInvalid, "mem already destroyed")
	}
	// Unmapped now: a context still bound to it refuses to run (freed), and
	// Bytes is empty from here on rather than a view of released pages.
	buf := sm.buf
	sm.buf = nil
	freeDevice(buf)
	return nil
}

// SetIOMem binds m to the operand attr names (rknn_matmul_set_io_mem).
func (c *Context) SetIOMem(m npu.Mem, attr *npu.TensorAttr) error {
	const fn = "rknn_matmul_set_io_mem"
	c.mu.Lock()
	defer c.mu.Unlock()
	sm, err := c.ownMem(fn, m)
	if err != nil {
		return err
	}
	if sm.freed.Load() {
		return rkErr(fn, npu.ErrParamInvalid, "mem was destroyed")
	}
	if attr == nil {
		return rkErr(fn, npu.ErrParamInvalid, "nil tensor attr")
	}
	var want *npu.TensorAttr
	var slot **Mem
	switch attr.Name {
	case "A":
		want, slot = &c.attrs.A, &c.a
	case "B":
		want, slot = &c.attrs.B, &c.b
	case "C":
		want, slot = &c.attrs.C, &c.c
	default:
		return rkErr(fn, npu.ErrParamInvalid, "tensor attr name %q: want \"A\", \"B\" or \"C\"", attr.Name)
	}
	if sm.Size() < int(want.Size) || sm.Size() < int(attr.Size) {
		return rkErr(fn, npu.ErrParamInvalid, "%s: mem size %d < attr size %d", attr.Name, sm.Size(), max(want.Size, attr.Size))
	}
	*slot = sm
	return nil
}

// SetCoreMask records the cores a run may use (rknn_matmul_set_core_mask).
func (c *Context) SetCoreMask(mask npu.CoreMask) error {
	const fn = "rknn_matmul_set_core_mask"
	c.mu.Lock()
	defer c.mu.Unlock()
	if err := c.alive(fn); err != nil {
		return err
	}
	switch mask {
	case npu.CoreAuto, npu.Core0, npu.Core1, npu.Core2, npu.Core0_1, npu.Core0_1_2, npu.CoreAll:
		c.mask = mask
		return nil
	}
	return rkErr(fn, npu.ErrParamInvalid, "core mask %#x invalid (0 auto, 1, 2, 4, 3 = 0_1, 7 = 0_1_2, 0xffff all)", uint32(mask))
}

// SetQuantParams sets the per-layer scale and zero point of A, B or C
// (INT8_MM_INT8_TO_INT8 only on this profile).
func (c *Context) SetQuantParams(p *npu.QuantParams) error {
	const fn = "rknn_matmul_set_quant_params"
	c.mu.Lock()
	defer c.mu.Unlock()
	if err := c.alive(fn); err != nil {
		return err
	}
	if p == nil {
		return rkErr(fn, npu.ErrParamInvalid, "nil quant params")
	}
	if c.info.Type != npu.Int8MMInt8ToInt8 {
		return rkErr(fn, npu.ErrParamInvalid, "quant params apply to INT8_MM_INT8_TO_INT8 only, context is %s", c.info.Type)
	}
	idx := map[string]int{"A": 0, "B": 1, "C": 2}
	i, ok := idx[p.Name]
	if !ok {
		return rkErr(fn, npu.ErrParamInvalid, "name %q: want \"A\", \"B\" or \"C\"", p.Name)
	}
	if len(p.Scale) != 1 || len(p.ZP) > 1 {
		return rkErr(fn, npu.ErrParamInvalid, "%s: per-layer quant needs scale_len=1 and zp_len<=1, got %d and %d", p.Name, len(p.Scale), len(p.ZP))
	}
	s := p.Scale[0]
	if !(s > 0) || math.IsInf(float64(s), 0) {
		return rkErr(fn, npu.ErrParamInvalid, "%s: scale %g must be finite and > 0", p.Name, s)
	}
	var zp int32
	if len(p.ZP) == 1 {
		zp = p.ZP[0]
	}
	qt := c.info.ACQuantType
	if i == 1 {
		qt = c.info.BQuantType
	}
	if qt == npu.QuantPerLayerSym && zp != 0 {
		return rkErr(fn, npu.ErrParamInvalid, "%s: zero point %d with symmetric quantization", p.Name, zp)
	}
	if zp < math.MinInt8 || zp > math.MaxInt8 {
		return rkErr(fn, npu.ErrParamInvalid, "%s: zero point %d outside int8", p.Name, zp)
	}
	c.quant[i] = perLayer{scale: s, zp: zp}
	return nil
}

// Destroy frees the context; every later call fails with ErrCtxInvalid.
func (c *Context) Destroy() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if err := c.alive("rknn_matmul_destroy"); err != nil {
		return err
	}
	c.destroyed = true
	c.a, c.b, c.c = nil, nil, nil
	return nil
}
