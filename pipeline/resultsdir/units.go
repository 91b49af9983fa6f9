package resultsdir

import (
	"bufio"
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"sync"

	"github.com/evalrun/evalrun/internal/atomicfile"
	"github.com/evalrun/evalrun/internal/userfile"
	"github.com/evalrun/evalrun/pipeline/spec"
)

// Format names the layout of the units file's first line.
const Format = "evalrun/units/v3"

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
	// Plugins are what each backend's plugin said it was when it started
	// (the reference first): a resume refuses a run another build made.
	Plugins []Plugin `json:"plugins,omitempty"`
}

// Plugin is a backend's plugin as it described itself.
type Plugin struct {
	Backend string `json:"backend"`
	Name    string `json:"name"`
	Version string `json:"version"`
}

// Backend is a candidate and the gates it is judged by.
type Backend struct {
	Name  string     `json:"name"`
	Gates spec.Gates `json:"gates"`
}

// Record is a line after the manifest: a unit the run did (or began when
// it was interrupted), with every candidate's comparison and the unit's
// prompts.jsonl lines, so the file alone carries what a resume or a merge
// needs. The run's last line is the completion record instead.
type Record struct {
	Unit    string            `json:"unit,omitempty"`
	Results []Result          `json:"results,omitempty"`
	Prompts []json.RawMessage `json:"prompts,omitempty"`
	// Complete marks the last line of a run that went through its plan
	// (its backends may have failed): it was not interrupted or killed.
	Complete bool `json:"complete,omitempty"`
	// Digest chains the file: the hex sha256 of the previous line's digest
	// (the manifest line's sha256 for the first record) and this line as
	// written without it. A merge or resume refuses a record edited,
	// dropped or moved.
	Digest string `json:"digest,omitempty"`
}

// chain is the digest of a record line (marshalled without its digest)
// that follows the line whose digest is prev.
func chain(prev []byte, line []byte) []byte {
	h := sha256.New()
	h.Write(prev)
	h.Write(line)
	return h.Sum(nil)
}

// Result is one candidate's accumulated comparison over one unit, in the
// host's own encoding (State).
type Result struct {
	Backend string          `json:"backend"`
	State   json.RawMessage `json:"state"`
}

// Writer writes a units file as the run goes. The manifest and the records
// a resumed run carries over go to a temporary file, which replaces
// UnitsFile with the first new unit (or on Commit), so an interrupted
// rewrite never loses the file being resumed; then every unit is synced
// before Add returns: a crash loses at most the unit in flight.
type Writer struct {
	mu      sync.Mutex
	f       *atomicfile.File
	prompts []json.RawMessage // the lines of the unit in flight
	err     error
	prev    []byte // the digest of the last line written
}

// CreateUnits starts dir's units file with its manifest.
func CreateUnits(dir string, m Manifest) (*Writer, error) {
	m.Format = Format
	f, err := atomicfile.Create(filepath.Join(dir, UnitsFile))
	if err != nil {
		return nil, err
	}
	w := &Writer{f: f}
	w.write(m)
	return w, nil
}

func (w *Writer) write(v any) {
	if w.err != nil {
		return
	}
	line, err := json.Marshal(v)
	if r, ok := v.(Record); ok && err == nil {
		r.Digest = ""
		if line, err = json.Marshal(r); err == nil {
			w.prev = chain(w.prev, line)
			r.Digest = hex.EncodeToString(w.prev)
			line, err = json.Marshal(r)
		}
	} else if err == nil {
		sum := sha256.Sum256(line) // the manifest starts the chain
		w.prev = sum[:]
	}
	if err == nil {
		_, err = w.f.Write(append(line, '\n'))
	}
	w.err = err
}

// Prompt keeps a prompts.jsonl line of the unit in flight for its record.
func (w *Writer) Prompt(line []byte) {
	if w != nil {
		w.mu.Lock()
		w.prompts = append(w.prompts, json.RawMessage(slices.Clone(line)))
		w.mu.Unlock()
	}
}

// Carry writes a record kept from the interrupted run being resumed.
func (w *Writer) Carry(r Record) {
	if w != nil {
		w.mu.Lock()
		w.write(r)
		w.mu.Unlock()
	}
}

// Add records a unit with its candidates' results and the prompts.jsonl
// lines given since the last Add, and makes it durable.
func (w *Writer) Add(unit string, results []Result) {
	if w == nil {
		return
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	w.write(Record{Unit: unit, Results: results, Prompts: w.prompts})
	w.prompts = nil
	w.sync()
}

func (w *Writer) sync() {
	if w.err == nil {
		w.err = w.f.Sync()
	}
	if w.err == nil {
		w.err = w.f.Publish()
	}
}

// Commit ends the file, with the completion record when the run went
// through its plan, and closes it.
func (w *Writer) Commit(complete bool) error {
	if w == nil {
		return nil
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	if complete {
		w.write(Record{Complete: true})
	}
	w.sync()
	if w.err != nil {
		w.f.Abort()
		return w.err
	}
	return w.f.Commit()
}

// Abort closes the file; one no unit reached is discarded (the file being
// resumed, if any, stays as it was).
func (w *Writer) Abort() {
	if w != nil {
		w.f.Abort()
	}
}

// Leftovers lists the temporary units files of runs killed before their
// first unit in dir, except w's own (package atomicfile).
func (w *Writer) Leftovers(dir string) []string {
	var live *atomicfile.File
	if w != nil {
		live = w.f
	}
	return atomicfile.Leftovers(filepath.Join(dir, UnitsFile), live)
}

// File is a units file as read back.
type File struct {
	Dir      string
	Manifest Manifest
	Units    []Record // the units recorded, in the order the run did them
	// Complete: the run went through its plan; otherwise it was interrupted
	// or killed, and Units holds what it did.
	Complete bool
	// Note says why the last line was ignored (cut short when the run was
	// killed while writing it); "" when it was not.
	Note string

	planned, recorded map[string]bool // unit ids, for check
}

// MaxLine bounds one line of a units file (a unit's per-token values).
const MaxLine = 256 << 20

// ReadUnits reads dir's units file. Errors name the file and line.
func ReadUnits(dir string) (*File, error) {
	path := filepath.Join(dir, UnitsFile)
	f, err := userfile.Open(path)
	if errors.Is(err, os.ErrNotExist) {
		return nil, fmt.Errorf("%s: no %s: not the results directory of a run, or one killed before it finished a unit", dir, UnitsFile)
	}
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return parse(dir, path, f)
}

func parse(dir, path string, r io.Reader) (*File, error) {
	out := &File{Dir: dir}
	br := bufio.NewReaderSize(r, 64<<10)
	var torn error  // the last line read, if it did not parse
	var prev []byte // the digest of the last line read
	line := 0
	for {
		data, err := readLine(br)
		if err == io.EOF {
			break
		}
		line++
		if err != nil {
			return nil, fmt.Errorf("%s:%d: %v", path, line, err)
		}
		if torn != nil {
			return nil, torn // a bad line with more after it
		}
		if line == 1 {
			if err := decodeStrict(data, &out.Manifest); err != nil {
				return nil, fmt.Errorf("%s:1: manifest: %v", path, err)
			}
			if err := out.Manifest.check(); err != nil {
				return nil, fmt.Errorf("%s:1: %v", path, err)
			}
			sum := sha256.Sum256(data)
			prev = sum[:]
			continue
		}
		if out.Complete {
			return nil, fmt.Errorf("%s:%d: a line after the completion record", path, line)
		}
		var rec Record
		err = decodeStrict(data, &rec)
		if err == nil {
			err = out.check(rec)
		}
		if err != nil {
			torn = fmt.Errorf("%s:%d: %v", path, line, err)
			continue
		}
		if prev, err = verify(prev, rec); err != nil {
			return nil, fmt.Errorf("%s:%d: %v", path, line, err)
		}
		if rec.Complete {
			out.Complete = true
		} else {
			out.Units = append(out.Units, rec)
			out.recorded[rec.Unit] = true
		}
	}
	if line == 0 {
		return nil, fmt.Errorf("%s: empty", path)
	}
	if torn != nil {
		out.Note = fmt.Sprintf("%v: the last line is cut short (the run was killed while writing it): ignored", torn)
	}
	return out, nil
}

// readLine reads a line without its newline; the last one may lack it.
func readLine(br *bufio.Reader) ([]byte, error) {
	var line []byte
	for {
		chunk, err := br.ReadSlice('\n')
		if len(line)+len(chunk) > MaxLine+1 {
			return nil, fmt.Errorf("line longer than %d bytes", MaxLine)
		}
		line = append(line, chunk...)
		switch {
		case err == bufio.ErrBufferFull:
			continue
		case err == io.EOF && len(line) > 0:
			return line, nil
		case err != nil:
			return nil, err
		}
		return line[:len(line)-1], nil
	}
}

// verify checks a record's digest against the chain so far and returns it.
func verify(prev []byte, r Record) ([]byte, error) {
	got := r.Digest
	r.Digest = ""
	line, err := json.Marshal(r)
	if err != nil {
		return nil, err
	}
	want := chain(prev, line)
	if got != hex.EncodeToString(want) {
		if got == "" {
			return nil, errors.New("a record without its digest: not written by evalrun (or edited)")
		}
		return nil, errors.New("the record's digest does not match: it was edited, or lines were dropped or moved")
	}
	return want, nil
}

func decodeStrict(data []byte, v any) error {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return err
	}
	if dec.More() {
		return errors.New("more than one value on the line")
	}
	return nil
}

// check refuses a record the file cannot hold: one for a unit the plan
// does not have or recorded already, a result without a backend or state,
// a completion record with a unit.
func (f *File) check(r Record) error {
	if r.Complete {
		if r.Unit != "" || r.Results != nil || r.Prompts != nil {
			return errors.New("a completion record with a unit")
		}
		return nil
	}
	if f.planned == nil {
		f.planned, f.recorded = map[string]bool{}, map[string]bool{}
		for _, u := range f.Manifest.Units {
			f.planned[u.ID] = true
		}
	}
	if !f.planned[r.Unit] {
		return fmt.Errorf("unit %q is not in the plan", r.Unit)
	}
	if f.recorded[r.Unit] {
		return fmt.Errorf("unit %q recorded twice", r.Unit)
	}
	for i, res := range r.Results {
		if res.Backend == "" || len(res.State) == 0 {
			return fmt.Errorf("unit %q: result %d without a backend or a state", r.Unit, i+1)
		}
	}
	return nil
}

func (m *Manifest) check() error {
	switch {
	case m.Format != Format:
		return fmt.Errorf("format %q, want %q", m.Format, Format)
	case m.Shard.Total < 1 || m.Shard.Total > MaxShards || m.Shard.Index < 0 || m.Shard.Index >= m.Shard.Total:
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
