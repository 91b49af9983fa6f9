package shard

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"

	"github.com/evalrun/evalrun/internal/atomicfile"
	"github.com/evalrun/evalrun/pipeline/spec"
)

// FileName is the units file in a shard's results directory.
const FileName = "units.jsonl"

// Format names the layout of the units file's first line.
const Format = "evalrun/units/v1"

// Manifest is the units file's first line: what the whole run plans and
// which part of it this shard is.
type Manifest struct {
	Format string `json:"format"`
	// SpecDigest covers everything that decides the results (model, tokens,
	// backends, options, gates, bench settings) and nothing that differs
	// between machines (paths, output directories, timeouts).
	SpecDigest string    `json:"spec_digest"`
	Shard      Shard     `json:"shard"`
	Units      []Unit    `json:"units"`    // every unit of the run, in plan order
	Backends   []Backend `json:"backends"` // the candidates, in spec order
}

// Unit is one unit of the plan.
type Unit struct {
	ID   string `json:"id"`
	Rows int    `json:"rows,omitempty"` // positions a candidate compares in it
}

// Backend is a candidate and the gates it is judged by.
type Backend struct {
	Name  string     `json:"name"`
	Gates spec.Gates `json:"gates"`
}

// Result is one candidate's accumulated comparison over one unit, in the
// host's own encoding (State).
type Result struct {
	Unit    string          `json:"unit"`
	Backend string          `json:"backend"`
	State   json.RawMessage `json:"state"`
}

// Writer streams a units file; it appears under its name on Commit only.
type Writer struct {
	f   *atomicfile.File
	w   *bufio.Writer
	enc *json.Encoder
	err error
}

// Create starts dir's units file with its manifest.
func Create(dir string, m Manifest) (*Writer, error) {
	m.Format = Format
	f, err := atomicfile.Create(filepath.Join(dir, FileName))
	if err != nil {
		return nil, err
	}
	w := &Writer{f: f, w: bufio.NewWriter(f)}
	w.enc = json.NewEncoder(w.w)
	w.err = w.enc.Encode(m)
	return w, nil
}

// Add appends a unit's result.
func (w *Writer) Add(r Result) {
	if w != nil && w.err == nil {
		w.err = w.enc.Encode(r)
	}
}

// Commit flushes the file and moves it into place.
func (w *Writer) Commit() error {
	if w == nil {
		return nil
	}
	if w.err == nil {
		w.err = w.w.Flush()
	}
	if w.err != nil {
		w.f.Abort()
		return w.err
	}
	return w.f.Commit()
}

// Abort discards the file.
func (w *Writer) Abort() {
	if w != nil {
		w.f.Abort()
	}
}

// File is a shard's units file as read back.
type File struct {
	Dir      string
	Manifest Manifest
	Results  []Result
}

// MaxLine bounds one line of a units file (a unit's per-token values).
const MaxLine = 256 << 20

// Read reads dir's units file. Errors name the file and line.
func Read(dir string) (*File, error) {
	path := filepath.Join(dir, FileName)
	f, err := os.Open(path)
	if errors.Is(err, os.ErrNotExist) {
		return nil, fmt.Errorf("%s: not a shard's results directory (no %s: was it run with --shard?)", dir, FileName)
	}
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return parse(dir, path, f)
}

func parse(dir, path string, r io.Reader) (*File, error) {
	out := &File{Dir: dir}
	sc := bufio.NewScanner(r)
	sc.Buffer(nil, MaxLine)
	line := 0
	for sc.Scan() {
		line++
		dec := json.NewDecoder(bytes.NewReader(sc.Bytes()))
		dec.DisallowUnknownFields()
		if line == 1 {
			if err := dec.Decode(&out.Manifest); err != nil {
				return nil, fmt.Errorf("%s:1: manifest: %v", path, err)
			}
			if err := out.Manifest.check(); err != nil {
				return nil, fmt.Errorf("%s:1: %v", path, err)
			}
			continue
		}
		var res Result
		if err := dec.Decode(&res); err != nil {
			return nil, fmt.Errorf("%s:%d: %v", path, line, err)
		}
		out.Results = append(out.Results, res)
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("%s:%d: %v", path, line+1, err)
	}
	if line == 0 {
		return nil, fmt.Errorf("%s: empty", path)
	}
	return out, nil
}

func (m *Manifest) check() error {
	switch {
	case m.Format != Format:
		return fmt.Errorf("format %q, want %q", m.Format, Format)
	case m.Shard.Total < 1 || m.Shard.Total > MaxTotal || m.Shard.Index < 0 || m.Shard.Index >= m.Shard.Total:
		return fmt.Errorf("shard %s out of range", m.Shard)
	case m.SpecDigest == "":
		return errors.New("no spec_digest")
	}
	seen := map[string]bool{}
	for _, u := range m.Units {
		if seen[u.ID] || u.ID == "" || u.Rows < 0 {
			return fmt.Errorf("unit %q listed twice, empty or with negative rows", u.ID)
		}
		seen[u.ID] = true
	}
	return nil
}
