// Command evalrun-plugin-hexagon is a simulated Qualcomm Hexagon HTP backend
// (the NPU llama.cpp's ggml-hexagon backend drives): the evalrun engine with
// its weight matmuls (and, with ops: layer, the whole layer) on simulated
// HTP sessions. On a phone, the llamacpp plugin pointed at a Hexagon build
// of llama.cpp is the real thing; this simulator is what CI runs.
//
// Options:
//
//	ops        matmul | layer (default matmul): MUL_MAT only, or every op of
//	           a layer (MUL_MAT, ADD, MUL, RMS_NORM, ROPE, SWIGLU, SOFT_MAX)
//	sessions   1..n_layer (default 1): HTP sessions the layers are split over
//	numerics   exact | ggml: the CPU part (default exact)
//	faults     {crash_after, hang_after, nan_after, inf_after, bitflip_after: N,
//	           bitflip_bit: B}: simulated device faults from the (N+1)-th
//	           HTP matmul after Load (package plugins/internal/faults)
package main

import (
	"fmt"

	"github.com/hashicorp/go-hclog"

	"github.com/evalrun/evalrun/backend"
	"github.com/evalrun/evalrun/engine"
	"github.com/evalrun/evalrun/plugins/enginebackend"
	"github.com/evalrun/evalrun/plugins/hexagon/htp"
	"github.com/evalrun/evalrun/plugins/internal/faults"
)

// version is set at build time with -ldflags "-X main.version=...".
var version = "dev"

func main() {
	log := backend.NewPluginLogger("hexagon")
	backend.Serve(enginebackend.New(config(log)), backend.WithLogger(log))
}

func config(log hclog.Logger) enginebackend.Config {
	return enginebackend.Config{
		Name:         "hexagon",
		Version:      version,
		Device:       "hexagon-htp (sim)",
		Capabilities: []string{"eval", "bench", "sessions"},
		Options: enginebackend.DeviceOptions(func(m *engine.Model, o *options) (enginebackend.Device, error) {
			return attach(m, o, log)
		}),
		Logger: log,
	}
}

// options are the plugin's own Load options.
type options struct {
	Ops      string          `json:"ops"`
	Sessions *int            `json:"sessions"`
	Faults   *faults.Options `json:"faults"`

	sessions int
}

// maxSessions bounds the option before the model is known (ggml-hexagon
// opens at most 16 sessions); attach checks it against the layer count.
const maxSessions = 16

// Validate applies defaults and checks every option; errors name it.
func (o *options) Validate() error {
	switch o.Ops {
	case "":
		o.Ops = "matmul"
	case "matmul", "layer":
	default:
		return fmt.Errorf("option \"ops\": %q unknown (want matmul or layer)", o.Ops)
	}
	o.sessions = 1
	if o.Sessions != nil {
		o.sessions = *o.Sessions
	}
	if o.sessions < 1 || o.sessions > maxSessions {
		return fmt.Errorf("option \"sessions\": %d outside 1..%d", o.sessions, maxSessions)
	}
	return o.Faults.Validate()
}

// device is the HTP attached to a loaded model, with its plan and its
// faults (nil: none), armed after the warm-up.
type device struct {
	*htp.Device
	plan   []backend.PlanEntry
	faults *faults.Injector
	log    hclog.Logger
}

func (d *device) Plan() ([]backend.PlanEntry, string) { return d.plan, d.Summary() }

// Simulated: always (there is no hardware driver), so the host labels the
// throughput simulated.
func (d *device) Simulated() bool { return true }

func (d *device) Arm() { d.faults.Arm() }

// Close logs what ran on every session, then releases the device.
func (d *device) Close() error {
	for _, s := range d.Sessions() {
		args := []any{"session", s.Name}
		for _, c := range s.Counts() {
			args = append(args, c.Op, c.N)
		}
		d.log.Info("htp session ops", args...)
	}
	return d.Device.Close()
}

func attach(m *engine.Model, o *options, log hclog.Logger) (enginebackend.Device, error) {
	if o.sessions > m.Config.NLayer {
		return nil, backend.Errorf(backend.ErrInvalidArgument, "option \"sessions\": %d exceeds the model's %d layers (one session per layer at most)", o.sessions, m.Config.NLayer)
	}
	injector := faults.New(o.Faults)
	dev, err := htp.New(m, htp.Config{Sessions: o.sessions, Faults: injector, Layer: o.Ops == "layer"}, m.File().Evict)
	if err != nil {
		return nil, err
	}
	d := &device{Device: dev, faults: injector, log: log}
	for _, op := range m.MatMulOps(1) {
		e := backend.PlanEntry{Op: op.Name, Device: "cpu", Shape: enginebackend.Shape(op)}
		if s, ok := dev.Claims(&op); ok {
			e.Device = s.Name
		} else {
			e.Reason = fmt.Sprintf("weight type %s: the HTP takes Q4_0, Q8_0, MXFP4, F16, F32", op.Weight.Type)
		}
		d.plan = append(d.plan, e)
	}
	return d, nil
}
