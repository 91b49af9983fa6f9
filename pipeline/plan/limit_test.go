package plan

import (
	"context"
	"slices"
	"testing"

	"github.com/evalrun/evalrun/internal/testkit"
	"github.com/evalrun/evalrun/pipeline/spec"
)

// evalrun run --limit N cuts every dataset to its first N records (a score
// set's records before chunking, a generate set's prompts); Limited is N
// only when records were left out, and a dataset's own smaller limit stays
// the spec's, not a cut.
func TestLimitRecords(t *testing.T) {
	plan := func(n int, ownLimit int) *Plan {
		t.Helper()
		s, err := spec.Load(context.Background(), testkit.Path("configs", "default.yaml"))
		if err != nil {
			t.Fatal(err)
		}
		s.Datasets[1].Limit = ownLimit
		if n > 0 {
			if err := s.LimitRecords(n); err != nil {
				t.Fatal(err)
			}
		}
		p, err := New(context.Background(), s)
		if err != nil {
			t.Fatal(err)
		}
		return p
	}
	full := plan(0, 0)
	stories, openings := full.Datasets[0], full.Datasets[1]
	if stories.Records != 12 || openings.Records != 10 || full.Limited() != 0 {
		t.Fatalf("full: %d and %d records, limited %d", stories.Records, openings.Records, full.Limited())
	}

	p := plan(2, 0)
	s, g := p.Datasets[0], p.Datasets[1]
	if p.Limited() != 2 || s.Records != 2 || g.Records != 2 || len(g.Prompts) != 2 || !s.Cut || !g.Cut {
		t.Fatalf("--limit 2: limited %d, records %d and %d, %d prompts", p.Limited(), s.Records, g.Records, len(g.Prompts))
	}
	if s.Tokens >= stories.Tokens || len(s.Stream) != s.Tokens || !slices.Equal(s.Stream, stories.Stream[:s.Tokens]) {
		t.Errorf("--limit 2: score stream of %d tokens is not the first records' (of %d)", s.Tokens, stories.Tokens)
	}
	if g.Prompts[1].ID != openings.Prompts[1].ID {
		t.Errorf("--limit 2: prompts %v", g.Prompts)
	}

	if p := plan(12, 0); p.Limited() != 0 || p.Datasets[0].Records != 12 || p.Datasets[1].Records != 10 {
		t.Errorf("--limit 12 left nothing out, but limited %d (%d, %d records)", p.Limited(), p.Datasets[0].Records, p.Datasets[1].Records)
	}
	// openings' own limit 1 is smaller: the spec runs one prompt, --limit
	// cuts only stories.
	if p := plan(3, 1); p.Limited() != 3 || p.Datasets[1].Records != 1 || p.Datasets[1].Cut || !p.Datasets[0].Cut {
		t.Errorf("own limit 1 and --limit 3: limited %d, openings %d records (cut %v)", p.Limited(), p.Datasets[1].Records, p.Datasets[1].Cut)
	}
}
