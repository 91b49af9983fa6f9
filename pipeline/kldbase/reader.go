package kldbase

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math"

	"github.com/evalrun/evalrun/internal/userfile"
)

// Reader gives random access to the records of a base file without loading
// them: only the header, the tokens and one record are held in memory.
// The read methods reuse an internal buffer: a Reader is not safe for
// concurrent use (open one per goroutine).
type Reader struct {
	name          string
	ra            io.ReaderAt
	closer        io.Closer
	nCtx, nVocab  int
	nChunk        int
	tokens        []int32
	recordsOffset int64
	buf           []byte // last raw record, reused
	rec           Record // last record, reused by Record
}

// Open opens and validates a base file: magic, n_ctx, n_vocab, n_chunk
// against the exact file size, and every token against n_vocab. Errors are
// *FormatError naming the file, the field and its byte offset.
func Open(path string) (*Reader, error) {
	f, err := userfile.Open(path)
	if err != nil {
		return nil, err
	}
	st, err := f.Stat()
	if err != nil {
		f.Close()
		return nil, err
	}
	r, err := NewReader(f, st.Size(), path)
	if err != nil {
		f.Close()
		return nil, err
	}
	r.closer = f
	return r, nil
}

// NewReader validates a base file of the given size read through ra; name
// is used in errors.
func NewReader(ra io.ReaderAt, size int64, name string) (*Reader, error) {
	ferr := func(field string, off int64, format string, args ...any) error {
		return &FormatError{File: name, Field: field, Offset: off, Msg: fmt.Sprintf(format, args...)}
	}
	var hdr [HeaderSize]byte
	if n, err := ra.ReadAt(hdr[:], 0); n < HeaderSize {
		if err == nil || errors.Is(err, io.EOF) {
			field, off := headerFieldAt(int64(n))
			return nil, ferr(field, off, "file ends after %d bytes, the header needs %d", size, HeaderSize)
		}
		return nil, fmt.Errorf("%s: reading header: %w", name, err)
	}
	if string(hdr[:8]) != Magic {
		return nil, ferr("magic", 0, "got %q, want %q (not a llama-perplexity base-logit file)", hdr[:8], Magic)
	}
	nCtxU := binary.LittleEndian.Uint32(hdr[8:]) // llama.cpp reads it as uint32
	nVocab := int32(binary.LittleEndian.Uint32(hdr[12:]))
	nChunk := int32(binary.LittleEndian.Uint32(hdr[16:]))
	// n_ctx < 3 leaves no scored position in a chunk.
	if nCtxU < 3 || nCtxU > math.MaxInt32 {
		return nil, ferr("n_ctx", 8, "%d, want 3 to %d", nCtxU, math.MaxInt32)
	}
	nCtx := int32(nCtxU)
	if nVocab < 1 {
		return nil, ferr("n_vocab", 12, "%d, want at least 1", nVocab)
	}
	// At least one chunk: then n_ctx and n_vocab are bounded by the file size.
	if nChunk < 1 {
		return nil, ferr("n_chunk", 16, "%d, want at least 1", nChunk)
	}
	want, ok := FileSize(int(nCtx), int(nVocab), int(nChunk))
	if !ok || want != size {
		return nil, sizeError(name, int(nCtx), int(nVocab), int(nChunk), size, want, ok)
	}

	r := &Reader{
		name: name, ra: ra,
		nCtx: int(nCtx), nVocab: int(nVocab), nChunk: int(nChunk),
		recordsOffset: HeaderSize + 4*int64(nCtx)*int64(nChunk),
	}
	raw := make([]byte, 4*r.nCtx*r.nChunk)
	if _, err := ra.ReadAt(raw, HeaderSize); err != nil && !(len(raw) == 0 && errors.Is(err, io.EOF)) {
		return nil, fmt.Errorf("%s: reading tokens: %w", name, err)
	}
	r.tokens = make([]int32, r.nCtx*r.nChunk)
	for i := range r.tokens {
		t := int32(binary.LittleEndian.Uint32(raw[4*i:]))
		if t < 0 || t >= nVocab {
			return nil, ferr(fmt.Sprintf("tokens[%d]", i), HeaderSize+4*int64(i), "token %d outside the vocabulary of %d", t, nVocab)
		}
		r.tokens[i] = t
	}
	return r, nil
}

// headerFieldAt names the header field a file of n bytes ends in.
func headerFieldAt(n int64) (string, int64) {
	switch {
	case n < 8:
		return "magic", 0
	case n < 12:
		return "n_ctx", 8
	case n < 16:
		return "n_vocab", 12
	default:
		return "n_chunk", 16
	}
}

// sizeError explains a size mismatch by the first region the file does not
// match: the tokens, a record (named by chunk and position) or trailing bytes.
func sizeError(name string, nCtx, nVocab, nChunk int, size, want int64, fits bool) error {
	e := &FormatError{File: name}
	dims := fmt.Sprintf("n_ctx %d, n_vocab %d, n_chunk %d", nCtx, nVocab, nChunk)
	tokEnd := HeaderSize + 4*int64(nCtx)*int64(nChunk) // cannot overflow: both are int32
	switch {
	case size < tokEnd:
		e.Field, e.Offset = "tokens", HeaderSize
		e.Msg = fmt.Sprintf("file is truncated: %s need %d token bytes, file has %d bytes", dims, tokEnd-HeaderSize, size)
	case !fits:
		e.Field, e.Offset = "n_chunk", 16
		e.Msg = fmt.Sprintf("%s give a file size beyond 2^63 bytes, file has %d", dims, size)
	case size < want:
		rb := int64(RecordBytes(nVocab))
		idx := (size - tokEnd) / rb
		per := int64(PerChunk(nCtx))
		e.Field = fmt.Sprintf("record chunk %d position %d", idx/per, idx%per)
		e.Offset = tokEnd + idx*rb
		e.Msg = fmt.Sprintf("file is truncated: %s need %d bytes, file has %d", dims, want, size)
	default:
		e.Field, e.Offset = "end of records", want
		e.Msg = fmt.Sprintf("%d trailing bytes after the records (%s)", size-want, dims)
	}
	return e
}

// Close closes the file opened by Open (a no-op for NewReader).
func (r *Reader) Close() error {
	if r.closer == nil {
		return nil
	}
	return r.closer.Close()
}

// NCtx is the context size each chunk was evaluated with.
func (r *Reader) NCtx() int { return r.nCtx }

// NVocab is the vocabulary size of each record.
func (r *Reader) NVocab() int { return r.nVocab }

// NChunk is the number of chunks.
func (r *Reader) NChunk() int { return r.nChunk }

// First is the first scored position of a chunk, n_ctx/2.
func (r *Reader) First() int { return r.nCtx / 2 }

// PerChunk is the number of records per chunk, n_ctx − 1 − n_ctx/2.
func (r *Reader) PerChunk() int { return PerChunk(r.nCtx) }

// Tokens are the evaluated tokens, n_ctx·n_chunk of them, as the text
// tokenized (the first token of a chunk is not replaced by BOS here; the
// evaluation does that).
func (r *Reader) Tokens() []int32 { return r.tokens }

// Target is the token record k of chunk predicts:
// tokens[chunk·n_ctx + First() + k + 1].
func (r *Reader) Target(chunk, k int) int32 {
	return r.tokens[chunk*r.nCtx+r.First()+k+1]
}

// RecordOffset is the byte offset of record k of chunk.
func (r *Reader) RecordOffset(chunk, k int) int64 {
	return r.recordsOffset + (int64(chunk)*int64(r.PerChunk())+int64(k))*int64(RecordBytes(r.nVocab))
}

// RawRecord reads the bytes of record k of chunk (RecordBytes(NVocab())
// of them) into dst, growing it if needed, and returns them.
func (r *Reader) RawRecord(chunk, k int, dst []byte) ([]byte, error) {
	if chunk < 0 || chunk >= r.nChunk || k < 0 || k >= r.PerChunk() {
		return nil, fmt.Errorf("%s: record chunk %d position %d out of range (%d chunks of %d records)", r.name, chunk, k, r.nChunk, r.PerChunk())
	}
	n := RecordBytes(r.nVocab)
	if cap(dst) < n {
		dst = make([]byte, n)
	}
	dst = dst[:n]
	off := r.RecordOffset(chunk, k)
	if _, err := r.ra.ReadAt(dst, off); err != nil {
		return nil, &FormatError{File: r.name, Field: fmt.Sprintf("record chunk %d position %d", chunk, k), Offset: off, Msg: err.Error()}
	}
	return dst, nil
}

// ReadRecord reads record k of chunk into rec.
func (r *Reader) ReadRecord(chunk, k int, rec *Record) error {
	raw, err := r.RawRecord(chunk, k, r.buf)
	if err != nil {
		return err
	}
	r.buf = raw
	UnmarshalRecord(raw, r.nVocab, rec)
	return nil
}

// Record decodes record k of chunk into the base log-probabilities
// dst[i] = scale·q_i + min_log_prob (len(dst) must be NVocab()).
func (r *Reader) Record(chunk, k int, dst []float32) error {
	if len(dst) != r.nVocab {
		return fmt.Errorf("%s: record needs %d floats, got %d", r.name, r.nVocab, len(dst))
	}
	if err := r.ReadRecord(chunk, k, &r.rec); err != nil {
		return err
	}
	r.rec.Decode(dst)
	return nil
}
