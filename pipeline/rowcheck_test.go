package pipeline

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/evalrun/evalrun/backend"
	"github.com/evalrun/evalrun/internal/exitcode"
	"github.com/evalrun/evalrun/pipeline/spec"
	"github.com/evalrun/evalrun/pipeline/summary"
)

// lyingFake is a fake whose Load reports another vocabulary, or whose
// Eval sends one row a logit short, or a call one row more or less than
// asked for: the host must notice each, fail only that backend, and keep
// every other result.
type lyingFake struct {
	*fakeBackend
	loadVocab int   // >0: the n_vocab Load reports
	shortRow  int64 // >0: the row with this number arrives one logit short
	extraRow  bool  // every call sends a row more than asked for
	floodRows bool  // every call sends rows past the last until cancelled
	dropRow   bool  // every call leaves its last row out
}

func (l *lyingFake) Load(ctx context.Context, req backend.LoadRequest) (backend.LoadResult, error) {
	res, err := l.fakeBackend.Load(ctx, req)
	if l.loadVocab > 0 {
		res.Model.NVocab = l.loadVocab
	}
	return res, err
}

func (l *lyingFake) Eval(ctx context.Context, req backend.EvalRequest, emit func(backend.Logits) error) error {
	err := l.fakeBackend.Eval(ctx, req, func(g backend.Logits) error {
		if l.shortRow > 0 && l.rows.Load() == l.shortRow {
			g.Values = g.Values[:len(g.Values)-1]
		}
		if l.dropRow && g.Index == len(req.Tokens)-1 {
			return nil
		}
		return emit(g)
	})
	if err == nil && l.extraRow {
		err = emit(backend.Logits{Index: len(req.Tokens), Values: make([]float32, l.nVocab)})
	}
	for err == nil && l.floodRows && ctx.Err() == nil {
		err = emit(backend.Logits{Index: len(req.Tokens), Values: make([]float32, l.nVocab)})
	}
	return err
}

func TestRunChecksTheVocabularyAtLoadAndEveryRow(t *testing.T) {
	liars := map[string]*lyingFake{
		"ref":   {fakeBackend: newFake(64)},
		"good":  {fakeBackend: newFake(64)},
		"vocab": {fakeBackend: newFake(64), loadVocab: 63},
		"short": {fakeBackend: newFake(64), shortRow: 7},
		"extra": {fakeBackend: newFake(64), extraRow: true},
		"drop":  {fakeBackend: newFake(64), dropRow: true},
		"flood": {fakeBackend: newFake(64), floodRows: true},
	}
	launch := func(_ context.Context, b spec.Backend, _ Launch) (backend.Backend, Process, error) {
		l, ok := liars[b.Name]
		if !ok {
			return nil, nil, errors.New("no such test backend " + b.Name)
		}
		return l, fakeProc{l.fakeBackend}, nil
	}
	p := testPlan(t, 64, 256, 32, 4,
		spec.Backend{Name: "vocab", Plugin: "fake"},
		spec.Backend{Name: "good", Plugin: "fake"},
		spec.Backend{Name: "short", Plugin: "fake"},
		spec.Backend{Name: "extra", Plugin: "fake"},
		spec.Backend{Name: "drop", Plugin: "fake"},
		spec.Backend{Name: "flood", Plugin: "fake"})
	res, err := Run(context.Background(), p, Options{OutDir: t.TempDir(), Stderr: &strings.Builder{}, Launch: launch, Version: "test"})
	if err != nil {
		t.Fatal(err)
	}
	s := readSummary(t, res.Dir)
	by := map[string]summary.BackendSummary{}
	for _, b := range s.Backends {
		by[b.Name] = b
	}
	if b := by["vocab"]; b.Status != summary.StatusFailed || !strings.Contains(b.Error, "the plugin reads a vocabulary of 63 tokens, the host's has 64") || b.Accuracy != nil && b.Accuracy.Tokens > 0 {
		t.Errorf("a plugin reporting another vocabulary at Load: status %s, error %q", b.Status, b.Error)
	}
	if b := by["short"]; b.Status != summary.StatusFailed || !strings.Contains(b.Error, "the plugin sent a row of 63 logits, the vocabulary has 64") {
		t.Errorf("a short row: status %s, error %q", b.Status, b.Error)
	} else if b.Accuracy == nil || b.Accuracy.Tokens != 6 || b.Accuracy.Complete {
		t.Errorf("a short row: the 6 rows before it must be kept as an incomplete comparison: %+v", b.Accuracy)
	}
	for name, want := range map[string]string{"extra": "the plugin sent 1 more logits rows than requested", "drop": "the plugin sent fewer logits rows than requested",
		"flood": "more logits rows than requested"} {
		if b := by[name]; b.Status != summary.StatusFailed || !strings.Contains(b.Error, want) {
			t.Errorf("a call with a row %s: status %s, error %q, want %q", name, b.Status, b.Error, want)
		}
	}
	if g := by["good"]; g.Status != summary.StatusOK || !g.Accuracy.Complete {
		t.Errorf("the healthy backend: %s %+v", g.Status, g.Accuracy)
	}
	if s.Verdict.ExitCode != exitcode.Backend {
		t.Errorf("verdict %+v, want exit %d", s.Verdict, exitcode.Backend)
	}
}
