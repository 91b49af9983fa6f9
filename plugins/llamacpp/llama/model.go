package llama

import (
	"bytes"
	"fmt"
	"reflect"
	"runtime"
	"strings"
	"unsafe"
)

// ModelParams are the model settings the plugin passes through; the rest
// keep the library's defaults.
type ModelParams struct {
	NGPULayers *int32   // nil: the library's default
	Devices    []string // ggml device names to offload to; nil: all
}

// Model is a loaded llama_model.
type Model struct {
	lib   *Library
	ptr   uintptr
	vocab uintptr
}

// LoadModel loads a GGUF file.
func (l *Library) LoadModel(path string, p ModelParams) (*Model, error) {
	img := l.f.modelDefaults()
	mp := NewStruct(l.Layout.ModelParams, img.B[:])
	if p.NGPULayers != nil {
		if err := mp.Set("n_gpu_layers", *p.NGPULayers); err != nil {
			return nil, err
		}
	}
	var devs []uintptr // NULL-terminated ggml_backend_dev_t list, read during the call
	if len(p.Devices) > 0 {
		for _, name := range p.Devices {
			d := l.f.devByName(name)
			if d == 0 {
				var have []string
				for _, dev := range l.Devices {
					have = append(have, dev.Name)
				}
				return nil, fmt.Errorf("device %q: the library has no such ggml device (it has: %s)", name, strings.Join(have, ", "))
			}
			devs = append(devs, d)
		}
		devs = append(devs, 0)
		if err := mp.Set("devices", uintptr(unsafe.Pointer(&devs[0]))); err != nil {
			return nil, err
		}
	}
	out := l.f.modelLoad.Call([]reflect.Value{reflect.ValueOf(path), mp.Value()})
	runtime.KeepAlive(devs)
	ptr := out[0].Interface().(uintptr)
	if ptr == 0 {
		return nil, fmt.Errorf("llama_model_load_from_file(%s) failed (its reason is in the plugin's log)", path)
	}
	return &Model{lib: l, ptr: ptr, vocab: l.f.getVocab(ptr)}, nil
}

// Free releases the model.
func (m *Model) Free() {
	if m.ptr != 0 {
		m.lib.f.modelFree(m.ptr)
		m.ptr = 0
	}
}

// NVocab is llama_vocab_n_tokens.
func (m *Model) NVocab() int { return int(m.lib.f.vocabNTokens(m.vocab)) }

// TokenText is llama_vocab_get_text: the token's text as the vocabulary
// stores it.
func (m *Model) TokenText(id int) string { return m.lib.f.vocabText(m.vocab, int32(id)) }

// BOS is the token to start a sequence with, or -1 when the vocabulary adds
// none (llama_vocab_get_add_bos, llama_vocab_bos).
func (m *Model) BOS() int32 {
	if !m.lib.f.vocabAddBOS(m.vocab) {
		return -1
	}
	return m.lib.f.vocabBOS(m.vocab)
}

// NParams, Size, NCtxTrain, NEmbd and NLayer are the llama_model_* getters.
func (m *Model) NParams() uint64 { return m.lib.f.nParams(m.ptr) }
func (m *Model) Size() uint64    { return m.lib.f.modelSize(m.ptr) }
func (m *Model) NCtxTrain() int  { return int(m.lib.f.nCtxTrain(m.ptr)) }
func (m *Model) NEmbd() int      { return int(m.lib.f.nEmbd(m.ptr)) }
func (m *Model) NLayer() int     { return int(m.lib.f.nLayer(m.ptr)) }

// Desc is llama_model_desc, e.g. "llama ?B Q8_0".
func (m *Model) Desc() string {
	buf := make([]byte, 256)
	n := m.lib.f.modelDesc(m.ptr, &buf[0], uintptr(len(buf)))
	return cString(buf, n)
}

// Meta is llama_model_meta_val_str; ok is false when the key is absent.
func (m *Model) Meta(key string) (string, bool) {
	buf := make([]byte, 1024)
	n := m.lib.f.metaValStr(m.ptr, key, &buf[0], uintptr(len(buf)))
	if n < 0 {
		return "", false
	}
	return cString(buf, n), true
}

func cString(buf []byte, n int32) string {
	if n < 0 {
		return ""
	}
	if i := bytes.IndexByte(buf, 0); i >= 0 {
		buf = buf[:i]
	}
	return string(buf)
}

// FlashAttn values (enum llama_flash_attn_type).
const (
	FlashAttnAuto = -1
	FlashAttnOff  = 0
	FlashAttnOn   = 1
)

// ContextParams are the context settings the plugin chooses.
type ContextParams struct {
	NCtx, NBatch, NUBatch, NSeqMax int
	Threads                        int
	FlashAttn                      int32
	TypeK, TypeV                   int32 // ggml types
	// SWAFull is swa_full: true gives sliding-window layers a full-size
	// cache (libllama's default); false, a cache of the window plus a
	// micro-batch used as a ring, as llama.cpp's tools set it.
	SWAFull bool
	// Observe, if set, sees the graph's nodes as they are computed
	// (llama.cpp's cb_eval).
	Observe *Observer
}

// Context is a llama_context with one reusable llama_batch of NUBatch tokens.
type Context struct {
	m      *Model
	ptr    uintptr
	mem    uintptr
	batch  Struct
	raw    *batchV1 // view of batch for filling (every layout shares llama_batch v1)
	cap    int
	nVocab int
	nSeq   int
	obs    uintptr // observer registration, 0 if none
}

// NewContext creates a context on the model.
func (m *Model) NewContext(p ContextParams) (*Context, error) {
	l := m.lib
	img := l.f.contextDefaults()
	cp := NewStruct(l.Layout.ContextParams, img.B[:])
	for _, kv := range []struct {
		name string
		v    any
	}{
		{"n_ctx", uint32(p.NCtx)}, {"n_batch", uint32(p.NBatch)}, {"n_ubatch", uint32(p.NUBatch)}, {"n_seq_max", uint32(p.NSeqMax)},
		{"n_threads", int32(p.Threads)}, {"n_threads_batch", int32(p.Threads)},
		{"flash_attn_type", p.FlashAttn}, {"type_k", p.TypeK}, {"type_v", p.TypeV}, {"swa_full", p.SWAFull},
		// Logits for every row the caller asks for, and timings off.
		{"no_perf", true},
	} {
		if err := cp.Set(kv.name, kv.v); err != nil {
			return nil, err
		}
	}
	var obs uintptr
	if p.Observe != nil {
		cb, ud := registerObserver(p.Observe)
		if err := cp.Set("cb_eval", cb); err != nil {
			unregisterObserver(ud)
			return nil, err
		}
		if err := cp.Set("cb_eval_user_data", ud); err != nil {
			unregisterObserver(ud)
			return nil, err
		}
		obs = ud
	}
	out := l.f.initContext.Call([]reflect.Value{reflect.ValueOf(m.ptr), cp.Value()})
	ptr := out[0].Interface().(uintptr)
	if ptr == 0 {
		if obs != 0 {
			unregisterObserver(obs)
		}
		return nil, fmt.Errorf("llama_init_from_model failed (n_ctx %d, flash_attn %d, type_k %d, type_v %d; its reason is in the plugin's log)", p.NCtx, p.FlashAttn, p.TypeK, p.TypeV)
	}
	if l.Layout.Batch != reflect.TypeFor[batchV1]() {
		l.f.free(ptr)
		return nil, fmt.Errorf("layout %s: llama_batch is not the v1 layout this code fills", l.Layout.Name)
	}
	bout := l.f.batchInit.Call([]reflect.Value{reflect.ValueOf(int32(p.NUBatch)), reflect.ValueOf(int32(0)), reflect.ValueOf(int32(1))})
	b := Struct{reflect.New(l.Layout.Batch).Elem()}
	b.v.Set(bout[0])
	c := &Context{m: m, ptr: ptr, mem: l.f.getMemory(ptr), batch: b, cap: p.NUBatch, nVocab: m.NVocab(), nSeq: p.NSeqMax, obs: obs}
	c.raw = (*batchV1)(b.v.Addr().UnsafePointer())
	return c, nil
}

// Free releases the batch and the context.
func (c *Context) Free() {
	if c.ptr != 0 {
		c.raw.NTokens = 0
		c.m.lib.f.batchFree.Call([]reflect.Value{c.batch.Value()})
		c.m.lib.f.free(c.ptr)
		c.ptr = 0
		if c.obs != 0 {
			unregisterObserver(c.obs)
			c.obs = 0
		}
	}
}

// BatchCap is the most tokens one Decode takes.
func (c *Context) BatchCap() int { return c.cap }

// NCtx is llama_n_ctx.
func (c *Context) NCtx() int { return int(c.m.lib.f.nCtx(c.ptr)) }

// Decode runs llama_decode on tokens of sequence seq at positions pos0...;
// logits are computed for the rows where want(i) is true (nil: none).
func (c *Context) Decode(seq int32, pos0 int, tokens []int32, want func(i int) bool) error {
	n := len(tokens)
	if n == 0 || n > c.cap {
		return fmt.Errorf("decode: %d tokens, want 1..%d", n, c.cap)
	}
	r := c.raw
	tok := unsafe.Slice((*int32)(r.Token), c.cap)
	pos := unsafe.Slice((*int32)(r.Pos), c.cap)
	nseq := unsafe.Slice((*int32)(r.NSeqID), c.cap)
	seqs := unsafe.Slice((**int32)(r.SeqID), c.cap)
	logits := unsafe.Slice((*int8)(r.Logits), c.cap)
	for i, t := range tokens {
		tok[i] = t
		pos[i] = int32(pos0 + i)
		nseq[i] = 1
		*seqs[i] = seq
		logits[i] = 0
		if want != nil && want(i) {
			logits[i] = 1
		}
	}
	r.NTokens = int32(n)
	out := c.m.lib.f.decode.Call([]reflect.Value{reflect.ValueOf(c.ptr), c.batch.Value()})
	r.NTokens = 0
	switch rc := out[0].Interface().(int32); rc {
	case 0:
		return nil
	case 1:
		return fmt.Errorf("llama_decode: no KV cache slot for %d tokens at position %d (returned 1)", n, pos0)
	case 2:
		return fmt.Errorf("llama_decode: aborted (returned 2)")
	default:
		return fmt.Errorf("llama_decode: invalid input or failure (returned %d; the reason is in the plugin's log)", rc)
	}
}

// Logits returns the logits of batch row i of the last Decode, a view into
// the library's buffer valid until the next call.
func (c *Context) Logits(i int) ([]float32, error) {
	p := c.m.lib.f.logitsIth(c.ptr, int32(i))
	if p == nil {
		return nil, fmt.Errorf("llama_get_logits_ith(%d): no logits for that row", i)
	}
	return unsafe.Slice(p, c.nVocab), nil
}

// SeqRm removes positions [p0, p1) of seq from the memory (p1 < 0: to the
// end).
func (c *Context) SeqRm(seq int32, p0, p1 int) bool {
	return c.m.lib.f.memorySeqRm(c.mem, seq, int32(p0), int32(p1))
}

// SeqPosMax is the largest position of seq in the memory (-1: empty).
func (c *Context) SeqPosMax(seq int32) int { return int(c.m.lib.f.memorySeqPosMx(c.mem, seq)) }

// SeqState is llama_state_seq_get_data: sequence seq's part of the memory
// (its KV cache cells) as bytes SetSeqState takes back.
func (c *Context) SeqState(seq int32) []byte {
	buf := make([]byte, c.m.lib.f.stateSeqSize(c.ptr, seq))
	if len(buf) == 0 {
		return nil
	}
	return buf[:c.m.lib.f.stateSeqGet(c.ptr, &buf[0], uintptr(len(buf)), seq)]
}

// SetSeqState is llama_state_seq_set_data: it puts a SeqState into sequence
// seq; false: the library refused it (no room, another model or layout).
func (c *Context) SetSeqState(seq int32, state []byte) bool {
	if len(state) == 0 {
		return false
	}
	return c.m.lib.f.stateSeqSet(c.ptr, &state[0], uintptr(len(state)), seq) != 0
}

// Clear empties the memory (KV cache) of every sequence.
func (c *Context) Clear() { c.m.lib.f.memoryClear(c.mem, true) }

// Synchronize waits for the backends to finish (llama_synchronize).
func (c *Context) Synchronize() { c.m.lib.f.synchronize(c.ptr) }
