package diag

import (
	"cmp"
	"slices"
	"strconv"
	"strings"

	"github.com/evalrun/evalrun/backend"
)

// Merge combines the reports of a run's shards (evalrun merge), in shard
// order: the kernel accounting's device calls are summed kernel by kernel
// (each shard counts its own units and bench), so it equals one unsharded
// run's. Shadow statistics and the per-layer drift cannot be summed: they
// are the first shard's, and a warning says so when there are several.
func Merge(reports []*Report) *Report {
	var first *Report
	var sum *backend.Diagnostics
	n := 0
	for _, r := range reports {
		if r == nil {
			continue
		}
		n++
		if first == nil {
			first = r
			sum = &backend.Diagnostics{Shadow: r.Shadow, Ops: r.Ops}
			if r.Kernels != nil {
				sum.KernelList = r.Kernels.List
				sum.Kernels = slices.Clone(r.Kernels.Entries)
			}
			continue
		}
		if r.Kernels == nil || sum.KernelList == "" {
			continue
		}
		sum.Kernels = addKernels(sum.Kernels, r.Kernels.Entries)
	}
	if first == nil {
		return nil
	}
	out := New(sum)
	out.LayerDrift = first.LayerDrift
	// The first shard's own findings beyond the kernel accounting's.
	own := New(&backend.Diagnostics{Shadow: first.Shadow, KernelList: sum.KernelList, Kernels: kernelEntries(first)})
	for _, w := range first.Warnings {
		if !slices.Contains(own.Warnings, w) {
			out.Warnings = append(out.Warnings, w)
		}
	}
	if first.Shadow && n > 1 {
		out.Warnings = append(out.Warnings, "shadow statistics and layer drift are the first shard's (they cannot be summed over shards)")
	}
	return out
}

// addKernels adds b's calls to a's entries of the same kernel and shape. A
// kernel list has the same entries in every shard; in auto mode a shard
// lists the kernels it ran, so the union is sorted as the plugin sorts
// (by name, then T).
func addKernels(a, b []backend.KernelUse) []backend.KernelUse {
	added := false
	for _, e := range b {
		i := slices.IndexFunc(a, func(x backend.KernelUse) bool { return x.Name == e.Name && x.Shape == e.Shape })
		if i >= 0 {
			a[i].Calls += e.Calls
			continue
		}
		a, added = append(a, e), true
	}
	if added {
		slices.SortStableFunc(a, func(x, y backend.KernelUse) int {
			return cmp.Or(strings.Compare(x.Name, y.Name), cmp.Compare(leadingInt(x.Shape), leadingInt(y.Shape)))
		})
	}
	return a
}

// leadingInt is T of a "T×K×N" shape.
func leadingInt(shape string) int {
	t, _, _ := strings.Cut(shape, "×")
	n, _ := strconv.Atoi(t)
	return n
}

func kernelEntries(r *Report) []backend.KernelUse {
	if r.Kernels == nil {
		return nil
	}
	return r.Kernels.Entries
}
