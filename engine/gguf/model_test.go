package gguf

import (
	"bytes"
	"encoding/binary"
	"math"
	"os"
	"path/filepath"
	"reflect"
	"runtime"
	"testing"
	"unsafe"

	"github.com/evalrun/evalrun/engine/ggml"
)

var bundledModels = []string{
	"stories260K.gguf",
	"stories260K-f16.gguf",
	"stories260K-q8_0.gguf",
	"stories260K-q4_0.gguf",
	"stories260K-q4_k_m.gguf",
}

func modelPath(name string) string { return filepath.Join("..", "..", "models", name) }

func openModel(t testing.TB, name string) *File {
	t.Helper()
	f, err := Open(modelPath(name))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.Close() })
	return f
}

func TestBundledModels(t *testing.T) {
	for _, name := range bundledModels {
		t.Run(name, func(t *testing.T) {
			f := openModel(t, name)
			if f.Version != 3 || len(f.Tensors) != 48 || f.Alignment != 32 {
				t.Fatalf("version %d, %d tensors, alignment %d; want 3, 48, 32", f.Version, len(f.Tensors), f.Alignment)
			}
			st, _ := os.Stat(modelPath(name))
			if f.Size != st.Size() || f.DataOffset%32 != 0 {
				t.Errorf("Size %d (file %d), DataOffset %d not aligned", f.Size, st.Size(), f.DataOffset)
			}
			wantUint := map[string]uint64{
				"llama.block_count": 5, "llama.embedding_length": 64, "llama.feed_forward_length": 172,
				"llama.attention.head_count": 8, "llama.attention.head_count_kv": 4, "llama.context_length": 2048,
				"tokenizer.ggml.bos_token_id": 1, "tokenizer.ggml.eos_token_id": 2,
			}
			for key, want := range wantUint {
				if got, ok := f.Uint(key); !ok || got != want {
					t.Errorf("Uint(%q) = %d, %v; want %d", key, got, ok, want)
				}
			}
			if arch, ok := f.String("general.architecture"); !ok || arch != "llama" {
				t.Errorf("general.architecture = %q, %v", arch, ok)
			}
			if eps, ok := f.Float("llama.attention.layer_norm_rms_epsilon"); !ok || eps != float64(float32(1e-5)) {
				t.Errorf("rms eps = %v, %v", eps, ok)
			}
			tokens, ok := f.Strings("tokenizer.ggml.tokens")
			if !ok || len(tokens) != 512 || tokens[0] != "<unk>" || tokens[1] != "<s>" || tokens[3] != "<0x00>" {
				t.Errorf("tokens: ok=%v len=%d first=%q", ok, len(tokens), tokens[:min(4, len(tokens))])
			}
			if scores, ok := f.Float32s("tokenizer.ggml.scores"); !ok || len(scores) != 512 {
				t.Errorf("scores: ok=%v len=%d", ok, len(scores))
			}
			if types, ok := f.Int32s("tokenizer.ggml.token_type"); !ok || len(types) != 512 || types[0] != 2 || types[1] != 3 || types[3] != 6 {
				t.Errorf("token_type: ok=%v %v", ok, types[:min(4, len(types))])
			}
			end := uint64(0)
			for i := range f.Tensors {
				ti := &f.Tensors[i]
				data := f.TensorData(ti)
				if uint64(len(data)) != ti.Size {
					t.Errorf("%s: %d data bytes, Size %d", ti.Name, len(data), ti.Size)
				}
				end = max(end, f.DataOffset+ti.Offset+ti.Size)
				if got, ok := f.Tensor(ti.Name); !ok || got != ti {
					t.Errorf("Tensor(%q) lookup failed", ti.Name)
				}
			}
			if end > uint64(f.Size) || f.Size-int64(end) >= 32 {
				t.Errorf("tensor data ends at %d, file is %d bytes", end, f.Size)
			}
		})
	}
}

func TestBundledModelTensors(t *testing.T) {
	q8 := openModel(t, "stories260K-q8_0.gguf")
	ti, ok := q8.Tensor("blk.0.ffn_down.weight")
	if !ok || !reflect.DeepEqual(ti.Dims, []uint64{172, 64}) || ti.Type != ggml.F16 || ti.Size != 172*64*2 {
		t.Errorf("q8_0 blk.0.ffn_down.weight = %+v, %v; want dims [172 64] F16", ti, ok)
	}
	q4 := openModel(t, "stories260K-q4_0.gguf")
	if ti, ok := q4.Tensor("output.weight"); !ok || ti.Type != ggml.Q8_0 || ti.Size != 512*2*34 {
		t.Errorf("q4_0 output.weight = %+v, %v; want Q8_0", ti, ok)
	}
	if ti, ok := q4.Tensor("blk.4.attn_q.weight"); !ok || ti.Type != ggml.Q4_0 {
		t.Errorf("q4_0 blk.4.attn_q.weight = %+v, %v; want Q4_0", ti, ok)
	}
	if _, ok := q4.Tensor("blk.5.attn_q.weight"); ok {
		t.Error("found a tensor of layer 5 in a 5-layer model")
	}

	f32 := openModel(t, "stories260K.gguf")
	emb, ok := f32.Tensor("token_embd.weight")
	if !ok || emb.Size != 512*64*4 || emb.NElements() != 512*64 || emb.Type != ggml.F32 || !reflect.DeepEqual(emb.Dims, []uint64{64, 512}) {
		t.Fatalf("token_embd.weight = %+v, %v", emb, ok)
	}
	// token_embd and output 512×64, output_norm 64, and per layer of 5: two
	// norms 64, q and o 64×64, k and v 64×32 (4 KV heads), gate, up, down 64×172.
	if n := f32.NParams(); n != 2*512*64+64+5*(2*64+2*64*64+2*64*32+3*64*172) {
		t.Errorf("NParams = %d, want 292800", n)
	}
	raw, err := os.ReadFile(modelPath("stories260K.gguf"))
	if err != nil {
		t.Fatal(err)
	}
	at := f32.DataOffset + emb.Offset
	byHand := math.Float32frombits(binary.LittleEndian.Uint32(raw[at:]))
	viaView := math.Float32frombits(binary.LittleEndian.Uint32(f32.TensorData(emb)))
	// 0xbe96e950 is the first weight as dumped with xxd at byte 14176.
	if at != 14176 || byHand != viaView || math.Float32bits(viaView) != 0xbe96e950 {
		t.Errorf("first float at %d: by hand %v, via TensorData %v (bits %#x)", at, byHand, viaView, math.Float32bits(viaView))
	}
	last := &f32.Tensors[len(f32.Tensors)-1]
	if !bytes.Equal(f32.TensorData(last), raw[f32.DataOffset+last.Offset:][:last.Size]) {
		t.Errorf("%s: mapped data differs from the file", last.Name)
	}
}

// Re-writing a bundled model gives the very same bytes: our writer lays out
// files exactly like llama.cpp's.
func TestRewriteBundledModels(t *testing.T) {
	for _, name := range bundledModels {
		t.Run(name, func(t *testing.T) {
			raw, err := os.ReadFile(modelPath(name))
			if err != nil {
				t.Fatal(err)
			}
			f, err := Parse(raw, name)
			if err != nil {
				t.Fatal(err)
			}
			var buf bytes.Buffer
			if _, err := rewrite(t, f).WriteTo(&buf); err != nil {
				t.Fatal(err)
			}
			g, err := Parse(buf.Bytes(), "rewritten")
			if err != nil {
				t.Fatal(err)
			}
			assertSameFile(t, f, g)
			if !bytes.Equal(buf.Bytes(), raw) {
				t.Errorf("rewritten file differs from the original (%d vs %d bytes)", buf.Len(), len(raw))
			}
		})
	}
}

func TestOpenErrors(t *testing.T) {
	dir := t.TempDir()
	empty := filepath.Join(dir, "empty.gguf")
	if err := os.WriteFile(empty, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	for _, path := range []string{filepath.Join(dir, "missing.gguf"), dir, empty} {
		if f, err := Open(path); err == nil {
			f.Close()
			t.Errorf("Open(%s) succeeded", path)
		}
		if f, err := OpenCopy(path); err == nil {
			f.Close()
			t.Errorf("OpenCopy(%s) succeeded", path)
		}
	}
	if _, err := Open(empty); !isFormatError(err, "magic") {
		t.Errorf("empty file: %v", err)
	}
	if _, err := OpenCopy(empty); !isFormatError(err, "magic") {
		t.Errorf("empty file, copied: %v", err)
	}
}

// TestOpenCopyReadsTheWholeFile: a copy has the mapping's metadata and
// tensor bytes, starts on a huge-page boundary, and Close frees it.
func TestOpenCopyReadsTheWholeFile(t *testing.T) {
	path := modelPath("stories260K-q4_0.gguf")
	mapped, err := Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer mapped.Close()
	copied, err := OpenCopy(path)
	if err != nil {
		t.Fatal(err)
	}
	if mapped.Copied() || !copied.Copied() {
		t.Fatalf("Copied(): mapped %v, copy %v", mapped.Copied(), copied.Copied())
	}
	if len(copied.Tensors) != len(mapped.Tensors) || len(copied.KVs) != len(mapped.KVs) {
		t.Fatalf("copy has %d tensors and %d keys, the mapping %d and %d", len(copied.Tensors), len(copied.KVs), len(mapped.Tensors), len(mapped.KVs))
	}
	for i := range mapped.Tensors {
		if !bytes.Equal(copied.TensorData(&copied.Tensors[i]), mapped.TensorData(&mapped.Tensors[i])) {
			t.Fatalf("tensor %s differs in the copy", mapped.Tensors[i].Name)
		}
	}
	if runtime.GOOS == "linux" {
		if p := uintptr(unsafe.Pointer(unsafe.SliceData(copied.data))); p%(2<<20) != 0 {
			t.Errorf("copy starts at %#x, not on a 2 MiB boundary", p)
		}
	}
	if err := copied.Close(); err != nil {
		t.Fatal(err)
	}
	if copied.TensorData(&copied.Tensors[0]) != nil {
		t.Error("TensorData after Close returned data")
	}
}

func TestTensorDataAfterClose(t *testing.T) {
	f, err := Open(modelPath("stories260K-q4_0.gguf"))
	if err != nil {
		t.Fatal(err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	if d := f.TensorData(&f.Tensors[0]); d != nil {
		t.Error("TensorData after Close returned data")
	}
	if n, ok := f.Uint("llama.block_count"); !ok || n != 5 {
		t.Error("metadata unusable after Close")
	}
	if err := f.Close(); err != nil {
		t.Errorf("second Close: %v", err)
	}
}

func BenchmarkOpen(b *testing.B) {
	path := modelPath("stories260K.gguf")
	for b.Loop() {
		f, err := Open(path)
		if err != nil {
			b.Fatal(err)
		}
		f.Close()
	}
}
