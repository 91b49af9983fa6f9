package opscheck

import (
	"bytes"
	"context"
	"encoding/binary"
	"encoding/json"
	"math"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/evalrun/evalrun/plugins/internal/faults"
	"github.com/evalrun/evalrun/plugins/rknn/kernels"
	"github.com/evalrun/evalrun/plugins/rknn/npu"
	"github.com/evalrun/evalrun/plugins/rknn/npu/sim"
	"github.com/evalrun/evalrun/plugins/rknn/offload"
)

const modelPath = "../../../models/stories260K.gguf"

// llama32_1B are Llama-3.2-1B's weight matmuls at T=1 (n_embd 2048, n_ff
// 8192, 32 heads, 8 KV heads of 64).
func llama32_1B() *kernels.List {
	return &kernels.List{Pairs: []kernels.Pair{
		kernels.NewPair("Qcur-0", 1, 2048, 2048),
		kernels.NewPair("Vcur-0", 1, 2048, 512),
		kernels.NewPair("Kcur-0", 1, 2048, 512),
		kernels.NewPair("attn_out-0", 1, 2048, 2048),
		kernels.NewPair("ffn_gate-0", 1, 2048, 8192),
		kernels.NewPair("ffn_up-0", 1, 2048, 8192),
		kernels.NewPair("ffn_out-0", 1, 8192, 2048),
	}}
}

var lineRE = regexp.MustCompile(`^  MUL_MAT\(name=[^,]+,type=(fp16|int8|int4),m=\d+,k=\d+,n=\d+\): (OK|FAIL)  \((nmse \d\.\de[-+]\d\d( > \d\.\de-\d\d)?(, \d+ NaN/Inf outputs)?(, \d+ saturated)?, \d+\.\d\d GFLOPS|.+)\)$`)

func checkOutput(t *testing.T, out string, rep Report) {
	t.Helper()
	lines := strings.Split(strings.TrimRight(out, "\n"), "\n")
	if len(lines) != len(rep.Results)+3 {
		t.Fatalf("%d lines for %d results:\n%s", len(lines), len(rep.Results), out)
	}
	for _, l := range lines[1 : len(lines)-2] {
		if !lineRE.MatchString(l) {
			t.Errorf("line %q is not test-backend-ops style", l)
		}
	}
	verdict := "OK"
	if !rep.OK {
		verdict = "FAIL"
	}
	if want := []string{
		"  " + itoa(rep.Passed) + "/" + itoa(len(rep.Results)) + " tests passed",
		"Backend RKNN(sim): " + verdict,
	}; lines[len(lines)-2] != want[0] || lines[len(lines)-1] != want[1] {
		t.Errorf("tail %q, want %q", lines[len(lines)-2:], want)
	}
}

func itoa(v int) string { b, _ := json.Marshal(v); return string(b) }

func TestBundledModelOps(t *testing.T) {
	for _, typ := range []offload.Type{offload.FP16, offload.Int8} {
		var out bytes.Buffer
		rep, err := Run(context.Background(), Config{Model: modelPath, Type: typ, ACLayout: npu.LayoutNative, MinTime: time.Millisecond}, &out)
		if err != nil {
			t.Fatal(err)
		}
		checkOutput(t, out.String(), rep)
		if !rep.OK || rep.Passed != 36 {
			t.Errorf("%s: %d/36 passed:\n%s", typ, rep.Passed, out.String())
		}
		worst := 0.0
		for _, r := range rep.Results {
			worst = max(worst, r.NMSE)
			if r.Runs < 1 || r.GFLOPS <= 0 {
				t.Errorf("%s %s: %d timed runs, %g GFLOPS", typ, r.Name, r.Runs, r.GFLOPS)
			}
		}
		t.Logf("%s: worst NMSE %.2e", typ, worst)
	}
}

// TestInt4TypeAwareLimit: int4 (amax/7) sits near its quantization noise
// 1/(2·7²) on uniform inputs, far above MUL_MAT's 5e-4: judged by 5e-4 every
// int4 kernel would fail; judged by MaxNMSEInt4 they pass, with the limit in
// the output line of a failure.
func TestInt4TypeAwareLimit(t *testing.T) {
	var out bytes.Buffer
	rep, err := Run(context.Background(), Config{Model: modelPath, Ops: []string{"ffn_up"}, Type: offload.Int4, ACLayout: npu.LayoutNorm, MinTime: time.Millisecond}, &out)
	if err != nil {
		t.Fatal(err)
	}
	checkOutput(t, out.String(), rep)
	if !rep.OK || rep.Passed != 5 || len(rep.Results) != 5 {
		t.Fatalf("int4: %d/%d passed, want 5/5:\n%s", rep.Passed, len(rep.Results), out.String())
	}
	for _, r := range rep.Results {
		if r.NMSE < 5e-3 || r.NMSE > 2e-2 || r.MaxNMSE != MaxNMSEInt4 {
			t.Errorf("%s: int4 NMSE %.2e (limit %.1e), want about 1.0e-2 under %.1e", r.Name, r.NMSE, r.MaxNMSE, MaxNMSEInt4)
		}
	}
	if MaxNMSEFor(offload.Int8) != MaxNMSE || MaxNMSEFor(offload.FP16) != MaxNMSE {
		t.Error("fp16 and int8 keep MUL_MAT's 5e-4")
	}
	if d := detail(Result{NMSE: 0.05, MaxNMSE: MaxNMSEInt4}); !strings.Contains(d, "nmse 5.0e-02 > 4.0e-02") {
		t.Errorf("failure detail %q does not quote the int4 limit", d)
	}
}

// TestLlama32_1BShapes: the 1B model's decode matmuls pass in fp16 and int8.
func TestLlama32_1BShapes(t *testing.T) {
	if testing.Short() {
		t.Skip("about 10 s of simulated matmuls")
	}
	for _, typ := range []offload.Type{offload.FP16, offload.Int8} {
		var out bytes.Buffer
		rep, err := Run(context.Background(), Config{Kernels: llama32_1B(), Type: typ, ACLayout: npu.LayoutNative, MinTime: time.Nanosecond}, &out)
		if err != nil {
			t.Fatal(err)
		}
		checkOutput(t, out.String(), rep)
		t.Logf("%s:\n%s", typ, out.String())
		if !rep.OK {
			t.Errorf("%s: %d/%d passed", typ, rep.Passed, len(rep.Results))
		}
	}
}

// TestNaNIsAFailure: one NaN in C fails the op even though the rest of C
// is right.
func TestNaNIsAFailure(t *testing.T) {
	var out bytes.Buffer
	nanAfter := 1
	injector := faults.New(&faults.Options{NaNAfter: &nanAfter})
	injector.Arm()
	drv := sim.New(sim.Options{Faults: injector})
	list := &kernels.List{Pairs: []kernels.Pair{kernels.NewPair("Qcur-0", 2, 64, 64)}}
	rep, err := Run(context.Background(), Config{Kernels: list, Driver: drv, Cores: 1, ACLayout: npu.LayoutNative, MinTime: time.Nanosecond}, &out)
	if err != nil {
		t.Fatal(err)
	}
	// The faults count runs per driver: run 1 (the first check) is clean,
	// every later run writes NaN into C(0,0).
	if !rep.OK {
		t.Fatalf("first run should be clean:\n%s", out.String())
	}
	out.Reset()
	rep, err = Run(context.Background(), Config{Kernels: list, Driver: drv, Cores: 1, ACLayout: npu.LayoutNative, MinTime: time.Nanosecond}, &out)
	if err != nil {
		t.Fatal(err)
	}
	if rep.OK || rep.Results[0].Bad != 1 || !strings.Contains(out.String(), "1 NaN/Inf outputs") {
		t.Errorf("NaN device: %+v\n%s", rep.Results, out.String())
	}
	checkOutput(t, out.String(), rep)
}

func TestConfigErrors(t *testing.T) {
	list := llama32_1B()
	for _, c := range []struct {
		cfg  Config
		want string
	}{
		{Config{Kernels: list, Model: modelPath}, "not both"},
		{Config{}, "no kernel list and no model"},
		{Config{Model: modelPath, Ops: []string{"ffn_upp"}}, `unknown op "ffn_upp"`},
		{Config{Model: modelPath, Tokens: []int{0}}, "token count 0"},
		{Config{Model: "missing.gguf"}, "missing.gguf"},
		{Config{Kernels: &kernels.List{Pairs: []kernels.Pair{{Name: "x"}}}}, `pairs[0] ("x")`},
	} {
		_, err := Run(context.Background(), c.cfg, new(bytes.Buffer))
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("err = %v, want %q", err, c.want)
		}
	}
	// A shape the NPU cannot take is a failed op, not a silent CPU pass.
	var out bytes.Buffer
	rep, err := Run(context.Background(), Config{Kernels: &kernels.List{Pairs: []kernels.Pair{kernels.NewPair("big", 1, 10272, 16)}}, ACLayout: npu.LayoutNative}, &out)
	if err != nil || rep.OK || !strings.Contains(out.String(), "FAIL  (not supported: K=10272 > 10240") {
		t.Errorf("K=10272: %v\n%s", err, out.String())
	}
}

// TestDump: the dumped buffers are the device's: A is the packed input, C
// unpacks to the gathered result, the sidecar describes the split.
func TestDump(t *testing.T) {
	dir := t.TempDir()
	list := &kernels.List{Pairs: []kernels.Pair{kernels.NewPair("ffn_out-0", 3, 172, 96)}}
	for _, typ := range []offload.Type{offload.FP16, offload.Int8} {
		dumpDir := filepath.Join(dir, typ.String())
		rep, err := Run(context.Background(), Config{Kernels: list, Type: typ, ACLayout: npu.LayoutNative, DumpDir: dumpDir, MinTime: time.Nanosecond}, new(bytes.Buffer))
		if err != nil || !rep.OK {
			t.Fatalf("%s: %v %+v", typ, err, rep)
		}
		opDir := rep.Results[0].DumpDir
		if opDir != filepath.Join(dumpDir, "000_ffn_out-0_m3") {
			t.Fatalf("dump dir %q", opDir)
		}
		var sc Sidecar
		js, err := os.ReadFile(filepath.Join(opDir, "op.json"))
		if err != nil {
			t.Fatal(err)
		}
		if err := json.Unmarshal(js, &sc); err != nil {
			t.Fatal(err)
		}
		if sc.M != 3 || sc.K != 172 || sc.N != 96 || len(sc.Cores) != 3 || sc.Cores[0].InfoK != 192 || sc.Cores[1].Lo != 32 || sc.ALayout != "NATIVE" {
			t.Fatalf("sidecar %+v", sc)
		}
		for i, c := range sc.Cores { // the masks the contexts run with
			if c.Mask != uint32(npu.Core0)<<i {
				t.Errorf("%s: core %d mask %#x, want %#x", typ, i, c.Mask, uint32(npu.Core0)<<i)
			}
		}
		a := readF32(t, filepath.Join(opDir, sc.InputA))
		result := readF32(t, filepath.Join(opDir, sc.Result))
		ref := readF64(t, filepath.Join(opDir, sc.Reference))
		if len(a) != 3*172 || len(result) != 3*96 || len(ref) != 3*96 || len(readF32(t, filepath.Join(opDir, sc.InputB))) != 172*96 {
			t.Fatal("input/result/reference sizes")
		}
		for _, c := range sc.Cores {
			info := npu.MatmulInfo{M: c.InfoM, K: c.InfoK, N: c.InfoN, Type: typ.MatmulType(), BLayout: npu.LayoutNative, ACLayout: npu.LayoutNative}
			aBuf, _ := os.ReadFile(filepath.Join(opDir, c.A.File))
			cBuf, _ := os.ReadFile(filepath.Join(opDir, c.C.File))
			bBuf, _ := os.ReadFile(filepath.Join(opDir, c.B.File))
			if len(aBuf) != int(c.A.Size) || len(bBuf) != int(c.B.Size) || len(cBuf) != int(c.C.Size) {
				t.Fatalf("core %d buffer sizes", c.Core)
			}
			w := c.Hi - c.Lo
			if typ == offload.FP16 {
				want := make([]byte, len(aBuf))
				if err := npu.PackA(&info, a, 3, 172, want); err != nil || !bytes.Equal(want, aBuf) {
					t.Errorf("core %d: A is not the fp16 native packing of a.f32 (%v)", c.Core, err)
				}
				got := make([]float32, 3*w)
				if err := npu.UnpackC(&info, cBuf, got, 3, w); err != nil {
					t.Fatal(err)
				}
				for m := range 3 {
					for j := range w {
						if got[m*w+j] != result[m*96+c.Lo+j] {
							t.Fatalf("core %d C(%d,%d) = %v, result %v", c.Core, m, j, got[m*w+j], result[m*96+c.Lo+j])
						}
					}
				}
			} else {
				ci := make([]int32, 3*w)
				if err := npu.UnpackC(&info, cBuf, ci, 3, w); err != nil {
					t.Fatal(err)
				}
				if len(c.BScale) != w || len(sc.AScale) != 3 {
					t.Fatalf("scales: %d b, %d a", len(c.BScale), len(sc.AScale))
				}
				v := float32(ci[w+1]) * sc.AScale[1] * c.BScale[1]
				if v != result[96+c.Lo+1] {
					t.Errorf("int8 C·sA·sB = %v, result %v", v, result[96+c.Lo+1])
				}
			}
		}
	}
}

func readF32(t *testing.T, path string) []float32 {
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	v := make([]float32, len(b)/4)
	for i := range v {
		v[i] = math.Float32frombits(binary.LittleEndian.Uint32(b[4*i:]))
	}
	return v
}

func readF64(t *testing.T, path string) []float64 {
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	v := make([]float64, len(b)/8)
	for i := range v {
		v[i] = math.Float64frombits(binary.LittleEndian.Uint64(b[8*i:]))
	}
	return v
}
