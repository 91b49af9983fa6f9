package llama

import (
	"encoding/binary"
	"fmt"
	"math"
	"reflect"
	"strings"
	"unsafe"
)

// A Layout is how one llama.cpp version lays out the structs that its API
// passes by value, mirrored byte for byte as Go structs with explicit
// padding (64-bit Linux: amd64 and arm64 lay them out alike). Every field
// that takes part carries a `c:"name"` tag with its C name; the layout test
// compiles the version's llama.h and compares sizeof/offsetof with these.
//
// The defaults are what the version's *_default_params return: at load time
// the library is probed with them (see Probe), so a library with another
// layout is refused instead of being handed structs it would misread.
type Layout struct {
	Name          string       // the llama.cpp version, e.g. "v0.5.0"
	Commit        string       // the commit the table was checked against
	ModelParams   reflect.Type // struct llama_model_params
	ContextParams reflect.Type // struct llama_context_params
	Batch         reflect.Type // struct llama_batch
	// ModelDefaults and ContextDefaults are llama_model_default_params()
	// and llama_context_default_params() by C field name (padding is not
	// compared: compilers need not write it).
	ModelDefaults   map[string]any
	ContextDefaults map[string]any
}

// Layouts are the supported versions, newest first. docs/backends.md
// ("Supported struct layouts") says how to add one.
var Layouts = []*Layout{layoutV050}

// llama_model_params of llama.cpp v0.5.0 (include/llama.h).
type modelParamsV050 struct {
	Devices                  uintptr `c:"devices"`
	TensorBuftOverrides      uintptr `c:"tensor_buft_overrides"`
	NGPULayers               int32   `c:"n_gpu_layers"`
	SplitMode                int32   `c:"split_mode"`
	LoadMode                 int32   `c:"load_mode"`
	LazyMode                 int32   `c:"lazy_mode"`
	MainGPU                  int32   `c:"main_gpu"`
	_                        [4]byte
	TensorSplit              uintptr `c:"tensor_split"`
	ProgressCallback         uintptr `c:"progress_callback"`
	ProgressCallbackUserData uintptr `c:"progress_callback_user_data"`
	KVOverrides              uintptr `c:"kv_overrides"`
	VocabOnly                bool    `c:"vocab_only"`
	CheckTensors             bool    `c:"check_tensors"`
	UseExtraBufts            bool    `c:"use_extra_bufts"`
	NoHost                   bool    `c:"no_host"`
	NoAlloc                  bool    `c:"no_alloc"`
	LoadMTP                  bool    `c:"load_mtp"`
	_                        [2]byte
}

// llama_context_params of llama.cpp v0.5.0.
type contextParamsV050 struct {
	NCtx              uint32  `c:"n_ctx"`
	NBatch            uint32  `c:"n_batch"`
	NUBatch           uint32  `c:"n_ubatch"`
	NSeqMax           uint32  `c:"n_seq_max"`
	NRSSeq            uint32  `c:"n_rs_seq"`
	NOutputsMax       uint32  `c:"n_outputs_max"`
	NOutputsMaxPerSeq uint32  `c:"n_outputs_max_per_seq"`
	NThreads          int32   `c:"n_threads"`
	NThreadsBatch     int32   `c:"n_threads_batch"`
	CtxType           int32   `c:"ctx_type"`
	RopeScalingType   int32   `c:"rope_scaling_type"`
	PoolingType       int32   `c:"pooling_type"`
	AttentionType     int32   `c:"attention_type"`
	FlashAttnType     int32   `c:"flash_attn_type"`
	RopeFreqBase      float32 `c:"rope_freq_base"`
	RopeFreqScale     float32 `c:"rope_freq_scale"`
	YarnExtFactor     float32 `c:"yarn_ext_factor"`
	YarnAttnFactor    float32 `c:"yarn_attn_factor"`
	YarnBetaFast      float32 `c:"yarn_beta_fast"`
	YarnBetaSlow      float32 `c:"yarn_beta_slow"`
	YarnOrigCtx       uint32  `c:"yarn_orig_ctx"`
	DefragThold       float32 `c:"defrag_thold"`
	CbEval            uintptr `c:"cb_eval"`
	CbEvalUserData    uintptr `c:"cb_eval_user_data"`
	TypeK             int32   `c:"type_k"`
	TypeV             int32   `c:"type_v"`
	AbortCallback     uintptr `c:"abort_callback"`
	AbortCallbackData uintptr `c:"abort_callback_data"`
	Embeddings        bool    `c:"embeddings"`
	OffloadKQV        bool    `c:"offload_kqv"`
	NoPerf            bool    `c:"no_perf"`
	OpOffload         bool    `c:"op_offload"`
	SWAFull           bool    `c:"swa_full"`
	KVUnified         bool    `c:"kv_unified"`
	_                 [2]byte
	Samplers          uintptr `c:"samplers"`
	NSamplers         uintptr `c:"n_samplers"`
	CtxOther          uintptr `c:"ctx_other"`
}

// llama_batch, unchanged for a long time (v0.5.0 and b10587 alike).
type batchV1 struct {
	NTokens int32 `c:"n_tokens"`
	_       [4]byte
	Token   unsafe.Pointer `c:"token"`    // llama_token *
	Embd    unsafe.Pointer `c:"embd"`     // float *
	Pos     unsafe.Pointer `c:"pos"`      // llama_pos *
	NSeqID  unsafe.Pointer `c:"n_seq_id"` // int32_t *
	SeqID   unsafe.Pointer `c:"seq_id"`   // llama_seq_id **
	Logits  unsafe.Pointer `c:"logits"`   // int8_t *
}

var layoutV050 = &Layout{
	Name:          "v0.5.0",
	Commit:        "0ad4a86",
	ModelParams:   reflect.TypeFor[modelParamsV050](),
	ContextParams: reflect.TypeFor[contextParamsV050](),
	Batch:         reflect.TypeFor[batchV1](),
	ModelDefaults: map[string]any{
		"devices": uintptr(0), "tensor_buft_overrides": uintptr(0),
		"n_gpu_layers": int32(-1), "split_mode": int32(1), "load_mode": int32(-1), "lazy_mode": int32(1), "main_gpu": int32(0),
		"tensor_split": uintptr(0), "progress_callback": uintptr(0), "progress_callback_user_data": uintptr(0), "kv_overrides": uintptr(0),
		"vocab_only": false, "check_tensors": false, "use_extra_bufts": true, "no_host": false, "no_alloc": false, "load_mtp": false,
	},
	ContextDefaults: map[string]any{
		"n_ctx": uint32(512), "n_batch": uint32(2048), "n_ubatch": uint32(512), "n_seq_max": uint32(1), "n_rs_seq": uint32(0),
		"n_outputs_max": uint32(0), "n_outputs_max_per_seq": uint32(1), "n_threads": int32(4), "n_threads_batch": int32(4),
		"ctx_type": int32(0), "rope_scaling_type": int32(-1), "pooling_type": int32(-1), "attention_type": int32(-1), "flash_attn_type": int32(-1),
		"rope_freq_base": float32(0), "rope_freq_scale": float32(0), "yarn_ext_factor": float32(-1), "yarn_attn_factor": float32(-1),
		"yarn_beta_fast": float32(-1), "yarn_beta_slow": float32(-1), "yarn_orig_ctx": uint32(0), "defrag_thold": float32(-1),
		"cb_eval": uintptr(0), "cb_eval_user_data": uintptr(0), "type_k": int32(1), "type_v": int32(1),
		"abort_callback": uintptr(0), "abort_callback_data": uintptr(0),
		"embeddings": false, "offload_kqv": true, "no_perf": true, "op_offload": true, "swa_full": true, "kv_unified": false,
		"samplers": uintptr(0), "n_samplers": uintptr(0), "ctx_other": uintptr(0),
	},
}

// Field is one C field of a mirrored struct.
type Field struct {
	Name   string // C name
	Offset uintptr
	Size   uintptr
	Kind   reflect.Kind
}

// Fields lists the C fields of a mirrored struct type in order.
func Fields(t reflect.Type) []Field {
	var out []Field
	for f := range t.Fields() {
		name := f.Tag.Get("c")
		if name == "" {
			continue
		}
		out = append(out, Field{Name: name, Offset: f.Offset, Size: f.Type.Size(), Kind: f.Type.Kind()})
	}
	return out
}

// ProbeSize is how many bytes a probe lets a *_default_params function
// write: far more than any known version's struct, so a larger unknown one
// cannot write past the buffer.
const ProbeSize = 4096

// probeBuf receives a *_default_params result of unknown size.
type probeBuf struct{ B [ProbeSize]byte }

// matchDefaults checks that image holds t's struct with the given defaults
// and nothing (zero bytes) after it. It returns why not.
func matchDefaults(what string, t reflect.Type, defaults map[string]any, image []byte) error {
	var diffs []string
	seen := 0
	for _, f := range Fields(t) {
		want, ok := defaults[f.Name]
		if !ok {
			continue
		}
		seen++
		got := decodeField(f, image[f.Offset:f.Offset+f.Size])
		if got != want {
			diffs = append(diffs, fmt.Sprintf("%s at offset %d is %v, want %v", f.Name, f.Offset, got, want))
		}
	}
	if seen != len(defaults) {
		return fmt.Errorf("%s: the table's defaults name fields the struct lacks", what)
	}
	for i := t.Size(); i < uintptr(len(image)); i++ {
		if image[i] != 0 {
			diffs = append(diffs, fmt.Sprintf("byte %d past the %d-byte struct is written (0x%02x): the library's struct is larger", i, t.Size(), image[i]))
			break
		}
	}
	if len(diffs) > 0 {
		return fmt.Errorf("%s: %s", what, strings.Join(diffs, "; "))
	}
	return nil
}

func decodeField(f Field, b []byte) any {
	switch f.Kind {
	case reflect.Bool:
		return b[0] != 0
	case reflect.Int32:
		return int32(binary.LittleEndian.Uint32(b))
	case reflect.Uint32:
		return binary.LittleEndian.Uint32(b)
	case reflect.Float32:
		return math.Float32frombits(binary.LittleEndian.Uint32(b))
	case reflect.Uintptr, reflect.UnsafePointer:
		return uintptr(binary.LittleEndian.Uint64(b))
	}
	return fmt.Sprintf("%x", b)
}

// MatchLayout finds the layout whose default structs equal the probed
// images of llama_model_default_params() and llama_context_default_params().
// With no match the error lists, per known layout, what differed.
func MatchLayout(modelImage, contextImage []byte) (*Layout, error) {
	var why []string
	for _, l := range Layouts {
		err := matchDefaults("llama_model_params", l.ModelParams, l.ModelDefaults, modelImage)
		if err == nil {
			err = matchDefaults("llama_context_params", l.ContextParams, l.ContextDefaults, contextImage)
		}
		if err == nil {
			return l, nil
		}
		why = append(why, fmt.Sprintf("not %s (%v)", l.Name, err))
	}
	return nil, fmt.Errorf("unknown llama.cpp struct layout: %s; supported: %s", strings.Join(why, "; "), supportedNames())
}

func supportedNames() string {
	var names []string
	for _, l := range Layouts {
		names = append(names, l.Name+" ("+l.Commit+")")
	}
	return strings.Join(names, ", ")
}

// Struct is a value of one of a layout's mirrored structs, set by C field name.
type Struct struct{ v reflect.Value }

// NewStruct wraps an addressable copy of the struct in image (its first
// t.Size() bytes).
func NewStruct(t reflect.Type, image []byte) Struct {
	v := reflect.New(t).Elem()
	copy(unsafe.Slice((*byte)(v.Addr().UnsafePointer()), t.Size()), image)
	return Struct{v}
}

// Set assigns a field by C name; x must have the field's Go type.
func (s Struct) Set(name string, x any) error {
	for f := range s.v.Type().Fields() {
		if f.Tag.Get("c") == name {
			xv := reflect.ValueOf(x)
			if xv.Type() != f.Type {
				return fmt.Errorf("field %s is %s, not %s", name, f.Type, xv.Type())
			}
			s.v.FieldByIndex(f.Index).Set(xv)
			return nil
		}
	}
	return fmt.Errorf("%s has no field %s in this llama.cpp version", s.v.Type().Name(), name)
}

// Get reads a field by C name.
func (s Struct) Get(name string) (any, error) {
	for f := range s.v.Type().Fields() {
		if f.Tag.Get("c") == name {
			return s.v.FieldByIndex(f.Index).Interface(), nil
		}
	}
	return nil, fmt.Errorf("%s has no field %s in this llama.cpp version", s.v.Type().Name(), name)
}

// Value is the struct as a reflect.Value, for calls.
func (s Struct) Value() reflect.Value { return s.v }
