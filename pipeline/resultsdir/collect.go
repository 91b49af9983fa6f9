package resultsdir

import (
	"cmp"
	"encoding/json"
	"fmt"
	"reflect"
	"slices"
	"strings"
)

// Set is the shards of one run, checked against each other: every unit of
// the plan has at most one owner, and the results come in plan order.
type Set struct {
	Manifest Manifest            // the plan all shards share
	Files    []*File             // by shard index
	Owner    []*File             // per unit of the plan: the shard that ran it; nil if none did
	Missing  []string            // ids of the units no shard ran (allowed with allowPartial)
	Results  [][]Result          // per unit of the plan: its candidates' results, in the owner's order
	Prompts  [][]json.RawMessage // per unit of the plan: its prompts.jsonl lines, in the owner's order
}

// Collect checks that the files are shards of one spec, that no unit was
// run twice and (unless allowPartial) that every shard went through its
// units and every unit was run, and orders their results by the plan.
// Errors name the shards and units concerned.
func Collect(files []*File, allowPartial bool) (*Set, error) {
	if len(files) == 0 {
		return nil, fmt.Errorf("no shards to merge")
	}
	for _, f := range files {
		if err := f.finished(); err != nil && !allowPartial {
			return nil, err
		}
	}
	files = slices.Clone(files)
	slices.SortStableFunc(files, func(a, b *File) int {
		return cmp.Or(cmp.Compare(a.Manifest.Shard.Total, b.Manifest.Shard.Total), cmp.Compare(a.Manifest.Shard.Index, b.Manifest.Shard.Index))
	})
	first := files[0]
	for _, f := range files[1:] {
		if f.Manifest.SpecDigest != first.Manifest.SpecDigest {
			return nil, fmt.Errorf("shards of different specs (models, datasets, backends, options or gates differ): %s has spec digest %.12s, %s has %.12s",
				first.Dir, first.Manifest.SpecDigest, f.Dir, f.Manifest.SpecDigest)
		}
		if !slices.Equal(f.Manifest.Units, first.Manifest.Units) || !slices.EqualFunc(f.Manifest.Backends, first.Manifest.Backends, sameBackend) {
			return nil, fmt.Errorf("%s and %s plan different units or backends under the same spec digest", first.Dir, f.Dir)
		}
	}
	units := first.Manifest.Units
	s := &Set{Manifest: first.Manifest, Files: files, Owner: make([]*File, len(units)), Results: make([][]Result, len(units)), Prompts: make([][]json.RawMessage, len(units))}
	var dups []string
	for _, f := range files {
		for i := range units {
			if !f.Manifest.Shard.Owns(units, i) {
				continue
			}
			if o := s.Owner[i]; o != nil {
				d := fmt.Sprintf("unit %s is in both %s (shard %s) and %s (shard %s)", units[i].ID, o.Dir, o.Manifest.Shard, f.Dir, f.Manifest.Shard)
				if o.Manifest.Shard == f.Manifest.Shard {
					d = fmt.Sprintf("shard %s given twice: %s and %s", f.Manifest.Shard, o.Dir, f.Dir)
				}
				if !slices.Contains(dups, d) {
					dups = append(dups, d)
				}
				continue
			}
			s.Owner[i] = f
		}
	}
	if len(dups) > 0 {
		return nil, fmt.Errorf("duplicate shards: %s", strings.Join(dups, "; "))
	}
	index := make(map[string]int, len(units))
	for i, u := range units {
		index[u.ID] = i
	}
	recorded := make([]bool, len(units))
	for _, f := range files {
		for _, r := range f.Units {
			i := index[r.Unit] // a unit of the plan (File.check)
			if s.Owner[i] != f {
				return nil, fmt.Errorf("%s: a result for unit %q, which is not shard %s's", f.Dir, r.Unit, f.Manifest.Shard)
			}
			s.Results[i], s.Prompts[i], recorded[i] = r.Results, r.Prompts, true
		}
	}
	for i, o := range s.Owner {
		if o == nil || !o.Complete && !recorded[i] {
			s.Missing = append(s.Missing, units[i].ID)
		}
	}
	if len(s.Missing) > 0 && !allowPartial {
		return nil, fmt.Errorf("incomplete: %s (--allow-partial merges what is there and marks the result partial)", s.describeMissing())
	}
	return s, nil
}

func sameBackend(a, b Backend) bool { return a.Name == b.Name && reflect.DeepEqual(a.Gates, b.Gates) }

// describeMissing names the missing shards, when every shard has the same
// total, and the missing units.
func (s *Set) describeMissing() string {
	total := s.Files[0].Manifest.Shard.Total
	var shards []string
	for _, f := range s.Files {
		if f.Manifest.Shard.Total != total {
			total = 0
		}
	}
	if total > 0 {
		have := map[int]bool{}
		for _, f := range s.Files {
			have[f.Manifest.Shard.Index] = true
		}
		for i := range total {
			if !have[i] {
				shards = append(shards, Shard{Index: i, Total: total}.String())
			}
		}
	}
	ids := s.Missing
	more := ""
	if len(ids) > 8 {
		ids, more = ids[:8], fmt.Sprintf(", and %d more", len(s.Missing)-8)
	}
	msg := fmt.Sprintf("%d of %d units were not run (%s%s)", len(s.Missing), len(s.Manifest.Units), strings.Join(ids, ", "), more)
	if len(shards) > 0 {
		word := "shard"
		if len(shards) > 1 {
			word = "shards"
		}
		msg = fmt.Sprintf("missing %s %s: %s", word, strings.Join(shards, ", "), msg)
	}
	return msg
}

// finished refuses the units file of a shard that was interrupted or killed
// before it went through its units, saying how to finish it.
func (f *File) finished() error {
	if f.Complete {
		return nil
	}
	sh := f.Manifest.Shard
	owned := 0
	for i := range f.Manifest.Units {
		if sh.Owns(f.Manifest.Units, i) {
			owned++
		}
	}
	return fmt.Errorf("shard %s in %s did not finish (interrupted or killed: %d of its %d units recorded): resume it with evalrun run SPEC --shard %s --out %s --resume, or merge with --allow-partial",
		sh, f.Dir, len(f.Units), owned, sh, f.Dir)
}
