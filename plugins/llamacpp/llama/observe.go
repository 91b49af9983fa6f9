package llama

import (
	"sync"
	"unsafe"

	"github.com/ebitengine/purego"
)

// Tensor is a node of llama.cpp's compute graph as the scheduler's eval
// callback sees it, after the node was computed. Data views the tensor's
// bytes in host memory (CPU backends) and is valid only during the call.
type Tensor struct {
	Name string
	Type int32    // ggml type
	Op   int32    // ggml op
	Ne   [4]int64 // elements per dimension
	Nb   [4]int64 // strides in bytes
	Data unsafe.Pointer
}

// F32 returns the elements of a contiguous F32 tensor (nil otherwise).
func (t *Tensor) F32() []float32 {
	if t.Type != 0 || t.Data == nil || t.Nb[0] != 4 {
		return nil
	}
	n := t.Ne[0] * t.Ne[1] * t.Ne[2] * t.Ne[3]
	if t.Nb[1] != 4*t.Ne[0] || t.Nb[2] != t.Nb[1]*t.Ne[1] || t.Nb[3] != t.Nb[2]*t.Ne[2] {
		return nil
	}
	return unsafe.Slice((*float32)(t.Data), n)
}

// Observer receives every computed graph node whose name want accepts
// (want nil: all). Asking for a node makes the scheduler compute it on its
// own, which rules out fusing it with its neighbours.
type Observer struct {
	Want func(name string) bool
	Node func(t *Tensor)
}

// ggml_tensor field offsets (v0.5.0, identical in b10587): checked by
// TestTensorLayout against ggml.h.
const (
	tensorOffType = 0
	tensorOffNe   = 16
	tensorOffNb   = 48
	tensorOffOp   = 80
	tensorOffData = 248
	tensorOffName = 256
	tensorNameLen = 64
)

var (
	observersMu sync.Mutex
	observers   = map[uintptr]*Observer{}
	nextObs     uintptr
	evalCB      uintptr
	evalCBOnce  sync.Once
)

func tensorName(p unsafe.Pointer) string {
	b := unsafe.Slice((*byte)(unsafe.Add(p, tensorOffName)), tensorNameLen)
	n := 0
	for n < len(b) && b[n] != 0 {
		n++
	}
	return string(b[:n])
}

// evalCallback is ggml_backend_sched_eval_callback:
// bool (*)(struct ggml_tensor * t, bool ask, void * user_data).
func evalCallback(p unsafe.Pointer, ask bool, ud uintptr) bool {
	observersMu.Lock()
	o := observers[ud]
	observersMu.Unlock()
	if o == nil {
		return !ask // not ours: let the graph run on
	}
	name := tensorName(p)
	if o.Want != nil && !o.Want(name) {
		return !ask
	}
	if ask {
		return true
	}
	tt := &Tensor{
		Name: name,
		Type: *(*int32)(unsafe.Add(p, tensorOffType)),
		Op:   *(*int32)(unsafe.Add(p, tensorOffOp)),
		Ne:   *(*[4]int64)(unsafe.Add(p, tensorOffNe)),
		Nb:   *(*[4]int64)(unsafe.Add(p, tensorOffNb)),
		Data: *(*unsafe.Pointer)(unsafe.Add(p, tensorOffData)),
	}
	o.Node(tt)
	return true
}

// registerObserver returns the callback and user data to put into
// llama_context_params.
func registerObserver(o *Observer) (cb, ud uintptr) {
	evalCBOnce.Do(func() { evalCB = purego.NewCallback(evalCallback) })
	observersMu.Lock()
	defer observersMu.Unlock()
	nextObs++
	observers[nextObs] = o
	return evalCB, nextObs
}

func unregisterObserver(ud uintptr) {
	observersMu.Lock()
	delete(observers, ud)
	observersMu.Unlock()
}
