package engine

import "testing"

// TestSWACellsPlaceAsLlamaCpp traces llama.cpp's iSWA cache for Gemma 3 1B
// (window 512) at n_ctx 2048 with 512-token micro-batches, as
// llama-perplexity runs it: a cache of pad(512+512, 256) = 1024 cells;
// the third micro-batch overwrites cells 0..511 (positions 0..511 are out
// of every new row's window), the fourth cells 512..1023.
func TestSWACellsPlaceAsLlamaCpp(t *testing.T) {
	if got := swaCacheSize(2048, 512); got != 1024 {
		t.Fatalf("swaCacheSize(2048, 512) = %d, want 1024", got)
	}
	if got := swaCacheSize(300, 512); got != 512 {
		t.Fatalf("swaCacheSize(300, 512) = %d, want 512 (the whole context, padded)", got)
	}
	c := newSWACells(1024, 512)
	for ub, first := range []int{0, 512, 0, 512} {
		cells, ok := c.place(ub*512, 512)
		if !ok || cells[0] != first || cells[511] != first+511 {
			t.Fatalf("micro-batch %d: cells %v..%v (ok %v), want %d..%d", ub, cells[0], cells[511], ok, first, first+511)
		}
	}
	// Position 1600 (cell 576) sees positions 1089..1600: cells 65..511 and
	// 512..576, not cell 64 (position 1088) nor cell 600 (position 1624).
	for cell, want := range map[int]bool{64: false, 65: true, 511: true, 576: true, 577: false} {
		if got := c.visible(cell, 1600); got != want {
			t.Errorf("position 1600 sees cell %d (position %d): %v, want %v", cell, c.pos[cell], got, want)
		}
	}
	// Truncating to 1800 frees cells 776..1023 and moves the head there;
	// the next token goes to cell 776.
	c.remove(1800, 1<<31-1)
	if cells, _ := c.place(1800, 1); cells[0] != 776 {
		t.Errorf("after truncating to 1800, position 1800 went to cell %d, want 776", cells[0])
	}
	// A single token at a time once the ring is full reuses the oldest cell.
	c.reset()
	for p := range 1100 {
		cells, ok := c.place(p, 1)
		if !ok {
			t.Fatalf("position %d: no room", p)
		}
		if want := p % 1024; p < 1024 && cells[0] != want {
			t.Fatalf("position %d in cell %d, want %d", p, cells[0], want)
		}
	}
	if c.used > 1024 || c.minPos() < 1100-1024 {
		t.Errorf("after 1100 positions: %d cells used, first position %d", c.used, c.minPos())
	}
}
