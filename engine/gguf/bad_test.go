package gguf

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"math/rand/v2"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/evalrun/evalrun/engine/ggml"
)

// raw assembles GGUF bytes field by field, so tests can write what the
// Writer refuses to.
type raw struct{ b []byte }

func rawHeader(version uint32, nTensors, nKV uint64) *raw {
	r := &raw{b: []byte(magic)}
	return r.u32(version).u64(nTensors).u64(nKV)
}

func (r *raw) u8(v uint8) *raw   { r.b = append(r.b, v); return r }
func (r *raw) u32(v uint32) *raw { r.b = binary.LittleEndian.AppendUint32(r.b, v); return r }
func (r *raw) u64(v uint64) *raw { r.b = binary.LittleEndian.AppendUint64(r.b, v); return r }
func (r *raw) str(s string) *raw { return r.u64(uint64(len(s))).bytes([]byte(s)) }
func (r *raw) bytes(b []byte) *raw {
	r.b = append(r.b, b...)
	return r
}
func (r *raw) pos() int64 { return int64(len(r.b)) }

func (r *raw) kvU32(key string, v uint32) *raw { return r.str(key).u32(uint32(TypeUint32)).u32(v) }

// tensor writes a tensor info; n_dims is len(dims).
func (r *raw) tensor(name string, dims []uint64, t ggml.Type, offset uint64) *raw {
	r.str(name).u32(uint32(len(dims)))
	for _, d := range dims {
		r.u64(d)
	}
	return r.u32(uint32(t)).u64(offset)
}

// data pads to 32 and appends n data bytes.
func (r *raw) data(n int) []byte {
	for len(r.b)%32 != 0 {
		r.b = append(r.b, 0)
	}
	return append(r.b, make([]byte, n)...)
}

type badCase struct {
	name   string
	data   []byte
	field  string // substring of FormatError.Field
	msg    string // substring of FormatError.Msg
	offset int64  // -1: not checked
}

func badCases() []badCase {
	var cs []badCase
	add := func(name string, data []byte, field, msg string, offset int64) {
		cs = append(cs, badCase{name, data, field, msg, offset})
	}
	oneF32 := func(r *raw) []byte { return r.tensor("w", []uint64{8}, ggml.F32, 0).data(32) }

	add("empty", nil, "magic", "too short", 0)
	add("bad magic", append([]byte("GGML"), rawHeader(3, 0, 0).b[4:]...), "magic", "not a GGUF file", 0)
	add("version 1", rawHeader(1, 0, 0).b, "version", "version 1 is not supported", 4)
	add("version 4", rawHeader(4, 0, 0).b, "version", "version 4 is not supported", 4)
	add("version 0", rawHeader(0, 0, 0).b, "version", "version 0 is not supported", 4)
	add("big-endian", rawHeader(3<<24, 0, 0).b, "version", "big-endian", 4)
	add("truncated header", rawHeader(3, 0, 0).b[:20], "kv_count", "unexpected end of file", 16)

	r := rawHeader(3, 1, 1).str(alignmentKey).u32(uint32(TypeUint32))
	at := r.pos()
	add("alignment 0", oneF32(r.u32(0)), `kv[0] ("general.alignment").value`, "alignment 0 is not a power of two", at)
	r = rawHeader(3, 1, 1).str(alignmentKey).u32(uint32(TypeUint32))
	add("alignment 3", oneF32(r.u32(3)), `kv[0] ("general.alignment").value`, "alignment 3 is not a power of two", at)
	r = rawHeader(3, 1, 1).str(alignmentKey)
	at = r.pos()
	add("alignment u64", oneF32(r.u32(uint32(TypeUint64)).u64(32)), `kv[0] ("general.alignment").type`, "must be of type u32, not u64", at)
	r = rawHeader(3, 1, 1).str(alignmentKey)
	add("alignment i32", oneF32(r.u32(uint32(TypeInt32)).u32(32)), `kv[0] ("general.alignment").type`, "must be of type u32, not i32", at)

	r = rawHeader(3, 1, 0).str("w")
	at = r.pos()
	add("n_dims 0", r.u32(0).u32(0).u64(0).data(32), `tensor_infos[0].n_dims ("w")`, "n_dims 0 is not in 1..4", at)
	add("n_dims 5", rawHeader(3, 1, 0).tensor("w", []uint64{1, 1, 1, 1, 1}, ggml.F32, 0).data(32),
		`tensor_infos[0].n_dims ("w")`, "n_dims 5 is not in 1..4", at)

	r = rawHeader(3, 1, 0).str("w").u32(2).u64(64)
	at = r.pos()
	add("dim 0", r.u64(0).u32(0).u64(0).data(32), `tensor_infos[0].dims[1] ("w")`, "dimension 0 is not allowed", at)
	r = rawHeader(3, 1, 0).str("w").u32(2).u64(1 << 32)
	at = r.pos()
	add("element overflow", r.u64(1<<32).u32(0).u64(0).data(32), `tensor_infos[0].dims[1] ("w")`, "overflow", at)
	add("byte size overflow", rawHeader(3, 1, 0).tensor("w", []uint64{1 << 62}, ggml.F64, 0).data(32),
		`tensor_infos[0].dims ("w")`, "byte size overflows", -1)

	r = rawHeader(3, 1, 0).str("q").u32(1)
	at = r.pos()
	add("partial block", r.u64(48).u32(uint32(ggml.Q4_0)).u64(0).data(64), `tensor_infos[0].dims[0] ("q")`,
		"row length 48 is not a multiple of the Q4_0 block size 32", at)
	r = rawHeader(3, 1, 0).str("m").u32(1)
	at = r.pos()
	add("MXFP4 partial block", r.u64(48).u32(uint32(ggml.MXFP4)).u64(0).data(64), `tensor_infos[0].dims[0] ("m")`,
		"row length 48 is not a multiple of the MXFP4 block size 32", at)
	// 64 MXFP4 values are 2 blocks of 17 bytes: 33 bytes of data are one short.
	add("MXFP4 data truncated", rawHeader(3, 1, 0).tensor("m", []uint64{64}, ggml.MXFP4, 0).data(33), `tensor_infos[0].offset ("m")`, "past the end", -1)
	r = rawHeader(3, 1, 0).str("w").u32(1).u64(8)
	at = r.pos()
	add("type 99", r.u32(99).u64(0).data(32), `tensor_infos[0].type ("w")`, "unknown tensor type 99", at)

	r = rawHeader(3, 1, 0).str("w").u32(1).u64(8).u32(0)
	at = r.pos()
	add("offset past end", r.u64(64).data(32), `tensor_infos[0].offset ("w")`, "past the end", at)
	add("data truncated", rawHeader(3, 1, 0).tensor("w", []uint64{8}, ggml.F32, 0).data(31), `tensor_infos[0].offset ("w")`, "past the end", -1)
	add("offset misaligned", rawHeader(3, 1, 0).tensor("w", []uint64{8}, ggml.F32, 4).data(64),
		`tensor_infos[0].offset ("w")`, "offset 4 is not a multiple of the alignment 32", -1)
	r = rawHeader(3, 2, 0).tensor("a", []uint64{16}, ggml.F32, 0).str("b").u32(1).u64(16).u32(0)
	at = r.pos()
	add("overlap", r.u64(32).data(96), `tensor_infos[1].offset ("b")`, `overlaps tensor "a" at [0, 64)`, at)
	add("overlap, out of order", rawHeader(3, 2, 0).tensor("a", []uint64{16}, ggml.F32, 32).tensor("b", []uint64{16}, ggml.F32, 0).data(96),
		`tensor_infos[0].offset ("a")`, `overlaps tensor "b"`, -1)

	r = rawHeader(3, 2, 0).tensor("w", []uint64{8}, ggml.F32, 0)
	at = r.pos()
	add("duplicate tensor", r.tensor("w", []uint64{8}, ggml.F32, 32).data(64), `tensor_infos[1].name ("w")`, "duplicate tensor name", at)
	add("long name", rawHeader(3, 1, 0).tensor(strings.Repeat("x", 64), []uint64{8}, ggml.F32, 0).data(32),
		"tensor_infos[0].name", "name of 64 bytes is longer than the 63", 24)

	r = rawHeader(3, 0, 2).kvU32("k", 1)
	at = r.pos()
	add("duplicate key", r.kvU32("k", 2).b, `kv[1] ("k").key`, "duplicate key", at)
	r = rawHeader(3, 0, 1).str("k")
	at = r.pos()
	add("value type 13", r.u32(13).u32(0).b, `kv[0] ("k").type`, "unknown value type 13", at)
	r = rawHeader(3, 0, 1).str("k").u32(uint32(TypeArray))
	at = r.pos()
	add("array elem type 42", r.u32(42).u64(0).b, `kv[0] ("k").value.type`, "unknown array element type 42", at)
	r = rawHeader(3, 0, 1).str("k").u32(uint32(TypeBool))
	at = r.pos()
	add("bool 2", r.u8(2).b, `kv[0] ("k").value`, "bool value 2", at)
	r = rawHeader(3, 0, 1).str("k").u32(uint32(TypeArray)).u32(uint32(TypeBool)).u64(3).u8(1)
	at = r.pos()
	add("bool array", r.u8(5).u8(0).b, `kv[0] ("k").value[1]`, "bool value 5", at)
	r = rawHeader(3, 0, 1).str("k").u32(uint32(TypeArray)).u32(uint32(TypeString)).u64(2).str("ok")
	at = r.pos()
	add("string in array", r.u64(100).bytes([]byte("short")).b, `kv[0] ("k").value[1]`, "string length 100 exceeds the 5 bytes left", at)
	r = rawHeader(3, 0, 1).str("k").u32(uint32(TypeArray))
	for range maxArrayDepth {
		r.u32(uint32(TypeArray)).u64(1)
	}
	at = r.pos()
	add("nesting", r.u32(uint32(TypeArray)).u64(1).u32(uint32(TypeUint8)).u64(0).b,
		`kv[0] ("k").value[0][0][0][0][0][0][0][0]`, "nested deeper than 8", at)
	r = rawHeader(3, 0, 1).str("k").u32(uint32(TypeUint64))
	at = r.pos()
	add("truncated value", r.u32(7).b, `kv[0] ("k").value`, "need 8 bytes, 4 left", at)
	add("truncated key", rawHeader(3, 0, 1).u64(50).bytes([]byte("abcde")).b, "kv[0].key", "string length 50 exceeds the 5 bytes left", 24)

	// Huge counts and lengths must be refused before any allocation.
	add("tensor_count 2^63", rawHeader(3, 1<<63, 0).b, "tensor_count", "9223372036854775808 tensors", 8)
	add("kv_count 2^40", rawHeader(3, 0, 1<<40).b, "kv_count", "1099511627776 key/values", 16)
	add("kv_count ignoring tensors", rawHeader(3, 1, 2).u64(0).u64(0).u64(0).u64(0).b, "kv_count", "key/values", 16)
	add("key length 2^62", rawHeader(3, 0, 1).u64(1<<62).u32(0).u8(0).b, "kv[0].key", "string length 4611686018427387904", 24)
	add("name length 2^62", rawHeader(3, 1, 0).u64(1<<62).bytes(make([]byte, 40)).b, "tensor_infos[0].name", "string length 4611686018427387904", 24)
	r = rawHeader(3, 0, 1).str("a").u32(uint32(TypeArray)).u32(uint32(TypeUint32))
	at = r.pos()
	add("array count 2^60", r.u64(1<<60).u32(0).b, `kv[0] ("a").value.count`, "array of 1152921504606846976 u32", at)
	add("string array 2^60", rawHeader(3, 0, 1).str("a").u32(uint32(TypeArray)).u32(uint32(TypeString)).u64(1<<60).u64(0).b,
		`kv[0] ("a").value.count`, "1152921504606846976 string", at)
	add("nested array 2^60", rawHeader(3, 0, 1).str("a").u32(uint32(TypeArray)).u32(uint32(TypeArray)).u64(1<<60).u64(0).b,
		`kv[0] ("a").value.count`, "1152921504606846976 array", at)
	// 2 u64 elements need 16 bytes; only 15 are there.
	add("array count by one", rawHeader(3, 0, 1).str("a").u32(uint32(TypeArray)).u32(uint32(TypeUint64)).u64(2).bytes(make([]byte, 15)).b,
		`kv[0] ("a").value.count`, "only 15 bytes are left", at)
	return cs
}

func TestBadFiles(t *testing.T) {
	for _, c := range badCases() {
		t.Run(c.name, func(t *testing.T) {
			f, err := Parse(c.data, "bad.gguf")
			if err == nil {
				t.Fatalf("parsed: %d KVs, %d tensors", len(f.KVs), len(f.Tensors))
			}
			fe, ok := err.(*FormatError)
			if !ok {
				t.Fatalf("error %T %v, want *FormatError", err, err)
			}
			if !strings.Contains(fe.Field, c.field) || !strings.Contains(fe.Msg, c.msg) || fe.File != "bad.gguf" {
				t.Errorf("error %q\nwant field %q, message %q", err, c.field, c.msg)
			}
			if c.offset >= 0 && fe.Offset != c.offset {
				t.Errorf("error %q: offset %d, want %d", err, fe.Offset, c.offset)
			}
			if want := fmt.Sprintf("bad.gguf: %s at byte %d: %s", fe.Field, fe.Offset, fe.Msg); err.Error() != want {
				t.Errorf("Error() = %q, want %q", err, want)
			}
		})
	}
}

// The message format of the contract, on a realistic file: the 4th tensor
// has a zero dimension.
func TestFormatErrorMessage(t *testing.T) {
	r := rawHeader(3, 4, 0)
	for i, name := range []string{"token_embd.weight", "blk.0.attn_q.weight", "blk.0.ffn_gate.weight"} {
		r.tensor(name, []uint64{64, 2}, ggml.F32, uint64(i*512))
	}
	r.str("blk.0.ffn_up.weight").u32(2).u64(64)
	at := r.pos()
	data := r.u64(0).u32(0).u64(3 * 512).data(4 * 512)
	_, err := Parse(data, "models/x.gguf")
	want := fmt.Sprintf(`models/x.gguf: tensor_infos[3].dims[1] ("blk.0.ffn_up.weight") at byte %d: dimension 0 is not allowed`, at)
	if err == nil || err.Error() != want {
		t.Errorf("got  %v\nwant %s", err, want)
	}
	if binary.LittleEndian.Uint64(data[at:]) != 0 {
		t.Error("the reported offset does not point at the zero dimension")
	}
}

func TestVersion2(t *testing.T) {
	data := rawHeader(2, 1, 1).kvU32("general.alignment", 64).tensor("w", []uint64{4, 2}, ggml.F16, 0)
	for len(data.b)%64 != 0 {
		data.u8(0)
	}
	f, err := Parse(data.bytes(bytes.Repeat([]byte{1}, 16)).b, "v2.gguf")
	if err != nil {
		t.Fatal(err)
	}
	ti, ok := f.Tensor("w")
	if f.Version != 2 || f.Alignment != 64 || !ok || ti.Size != 16 || !bytes.Equal(f.TensorData(ti), bytes.Repeat([]byte{1}, 16)) {
		t.Errorf("version %d, alignment %d, tensor %+v", f.Version, f.Alignment, ti)
	}
}

// Hostile counts are refused quickly and without allocating their size.
func TestHugeCountsDoNotAllocate(t *testing.T) {
	for _, c := range badCases() {
		if !strings.Contains(c.name, "2^") {
			continue
		}
		var before, after runtime.MemStats
		runtime.ReadMemStats(&before)
		start := time.Now()
		_, err := Parse(c.data, "huge.gguf")
		elapsed := time.Since(start)
		runtime.ReadMemStats(&after)
		if err == nil {
			t.Fatalf("%s: parsed", c.name)
		}
		if allocated := after.TotalAlloc - before.TotalAlloc; allocated > 64<<10 {
			t.Errorf("%s: allocated %d bytes", c.name, allocated)
		}
		if elapsed > 50*time.Millisecond {
			t.Errorf("%s: took %v", c.name, elapsed)
		}
		if allocs := testing.AllocsPerRun(10, func() { Parse(c.data, "huge.gguf") }); allocs > 20 {
			t.Errorf("%s: %.0f allocations", c.name, allocs)
		}
	}
}

// smallValidFile holds every KV type and several tensor types; its last
// tensor ends exactly at the end of the file, so every truncation is bad.
func smallValidFile(t testing.TB) []byte {
	t.Helper()
	w := NewWriter()
	for _, kv := range everyKV {
		if err := w.AddKV(kv.key, kv.in); err != nil {
			t.Fatal(err)
		}
	}
	for i, tt := range roundTripTensors[:4] {
		if err := w.AddTensor(tt.name, tt.typ, tt.dims, tensorBytes(t, tt, byte(i))); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.AddTensor("last", ggml.F32, []uint64{8}, make([]byte, 32)); err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	if _, err := w.WriteTo(&buf); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

func TestTruncatedEverywhere(t *testing.T) {
	data := smallValidFile(t)
	if _, err := Parse(data, "full.gguf"); err != nil {
		t.Fatal(err)
	}
	for n := range len(data) {
		// A fresh copy with no spare capacity, so reading past n would fault
		// rather than silently see the rest.
		cut := bytes.Clone(data[:n])
		if f, err := Parse(cut, "cut.gguf"); err == nil {
			t.Fatalf("truncated to %d of %d bytes: parsed %d KVs, %d tensors", n, len(data), len(f.KVs), len(f.Tensors))
		} else if _, ok := err.(*FormatError); !ok {
			t.Fatalf("truncated to %d: %T %v", n, err, err)
		}
	}
}

func TestRandomBitFlips(t *testing.T) {
	data := smallValidFile(t)
	parsed := 0
	for seed := range uint64(2000) {
		rng := rand.New(rand.NewPCG(seed, 7))
		mutated := bytes.Clone(data)
		for range 1 + rng.IntN(4) {
			i := rng.IntN(len(mutated))
			mutated[i] ^= 1 << rng.IntN(8)
		}
		if checkParse(t, mutated) {
			parsed++
		}
	}
	t.Logf("%d of 2000 mutated files still parse", parsed)
}

// checkParse parses data; on success it checks that the tensors lie inside
// the data and that writing the result back is stable.
func checkParse(t *testing.T, data []byte) bool {
	t.Helper()
	f, err := Parse(data, "mutated.gguf")
	if err != nil {
		if _, ok := err.(*FormatError); !ok {
			t.Fatalf("error %T %v, want *FormatError", err, err)
		}
		return false
	}
	for i := range f.Tensors {
		ti := &f.Tensors[i]
		d := f.TensorData(ti)
		end := f.DataOffset + ti.Offset + ti.Size
		if uint64(len(d)) != ti.Size || end > uint64(len(data)) || end < f.DataOffset {
			t.Fatalf("tensor %q: %d data bytes for size %d, ends at %d of %d", ti.Name, len(d), ti.Size, end, len(data))
		}
	}
	var once, twice bytes.Buffer
	if _, err := rewrite(t, f).WriteTo(&once); err != nil {
		t.Fatal(err)
	}
	g, err := Parse(once.Bytes(), "rewritten.gguf")
	if err != nil {
		t.Fatalf("re-written file does not parse: %v", err)
	}
	rewrite(t, g).WriteTo(&twice)
	if !bytes.Equal(once.Bytes(), twice.Bytes()) {
		t.Fatal("writing a parsed file is not stable")
	}
	return true
}

func FuzzParse(f *testing.F) {
	f.Add(smallValidFile(f))
	f.Add(rawHeader(2, 1, 1).kvU32(alignmentKey, 8).tensor("w", []uint64{2}, ggml.F32, 0).data(8))
	f.Add(rawHeader(3, 0, 1).str("k").u32(uint32(TypeArray)).u32(uint32(TypeArray)).u64(1).u32(uint32(TypeString)).u64(1).str("s").b)
	for _, tt := range roundTripTensors {
		w := NewWriter()
		w.AddTensor(tt.name, tt.typ, tt.dims, tensorBytes(f, tt, 1))
		var buf bytes.Buffer
		w.WriteTo(&buf)
		f.Add(buf.Bytes())
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		checkParse(t, data)
	})
}
