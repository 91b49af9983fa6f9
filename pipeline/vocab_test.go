package pipeline

import (
	"path/filepath"
	"strings"
	"testing"
)

// The host sends the digest of the vocabulary it tokenizes with, and a
// plugin whose model reads another vocabulary refuses to load.
func TestPlanSendsTheHostsVocabulary(t *testing.T) {
	p := loadPlan(t, filepath.Join("..", "configs", "quantized.yaml"), map[string]string{"EVALRUN_BENCH_ENABLED": "false"})
	if len(p.VocabDigest) != 64 {
		t.Fatalf("plan vocabulary digest %q", p.VocabDigest)
	}
	for i := range p.Datasets {
		p.Datasets[i].Stream, p.Datasets[i].Prompts = p.Datasets[i].Stream[:0], p.Datasets[i].Prompts[:min(1, len(p.Datasets[i].Prompts))]
	}
	p.VocabDigest = strings.Repeat("0", 64)
	s := runEngine(t, p)
	if s.Reference.Status != StatusFailed || !strings.Contains(s.Reference.Error, "not the one the host tokenizes with") {
		t.Fatalf("reference with another vocabulary: status %s, error %q", s.Reference.Status, s.Reference.Error)
	}
	if s.Verdict.ExitCode != ExitBackend {
		t.Errorf("exit code %d, want %d", s.Verdict.ExitCode, ExitBackend)
	}
}
