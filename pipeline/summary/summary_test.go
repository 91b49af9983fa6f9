package summary

import (
	"testing"
)

func TestHostTimingAdd(t *testing.T) {
	h := &HostTiming{PassesS: 2, ComputeS: 1}
	h.Add(&HostTiming{PassesS: 2, ComputeS: 2})
	if h.PassesS != 4 || h.HostIPCS == nil || *h.HostIPCS != 1 || *h.HostIPCShare != 0.25 {
		t.Errorf("%+v", h)
	}
	h = &HostTiming{PassesS: 2}
	if h.SetHostIPC(); h.HostIPCS != nil { // no compute times reported
		t.Errorf("host_ipc_s without compute: %v", *h.HostIPCS)
	}
}

// TestHostCPUAdd: a merge's host CPU time is the shards' sum, and unknown
// when one shard did not measure it.
func TestHostCPUAdd(t *testing.T) {
	f := func(v float64) *float64 { return &v }
	h := &HostTiming{}
	h.Add(&HostTiming{PassesS: 2, ComputeS: 1, HostCPUS: f(0.5)})
	h.Add(&HostTiming{PassesS: 2, ComputeS: 1, HostCPUS: f(0.25)})
	if h.HostCPUS == nil || *h.HostCPUS != 0.75 {
		t.Fatalf("two shards' host CPU: %v", h.HostCPUS)
	}
	h.Add(&HostTiming{PassesS: 1, ComputeS: 1})
	if h.HostCPUS != nil {
		t.Errorf("with a shard that did not measure it: %v", *h.HostCPUS)
	}
}
