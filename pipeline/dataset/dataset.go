// Package dataset reads evalrun prompt sets: JSONL files with one record per
// line, {"id": "...", "text": "..."} or {"id": "...", "tokens": [1, 403, ...]}.
// Records stream one at a time, so a prompt set of any size costs the memory
// of its longest line (at most MaxLineBytes) plus its ids.
package dataset

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"strconv"
	"unicode/utf8"

	"github.com/evalrun/evalrun/internal/userfile"
)

// MaxLineBytes is the longest line accepted (16 MiB).
const MaxLineBytes = 16 << 20

// Record is one prompt. Exactly one of Text and Tokens is set: Tokens is nil
// for a text record, and a tokens record is fed as given (BOS included).
type Record struct {
	ID     string
	Text   string
	Tokens []int32
	Line   int // 1-based line in the file
}

// Error is a problem with one line of a prompt set; it prints as
// `datasets/x.jsonl:7: duplicate id "a" (first on line 3)`.
type Error struct {
	File string
	Line int
	Msg  string
}

func (e *Error) Error() string {
	return fmt.Sprintf("%s:%d: %s", e.File, e.Line, e.Msg)
}

// Reader streams the records of one prompt set.
type Reader struct {
	name    string
	scanner *bufio.Scanner
	closer  io.Closer
	line    int
	ids     map[string]int // id -> line it was first seen on
	err     error          // sticky: after an error every Next returns it
}

// Open opens a JSONL prompt set. Close it when done.
func Open(path string) (*Reader, error) {
	f, err := userfile.Open(path)
	if err != nil {
		return nil, fmt.Errorf("dataset: %w", err)
	}
	r := NewReader(f, path)
	r.closer = f
	return r, nil
}

// NewReader reads a prompt set from src; name is the file name used in
// errors.
func NewReader(src io.Reader, name string) *Reader {
	sc := bufio.NewScanner(src)
	// One extra byte for the '\n', so a line of exactly MaxLineBytes fits.
	sc.Buffer(make([]byte, 64<<10), MaxLineBytes+1)
	return &Reader{name: name, scanner: sc, ids: map[string]int{}}
}

// Close closes the file opened by Open.
func (r *Reader) Close() error {
	if r.closer == nil {
		return nil
	}
	err := r.closer.Close()
	r.closer = nil
	return err
}

// Next returns the next record, io.EOF after the last one, or an *Error
// naming the file and line of the first bad record.
func (r *Reader) Next() (Record, error) {
	if r.err != nil {
		return Record{}, r.err
	}
	for r.scanner.Scan() {
		r.line++
		text := r.scanner.Bytes()
		if r.line == 1 {
			text = bytes.TrimPrefix(text, []byte("\xef\xbb\xbf")) // UTF-8 byte order mark
		}
		if len(bytes.TrimSpace(text)) == 0 {
			continue
		}
		rec, msg := parseLine(text)
		if msg == "" {
			if first, dup := r.ids[rec.ID]; dup {
				msg = fmt.Sprintf("duplicate id %q (first on line %d)", rec.ID, first)
			}
		}
		if msg != "" {
			r.err = &Error{File: r.name, Line: r.line, Msg: msg}
			return Record{}, r.err
		}
		r.ids[rec.ID] = r.line
		rec.Line = r.line
		return rec, nil
	}
	switch err := r.scanner.Err(); {
	case errors.Is(err, bufio.ErrTooLong):
		r.err = &Error{File: r.name, Line: r.line + 1, Msg: fmt.Sprintf("line longer than %d MiB", MaxLineBytes>>20)}
	case err != nil:
		r.err = fmt.Errorf("dataset: %s: reading after line %d: %w", r.name, r.line, err)
	default:
		r.err = io.EOF
	}
	return Record{}, r.err
}

// parseLine decodes one non-blank line; a non-empty message says what is
// wrong with it.
func parseLine(line []byte) (Record, string) {
	if !utf8.Valid(line) {
		return Record{}, "invalid UTF-8"
	}
	dec := json.NewDecoder(bytes.NewReader(line))
	dec.UseNumber()
	tok, err := dec.Token()
	if err != nil {
		return Record{}, jsonMsg(err, dec)
	}
	if d, ok := tok.(json.Delim); !ok || d != '{' {
		return Record{}, "want a JSON object {\"id\": ..., \"text\": ...} per line"
	}
	var rec Record
	var hasID, hasText, hasTokens bool
	seen := map[string]bool{}
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			return Record{}, jsonMsg(err, dec)
		}
		key, _ := tok.(string) // object keys are always strings
		if seen[key] {
			return Record{}, fmt.Sprintf("field %q given twice", key)
		}
		seen[key] = true
		var raw json.RawMessage
		if err := dec.Decode(&raw); err != nil {
			return Record{}, jsonMsg(err, dec)
		}
		switch key {
		case "id":
			if raw[0] != '"' || json.Unmarshal(raw, &rec.ID) != nil {
				return Record{}, "id: want a string, got " + preview(raw)
			}
			hasID = true
		case "text":
			if raw[0] != '"' || json.Unmarshal(raw, &rec.Text) != nil {
				return Record{}, "text: want a string, got " + preview(raw)
			}
			hasText = true
		case "tokens":
			tokens, msg := parseTokens(raw)
			if msg != "" {
				return Record{}, "tokens: " + msg
			}
			rec.Tokens, hasTokens = tokens, true
		default:
			return Record{}, fmt.Sprintf("unknown field %q (want id, and text or tokens)", key)
		}
	}
	if _, err := dec.Token(); err != nil { // the closing '}'
		return Record{}, jsonMsg(err, dec)
	}
	if _, err := dec.Token(); err != io.EOF {
		return Record{}, "more than one JSON value on the line (one record per line)"
	}
	switch {
	case !hasID:
		return Record{}, `missing "id"`
	case rec.ID == "":
		return Record{}, "id is empty"
	case hasText && hasTokens:
		return Record{}, `has both "text" and "tokens"; give one`
	case !hasText && !hasTokens:
		return Record{}, `has neither "text" nor "tokens"`
	case hasText && rec.Text == "":
		return Record{}, "text is empty"
	case hasTokens && len(rec.Tokens) == 0:
		return Record{}, "tokens is empty"
	}
	return rec, ""
}

// parseTokens decodes a JSON array of non-negative integer token ids.
func parseTokens(raw json.RawMessage) ([]int32, string) {
	if raw[0] != '[' {
		return nil, "want a list of token ids, got " + preview(raw)
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	var items []any
	if err := dec.Decode(&items); err != nil {
		return nil, jsonMsg(err, dec)
	}
	out := make([]int32, len(items))
	for i, it := range items {
		n, ok := it.(json.Number)
		if !ok {
			return nil, fmt.Sprintf("item %d: want an integer token id, got %s", i, preview(mustJSON(it)))
		}
		v, err := strconv.ParseInt(n.String(), 10, 64)
		switch {
		case err != nil:
			return nil, fmt.Sprintf("item %d: want an integer token id, got %s", i, n)
		case v < 0:
			return nil, fmt.Sprintf("item %d: negative token id %d", i, v)
		case v > math.MaxInt32:
			return nil, fmt.Sprintf("item %d: token id %d is too large", i, v)
		}
		out[i] = int32(v)
	}
	return out, ""
}

func jsonMsg(err error, dec *json.Decoder) string {
	if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
		return "invalid JSON: the line ends inside the object"
	}
	var syn *json.SyntaxError
	if errors.As(err, &syn) {
		return fmt.Sprintf("invalid JSON near column %d: %s", syn.Offset, syn.Error())
	}
	return fmt.Sprintf("invalid JSON near column %d: %v", dec.InputOffset()+1, err)
}

func mustJSON(v any) []byte {
	b, _ := json.Marshal(v)
	return b
}

// preview shows a JSON value in an error, shortened.
func preview(raw []byte) string {
	const max = 40
	if len(raw) <= max {
		return string(raw)
	}
	cut := max
	for cut > 0 && !utf8.RuneStart(raw[cut]) {
		cut--
	}
	return string(raw[:cut]) + "..."
}
