// Command evalrun-plugin-rknn is the RK3588 NPU backend: the evalrun engine
// with weight matmuls offloaded to the NPU through the RKNN matmul API (the
// simulator, or librknnrt when built with -tags rknpu), the rest on the CPU.
// The host launches it; it is not run by hand, except for its two commands
// (see tools.go), which evalrun kernels and evalrun ops run:
//
//	evalrun-plugin-rknn kernels --model M ...   a mat_kernel_size.json
//	evalrun-plugin-rknn ops --model M ...       test-backend-ops for the NPU
//
// They live here rather than in evalrun so that the host links no NPU code
// (the simulator, or with -tags rknpu the cgo driver) and the option parsing
// is the plugin's own.
//
// Options:
//
//	driver     sim | hardware (default sim)
//	type       fp16 | int8 | int4 (default fp16)
//	cores      1..3 (default 3): NPU cores sharing each matmul's N
//	kernels    auto | PATH of a mat_kernel_size.json (default auto)
//	ac_layout  native | normal (default native): layout of A and C
//	numerics   exact | ggml: the CPU part (default exact)
//	shadow     true: every NPU call also computed on the CPU path, the
//	           difference reported per op (Diagnostics); default false
//	cpu_ops    op or weight names kept on the CPU ("ffn_out-3",
//	           "blk.3.ffn_down")
//	int4_b_nibbles     low_first | high_first: element order in the bytes of
//	                   an int4 B in native layout (default low_first)
//	int4_overflow      saturate | wrap: the simulated int16 output (sim)
//	fp16_accumulation  blocks32 | ideal: the simulated fp32 accumulation in
//	                   blocks of 32, or float64 with one rounding (sim)
//	faults     {crash_after, hang_after, nan_after, inf_after, bitflip_after: N,
//	           bitflip_bit: B}: simulated device faults from the (N+1)-th
//	           NPU run after Load, each core's run one (package
//	           plugins/internal/faults); driver sim only
package main

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"github.com/evalrun/evalrun/backend"
	"github.com/evalrun/evalrun/engine"
	"github.com/evalrun/evalrun/internal/toolcmd"
	"github.com/evalrun/evalrun/plugins/enginebackend"
	"github.com/evalrun/evalrun/plugins/internal/faults"
	"github.com/evalrun/evalrun/plugins/rknn/kernels"
	"github.com/evalrun/evalrun/plugins/rknn/npu"
	"github.com/evalrun/evalrun/plugins/rknn/npu/rknnrt"
	"github.com/evalrun/evalrun/plugins/rknn/npu/sim"
	"github.com/evalrun/evalrun/plugins/rknn/offload"
)

// version is set at build time with -ldflags "-X main.version=...".
var version = "dev"

func main() {
	if code, ran := toolcmd.Run(os.Args[1:], tools()...); ran {
		os.Exit(code)
	}
	log := backend.NewPluginLogger("rknn")
	backend.Serve(enginebackend.New(enginebackend.Config{
		Name:         "rknn",
		Version:      version,
		Device:       deviceName(),
		Capabilities: []string{"eval", "bench", "sessions"},
		Options:      enginebackend.DeviceOptions(attach),
		Logger:       log,
		MapWeights:   true, // attach evicts the offloaded weights
	}), backend.WithLogger(log))
}

// deviceName: a build without the hardware driver can only simulate.
func deviceName() string {
	if _, err := rknnrt.New(); err != nil {
		return "rk3588-npu (sim)"
	}
	return "rk3588-npu"
}

// options are the plugin's own Load options (numerics belongs to the engine).
type options struct {
	Driver   string   `json:"driver"`
	Type     string   `json:"type"`
	Cores    *int     `json:"cores"`
	Kernels  string   `json:"kernels"`
	ACLayout string   `json:"ac_layout"`
	Shadow   bool     `json:"shadow"`
	CPUOps   []string `json:"cpu_ops"`

	// The readings the RKNN documents leave open (docs/npu-plugins.md).
	Int4BNibbles     string `json:"int4_b_nibbles"`
	Int4Overflow     string `json:"int4_overflow"`
	FP16Accumulation string `json:"fp16_accumulation"`
	simReadings      sim.Options

	Faults *faults.Options `json:"faults"`

	cfg      offload.Config
	listName string
}

// ResolvePaths makes a relative kernels path start at dir (the spec's
// directory), as docs/spec.md promises for every path in a spec.
func (o *options) ResolvePaths(dir string) {
	if o.Kernels != "" && o.Kernels != "auto" && !filepath.IsAbs(o.Kernels) {
		o.Kernels = filepath.Join(dir, o.Kernels)
	}
}

// Validate applies defaults and checks every option; errors name it.
func (o *options) Validate() error {
	switch o.Driver {
	case "":
		o.Driver = "sim"
	case "sim", "hardware":
	default:
		return fmt.Errorf("option \"driver\": %q unknown (want sim or hardware)", o.Driver)
	}
	if o.Type == "" {
		o.Type = "fp16"
	}
	typ, err := offload.ParseType(o.Type)
	if err != nil {
		return fmt.Errorf("option \"type\": %v", err)
	}
	cores := npu.MaxCores
	if o.Cores != nil {
		cores = *o.Cores
	}
	if cores < 1 || cores > npu.MaxCores {
		return fmt.Errorf("option \"cores\": %d outside 1..%d", cores, npu.MaxCores)
	}
	layout := npu.LayoutNative
	switch o.ACLayout {
	case "", "native":
	case "normal", "norm":
		layout = npu.LayoutNorm
	default:
		return fmt.Errorf("option \"ac_layout\": %q unknown (want native or normal)", o.ACLayout)
	}
	o.cfg = offload.Config{Type: typ, Cores: cores, ACLayout: layout, Shadow: o.Shadow}
	if err := o.readings(); err != nil {
		return err
	}
	if len(o.CPUOps) > 0 {
		o.cfg.CPUOps = map[string]bool{}
		for _, n := range o.CPUOps {
			o.cfg.CPUOps[n] = true
		}
	}
	switch o.Kernels {
	case "", "auto":
		o.listName = "auto"
	default:
		l, err := kernels.Load(o.Kernels)
		if err != nil {
			return fmt.Errorf("option \"kernels\": %v", err)
		}
		o.cfg.Kernels, o.listName = &l, o.Kernels
	}
	if err := o.Faults.Validate(); err != nil {
		return err
	}
	if o.Faults.Any() && o.Driver != "sim" {
		return errors.New("option \"faults\": fault injection needs driver sim")
	}
	return nil
}

// readings checks the options that flip a simulator assumption: the
// nibble order applies to what the offload writes (and, on the simulator,
// to how the device reads it); the other two exist only in the simulator.
func (o *options) readings() error {
	switch o.Int4BNibbles {
	case "", "low_first":
	case "high_first":
		o.cfg.Int4BHighFirst, o.simReadings.Int4BHighFirst = true, true
	default:
		return fmt.Errorf("option \"int4_b_nibbles\": %q unknown (want low_first or high_first)", o.Int4BNibbles)
	}
	switch o.Int4Overflow {
	case "", "saturate":
	case "wrap":
		o.simReadings.Int4Wrap = true
	default:
		return fmt.Errorf("option \"int4_overflow\": %q unknown (want saturate or wrap)", o.Int4Overflow)
	}
	switch o.FP16Accumulation {
	case "", "blocks32":
	case "ideal":
		o.simReadings.FP16Ideal = true
	default:
		return fmt.Errorf("option \"fp16_accumulation\": %q unknown (want blocks32 or ideal)", o.FP16Accumulation)
	}
	if o.Driver == "hardware" && (o.simReadings.Int4Wrap || o.simReadings.FP16Ideal) {
		return errors.New("options \"int4_overflow\" and \"fp16_accumulation\" describe the simulated device: they need driver sim")
	}
	return nil
}

// openDriver opens the NPU driver the options name; a simulated one
// computes on threads, through parallel if not nil, with the faults
// injected (sim.Options).
func (o *options) openDriver(threads int, parallel func(n, align int, fn func(lo, hi int)), injector *faults.Injector) (npu.Driver, error) {
	if o.Driver == "hardware" {
		drv, err := rknnrt.New()
		if err != nil {
			return nil, fmt.Errorf("driver hardware: %w", err)
		}
		return drv, nil
	}
	opts := o.simReadings
	opts.Threads, opts.Parallel, opts.Small, opts.Faults = threads, parallel, engine.Small, injector
	return sim.New(opts), nil
}

// npuDevice is the offload attached to a loaded model, with its plan and
// its faults (nil: none), armed after the warm-up.
type npuDevice struct {
	*offload.MatMuler
	plan     []backend.PlanEntry
	summary  string
	listName string
	faults   *faults.Injector
	sim      bool // the simulated NPU: its speed is the simulator's
}

func (d *npuDevice) Simulated() bool { return d.sim }

// Diagnostics implements enginebackend.Diagnoser.
func (d *npuDevice) Diagnostics() *backend.Diagnostics { return d.MatMuler.Diagnostics(d.listName) }

func (d *npuDevice) Plan() ([]backend.PlanEntry, string) { return d.plan, d.summary }

// Arm runs after Load's warm-up: faults and diagnostics count from here.
func (d *npuDevice) Arm() {
	d.ResetDiagnostics()
	d.faults.Arm()
}

// attach opens the driver, converts the weights and creates the contexts
// of every planned op, and reports the plan.
func attach(m *engine.Model, o *options) (enginebackend.Device, error) {
	if err := offload.CheckCPUOps(o.CPUOps, m.MatMulOps(1)); err != nil {
		return nil, backend.Errorf(backend.ErrInvalidArgument, "option \"cpu_ops\": %v", err)
	}
	cfg := o.cfg
	cfg.Evict = m.File().Evict // the CPU keeps no copy of offloaded weights
	dev := &npuDevice{sim: o.Driver != "hardware", listName: o.listName, faults: faults.New(o.Faults)}
	// The simulator computes on the host's threads: the cores of a matmul
	// run together as one job of the model's worker pool (sim RunCores).
	drv, err := o.openDriver(m.Threads(), m.Parallel, dev.faults)
	if err != nil {
		return nil, err
	}
	cfg.Driver = drv
	dev.MatMuler, dev.plan, dev.summary, err = offload.Attach(m, m.CPUMatMul(), cfg, o.listName)
	if err != nil {
		return nil, err
	}
	return dev, nil
}
