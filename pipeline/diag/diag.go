// Package diag turns what a device plugin measured (backend.Diagnostics) and
// the per-layer hidden states of a candidate and the reference into the
// drill-down a bring-up engineer reads after a failed gate: which offloaded
// op differs most from the CPU path (shadow mode, ranked as RKNN-Toolkit2's
// accuracy_analysis and Polygraphy's per-layer comparison rank them), in
// which layer the residual stream drifts away from the reference, and which
// kernels of a kernel list ran.
package diag

import (
	"fmt"
	"math"
	"sort"
	"strings"

	"github.com/evalrun/evalrun/backend"
	"github.com/evalrun/evalrun/pipeline/summary"
)

// Report is one candidate's diagnostics: summary.Diagnostics.
type Report = summary.Diagnostics

// Kernels is the kernel accounting: summary.KernelAccounting.
type Kernels = summary.KernelAccounting

// New builds the report from a plugin's diagnostics (nil: the plugin has
// none, and so does the report).
func New(d *backend.Diagnostics) *Report {
	if d == nil {
		return nil
	}
	r := &Report{Shadow: d.Shadow, Ops: RankOps(d.Ops)}
	if d.KernelList != "" {
		k := &Kernels{List: d.KernelList, Entries: d.Kernels}
		for _, e := range d.Kernels {
			if e.Listed {
				k.Listed++
			}
			if e.Calls > 0 {
				k.Ran++
			} else {
				k.NeverRan = append(k.NeverRan, e.Name+" "+e.Shape)
			}
			k.Calls += e.Calls
		}
		r.Kernels = k
		switch {
		case len(k.NeverRan) > 0:
			r.Warnings = append(r.Warnings, fmt.Sprintf("%d of %d listed kernels never ran on the device: %s", len(k.NeverRan), k.Listed, list(k.NeverRan)))
		case k.Calls == 0:
			r.Warnings = append(r.Warnings, "no matmul ran on the device")
		}
	}
	return r
}

// OffloadProblem is what require_offload fails on ("" = every listed kernel
// ran and the device computed something).
func OffloadProblem(r *Report) string {
	switch {
	case r == nil || r.Kernels == nil:
		return "the plugin reports no kernel accounting"
	case len(r.Kernels.NeverRan) > 0:
		return fmt.Sprintf("%d of %d listed kernels never ran: %s", len(r.Kernels.NeverRan), r.Kernels.Listed, list(r.Kernels.NeverRan))
	case r.Kernels.Calls == 0:
		return "no matmul ran on the device"
	}
	return ""
}

// RankOps orders ops by NMSE, worst first (non-finite outputs first of
// all); ties keep the model's order.
func RankOps(ops []backend.OpError) []backend.OpError {
	out := append([]backend.OpError(nil), ops...)
	sort.SliceStable(out, func(i, j int) bool {
		if (out[i].NonFinite > 0) != (out[j].NonFinite > 0) {
			return out[i].NonFinite > 0
		}
		return out[i].NMSE > out[j].NMSE
	})
	return out
}

// list joins names, shortened past 8.
func list(ns []string) string {
	const show = 8
	if len(ns) <= show {
		return strings.Join(ns, ", ")
	}
	return fmt.Sprintf("%s, … (%d more)", strings.Join(ns[:show], ", "), len(ns)-show)
}

// LayerDrift is summary.LayerDrift.
type LayerDrift = summary.LayerDrift

// LayerError is summary.LayerError.
type LayerError = summary.LayerError

// Positions picks up to n positions spread over rows first..last
// (inclusive), last always among them.
func Positions(first, last, n int) []int {
	if last < first || n < 1 {
		return nil
	}
	n = min(n, last-first+1)
	if n == 1 {
		return []int{last}
	}
	out := make([]int, n)
	for i := range n {
		out[i] = first + i*(last-first)/(n-1)
	}
	return out
}

// CompareLayers compares per-position hidden states (each nLayer rows of
// nEmbd values) of a candidate with the reference's, layer by layer.
func CompareLayers(ref, cand [][]float32, nLayer int) ([]LayerError, int, error) {
	if len(ref) != len(cand) || len(ref) == 0 {
		return nil, 0, fmt.Errorf("hidden states for %d reference and %d candidate positions", len(ref), len(cand))
	}
	n := len(ref[0])
	if nLayer < 1 || n%nLayer != 0 {
		return nil, 0, fmt.Errorf("%d hidden values per position are not %d layers", n, nLayer)
	}
	nEmbd := n / nLayer
	out := make([]LayerError, nLayer)
	grows, best := 0, math.Inf(-1)
	for il := range nLayer {
		var errSq, refSq, candSq, dot, maxAbs float64
		for p := range ref {
			if len(ref[p]) != n || len(cand[p]) != n {
				return nil, 0, fmt.Errorf("position %d: %d reference and %d candidate hidden values, want %d", p, len(ref[p]), len(cand[p]), n)
			}
			r, c := ref[p][il*nEmbd:(il+1)*nEmbd], cand[p][il*nEmbd:(il+1)*nEmbd]
			for i := range r {
				a, b := float64(r[i]), float64(c[i])
				d := b - a
				errSq += d * d
				refSq += a * a
				candSq += b * b
				dot += a * b
				maxAbs = max(maxAbs, math.Abs(d))
			}
		}
		e := LayerError{Layer: il, MaxAbs: maxAbs, Cosine: 1}
		if refSq > 0 {
			e.NMSE = errSq / refSq
		} else if errSq > 0 {
			e.NMSE = math.Inf(1)
		}
		if refSq > 0 && candSq > 0 {
			e.Cosine = dot / math.Sqrt(refSq*candSq)
		}
		prev := 0.0
		if il > 0 {
			prev = out[il-1].NMSE
			if prev > 0 {
				e.Growth = e.NMSE / prev
			}
		}
		if rise := e.NMSE - prev; rise > best {
			grows, best = il, rise
		}
		out[il] = e
	}
	return out, grows, nil
}
