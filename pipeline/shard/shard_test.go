package shard

import (
	"bytes"
	"strings"
	"testing"
)

// TestEveryUnitInExactlyOneShard for any number of shards, more shards than
// units included.
func TestEveryUnitInExactlyOneShard(t *testing.T) {
	for _, n := range []int{1, 2, 3, 7, 50} {
		for unit := range 40 {
			owners := 0
			for i := range n {
				if (Shard{i, n}).Owns(unit) {
					owners++
				}
			}
			if owners != 1 {
				t.Fatalf("unit %d has %d owners among %d shards", unit, owners, n)
			}
		}
	}
}

func TestParseAndEnv(t *testing.T) {
	if s, err := Parse("2/5"); err != nil || s != (Shard{2, 5}) {
		t.Fatalf("2/5: %v %v", s, err)
	}
	for _, bad := range []string{"5/5", "-1/3", "1", "a/b", "0/0", "1/200000"} {
		if _, err := Parse(bad); err == nil {
			t.Errorf("%q accepted", bad)
		}
	}
	env := func(m map[string]string) func(string) string { return func(k string) string { return m[k] } }
	if s, ok, err := FromEnv(env(map[string]string{EnvIndex: "3", EnvTotal: "4"})); !ok || err != nil || s != (Shard{3, 4}) {
		t.Fatalf("env: %v %v %v", s, ok, err)
	}
	if _, ok, err := FromEnv(env(nil)); ok || err != nil {
		t.Fatal("no variables must mean no shard")
	}
	if _, _, err := FromEnv(env(map[string]string{EnvIndex: "3"})); err == nil || !strings.Contains(err.Error(), EnvTotal) {
		t.Fatalf("index without total: %v", err)
	}
	if _, _, err := FromEnv(env(map[string]string{EnvIndex: "4", EnvTotal: "4"})); err == nil {
		t.Fatal("index 4 of 4 accepted")
	}
}

func manifestFile(t *testing.T) []byte {
	t.Helper()
	var b bytes.Buffer
	b.WriteString(`{"format":"evalrun/units/v1","spec_digest":"abc","shard":{"index":0,"total":2},"units":[{"id":"score/s/chunk-1","rows":3},{"id":"bench/x"}],"backends":[{"name":"x"}]}` + "\n")
	b.WriteString(`{"unit":"score/s/chunk-1","backend":"x","state":{"compared":3}}` + "\n")
	return b.Bytes()
}

func TestParseNamesTheLine(t *testing.T) {
	f, err := parse("d", "d/units.jsonl", bytes.NewReader(manifestFile(t)))
	if err != nil || len(f.Results) != 1 || f.Manifest.Shard != (Shard{0, 2}) {
		t.Fatalf("%+v %v", f, err)
	}
	bad := append(manifestFile(t), []byte("{\"unit\":\"x\",\"oops\":1}\n")...)
	if _, err := parse("d", "d/units.jsonl", bytes.NewReader(bad)); err == nil || !strings.Contains(err.Error(), "d/units.jsonl:3") {
		t.Fatalf("bad line: %v", err)
	}
	wrong := bytes.Replace(manifestFile(t), []byte(`"index":0`), []byte(`"index":2`), 1)
	if _, err := parse("d", "d/units.jsonl", bytes.NewReader(wrong)); err == nil || !strings.Contains(err.Error(), ":1:") {
		t.Fatalf("shard out of range: %v", err)
	}
}

func TestCollectChecksOwnership(t *testing.T) {
	f0, _ := parse("a", "a/units.jsonl", bytes.NewReader(manifestFile(t)))
	f1, _ := parse("b", "b/units.jsonl", bytes.NewReader(manifestFile(t)))
	f1.Manifest.Shard.Index, f1.Results = 1, nil
	set, err := Collect([]*File{f1, f0}, false)
	if err != nil || set.Files[0] != f0 || set.Owner[1] != f1 || len(set.Results[0]) != 1 {
		t.Fatalf("%+v %v", set, err)
	}
	f1.Results = append(f1.Results, Result{Unit: "score/s/chunk-1", Backend: "x"})
	if _, err := Collect([]*File{f0, f1}, false); err == nil || !strings.Contains(err.Error(), "not shard 1/2's") {
		t.Fatalf("a result for another shard's unit: %v", err)
	}
}

func FuzzParse(f *testing.F) {
	f.Add(manifestFile(&testing.T{}))
	f.Fuzz(func(t *testing.T, data []byte) {
		file, err := parse("d", "d/units.jsonl", bytes.NewReader(data))
		if err == nil {
			if _, err := Collect([]*File{file}, true); err != nil && !strings.Contains(err.Error(), "not shard") {
				t.Fatalf("a parsed file fails Collect: %v", err)
			}
		}
	})
}
