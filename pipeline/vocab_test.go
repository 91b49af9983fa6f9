package pipeline

import (
	"context"
	"errors"
	"io"
	"path/filepath"
	"strings"
	"testing"

	"github.com/evalrun/evalrun/internal/exitcode"
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
	_, err := Run(context.Background(), p, Options{OutDir: t.TempDir(), Stderr: io.Discard, Launch: engineLauncher})
	var ie *exitcode.InputError
	if !errors.As(err, &ie) || !strings.Contains(err.Error(), "not the one the host tokenizes with") || !strings.Contains(err.Error(), "reference.model") {
		t.Fatalf("reference with another vocabulary: err = %v, want an input error at reference.model", err)
	}
}
