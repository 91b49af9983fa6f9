package resultsdir

import (
	"fmt"
	"maps"
	"os"
	"slices"
	"strconv"
	"strings"
)

// Shard is shard Index (0-based) of Total.
type Shard struct {
	Index int `json:"index"`
	Total int `json:"total"`
}

func (s Shard) String() string { return fmt.Sprintf("%d/%d", s.Index, s.Total) }

// MaxShards bounds N: a run is not split into more shards than this.
const MaxShards = 100_000

// ParseShard reads "I/N" (0 <= I < N).
func ParseShard(v string) (Shard, error) {
	i, n, ok := strings.Cut(v, "/")
	if !ok {
		return Shard{}, fmt.Errorf("shard %q: want I/N, e.g. 0/4 (I counts from 0)", v)
	}
	return newShard(v, i, n)
}

func newShard(what, i, n string) (Shard, error) {
	index, err1 := strconv.Atoi(strings.TrimSpace(i))
	total, err2 := strconv.Atoi(strings.TrimSpace(n))
	switch {
	case err1 != nil || err2 != nil:
		return Shard{}, fmt.Errorf("shard %s: want integers I/N", what)
	case total < 1 || total > MaxShards:
		return Shard{}, fmt.Errorf("shard %s: N must be 1..%d", what, MaxShards)
	case index < 0 || index >= total:
		return Shard{}, fmt.Errorf("shard %s: I must be 0..%d (shards count from 0)", what, total-1)
	}
	return Shard{Index: index, Total: total}, nil
}

// Environment variables that select a shard without a flag: a Kubernetes
// Indexed Job sets JOB_COMPLETION_INDEX in each pod; the total comes from
// EVALRUN_SHARDS.
const (
	EnvIndex = "JOB_COMPLETION_INDEX"
	EnvTotal = "EVALRUN_SHARDS"
)

// ShardFromEnv reads the shard from EnvIndex and EnvTotal. ok is false when
// neither is set; one without the other is an error.
func ShardFromEnv(getenv func(string) string) (s Shard, ok bool, err error) {
	if getenv == nil {
		getenv = os.Getenv
	}
	i, n := getenv(EnvIndex), getenv(EnvTotal)
	switch {
	case i == "" && n == "":
		return Shard{}, false, nil
	case n == "":
		return Shard{}, false, fmt.Errorf("%s=%s is set but %s (the number of shards) is not", EnvIndex, i, EnvTotal)
	case i == "":
		return Shard{}, false, fmt.Errorf("%s=%s is set but %s (this shard's index) is not", EnvTotal, n, EnvIndex)
	}
	s, err = newShard(fmt.Sprintf("%s=%s %s=%s", EnvIndex, i, EnvTotal, n), i, n)
	return s, err == nil, err
}

// Owns reports whether the shard runs unit i of units: the unit whose
// position is i modulo Total, or, for a unit that goes With another, the
// same shard as that one (anchor).
func (s Shard) Owns(units []Unit, i int) bool { return anchor(units, i)%s.Total == s.Index }

// anchor is the position whose remainder decides unit i's shard: i, or
// the anchor of the unit it goes with. A cycle (which the spec's checks
// refuse) anchors at its smallest position.
func anchor(units []Unit, i int) int {
	seen := map[int]bool{}
	for !seen[i] && units[i].With != "" {
		seen[i] = true
		next := slices.IndexFunc(units, func(u Unit) bool { return u.ID == units[i].With })
		if next < 0 {
			return i
		}
		i = next
	}
	if seen[i] {
		return slices.Min(slices.Collect(maps.Keys(seen)))
	}
	return i
}

// Unit ids. Score chunks count from 1 as prompts.jsonl names them.
func ScoreUnit(dataset string, chunk int) string {
	return "score/" + dataset + "/chunk-" + strconv.Itoa(chunk+1)
}
func GenerateUnit(dataset, id string) string { return "generate/" + dataset + "/" + id }
func BenchUnit(backend string) string        { return "bench/" + backend }

// BenchedApart says why the benches of backends a and b, split into total
// shards, were not interleaved round by round in one process ("" when they
// were): a shard benches only its own backends, so comparing their speeds
// would compare two processes, perhaps two machines.
func BenchedApart(units []Unit, total int, a, b string) string {
	owner := func(name string) int {
		if i := slices.IndexFunc(units, func(u Unit) bool { return u.ID == BenchUnit(name) }); i >= 0 {
			return anchor(units, i) % total
		}
		return -1
	}
	oa, ob := owner(a), owner(b)
	switch {
	case total <= 1 || oa == ob:
		return ""
	case oa < 0 || ob < 0:
		return fmt.Sprintf("%s or %s has no bench in this run's plan", a, b)
	}
	return fmt.Sprintf("%s was benched by shard %d/%d and %s by shard %d/%d, not interleaved in one process", a, oa, total, b, ob, total)
}

// PromptUnit is the unit a prompts.jsonl line belongs to (its mode, dataset
// and id).
func PromptUnit(mode, dataset, id string) string { return mode + "/" + dataset + "/" + id }

// Unit is one unit of the plan.
type Unit struct {
	ID   string `json:"id"`
	Rows int    `json:"rows,omitempty"` // positions a candidate compares in it
	// With is the unit whose shard runs this one too: a backend's bench
	// goes with the bench of its speed_baseline, so that one process
	// interleaves the two (Owns).
	With string `json:"with,omitempty"`
}
