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
