package engine

import (
	"math"
	"path/filepath"
	"strings"
	"testing"

	"github.com/evalrun/evalrun/engine/synth"
)

func TestFP8Codes(t *testing.T) {
	for _, c := range []struct {
		name string
		f    *fp8Format
		max  float32
		min  float32 // smallest subnormal
	}{{"e4m3", fp8E4M3, 448, 0x1p-9}, {"e5m2", fp8E5M2, 57344, 0x1p-16}} {
		f := c.f
		if f.table[f.maxBits] != c.max || f.table[1] != c.min {
			t.Errorf("%s: max %g, smallest %g", c.name, f.table[f.maxBits], f.table[1])
		}
		// Every finite code decodes and encodes back to itself.
		for code := range 256 {
			v := f.table[code]
			if math.IsNaN(float64(v)) || math.IsInf(float64(v), 0) {
				continue
			}
			if got := f.encode(v); got != uint8(code) && !(v == 0 && got&0x7F == 0) {
				t.Errorf("%s: code %#x = %g encodes to %#x", c.name, code, v, got)
			}
		}
		// Saturation, NaN, sign.
		if f.encode(1e30) != f.maxBits || f.encode(-1e30) != 0x80|f.maxBits || f.encode(float32(math.Inf(1))) != f.maxBits {
			t.Errorf("%s: saturation: %#x %#x", c.name, f.encode(1e30), f.encode(-1e30))
		}
		if v := f.table[f.encode(float32(math.NaN()))]; !math.IsNaN(float64(v)) {
			t.Errorf("%s: NaN encodes to %g", c.name, v)
		}
		if f.encode(c.min/4) != 0 {
			t.Errorf("%s: a quarter of the smallest subnormal rounds to %#x", c.name, f.encode(c.min/4))
		}
	}
	// Ties to even: 1 + 1/16 lies between the E4M3 values 1 and 1.125 (even: 1);
	// 1 + 3/16 between 1.125 and 1.25 (even: 1.25).
	if v := fp8E4M3.table[fp8E4M3.encode(1.0625)]; v != 1 {
		t.Errorf("e4m3(1.0625) = %g, want 1", v)
	}
	if v := fp8E4M3.table[fp8E4M3.encode(1.1875)]; v != 1.25 {
		t.Errorf("e4m3(1.1875) = %g, want 1.25", v)
	}
	if v := fp8E5M2.table[fp8E5M2.encode(0.3)]; v != 0.3125 {
		t.Errorf("e5m2(0.3) = %g, want 0.3125", v)
	}
}

func TestInt8Asym(t *testing.T) {
	x := []float32{-1.5, 0.25, 3, 2.9, -1.49, 0}
	b := make([]byte, len(x)+8)
	encodeInt8Asym(b, x)
	y := make([]float32, len(x))
	decodeInt8Asym(b, y)
	scale := float32(4.5 / 255)
	if y[0] != -1.5 || math.Abs(float64(y[2]-3)) > 1e-6 || b[0] != 0 || b[2] != 255 {
		t.Errorf("min/max: %v (codes %v)", y, b[:len(x)])
	}
	for i := range x {
		if d := math.Abs(float64(y[i] - x[i])); d > float64(scale)/2+1e-6 {
			t.Errorf("x[%d] = %g came back as %g: error %g > scale/2", i, x[i], y[i], d)
		}
	}
	same := []float32{2, 2, 2}
	encodeInt8Asym(b[:11], same)
	decodeInt8Asym(b[:11], y[:3])
	if y[0] != 2 || y[2] != 2 {
		t.Errorf("constant head: %v", y[:3])
	}
}

func TestKVCacheOptionErrors(t *testing.T) {
	for _, c := range []struct {
		kv   KVCache
		want string
	}{
		{KVCache{Key: "fp8_e4m3"}, `key: "fp8_e4m3" unknown (want f32, f16, q8_0, int8_asym)`},
		{KVCache{Value: "int8_asym"}, `value: "int8_asym" unknown (want f32, f16, q8_0, fp8_e4m3, fp8_e5m2)`},
		{KVCache{Key: "q4_0"}, `key: "q4_0" unknown`},
	} {
		if err := c.kv.Validate(); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%+v: %v, want %q", c.kv, err, c.want)
		}
		if _, err := Open(modelPath("F32"), Options{KVCache: c.kv, Threads: 1}); err == nil || !strings.Contains(err.Error(), "kv_cache "+c.want) {
			t.Errorf("Open with %+v: %v", c.kv, err)
		}
	}
	// q8_0 needs a position's K row in whole blocks of 32: 6 heads of 8 is 48.
	path := filepath.Join(t.TempDir(), "kv48.gguf")
	if err := synth.Generate(synth.Config{NEmbd: 48, NLayer: 1, NHead: 6, NFF: 64, NVocab: 300, Seed: 1}, path); err != nil {
		t.Fatal(err)
	}
	if _, err := Open(path, Options{KVCache: KVCache{Value: KVQ8_0}, Threads: 1}); err == nil || !strings.Contains(err.Error(), "kv_cache value: q8_0: a position's row of 48 values (6 heads × 8) is not whole blocks of 32") {
		t.Errorf("q8_0 values of 48: %v", err)
	}
}

// kvKLD decodes the p3 tokens with a KV cache type and returns the mean
// KLD against the f32 cache and the rows whose top token moved.
func kvKLD(t *testing.T, ref [][]float32, ids []int32, kv KVCache, threads int) (float64, int, [][]float32) {
	t.Helper()
	m, err := Open(modelPath("F32"), Options{KVCache: kv, Threads: threads})
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	got := decodeAll(t, m, ids)
	var d diffStats
	for i := range got {
		d.add(i, ref[i], got[i])
	}
	return d.meanKLD(), len(d.argmaxMismatch), got
}

// TestKVCacheTypes: the f32 cache is the default bit for bit; every
// quantized cache changes the logits a little, int8 keys with fp8 values
// more than f16/f16; results do not depend on the thread count, and
// decoding in pieces (the cache read back at later positions) gives the
// one-batch result. (64 tokens: the arm64 tests run this under qemu.)
func TestKVCacheTypes(t *testing.T) {
	ids := p3Tokens(t)[:64]
	ref := decodeAll(t, openModel(t, modelPath("F32"), Exact, 2), ids)
	if k, _, _ := kvKLD(t, ref, ids, KVCache{Key: KVF32, Value: KVF32}, 2); k != 0 {
		t.Errorf("f32/f32: KLD %g, want 0", k)
	}
	kld := map[string]float64{}
	for i, kv := range []KVCache{
		{KVInt8Asym, KVFP8E4M3}, {KVQ8_0, KVQ8_0}, {KVF16, KVF16}, {KVInt8Asym, KVFP8E5M2}, {KVF32, KVFP8E4M3}, {KVInt8Asym, KVF32},
	} {
		k, moved, got := kvKLD(t, ref, ids, kv, 2)
		kld[kv.String()] = k
		t.Logf("%-20s mean KLD %.3g, top token moved in %d of %d rows", kv, k, moved, len(ids))
		if k <= 0 || k > 0.05 || moved > len(ids)/10 {
			t.Errorf("%s: mean KLD %g, top token moved in %d rows", kv, k, moved)
		}
		if i >= 2 {
			continue // the storage paths below: one scaled and one blocked codec
		}
		if _, _, one := kvKLD(t, ref, ids, kv, 1); !sameRows(one, got) {
			t.Errorf("%s: 1 and 2 threads differ", kv)
		}
		// The same tokens in three Decodes: the cache is read back from
		// its stored form at every later position.
		m, err := Open(modelPath("F32"), Options{KVCache: kv, Threads: 2})
		if err != nil {
			t.Fatal(err)
		}
		s := m.NewSession(0)
		var rows [][]float32
		for _, part := range [][]int32{ids[:1], ids[1:40], ids[40:]} {
			if err := s.Decode(part, nil, func(_ int, l []float32) error {
				rows = append(rows, append([]float32(nil), l...))
				return nil
			}); err != nil {
				t.Fatal(err)
			}
		}
		m.Close()
		var d diffStats
		for i := range rows {
			d.add(i, got[i], rows[i])
		}
		if d.maxAbs > 1e-4 {
			t.Errorf("%s: decoding in pieces differs from one batch by %g", kv, d.maxAbs)
		}
	}
	if !(kld["int8_asym/fp8_e4m3"] > kld["f16/f16"] && kld["f16/f16"] > 0) {
		t.Errorf("want f32 (0) < f16/f16 < int8_asym/fp8_e4m3, got %v", kld)
	}
}

func sameRows(a, b [][]float32) bool {
	for i := range a {
		for j := range a[i] {
			if math.Float32bits(a[i][j]) != math.Float32bits(b[i][j]) {
				return false
			}
		}
	}
	return true
}
