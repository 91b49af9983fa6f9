package resultsdir

import (
	"fmt"
	"strings"
	"testing"
)

// TestEveryUnitInExactlyOneShard for any number of shards, more shards than
// units included.
func TestEveryUnitInExactlyOneShard(t *testing.T) {
	units := make([]Unit, 40)
	for i := range units {
		units[i].ID = fmt.Sprint("u", i)
	}
	// Units that go with another (a bench with its speed_baseline's): a
	// chain, one going with a later unit, one with a unit not in the plan.
	units[37].With, units[38].With, units[39].With, units[5].With, units[6].With = "u36", "u37", "u2", "u30", "nowhere"
	for _, n := range []int{1, 2, 3, 7, 50} {
		owner := make([]int, len(units))
		for unit := range units {
			owners := 0
			for i := range n {
				if (Shard{i, n}).Owns(units, unit) {
					owners++
					owner[unit] = i
				}
			}
			if owners != 1 {
				t.Fatalf("unit %d has %d owners among %d shards", unit, owners, n)
			}
		}
		for a, b := range map[int]int{37: 36, 38: 36, 39: 2, 5: 30} {
			if owner[a] != owner[b] {
				t.Errorf("%d shards: unit %d goes with %d but is in shard %d, not %d", n, a, b, owner[a], owner[b])
			}
		}
		if n > 1 && owner[6] != 6%n {
			t.Errorf("%d shards: unit 6 goes with no unit of the plan, in shard %d", n, owner[6])
		}
	}
	// A cycle (refused by the spec's checks) still lands in one shard.
	units[10].With, units[11].With = "u11", "u10"
	if anchor(units, 10) != 10 || anchor(units, 11) != 10 {
		t.Errorf("a cycle of 10 and 11 anchors at %d and %d", anchor(units, 10), anchor(units, 11))
	}
}

func TestParseAndEnv(t *testing.T) {
	if s, err := ParseShard("2/5"); err != nil || s != (Shard{2, 5}) {
		t.Fatalf("2/5: %v %v", s, err)
	}
	for _, bad := range []string{"5/5", "-1/3", "1", "a/b", "0/0", "1/200000"} {
		if _, err := ParseShard(bad); err == nil {
			t.Errorf("%q accepted", bad)
		}
	}
	env := func(m map[string]string) func(string) string { return func(k string) string { return m[k] } }
	if s, ok, err := ShardFromEnv(env(map[string]string{EnvIndex: "3", EnvTotal: "4"})); !ok || err != nil || s != (Shard{3, 4}) {
		t.Fatalf("env: %v %v %v", s, ok, err)
	}
	if _, ok, err := ShardFromEnv(env(nil)); ok || err != nil {
		t.Fatal("no variables must mean no shard")
	}
	if _, _, err := ShardFromEnv(env(map[string]string{EnvIndex: "3"})); err == nil || !strings.Contains(err.Error(), EnvTotal) {
		t.Fatalf("index without total: %v", err)
	}
	if _, _, err := ShardFromEnv(env(map[string]string{EnvIndex: "4", EnvTotal: "4"})); err == nil {
		t.Fatal("index 4 of 4 accepted")
	}
}

func TestBenchedApart(t *testing.T) {
	units := []Unit{{ID: ScoreUnit("d", 0)}, {ID: BenchUnit("ref")}, {ID: BenchUnit("old")}, {ID: BenchUnit("new")}}
	if why := BenchedApart(units, 1, "old", "new"); why != "" {
		t.Fatalf("one process: %q", why)
	}
	// 2 shards: ref at 1, old at 2, new at 3: ref and new in shard 1, old in shard 0.
	if why := BenchedApart(units, 2, "ref", "new"); why != "" {
		t.Fatalf("both in shard 1/2: %q", why)
	}
	why := BenchedApart(units, 2, "old", "new")
	if !strings.Contains(why, "old was benched by shard 0/2 and new by shard 1/2") {
		t.Fatalf("split over shards: %q", why)
	}
	// The plan puts a bench with its speed_baseline's: not apart.
	units[3].With = BenchUnit("old")
	if why := BenchedApart(units, 2, "old", "new"); why != "" {
		t.Fatalf("new's bench goes with old's: %q", why)
	}
	if why := BenchedApart(units, 2, "old", "gone"); !strings.Contains(why, "has no bench") {
		t.Fatalf("a backend without a bench unit: %q", why)
	}
}
