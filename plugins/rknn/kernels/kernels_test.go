package kernels

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/evalrun/evalrun/engine"
	"github.com/evalrun/evalrun/engine/ggml"
	"github.com/evalrun/evalrun/engine/synth"
)

const modelPath = "../../../models/stories260K.gguf"

func TestParseSeedExample(t *testing.T) {
	src := `{"pairs":[{"src0":{"row":1,"col":2048},"src1":{"row":2048,"col":8192},"name":"ffn_up-0"}]}`
	l, err := Parse([]byte(src), "kernels.json")
	if err != nil {
		t.Fatal(err)
	}
	want := []Pair{{Src0: Shape{1, 2048}, Src1: Shape{2048, 8192}, Name: "ffn_up-0"}}
	if len(l.Pairs) != 1 || l.Pairs[0] != want[0] {
		t.Fatalf("pairs = %+v, want %+v", l.Pairs, want)
	}
	p := l.Pairs[0]
	if p.T() != 1 || p.K() != 2048 || p.N() != 8192 || p.Shape() != "1×2048×8192" {
		t.Errorf("T,K,N = %d,%d,%d shape %s", p.T(), p.K(), p.N(), p.Shape())
	}
	// Match is the seed's supports_op: name and every dimension.
	for _, c := range []struct {
		name    string
		T, K, N int
		want    bool
	}{
		{"ffn_up-0", 1, 2048, 8192, true},
		{"ffn_up-1", 1, 2048, 8192, false},
		{"ffn_gate-0", 1, 2048, 8192, false},
		{"ffn_up-0", 2, 2048, 8192, false},
		{"ffn_up-0", 1, 1024, 8192, false},
		{"ffn_up-0", 1, 2048, 4096, false},
	} {
		if got := l.Match(c.name, c.T, c.K, c.N); got != c.want {
			t.Errorf("Match(%s, %d, %d, %d) = %v, want %v", c.name, c.T, c.K, c.N, got, c.want)
		}
	}
	// The writer emits the seed's field order, byte for byte per pair.
	var b bytes.Buffer
	if _, err := l.WriteTo(&b); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(b.String(), `{"src0":{"row":1,"col":2048},"src1":{"row":2048,"col":8192},"name":"ffn_up-0"}`) {
		t.Errorf("written JSON %s lacks the seed's pair encoding", b.String())
	}
}

func TestParseErrors(t *testing.T) {
	pair := func(name string, t, k0, k1, n int) string {
		return `{"src0":{"row":` + itoa(t) + `,"col":` + itoa(k0) + `},"src1":{"row":` + itoa(k1) + `,"col":` + itoa(n) + `},"name":"` + name + `"}`
	}
	ok := pair("Qcur-0", 1, 64, 64, 64)
	for _, c := range []struct {
		what, src, want string
	}{
		{"shape mismatch", `{"pairs":[` + ok + `,` + ok[:0] + pair("a-0", 1, 64, 64, 8) + `,` + pair("b-0", 1, 64, 64, 8) + `,` + pair("ffn_up-0", 1, 2048, 4096, 8192) + `]}`,
			`kernels.json: pairs[3] ("ffn_up-0"): src0.col 2048 != src1.row 4096`},
		{"syntax error with position", "{\"pairs\":[\n  " + ok + ",\n  {\"src0\":{\"row\":1,,}}]}",
			"kernels.json: line 3, column 20: invalid character ','"},
		{"truncated", `{"pairs":[` + ok, "kernels.json: line 1, column"},
		{"empty", ``, "kernels.json: empty input"},
		{"not an object", `[1,2]`, "kernels.json: line 1, column"},
		{"missing pairs", `{}`, `kernels.json: missing "pairs" array`},
		{"wrong type", `{"pairs":[{"src0":{"row":"1","col":64},"src1":{"row":64,"col":64},"name":"x-0"}]}`,
			`kernels.json: pairs[0]: line 1, column`},
		{"unknown field", `{"pairs":[{"src0":{"row":1,"col":64},"src1":{"row":64,"col":64},"name":"x-0","nmae":"y"}]}`,
			`kernels.json: pairs[0]: unknown field "nmae"`},
		{"missing name", `{"pairs":[` + ok + `,{"src0":{"row":1,"col":64},"src1":{"row":64,"col":64}}]}`,
			`kernels.json: pairs[1]: missing name`},
		{"zero row", `{"pairs":[` + pair("x-0", 0, 64, 64, 64) + `]}`, `kernels.json: pairs[0] ("x-0"): src0.row 0 must be > 0`},
		{"negative col", `{"pairs":[` + pair("x-0", 1, 64, 64, -5) + `]}`, `kernels.json: pairs[0] ("x-0"): src1.col -5 must be > 0`},
		{"missing src1", `{"pairs":[{"src0":{"row":1,"col":64},"name":"x-0"}]}`, `kernels.json: pairs[0] ("x-0"): src1.row 0 must be > 0`},
		{"duplicate", `{"pairs":[` + ok + `,` + pair("Kcur-0", 1, 64, 64, 32) + `,` + ok + `]}`,
			`kernels.json: pairs[2] ("Qcur-0"): duplicate of pairs[0] (same name and shape 1×64×64)`},
		{"trailing data", `{"pairs":[]} {}`, "kernels.json: line 1, column 14: unexpected data"},
	} {
		_, err := Parse([]byte(c.src), "kernels.json")
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: err = %v, want it to contain %q", c.what, err, c.want)
		}
	}
	// Same name at another shape (another T) is a different kernel.
	if _, err := Parse([]byte(`{"pairs":[`+ok+`,`+pair("Qcur-0", 128, 64, 64, 64)+`]}`), "k"); err != nil {
		t.Errorf("same name, other T: %v", err)
	}
}

func itoa(v int) string {
	if v < 0 {
		return "-" + itoa(-v)
	}
	if v < 10 {
		return string(rune('0' + v))
	}
	return itoa(v/10) + string(rune('0'+v%10))
}

func openModel(t *testing.T) *engine.Model {
	t.Helper()
	m, err := engine.Open(modelPath, engine.Options{Threads: 1})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { m.Close() })
	return m
}

func TestForModelStories260K(t *testing.T) {
	m := openModel(t)
	l := ForModel(m, []int{1}, nil)
	if len(l.Pairs) != 36 {
		t.Fatalf("%d pairs at T=1, want 36 (5 layers × 7 + result_output)", len(l.Pairs))
	}
	want := map[string][3]int{
		"Qcur-0": {1, 64, 64}, "Kcur-0": {1, 64, 32}, "Vcur-0": {1, 64, 32}, "attn_out-0": {1, 64, 64},
		"ffn_gate-0": {1, 64, 172}, "ffn_up-0": {1, 64, 172}, "ffn_out-0": {1, 172, 64},
		"ffn_up-4": {1, 64, 172}, "result_output": {1, 64, 512},
	}
	got := map[string]Pair{}
	for _, p := range l.Pairs {
		got[p.Name] = p
	}
	for name, s := range want {
		p, ok := got[name]
		if !ok {
			t.Errorf("%s missing", name)
			continue
		}
		if p.T() != s[0] || p.K() != s[1] || p.N() != s[2] || p.Src1.Row != s[1] {
			t.Errorf("%s = %+v, want T=%d K=%d N=%d", name, p, s[0], s[1], s[2])
		}
	}
	if l.Pairs[0].Name != "Qcur-0" || l.Pairs[35].Name != "result_output" {
		t.Errorf("order: first %s last %s, want graph order Qcur-0 … result_output", l.Pairs[0].Name, l.Pairs[35].Name)
	}
	if err := l.Validate("gen"); err != nil {
		t.Error(err)
	}

	// Two token counts, filtered by op.
	l = ForModel(m, []int{1, 128, 1}, []string{"ffn_up", "result_output"})
	if len(l.Pairs) != 12 {
		t.Fatalf("%d pairs for ffn_up,result_output at T=1,128, want 12: %+v", len(l.Pairs), l.Pairs)
	}
	for _, p := range l.Pairs {
		if b := BaseName(p.Name); b != "ffn_up" && b != "result_output" {
			t.Errorf("filter let %s through", p.Name)
		}
		if p.T() != 1 && p.T() != 128 {
			t.Errorf("%s T=%d", p.Name, p.T())
		}
	}
	if !l.Match("ffn_up-3", 128, 64, 172) || l.Match("ffn_gate-3", 128, 64, 172) {
		t.Error("Match on the generated list")
	}
	if err := CheckOps([]string{"ffn_up", "result_output"}); err != nil {
		t.Error(err)
	}
	if err := CheckOps([]string{"ffn_upp"}); err == nil || !strings.Contains(err.Error(), `"ffn_upp"`) {
		t.Errorf("CheckOps(ffn_upp) = %v", err)
	}
}

func TestRoundTrip(t *testing.T) {
	m := openModel(t)
	l := ForModel(m, []int{1, 7}, nil)
	path := filepath.Join(t.TempDir(), "mat_kernel_size.json")
	if err := l.WriteFile(path); err != nil {
		t.Fatal(err)
	}
	back, err := Load(path)
	if err != nil {
		t.Fatal(err)
	}
	if len(back.Pairs) != len(l.Pairs) || len(l.Pairs) != 72 {
		t.Fatalf("read %d pairs, wrote %d (want 72)", len(back.Pairs), len(l.Pairs))
	}
	for i := range l.Pairs {
		if back.Pairs[i] != l.Pairs[i] {
			t.Errorf("pair %d: %+v != %+v", i, back.Pairs[i], l.Pairs[i])
		}
	}
	// An invalid list is not written.
	bad := List{Pairs: []Pair{NewPair("x-0", 1, 64, 64), NewPair("x-0", 1, 64, 64)}}
	if err := bad.WriteFile(filepath.Join(t.TempDir(), "bad.json")); err == nil {
		t.Error("WriteFile wrote a list with a duplicate")
	}
	if _, err := Load(filepath.Join(t.TempDir(), "missing.json")); err == nil || !os.IsNotExist(err) {
		t.Errorf("Load(missing) = %v", err)
	}
	var empty bytes.Buffer
	if _, err := (List{}).WriteTo(&empty); err != nil {
		t.Fatal(err)
	}
	if l, err := Parse(empty.Bytes(), "empty"); err != nil || len(l.Pairs) != 0 {
		t.Errorf("empty list round trip: %v %+v", err, l)
	}
}

func TestBaseName(t *testing.T) {
	for in, want := range map[string]string{"ffn_up-0": "ffn_up", "result_output": "result_output", "Qcur-15": "Qcur", "a-b": "a-b", "x-": "x-"} {
		if got := BaseName(in); got != want {
			t.Errorf("BaseName(%q) = %q, want %q", in, got, want)
		}
	}
}

func FuzzParse(f *testing.F) {
	f.Add([]byte(`{"pairs":[{"src0":{"row":1,"col":2048},"src1":{"row":2048,"col":8192},"name":"ffn_up-0"}]}`))
	f.Add([]byte(`{"pairs":[]}`))
	f.Add([]byte(`{"pairs":[{"src0":{"row":-1}}]}`))
	f.Add([]byte("{\"pairs\":[\n{\"name\":1}]}"))
	f.Fuzz(func(t *testing.T, data []byte) {
		l, err := Parse(data, "fuzz.json")
		if err != nil {
			if !strings.HasPrefix(err.Error(), "fuzz.json: ") {
				t.Fatalf("error does not name the file: %v", err)
			}
			return
		}
		// A valid list survives a write and re-read unchanged.
		var b bytes.Buffer
		if _, err := l.WriteTo(&b); err != nil {
			t.Fatal(err)
		}
		back, err := Parse(b.Bytes(), "again")
		if err != nil {
			t.Fatalf("re-parse of %s: %v", b.String(), err)
		}
		if len(back.Pairs) != len(l.Pairs) {
			t.Fatalf("round trip changed %d pairs to %d", len(l.Pairs), len(back.Pairs))
		}
		for i := range l.Pairs {
			if back.Pairs[i] != l.Pairs[i] {
				t.Fatalf("pair %d: %+v != %+v", i, back.Pairs[i], l.Pairs[i])
			}
		}
	})
}

// TestForModelFusedMatmuls: a Phi-3 layout's kernel list names its fused
// matmuls as llama.cpp's graph does (wqkv-N: Q, K and V rows; ffn_up-N:
// gate and up rows, no ffn_gate), so a list made for a board's NPU backend
// matches what the engine offloads.
func TestForModelFusedMatmuls(t *testing.T) {
	path := filepath.Join(t.TempDir(), "phi3.gguf")
	cfg := synth.Config{Arch: "phi3", NEmbd: 64, NLayer: 2, NHead: 4, NHeadKV: 2, NFF: 96, NVocab: 300, Type: ggml.F32, Seed: 1, NCtx: 256}
	if err := synth.Generate(cfg, path); err != nil {
		t.Fatal(err)
	}
	m, err := engine.Open(path, engine.Options{Threads: 1})
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	l := ForModel(m, []int{8}, nil)
	var names []string
	for _, p := range l.Pairs {
		names = append(names, p.Name)
	}
	want := "wqkv-0 attn_out-0 ffn_up-0 ffn_out-0 wqkv-1 attn_out-1 ffn_up-1 ffn_out-1 result_output"
	if got := strings.Join(names, " "); got != want {
		t.Fatalf("ops %s\nwant %s", got, want)
	}
	if !l.Match("wqkv-1", 8, 64, 64+2*32) || !l.Match("ffn_up-0", 8, 64, 2*96) {
		t.Errorf("fused shapes: %+v", l.Pairs)
	}
	if err := CheckOps([]string{"wqkv"}); err != nil {
		t.Error(err)
	}
}
