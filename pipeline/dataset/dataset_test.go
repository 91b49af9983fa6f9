package dataset

import (
	"errors"
	"io"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
)

// readAll reads every record, stopping at the first error.
func readAll(r *Reader) ([]Record, error) {
	var out []Record
	for {
		rec, err := r.Next()
		if errors.Is(err, io.EOF) {
			return out, nil
		}
		if err != nil {
			return out, err
		}
		out = append(out, rec)
	}
}

func TestGoodLines(t *testing.T) {
	in := "\xef\xbb\xbf{\"id\": \"a\", \"text\": \"Once upon a time\"}\n" +
		"\n" +
		"   \t \r\n" +
		"{\"tokens\": [1, 403, 0, 2147483647], \"id\": \"b\"}\r\n" +
		"  {\"id\":\"c\",\"text\":\"caf\\u00e9 \\\"quoted\\\"\\nnext\"}  \n" +
		"{\"id\": \"d\", \"text\": \"no newline at the end\"}"
	recs, err := readAll(NewReader(strings.NewReader(in), "x.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	want := []Record{
		{ID: "a", Text: "Once upon a time", Line: 1},
		{ID: "b", Tokens: []int32{1, 403, 0, 2147483647}, Line: 4},
		{ID: "c", Text: "café \"quoted\"\nnext", Line: 5},
		{ID: "d", Text: "no newline at the end", Line: 6},
	}
	if !reflect.DeepEqual(recs, want) {
		t.Errorf("got  %+v\nwant %+v", recs, want)
	}
	if recs[0].Tokens != nil {
		t.Error("a text record must have nil Tokens")
	}
}

func TestBadLines(t *testing.T) {
	const good = `{"id": "ok", "text": "fine"}` + "\n"
	cases := []struct{ line, want string }{
		{`{"id": "a", "text": "x"`, "x.jsonl:2: invalid JSON: the line ends inside the object"},
		{`{"id": "a" "text": "x"}`, "x.jsonl:2: invalid JSON near column 11: invalid character '\"' after object key:value pair"},
		{`not json`, "x.jsonl:2: invalid JSON near column 2: invalid character 'o' in literal null (expecting 'u')"},
		{`["a", "b"]`, `x.jsonl:2: want a JSON object {"id": ..., "text": ...} per line`},
		{`"just a string"`, `x.jsonl:2: want a JSON object`},
		{`{"id": "a", "txt": "x"}`, `x.jsonl:2: unknown field "txt" (want id, and text or tokens)`},
		{`{"id": "a", "ID": "b", "text": "x"}`, `x.jsonl:2: unknown field "ID"`},
		{`{"text": "x"}`, `x.jsonl:2: missing "id"`},
		{`{"id": "", "text": "x"}`, `x.jsonl:2: id is empty`},
		{`{"id": 7, "text": "x"}`, `x.jsonl:2: id: want a string, got 7`},
		{`{"id": null, "text": "x"}`, `x.jsonl:2: id: want a string, got null`},
		{`{"id": "ok", "text": "again"}`, `x.jsonl:2: duplicate id "ok" (first on line 1)`},
		{`{"id": "a", "id": "b", "text": "x"}`, `x.jsonl:2: field "id" given twice`},
		{`{"id": "a", "text": "x", "tokens": [1]}`, `x.jsonl:2: has both "text" and "tokens"; give one`},
		{`{"id": "a"}`, `x.jsonl:2: has neither "text" nor "tokens"`},
		{`{"id": "a", "text": ""}`, `x.jsonl:2: text is empty`},
		{`{"id": "a", "text": ["x"]}`, `x.jsonl:2: text: want a string, got ["x"]`},
		{`{"id": "a", "tokens": []}`, `x.jsonl:2: tokens is empty`},
		{`{"id": "a", "tokens": [1, -5]}`, `x.jsonl:2: tokens: item 1: negative token id -5`},
		{`{"id": "a", "tokens": [1.5]}`, `x.jsonl:2: tokens: item 0: want an integer token id, got 1.5`},
		{`{"id": "a", "tokens": [1e3]}`, `x.jsonl:2: tokens: item 0: want an integer token id, got 1e3`},
		{`{"id": "a", "tokens": ["1"]}`, `x.jsonl:2: tokens: item 0: want an integer token id, got "1"`},
		{`{"id": "a", "tokens": [2147483648]}`, `x.jsonl:2: tokens: item 0: token id 2147483648 is too large`},
		{`{"id": "a", "tokens": [99999999999999999999999]}`, `x.jsonl:2: tokens: item 0: want an integer token id`},
		{`{"id": "a", "tokens": "1 2 3"}`, `x.jsonl:2: tokens: want a list of token ids, got "1 2 3"`},
		{`{"id": "a", "text": "x"} {"id": "b", "text": "y"}`, `x.jsonl:2: more than one JSON value on the line`},
		{"{\"id\": \"a\", \"text\": \"\xff\"}", `x.jsonl:2: invalid UTF-8`},
	}
	for _, c := range cases {
		r := NewReader(strings.NewReader(good+c.line+"\n"+good), "x.jsonl")
		recs, err := readAll(r)
		if err == nil {
			t.Errorf("%s: no error", c.line)
			continue
		}
		if !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s:\n got %v\nwant %s", c.line, err, c.want)
		}
		var de *Error
		if !errors.As(err, &de) || de.Line != 2 || de.File != "x.jsonl" {
			t.Errorf("%s: error %#v is not an *Error on line 2", c.line, err)
		}
		if len(recs) != 1 {
			t.Errorf("%s: %d records before the error, want 1", c.line, len(recs))
		}
		if _, again := r.Next(); again != err {
			t.Errorf("%s: Next after an error = %v, want the same error", c.line, again)
		}
	}
}

func TestLongLines(t *testing.T) {
	// A line of exactly MaxLineBytes is accepted...
	prefix, suffix := `{"id": "big", "text": "`, `"}`
	text := strings.Repeat("a", MaxLineBytes-len(prefix)-len(suffix))
	recs, err := readAll(NewReader(strings.NewReader(prefix+text+suffix+"\n"), "big.jsonl"))
	if err != nil || len(recs) != 1 || len(recs[0].Text) != len(text) {
		t.Fatalf("line of MaxLineBytes: %d records, %v", len(recs), err)
	}
	// ...one byte more is an error naming its line.
	in := `{"id": "a", "text": "x"}` + "\n" + prefix + text + "a" + suffix + "\n"
	_, err = readAll(NewReader(strings.NewReader(in), "big.jsonl"))
	if err == nil || err.Error() != "big.jsonl:2: line longer than 16 MiB" {
		t.Fatalf("got %v", err)
	}
}

// countingReader counts how many bytes the Reader pulled from it.
type countingReader struct {
	r io.Reader
	n int
}

func (c *countingReader) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	c.n += n
	return n, err
}

func TestStreams(t *testing.T) {
	line := `{"id": "x", "text": "a story line that is long enough to matter"}` + "\n"
	// 40 MiB of records: streaming must not read it all to return the first.
	body := strings.NewReader(strings.Repeat(line, (40<<20)/len(line)))
	src := &countingReader{r: io.MultiReader(strings.NewReader(`{"id": "first", "tokens": [1, 2]}`+"\n"), body)}
	rec, err := NewReader(src, "big.jsonl").Next()
	if err != nil || rec.ID != "first" {
		t.Fatalf("%+v %v", rec, err)
	}
	if src.n > 1<<20 {
		t.Errorf("read %d bytes to return the first record", src.n)
	}
}

func TestOpen(t *testing.T) {
	if _, err := Open(filepath.Join(t.TempDir(), "missing.jsonl")); err == nil || !strings.Contains(err.Error(), "missing.jsonl") {
		t.Errorf("Open of a missing file: %v", err)
	}
}

// TestShippedDatasets checks the prompt sets in datasets/: they parse, ids
// are unique, and each holds what its README promises.
func TestShippedDatasets(t *testing.T) {
	want := map[string]struct {
		records  int
		text     bool
		minWords int
		maxWords int
	}{
		"stories.jsonl":        {12, true, 100, 250},
		"openings.jsonl":       {10, true, 4, 20},
		"tokens-example.jsonl": {3, false, 0, 0},
	}
	paths, err := filepath.Glob("../../datasets/*.jsonl")
	if err != nil || len(paths) < len(want) {
		t.Fatalf("datasets: %v %v", paths, err)
	}
	for _, p := range paths {
		r, err := Open(p)
		if err != nil {
			t.Fatal(err)
		}
		recs, err := readAll(r)
		r.Close()
		if err != nil {
			t.Errorf("%s: %v", p, err)
			continue
		}
		w, ok := want[filepath.Base(p)]
		if !ok {
			continue // a new set: parsing cleanly is all we know to check
		}
		if len(recs) != w.records {
			t.Errorf("%s: %d records, want %d", p, len(recs), w.records)
		}
		for _, rec := range recs {
			if w.text != (rec.Tokens == nil) {
				t.Errorf("%s:%d: text record = %v, want %v", p, rec.Line, rec.Tokens == nil, w.text)
			}
			if n := len(strings.Fields(rec.Text)); w.text && (n < w.minWords || n > w.maxWords) {
				t.Errorf("%s:%d: %d words, want %d..%d", p, rec.Line, n, w.minWords, w.maxWords)
			}
			for _, id := range rec.Tokens {
				if id >= 512 {
					t.Errorf("%s:%d: token %d is outside the bundled model's 512-token vocabulary", p, rec.Line, id)
				}
			}
			if rec.Tokens != nil && rec.Tokens[0] != 1 {
				t.Errorf("%s:%d: pre-tokenized records start with BOS (1)", p, rec.Line)
			}
		}
	}
}

func FuzzReader(f *testing.F) {
	f.Add([]byte(`{"id": "a", "text": "x"}` + "\n" + `{"id": "b", "tokens": [1, 2]}` + "\n"))
	f.Add([]byte("\n\n{\"id\": \"a\", \"text\": \"x\"}\r\n{\"id\": \"a\", \"text\": \"y\"}"))
	f.Add([]byte(`{"id": "a", "tokens": [1, -1, 1.5, "x", null, {}]}`))
	f.Add([]byte(`{"id": "a", "text": "x", "text": "y"} [] "" null`))
	f.Fuzz(func(t *testing.T, data []byte) {
		r := NewReader(strings.NewReader(string(data)), "fuzz.jsonl")
		ids := map[string]bool{}
		lastLine := 0
		for i := 0; ; i++ {
			rec, err := r.Next()
			if errors.Is(err, io.EOF) {
				return
			}
			if err != nil {
				var de *Error
				if !errors.As(err, &de) || de.Line <= lastLine || !strings.HasPrefix(err.Error(), "fuzz.jsonl:") {
					t.Fatalf("bad error %#v after line %d", err, lastLine)
				}
				return
			}
			if rec.ID == "" || ids[rec.ID] || rec.Line <= lastLine || (rec.Text == "") == (rec.Tokens == nil) {
				t.Fatalf("bad record %+v (previous line %d)", rec, lastLine)
			}
			for _, id := range rec.Tokens {
				if id < 0 {
					t.Fatalf("negative token in %+v", rec)
				}
			}
			ids[rec.ID] = true
			lastLine = rec.Line
		}
	})
}
