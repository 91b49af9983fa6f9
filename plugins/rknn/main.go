// Command evalrun-plugin-rknn is the RK3588 NPU backend: the evalrun engine
// with weight matmuls offloaded to the NPU through the RKNN matmul API (the
// simulator, or librknnrt when built with -tags rknpu), the rest on the CPU.
// The host launches it; it is not run by hand.
//
// Options:
//
//	driver     sim | hardware (default sim)
//	type       fp16 | int8 | int4 (default fp16)
//	cores      1..3 (default 3): NPU cores sharing each matmul's N
//	kernels    auto | PATH of a mat_kernel_size.json (default auto)
//	ac_layout  native | normal (default native): layout of A and C
//	numerics   exact | ggml: the CPU part (default exact)
//	fault_crash_after, fault_hang_after, fault_nan_after, fault_inf_after,
//	fault_bitflip_after N: simulated device faults from the (N+1)-th NPU run
//	    after Load (0 = the first run of the first Eval); sim only
//	fault_bitflip_bit B: the bit fault_bitflip_after flips (default 0)
package main

import (
	"errors"
	"fmt"

	"github.com/evalrun/evalrun/backend"
	"github.com/evalrun/evalrun/engine"
	"github.com/evalrun/evalrun/plugins/enginebackend"
	"github.com/evalrun/evalrun/plugins/rknn/kernels"
	"github.com/evalrun/evalrun/plugins/rknn/npu"
	"github.com/evalrun/evalrun/plugins/rknn/npu/rknnrt"
	"github.com/evalrun/evalrun/plugins/rknn/npu/sim"
	"github.com/evalrun/evalrun/plugins/rknn/offload"
)

// version is set at build time with -ldflags "-X main.version=...".
var version = "dev"

func main() {
	log := backend.NewPluginLogger("rknn")
	backend.Serve(enginebackend.New(enginebackend.Config{
		Name:         "rknn",
		Version:      version,
		Device:       deviceName(),
		Capabilities: []string{"eval", "bench", "sessions"},
		Options:      enginebackend.JSONOptions[options](),
		MatMul:       attach,
		Logger:       log,
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
	Driver   string `json:"driver"`
	Type     string `json:"type"`
	Cores    *int   `json:"cores"`
	Kernels  string `json:"kernels"`
	ACLayout string `json:"ac_layout"`

	// Fault counts are pointers: 0 is a valid count, absent means off.
	FaultCrashAfter   *int `json:"fault_crash_after"`
	FaultHangAfter    *int `json:"fault_hang_after"`
	FaultNaNAfter     *int `json:"fault_nan_after"`
	FaultInfAfter     *int `json:"fault_inf_after"`
	FaultBitflipAfter *int `json:"fault_bitflip_after"`
	FaultBitflipBit   *int `json:"fault_bitflip_bit"`

	cfg      offload.Config
	listName string
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
	o.cfg = offload.Config{Type: typ, Cores: cores, ACLayout: layout}
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
	for _, f := range o.faultFields() {
		if *f.v != nil && **f.v < 0 {
			return fmt.Errorf("option %q: %d must be >= 0", f.name, **f.v)
		}
		if *f.v != nil && o.Driver != "sim" {
			return fmt.Errorf("option %q: fault injection needs driver sim", f.name)
		}
	}
	if b := o.FaultBitflipBit; b != nil {
		if *b > 31 {
			return fmt.Errorf("option \"fault_bitflip_bit\": %d outside 0..31", *b)
		}
		if o.FaultBitflipAfter == nil {
			return errors.New("option \"fault_bitflip_bit\" needs fault_bitflip_after")
		}
	}
	return nil
}

type faultField struct {
	name string
	v    **int
	sim  func(*sim.Faults) *int
}

func (o *options) faultFields() []faultField {
	return []faultField{
		{"fault_crash_after", &o.FaultCrashAfter, func(f *sim.Faults) *int { return &f.CrashAfterRuns }},
		{"fault_hang_after", &o.FaultHangAfter, func(f *sim.Faults) *int { return &f.HangAfterRuns }},
		{"fault_nan_after", &o.FaultNaNAfter, func(f *sim.Faults) *int { return &f.NaNAfterRuns }},
		{"fault_inf_after", &o.FaultInfAfter, func(f *sim.Faults) *int { return &f.InfAfterRuns }},
		{"fault_bitflip_after", &o.FaultBitflipAfter, func(f *sim.Faults) *int { return &f.BitFlipAfterRuns }},
		{"fault_bitflip_bit", &o.FaultBitflipBit, func(f *sim.Faults) *int { return &f.BitFlipBit }},
	}
}

// simFaults maps the options onto sim.Faults. The sim counts every run of
// the driver, Load's one-token warm-up included, so counts are shifted by
// the warm-up's runs: fault_nan_after 0 hits the first run of the first Eval.
func (o *options) simFaults(warmupRuns int) sim.Faults {
	var f sim.Faults
	for _, ff := range o.faultFields() {
		if *ff.v == nil {
			continue
		}
		v := **ff.v
		if ff.name != "fault_bitflip_bit" {
			v += warmupRuns
		}
		*ff.sim(&f) = v
	}
	return f
}

// attach is the Load hook: open the driver, convert the weights and create
// the contexts (the warm-up), and report the plan.
func attach(m *engine.Model, cpu engine.MatMuler, parsed any) (engine.MatMuler, []backend.PlanEntry, string, error) {
	o := parsed.(*options)
	cfg := o.cfg
	cfg.Evict = m.File().Evict // the CPU keeps no copy of offloaded weights
	switch o.Driver {
	case "hardware":
		drv, err := rknnrt.New()
		if err != nil {
			return nil, nil, "", fmt.Errorf("driver hardware: %w", err)
		}
		cfg.Driver = drv
	default:
		// The engine's warm-up decodes one token: every op at T=1.
		warm := offload.CoreRuns(cfg, m.MatMulOps(1))
		cfg.Driver = sim.New(sim.Options{Faults: o.simFaults(warm), Threads: m.Threads()})
	}
	mm, plan, summary, err := offload.Attach(m, cpu, cfg, o.listName)
	if err != nil {
		return nil, nil, "", err
	}
	return mm, plan, summary, nil
}
