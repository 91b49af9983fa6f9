package main

import (
	"context"
	"errors"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/evalrun/evalrun/backend"
	"github.com/evalrun/evalrun/engine"
	"github.com/evalrun/evalrun/internal/testkit"
	"github.com/evalrun/evalrun/plugins/internal/faults"
	"github.com/evalrun/evalrun/plugins/rknn/npu/rknnrt"
)

// pluginPath is evalrun-plugin-rknn, built once by TestMain.
var pluginPath string

var modelPath, _ = filepath.Abs("../../models/stories260K.gguf")

func TestMain(m *testing.M) {
	name := backend.PluginPrefix + "rknn"
	testkit.Main(m, map[string]string{name: "./plugins/rknn"}, func(dir string) { pluginPath = filepath.Join(dir, name) })
}

func launch(t *testing.T) *backend.Client {
	t.Helper()
	c, err := backend.Launch(context.Background(), backend.LaunchConfig{Path: pluginPath, StartTimeout: 30 * time.Second})
	if err != nil {
		t.Fatalf("Launch: %v", err)
	}
	t.Cleanup(c.Kill)
	return c
}

func load(c *backend.Client, opts map[string]any) (backend.LoadResult, error) {
	return c.Load(context.Background(), backend.LoadRequest{ModelPath: modelPath, Threads: 1, Options: opts})
}

var prompt = []int32{1, 403, 407, 261, 378, 430, 312, 410}

func eval(c *backend.Client, ctx context.Context) ([][]float32, error) {
	var rows [][]float32
	err := c.Eval(ctx, backend.EvalRequest{Session: "s", Pos: 0, Tokens: prompt}, func(l backend.Logits) error {
		rows = append(rows, l.Values)
		return nil
	})
	return rows, err
}

// TestLoadDefaultsAndEval: defaults offload all 36 matmuls in fp16 on three
// simulated cores; the logits are close to the CPU engine's.
func TestLoadDefaultsAndEval(t *testing.T) {
	c := launch(t)
	info, err := c.Describe(context.Background())
	if err != nil || info.Name != "rknn" || info.Device != "rk3588-npu (sim)" {
		t.Errorf("Describe = %+v, %v", info, err)
	}
	res, err := load(c, nil)
	if err != nil {
		t.Fatal(err)
	}
	if res.PlanSummary != "36 of 36 matmuls on the NPU (fp16, 3 cores)" || len(res.Plan) != 36 {
		t.Errorf("plan summary %q, %d entries", res.PlanSummary, len(res.Plan))
	}
	for _, e := range res.Plan {
		if e.Device != "npu" {
			t.Errorf("plan entry %+v", e)
		}
	}
	if res.Plan[0].Op != "Qcur-0" || res.Plan[0].Shape != "1×64×64" {
		t.Errorf("first entry %+v", res.Plan[0])
	}
	// The sim driver's speeds are the simulator's: Describe says so once
	// loaded (not before: a board may run either driver).
	if info.Simulated() {
		t.Error("simulated before Load")
	}
	if info, err := c.Describe(context.Background()); err != nil || !info.Simulated() {
		t.Errorf("Describe after Load with the sim driver = %+v, %v: want the capability %q", info, err, backend.CapabilitySimulated)
	}
	rows, err := eval(c, context.Background())
	if err != nil || len(rows) != len(prompt) {
		t.Fatalf("Eval: %d rows, %v", len(rows), err)
	}

	ref, err := engine.Open(modelPath, engine.Options{Threads: 1})
	if err != nil {
		t.Fatal(err)
	}
	defer ref.Close()
	var maxAbs float64
	identical := true
	i := 0
	err = ref.NewSession(0).Decode(prompt, nil, func(_ int, l []float32) error {
		for j, v := range l {
			maxAbs = max(maxAbs, math.Abs(float64(v-rows[i][j])))
			identical = identical && v == rows[i][j]
		}
		i++
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if identical || maxAbs > 0.05 {
		t.Errorf("plugin logits vs CPU: max|Δ| %g, identical %v; want small but nonzero", maxAbs, identical)
	}
}

func TestOptionErrors(t *testing.T) {
	c := launch(t)
	list := filepath.Join(t.TempDir(), "k.json")
	os.WriteFile(list, []byte(`{"pairs":[{"src0":{"row":1,"col":64},"src1":{"row":32,"col":172},"name":"ffn_up-0"}]}`), 0o644)
	for _, tc := range []struct {
		opts map[string]any
		want string
	}{
		{map[string]any{"bogus": 1}, `unknown option "bogus"`},
		{map[string]any{"type": "fp8"}, `option "type": unknown type "fp8"`},
		{map[string]any{"cores": 4}, `option "cores": 4 outside 1..3`},
		{map[string]any{"cores": "3"}, `option "cores"`},
		{map[string]any{"driver": "gpu"}, `option "driver": "gpu" unknown`},
		{map[string]any{"ac_layout": "tp"}, `option "ac_layout"`},
		{map[string]any{"kernels": filepath.Join(t.TempDir(), "none.json")}, `option "kernels"`},
		{map[string]any{"kernels": list}, `pairs[0] ("ffn_up-0"): src0.col 64 != src1.row 32`},
		{map[string]any{"faults": map[string]any{"nan_after": -1}}, `option "faults.nan_after": -1 must be >= 0`},
		{map[string]any{"faults": map[string]any{"bitflip_bit": 3}}, `option "faults.bitflip_bit" needs faults.bitflip_after`},
		{map[string]any{"faults": map[string]any{"crash_after": 0}, "driver": "hardware"}, `option "faults": fault injection needs driver sim`},
		{map[string]any{"fault_nan_after": 0}, `unknown option "fault_nan_after"`},
		{map[string]any{"numerics": "fast"}, `numerics`},
		{map[string]any{"shadow": "yes"}, `option "shadow"`},
		{map[string]any{"cpu_ops": []string{"blk.3.ffn_dwn"}}, `option "cpu_ops": "blk.3.ffn_dwn" is neither a matmul nor a weight`},
		{map[string]any{"int4_b_nibbles": "middle"}, `option "int4_b_nibbles": "middle" unknown`},
		{map[string]any{"int4_overflow": "clip"}, `option "int4_overflow": "clip" unknown`},
		{map[string]any{"fp16_accumulation": "fp64"}, `option "fp16_accumulation": "fp64" unknown`},
	} {
		_, err := load(c, tc.opts)
		if err == nil || !strings.Contains(err.Error(), tc.want) || !errors.Is(err, backend.ErrInvalidArgument) {
			t.Errorf("Load(%v): err = %v, want an invalid-argument error containing %q", tc.opts, err, tc.want)
		}
	}
	// The hardware driver is not in this build: Load says how to get it.
	_, err := load(c, map[string]any{"driver": "hardware"})
	if err == nil || !strings.Contains(err.Error(), rknnrt.ErrNotBuilt.Error()) {
		t.Errorf("driver hardware: err = %v, want %q", err, rknnrt.ErrNotBuilt)
	}
	// The plugin is still usable.
	res, err := load(c, map[string]any{"type": "int8", "cores": 2, "ac_layout": "normal", "numerics": "ggml"})
	if err != nil || res.PlanSummary != "36 of 36 matmuls on the NPU (int8, 2 cores)" {
		t.Errorf("valid load after errors: %q, %v", res.PlanSummary, err)
	}
}

func TestKernelListOption(t *testing.T) {
	c := launch(t)
	list := filepath.Join(t.TempDir(), "mat_kernel_size.json")
	os.WriteFile(list, []byte(`{"pairs":[{"src0":{"row":1,"col":64},"src1":{"row":64,"col":172},"name":"ffn_up-0"}]}`), 0o644)
	res, err := load(c, map[string]any{"kernels": list})
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(res.PlanSummary, "1 of 36 matmuls on the NPU (fp16, 3 cores, kernel list "+list+"): ffn_up-0; CPU (not in the kernel list): Qcur-0") {
		t.Errorf("summary %q", res.PlanSummary)
	}
}

// TestFaultCrash: the simulated device kills the plugin process mid-Eval;
// the host sees a crash with the faults' exit status.
func TestFaultCrash(t *testing.T) {
	c := launch(t)
	if _, err := load(c, map[string]any{"faults": map[string]any{"crash_after": 3}}); err != nil {
		t.Fatalf("Load must survive: the warm-up's runs do not count: %v", err)
	}
	_, err := eval(c, context.Background())
	if !errors.Is(err, backend.ErrCrashed) {
		t.Fatalf("Eval: err = %v, want ErrCrashed", err)
	}
	if code := c.ExitCode(); code != faults.CrashExitCode {
		t.Errorf("exit code %d, want %d", code, faults.CrashExitCode)
	}
}

// TestFaultNaN: from the first Eval run on, C(0,0) is NaN: NaN logits reach
// the host.
func TestFaultNaN(t *testing.T) {
	c := launch(t)
	if _, err := load(c, map[string]any{"faults": map[string]any{"nan_after": 0}}); err != nil {
		t.Fatal(err)
	}
	rows, err := eval(c, context.Background())
	if err != nil {
		t.Fatal(err)
	}
	nan := 0
	for _, r := range rows {
		for _, v := range r {
			if math.IsNaN(float64(v)) {
				nan++
			}
		}
	}
	if nan == 0 {
		t.Error("no NaN logits arrived")
	}
}

// TestFaultCountsStartAfterLoad: the fault counts start after the warm-up
// even when the warm-up ran nothing on the NPU (a kernel list without T=1
// ops): faults.nan_after 0 hits the first NPU run of the first Eval.
func TestFaultCountsStartAfterLoad(t *testing.T) {
	c := launch(t)
	list := filepath.Join(t.TempDir(), "k.json")
	os.WriteFile(list, []byte(`{"pairs":[{"src0":{"row":8,"col":64},"src1":{"row":64,"col":172},"name":"ffn_up-0"}]}`), 0o644)
	if _, err := load(c, map[string]any{"kernels": list, "faults": map[string]any{"nan_after": 0}}); err != nil {
		t.Fatal(err)
	}
	rows, err := eval(c, context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if !math.IsNaN(float64(rows[0][0])) {
		t.Errorf("row 0 starts with %v: the first NPU run after Load was not hit", rows[0][0])
	}
}

// TestFaultHang: a hung device blocks Eval until the host's deadline; the
// plugin can then be killed.
func TestFaultHang(t *testing.T) {
	c := launch(t)
	if _, err := load(c, map[string]any{"faults": map[string]any{"hang_after": 5}}); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 500*time.Millisecond)
	defer cancel()
	if _, err := eval(c, ctx); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Eval on a hung device: err = %v, want DeadlineExceeded", err)
	}
	if c.Exited() {
		t.Error("plugin exited instead of hanging")
	}
	c.Kill()
}
