package summary

import (
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
)

func TestWriteRead(t *testing.T) {
	dir := t.TempDir()
	in := &Summary{Schema: SchemaVersion, Run: RunInfo{ID: "x", Name: "n"}, Verdict: Verdict{Status: VerdictPass}}
	if err := Write(dir, in); err != nil {
		t.Fatal(err)
	}
	out, err := Read(filepath.Join(dir, "summary.json"))
	if err != nil || !reflect.DeepEqual(in, out) {
		t.Fatalf("read back %+v, %v", out, err)
	}
	other := filepath.Join(dir, "other.json")
	os.WriteFile(other, []byte(`{"schema":"evalrun/summary/v0"}`), 0o666)
	if _, err := Read(other); err == nil || !strings.Contains(err.Error(), `schema "evalrun/summary/v0"`) {
		t.Errorf("another schema: %v", err)
	}
}

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
