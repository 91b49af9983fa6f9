package engine

import "testing"

// TestWeightsLoadGivesTheSameLogits: a copy of the file and its mapping
// are the same bytes, so the same logits, and Open does what it is told.
func TestWeightsLoadGivesTheSameLogits(t *testing.T) {
	ids := p3Tokens(t)
	var ref [][]float32
	for _, w := range []WeightsLoad{WeightsMmap, WeightsCopy, WeightsAuto} {
		m, err := Open(modelPath("Q8_0"), Options{Numerics: GGML, Threads: 1, Weights: w})
		if err != nil {
			t.Fatal(err)
		}
		switch {
		case w == WeightsMmap && m.File().Copied():
			t.Errorf("weights mmap: the file was copied")
		case w == WeightsCopy && !m.File().Copied():
			t.Errorf("weights copy: the file was mapped")
		}
		got := decodeAll(t, m, ids)
		m.Close()
		if ref == nil {
			ref = got
			continue
		}
		requireSameBits(t, "weights "+w.String(), "mapped", got, ref)
	}
}

// TestWeightsAutoCopiesWhatFits: auto copies only with huge pages offered
// and a file of at most a quarter of the available memory (known).
func TestWeightsAutoCopiesWhatFits(t *testing.T) {
	const gib = 1 << 30
	for _, c := range []struct {
		size, avail int64
		huge, want  bool
	}{
		{1 * gib, 16 * gib, true, true},
		{4 * gib, 16 * gib, true, true},
		{4*gib + 1, 16 * gib, true, false}, // a 4B F16 model on a 16 GiB board
		{1 * gib, 16 * gib, false, false},  // THP "never": a copy would gain nothing
		{1 * gib, 0, true, false},          // MemAvailable unknown
	} {
		if got := copyPays(c.size, c.avail, c.huge); got != c.want {
			t.Errorf("copyPays(%d, %d, %v) = %v, want %v", c.size, c.avail, c.huge, got, c.want)
		}
	}
	if memAvailable() <= 0 && hugePagesOffered() {
		t.Error("huge pages offered but no MemAvailable read")
	}
}

func TestParseWeightsLoad(t *testing.T) {
	for s, want := range map[string]WeightsLoad{"auto": WeightsAuto, "mmap": WeightsMmap, "COPY": WeightsCopy} {
		if got, err := ParseWeightsLoad(s); err != nil || got != want {
			t.Errorf("ParseWeightsLoad(%q) = %v, %v", s, got, err)
		}
	}
	if _, err := ParseWeightsLoad("mlock"); err == nil || err.Error() != `"mlock" is not one of auto, mmap, copy` {
		t.Errorf("ParseWeightsLoad(mlock): %v", err)
	}
}
