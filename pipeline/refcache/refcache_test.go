package refcache

import (
	"math"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"
)

func key(tokens ...int32) Key {
	return Key{ModelSHA256: "m", Plugin: "cpu", PluginVersion: "1", Device: "cpu", Options: map[string]any{"numerics": "exact"}, Tokens: tokens, LogitsFrom: 1, NVocab: 3}
}

var rows = [][]float32{{1, float32(math.Inf(-1)), -0.5}, {float32(math.NaN()), 2, 3}}

func TestPutGetIsBitExact(t *testing.T) {
	c, err := Open(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	if _, ok, err := c.Get(key(1, 2, 3), 2); ok || err != nil {
		t.Fatalf("empty cache: ok %v err %v", ok, err)
	}
	if err := c.Put(key(1, 2, 3), rows); err != nil {
		t.Fatal(err)
	}
	got, ok, err := c.Get(key(1, 2, 3), 2)
	if !ok || err != nil {
		t.Fatalf("ok %v err %v", ok, err)
	}
	for i, v := range append(rows[0], rows[1]...) {
		if math.Float32bits(v) != math.Float32bits(got[i]) {
			t.Fatalf("value %d: %v, want %v", i, got[i], v)
		}
	}
	for _, other := range []Key{key(1, 2, 4), func() Key { k := key(1, 2, 3); k.PluginVersion = "2"; return k }(),
		func() Key { k := key(1, 2, 3); k.Options = map[string]any{"numerics": "ggml"}; return k }()} {
		if _, ok, _ := c.Get(other, 2); ok {
			t.Fatalf("a different key hit: %+v", other)
		}
	}
	if c.Stats != (Stats{Hits: 1, Misses: 4, Written: 1}) {
		t.Fatalf("stats %+v", c.Stats)
	}
}

// TestDamagedEntryIsRecomputed: a truncated entry, or one with a flipped
// bit, is a miss with a warning, and is removed.
func TestDamagedEntryIsRecomputed(t *testing.T) {
	c, _ := Open(t.TempDir())
	k := key(7)
	path := c.path(k.ID())
	for _, damage := range []func([]byte) []byte{
		func(b []byte) []byte { return b[:len(b)-5] },
		func(b []byte) []byte { b[12] ^= 1; return b },
	} {
		if err := c.Put(k, rows); err != nil {
			t.Fatal(err)
		}
		data, _ := os.ReadFile(path)
		if err := os.WriteFile(path, damage(data), 0o644); err != nil {
			t.Fatal(err)
		}
		if _, ok, err := c.Get(k, 2); ok || err == nil || !strings.Contains(err.Error(), path) {
			t.Fatalf("damaged entry: ok %v err %v", ok, err)
		}
		if _, err := os.Stat(path); !os.IsNotExist(err) {
			t.Fatal("a damaged entry must be removed")
		}
	}
	if c.Stats.Corrupt != 2 {
		t.Fatalf("stats %+v", c.Stats)
	}
}

// TestConcurrentWritersLeaveOneValidEntry: shards sharing a cache write the
// same key at once; readers always find a complete entry or none.
func TestConcurrentWritersLeaveOneValidEntry(t *testing.T) {
	dir := t.TempDir()
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() {
			c, _ := Open(dir)
			for range 20 {
				if err := c.Put(key(9), rows); err != nil {
					t.Error(err)
				}
				if _, _, err := c.Get(key(9), 2); err != nil {
					t.Error(err)
				}
			}
		})
	}
	wg.Wait()
	entries, err := List(dir)
	if err != nil || len(entries) != 1 {
		t.Fatalf("%d entries (%v), want 1 and no temporary files", len(entries), err)
	}
}

func TestPruneByAgeThenSize(t *testing.T) {
	dir := t.TempDir()
	c, _ := Open(dir)
	now := time.Now()
	for i := range 4 {
		k := key(int32(i))
		if err := c.Put(k, rows); err != nil {
			t.Fatal(err)
		}
		old := now.Add(-time.Duration(10-i) * time.Hour) // entry 0 the oldest
		os.Chtimes(c.path(k.ID()), old, old)
	}
	entries, _ := List(dir)
	size := entries[0].Size
	removed, err := Prune(dir, 8*time.Hour, 0, now)
	if err != nil || len(removed) != 2 || filepath.Base(removed[0].Path) != key(0).ID() {
		t.Fatalf("age: removed %v %v", removed, err)
	}
	removed, err = Prune(dir, 0, size, now)
	if err != nil || len(removed) != 1 || filepath.Base(removed[0].Path) != key(2).ID() {
		t.Fatalf("size: removed %v %v", removed, err)
	}
	if left, _ := List(dir); len(left) != 1 || filepath.Base(left[0].Path) != key(3).ID() {
		t.Fatalf("left %v", left)
	}
}
