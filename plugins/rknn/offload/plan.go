package offload

import (
	"errors"
	"fmt"
	"slices"
	"sort"
	"strings"

	"github.com/evalrun/evalrun/backend"
	"github.com/evalrun/evalrun/engine"
	"github.com/evalrun/evalrun/plugins/rknn/kernels"
)

// Prepare is the warm-up: it converts the weight of every op it offloads and
// creates that op's contexts at M = op.T, and returns where each op runs.
// Driver failures are errors; a weight the NPU type cannot hold stays on the
// CPU with the reason in its plan entry.
func (o *MatMuler) Prepare(ops []engine.MatMulOp) ([]backend.PlanEntry, error) {
	plan := make([]backend.PlanEntry, 0, len(ops))
	for i := range ops {
		op := &ops[i]
		e := backend.PlanEntry{Op: op.Name, Device: "cpu", Shape: fmt.Sprintf("%d×%d×%d", op.T, op.K, op.N)}
		if ok, why := o.decide(op); !ok {
			e.Reason = why
		} else if _, err := o.kernel(op); err != nil {
			var conv *convertError
			if !errors.As(err, &conv) {
				return nil, fmt.Errorf("%s (%s): %w", op.Name, e.Shape, err)
			}
			e.Reason = conv.msg
		} else {
			e.Device = "npu"
		}
		plan = append(plan, e)
	}
	return plan, nil
}

// PlanOps are the ops a model's plan covers: every weight matmul at T=1 for
// auto, or at each token count of the kernel list.
func PlanOps(m *engine.Model, list *kernels.List) []engine.MatMulOp {
	if list == nil {
		return m.MatMulOps(1)
	}
	var ts []int
	for _, p := range list.Pairs {
		if !slices.Contains(ts, p.T()) {
			ts = append(ts, p.T())
		}
	}
	sort.Ints(ts)
	var ops []engine.MatMulOp
	for _, t := range ts {
		ops = append(ops, m.MatMulOps(t)...)
	}
	return ops
}

// Attach wraps a loaded model's CPU matmul: it plans and prepares every op
// of PlanOps and returns the offloading matmul with its plan and summary,
// e.g. "36 of 36 matmuls on the NPU (fp16, 3 cores)".
func Attach(m *engine.Model, cpu engine.MatMuler, cfg Config, listName string) (*MatMuler, []backend.PlanEntry, string, error) {
	if cfg.Parallel == nil {
		cfg.Parallel = m.Parallel
	}
	o, err := New(cfg, cpu)
	if err != nil {
		return nil, nil, "", err
	}
	ops := PlanOps(m, cfg.Kernels)
	plan, err := o.Prepare(ops)
	if err != nil {
		o.Close()
		return nil, nil, "", err
	}
	return o, plan, Summary(cfg, listName, plan, Unmatched(cfg.Kernels, ops)), nil
}

// Unmatched lists the kernel list entries that match none of ops (a list
// written for another model).
func Unmatched(list *kernels.List, ops []engine.MatMulOp) []string {
	if list == nil {
		return nil
	}
	var out []string
	for _, p := range list.Pairs {
		found := false
		for i := range ops {
			op := &ops[i]
			if op.Name == p.Name && op.T == p.T() && op.K == p.K() && op.N == p.N() {
				found = true
				break
			}
		}
		if !found {
			out = append(out, p.Name+" "+p.Shape())
		}
	}
	return out
}

// Summary is the plan in one line: how many matmuls run on the NPU, with
// which settings, which names went there (for a list) and why the others
// stayed on the CPU.
func Summary(cfg Config, listName string, plan []backend.PlanEntry, unmatched []string) string {
	var npuNames []string
	reasons := map[string][]string{}
	var order []string
	for _, e := range plan {
		if e.Device == "npu" {
			npuNames = append(npuNames, e.Op)
			continue
		}
		if _, seen := reasons[e.Reason]; !seen {
			order = append(order, e.Reason)
		}
		reasons[e.Reason] = append(reasons[e.Reason], e.Op)
	}
	cores := "cores"
	if cfg.Cores == 1 {
		cores = "core"
	}
	var b strings.Builder
	fmt.Fprintf(&b, "%d of %d matmuls on the NPU (%s, %d %s", len(npuNames), len(plan), cfg.Type, cfg.Cores, cores)
	if cfg.Kernels != nil {
		fmt.Fprintf(&b, ", kernel list %s", listName)
	}
	b.WriteString(")")
	if cfg.Kernels != nil && len(npuNames) > 0 {
		fmt.Fprintf(&b, ": %s", names(npuNames))
	}
	for _, r := range order {
		fmt.Fprintf(&b, "; CPU (%s): %s", r, names(reasons[r]))
	}
	if len(unmatched) > 0 {
		fmt.Fprintf(&b, "; %d kernel list entries match no matmul of the model: %s", len(unmatched), names(unmatched))
	}
	return b.String()
}

// names joins a list, shortened past 8 entries.
func names(ns []string) string {
	const show = 8
	if len(ns) <= show {
		return strings.Join(ns, ", ")
	}
	return fmt.Sprintf("%s, … (%d more)", strings.Join(ns[:show], ", "), len(ns)-show)
}
