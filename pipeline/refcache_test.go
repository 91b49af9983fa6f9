package pipeline

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"testing"

	"github.com/evalrun/evalrun/pipeline/refcache"

	"github.com/evalrun/evalrun/pipeline/summary"
)

// TestReferenceCache: a second run with the same cache computes no score
// chunk on the reference and gives the same summary; a truncated entry is
// detected and that chunk computed again.
func TestReferenceCache(t *testing.T) {
	p := shardPlan(t)
	for i := range p.Datasets[0].Stream { // no two chunks alike (identical chunks share an entry)
		p.Datasets[0].Stream[i] = int32((i*i*7 + i*3 + 1) % 61)
	}
	p.Spec.Cache = filepath.Join(t.TempDir(), "cache")
	run := func(name string) (*summary.Summary, int64) {
		fakes := shardFakes()
		var errb bytes.Buffer
		res, err := Run(context.Background(), p, Options{OutDir: filepath.Join(p.Spec.Output.Dir, name), Stderr: &errb, Launch: fakeLauncher(fakes), Version: "test"})
		if err != nil {
			t.Fatalf("%s: %v\n%s", name, err, errb.String())
		}
		return res.Summary, fakes["ref"].evals.Load()
	}
	normal := func(s *summary.Summary) string {
		c := *s
		c.Reference.Cache, c.Reference.Eval = nil, nil // the plugin's calls: fewer with a warm cache
		return comparable(t, &c)
	}
	cold, coldCalls := run("cold")
	warm, warmCalls := run("warm")
	t.Logf("reference Eval calls: cold %d, warm %d; cache cold %+v, warm %+v", coldCalls, warmCalls, *cold.Reference.Cache, *warm.Reference.Cache)
	if *cold.Reference.Cache != (refcache.Stats{Misses: 8, Written: 8}) || *warm.Reference.Cache != (refcache.Stats{Hits: 8}) {
		t.Fatalf("cache stats: cold %+v, warm %+v", *cold.Reference.Cache, *warm.Reference.Cache)
	}
	if coldCalls-warmCalls != 8 {
		t.Fatalf("the warm run called the reference %d times, the cold %d: want 8 score chunks fewer", warmCalls, coldCalls)
	}
	if a, b := normal(cold), normal(warm); a != b {
		t.Fatalf("warm summary differs:\n%s", lineDiff(a, b))
	}

	entries, err := refcache.List(p.Spec.Cache)
	if err != nil || len(entries) != 8 {
		t.Fatalf("%d entries: %v", len(entries), err)
	}
	data, _ := os.ReadFile(entries[3].Path)
	if err := os.WriteFile(entries[3].Path, data[:len(data)/2], 0o644); err != nil {
		t.Fatal(err)
	}
	again, againCalls := run("truncated")
	if *again.Reference.Cache != (refcache.Stats{Hits: 7, Misses: 1, Corrupt: 1, Written: 1}) || againCalls != warmCalls+1 {
		t.Fatalf("truncated entry: cache %+v, %d reference calls", *again.Reference.Cache, againCalls)
	}
	if a, b := normal(cold), normal(again); a != b {
		t.Fatalf("summary after recomputing differs:\n%s", lineDiff(a, b))
	}
}
