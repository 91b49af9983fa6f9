package resultsdir

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"reflect"
	"slices"
	"strings"
	"testing"
)

const (
	testManifest = `{"format":"evalrun/units/v3","spec_digest":"abc","shard":{"index":0,"total":2},"units":[{"id":"score/s/chunk-1","rows":3},{"id":"bench/x"},{"id":"score/s/chunk-2","rows":3}],"backends":[{"name":"x"}]}`
	testRecord   = `{"unit":"score/s/chunk-1","results":[{"backend":"x","state":{"compared":3}}],"prompts":[{"backend":"x","id":"chunk-1"}]}`
)

// manifestFile is a complete units file: the manifest, one unit, the
// completion record.
func manifestFile(t *testing.T) []byte {
	t.Helper()
	return sealed(t, testManifest, testRecord, `{"complete":true}`)
}

// sealed is a units file of a manifest and records, each record given its
// digest as a Writer gives it.
func sealed(t *testing.T, manifest string, records ...string) []byte {
	t.Helper()
	var b bytes.Buffer
	b.WriteString(manifest + "\n")
	sum := sha256.Sum256([]byte(manifest))
	prev := sum[:]
	for _, r := range records {
		var rec Record
		if err := json.Unmarshal([]byte(r), &rec); err != nil {
			t.Fatal(err)
		}
		line, err := json.Marshal(rec)
		if err != nil {
			t.Fatal(err)
		}
		prev = chain(prev, line)
		rec.Digest = hex.EncodeToString(prev)
		line, _ = json.Marshal(rec)
		b.Write(append(line, '\n'))
	}
	return b.Bytes()
}

// TestEditedRecordsAreRefused: a record edited, dropped or moved in a units file is refused by
// the reader (resume and merge), naming the line.
func TestEditedRecordsAreRefused(t *testing.T) {
	good := sealed(t, `{"format":"evalrun/units/v3","spec_digest":"abc","shard":{"index":0,"total":1},"units":[{"id":"u1","rows":3},{"id":"u2","rows":3}],"backends":[{"name":"x"}]}`,
		`{"unit":"u1","results":[{"backend":"x","state":{"compared":3}}]}`,
		`{"unit":"u2","results":[{"backend":"x","state":{"compared":3}}]}`,
		`{"complete":true}`)
	if _, err := parse("d", "d/units.jsonl", bytes.NewReader(good)); err != nil {
		t.Fatal(err)
	}
	lines := bytes.Split(bytes.TrimSuffix(good, []byte("\n")), []byte("\n"))
	join := func(ls ...[]byte) []byte { return append(bytes.Join(ls, []byte("\n")), '\n') }
	for _, c := range []struct {
		name string
		data []byte
		want string
	}{
		{"edited state", bytes.Replace(good, []byte(`"compared":3}}],"digest"`), []byte(`"compared":2}}],"digest"`), 1), "d/units.jsonl:2: the record's digest does not match"},
		{"edited manifest", bytes.Replace(good, []byte(`"spec_digest":"abc"`), []byte(`"spec_digest":"abd"`), 1), "d/units.jsonl:2: the record's digest does not match"},
		{"dropped record", join(lines[0], lines[2], lines[3]), "d/units.jsonl:2: the record's digest does not match"},
		{"moved records", join(lines[0], lines[2], lines[1], lines[3]), "d/units.jsonl:2:"},
		{"no digest", join(lines[0], []byte(`{"unit":"u1","results":[{"backend":"x","state":{"compared":3}}]}`)), "d/units.jsonl:2: a record without its digest"},
	} {
		if _, err := parse("d", "d/units.jsonl", bytes.NewReader(c.data)); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %v, want %q", c.name, err, c.want)
		}
	}
}

func TestParseNamesTheLine(t *testing.T) {
	f, err := parse("d", "d/units.jsonl", bytes.NewReader(manifestFile(t)))
	if err != nil || len(f.Units) != 1 || len(f.Units[0].Results) != 1 || len(f.Units[0].Prompts) != 1 || !f.Complete || f.Note != "" || f.Manifest.Shard != (Shard{Index: 0, Total: 2}) {
		t.Fatalf("%+v %v", f, err)
	}
	for _, bad := range []struct{ line, why string }{
		{`{"unit":"score/s/chunk-2","oops":1}`, "oops"},
		{`{"unit":"score/s/chunk-9"}`, "not in the plan"},
		{`{"unit":"score/s/chunk-1"}`, "recorded twice"},
		{`{"unit":"score/s/chunk-2","results":[{"state":{}}]}`, "without a backend"},
		{`{"complete":true,"unit":"score/s/chunk-2"}`, "completion record with a unit"},
	} {
		// In the middle of the file a bad line is an error naming it.
		data := append(sealed(t, testManifest, testRecord), []byte(bad.line+"\n"+`{"complete":true}`+"\n")...)
		if _, err := parse("d", "d/units.jsonl", bytes.NewReader(data)); err == nil || !strings.Contains(err.Error(), "d/units.jsonl:3") || !strings.Contains(err.Error(), bad.why) {
			t.Errorf("bad line %s: %v", bad.line, err)
		}
	}
	after := append(manifestFile(t), []byte(`{"unit":"score/s/chunk-2"}`+"\n")...)
	if _, err := parse("d", "d/units.jsonl", bytes.NewReader(after)); err == nil || !strings.Contains(err.Error(), ":4: a line after the completion record") {
		t.Errorf("a unit after the completion record: %v", err)
	}
	wrong := bytes.Replace(manifestFile(t), []byte(`"index":0`), []byte(`"index":2`), 1)
	if _, err := parse("d", "d/units.jsonl", bytes.NewReader(wrong)); err == nil || !strings.Contains(err.Error(), ":1:") {
		t.Fatalf("shard out of range: %v", err)
	}
}

// TestTornLastLineIsIgnored: a run killed while writing a unit leaves a
// cut-short last line; the file reads as incomplete with the units before
// it and a note naming the line.
func TestTornLastLineIsIgnored(t *testing.T) {
	killed := sealed(t, testManifest, testRecord)
	for _, tail := range []string{
		`{"unit":"score/s/chunk-2","results":[{"backend":"x","sta`, // cut mid-write
		`{"unit":"score/s/chunk-2","res` + "\n",                    // cut at a page boundary, newline kept
		"\x00\x00\x00\x00",                                         // a crash's zero-filled tail
		`{"complete":tr`,
	} {
		f, err := parse("d", "d/units.jsonl", bytes.NewReader(append(slices.Clone(killed), tail...)))
		if err != nil || f.Complete || len(f.Units) != 1 || !strings.Contains(f.Note, "d/units.jsonl:3") || !strings.Contains(f.Note, "ignored") {
			t.Errorf("tail %q: %+v %v", tail, f, err)
		}
	}
	if f, err := parse("d", "d/units.jsonl", bytes.NewReader(killed)); err != nil || f.Complete || f.Note != "" || len(f.Units) != 1 {
		t.Errorf("killed between units: %+v %v", f, err)
	}
}

func TestCollectChecksOwnership(t *testing.T) {
	f0, _ := parse("a", "a/units.jsonl", bytes.NewReader(manifestFile(t)))
	f1, _ := parse("b", "b/units.jsonl", bytes.NewReader(manifestFile(t)))
	f1.Manifest.Shard.Index, f1.Units = 1, nil
	set, err := Collect([]*File{f1, f0}, false)
	if err != nil || set.Files[0] != f0 || set.Owner[1] != f1 || len(set.Results[0]) != 1 || len(set.Prompts[0]) != 1 || len(set.Missing) != 0 {
		t.Fatalf("%+v %v", set, err)
	}
	// A shard that did not finish is refused, or with allowPartial its
	// unrecorded units are missing.
	f0.Complete = false
	if _, err := Collect([]*File{f0, f1}, false); err == nil || !strings.Contains(err.Error(), "shard 0/2 in a did not finish (interrupted or killed: 1 of its 2 units recorded)") || !strings.Contains(err.Error(), "--resume") {
		t.Fatalf("an unfinished shard: %v", err)
	}
	if set, err := Collect([]*File{f0, f1}, true); err != nil || !slices.Equal(set.Missing, []string{"score/s/chunk-2"}) {
		t.Fatalf("an unfinished shard, allowPartial: %+v %v", set, err)
	}
	f1.Units = append(f1.Units, Record{Unit: "score/s/chunk-1"})
	if _, err := Collect([]*File{f0, f1}, true); err == nil || !strings.Contains(err.Error(), "not shard 1/2's") {
		t.Fatalf("a result for another shard's unit: %v", err)
	}
}

// TestWriterIsDurableAsItGoes: each unit is on disk under units.jsonl once
// Add returns (what a killed run leaves); a resumed run's rewrite replaces
// the old file only with its first new unit, and one that stops before
// that leaves the old file as it was.
func TestWriterIsDurableAsItGoes(t *testing.T) {
	dir := t.TempDir()
	m := Manifest{SpecDigest: "abc", Shard: Shard{Index: 0, Total: 1}, Units: []Unit{{ID: "u1", Rows: 2}, {ID: "u2", Rows: 2}, {ID: "bench/x"}}}
	w, err := CreateUnits(dir, m)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := ReadUnits(dir); err == nil {
		t.Fatal("a units file before its first unit")
	}
	w.Prompt([]byte(`{"id":"u1"}`))
	w.Add("u1", []Result{{Backend: "x", State: json.RawMessage(`{"n":1}`)}})
	w.Prompt([]byte(`{"id":"u2"}`))
	f, err := ReadUnits(dir) // as a run killed here leaves it
	if err != nil || f.Complete || len(f.Units) != 1 || f.Units[0].Unit != "u1" || string(f.Units[0].Prompts[0]) != `{"id":"u1"}` {
		t.Fatalf("after the first unit: %+v %v", f, err)
	}
	w.Abort()
	// The resume: the kept unit carried over; stopped before a new unit.
	w, _ = CreateUnits(dir, m)
	w.Carry(f.Units[0])
	w.Abort()
	if g, err := ReadUnits(dir); err != nil || !reflect.DeepEqual(g, f) {
		t.Fatalf("an aborted resume changed the file: %+v %v", g, err)
	}
	w, _ = CreateUnits(dir, m)
	w.Carry(f.Units[0])
	w.Add("u2", nil)
	if err := w.Commit(true); err != nil {
		t.Fatal(err)
	}
	g, err := ReadUnits(dir)
	if err != nil || !g.Complete || len(g.Units) != 2 || g.Units[1].Unit != "u2" || len(g.Units[1].Prompts) != 0 {
		t.Fatalf("resumed: %+v %v", g, err)
	}
	if left := w.Leftovers(dir); len(left) != 0 {
		t.Fatalf("leftovers %v", left)
	}
}

func FuzzParse(f *testing.F) {
	f.Add(manifestFile(&testing.T{}))
	f.Add(bytes.TrimSuffix(manifestFile(&testing.T{}), []byte("true}\n")))
	f.Fuzz(func(t *testing.T, data []byte) {
		file, err := parse("d", "d/units.jsonl", bytes.NewReader(data))
		if err == nil {
			if _, err := Collect([]*File{file}, true); err != nil && !strings.Contains(err.Error(), "not shard") {
				t.Fatalf("a parsed file fails Collect: %v", err)
			}
		}
	})
}

// Two backends' speeds can be judged against each other only when one
// shard interleaved their benches.
