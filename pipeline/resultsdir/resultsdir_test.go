package resultsdir

import (
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/evalrun/evalrun/pipeline/summary"
)

func TestWriteReadSummarySummary(t *testing.T) {
	dir := t.TempDir()
	in := &summary.Summary{Schema: summary.SchemaVersion, Run: summary.RunInfo{ID: "x", Name: "n"}, Verdict: summary.Verdict{Status: summary.VerdictPass}}
	if err := WriteSummary(dir, in); err != nil {
		t.Fatal(err)
	}
	out, err := ReadSummary(filepath.Join(dir, SummaryFile))
	if err != nil || !reflect.DeepEqual(in, out) {
		t.Fatalf("read back %+v, %v", out, err)
	}
	other := filepath.Join(dir, "other.json")
	os.WriteFile(other, []byte(`{"schema":"evalrun/summary/v0"}`), 0o666)
	if _, err := ReadSummary(other); err == nil || !strings.Contains(err.Error(), `schema "evalrun/summary/v0"`) {
		t.Errorf("another schema: %v", err)
	}
}
