package diag

import (
	"fmt"
	"testing"

	"github.com/evalrun/evalrun/backend"
)

// TestMergeSumsKernelCalls: a kernel that ran in only one shard ran in the
// merged run; calls add up over the shards.
func TestMergeSumsKernelCalls(t *testing.T) {
	shard := func(a, b int64) *Report {
		return New(&backend.Diagnostics{KernelList: "auto", Kernels: []backend.KernelUse{
			{Name: "ffn_up", Shape: "1×64×172", Listed: true, Calls: a}, {Name: "ffn_down", Shape: "1×172×64", Listed: true, Calls: b}}})
	}
	s0, s1 := shard(5, 0), shard(7, 3)
	if len(s0.Kernels.NeverRan) != 1 || len(s0.Warnings) != 1 {
		t.Fatalf("shard 0 alone: %+v", s0)
	}
	m := Merge([]*Report{s0, nil, s1})
	if m.Kernels.Calls != 15 || m.Kernels.Ran != 2 || len(m.Kernels.NeverRan) != 0 || len(m.Warnings) != 0 || OffloadProblem(m) != "" {
		t.Fatalf("merged: %+v %+v", m.Kernels, m.Warnings)
	}
	if m.Kernels.Entries[0].Calls != 12 || s0.Kernels.Entries[0].Calls != 5 {
		t.Fatal("the merge must sum into a copy, not into a shard's report")
	}
	if Merge([]*Report{nil}) != nil {
		t.Fatal("no reports merge to none")
	}
}

// TestMergeAutoKernelsUnion: in auto mode each shard lists the kernels it
// ran; the merge lists their union in the plugin's order (name, then T).
func TestMergeAutoKernelsUnion(t *testing.T) {
	r := func(ks ...backend.KernelUse) *Report {
		return New(&backend.Diagnostics{KernelList: "auto", Kernels: ks})
	}
	m := Merge([]*Report{
		r(backend.KernelUse{Name: "a", Shape: "64×8×8", Calls: 1}, backend.KernelUse{Name: "b", Shape: "1×8×8", Calls: 2}),
		r(backend.KernelUse{Name: "a", Shape: "1×8×8", Calls: 3}, backend.KernelUse{Name: "a", Shape: "64×8×8", Calls: 4}, backend.KernelUse{Name: "a", Shape: "128×8×8", Calls: 5}),
	})
	var got []string
	for _, e := range m.Kernels.Entries {
		got = append(got, fmt.Sprintf("%s %s %d", e.Name, e.Shape, e.Calls))
	}
	if want := "[a 1×8×8 3 a 64×8×8 5 a 128×8×8 5 b 1×8×8 2]"; fmt.Sprint(got) != want {
		t.Fatalf("got %v, want %s", got, want)
	}
}
