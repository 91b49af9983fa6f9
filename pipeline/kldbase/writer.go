package kldbase

import (
	"bufio"
	"encoding/binary"
	"fmt"

	"github.com/evalrun/evalrun/internal/atomicfile"
)

// Writer writes a base file record by record, in file order (chunk by chunk,
// positions First() … n_ctx−2 within a chunk). The file appears at its path
// only when Close succeeds (package atomicfile).
type Writer struct {
	path     string
	f        *atomicfile.File
	bw       *bufio.Writer
	nCtx     int
	nVocab   int
	nChunk   int
	tokens   []int32
	written  int
	rec      Record
	buf      []byte
	err      error // first write error; later calls return it
	finished bool
}

// Create starts a base file for chunks of nCtx tokens over a vocabulary of
// nVocab. n_chunk = len(tokens)/nCtx; the header stores the first
// n_chunk·nCtx tokens (the text's tokens, without the per-chunk BOS
// overwrite), as llama-perplexity does.
func Create(path string, nCtx, nVocab int, tokens []int32) (*Writer, error) {
	if nCtx < 3 || nCtx > 1<<31-1 {
		return nil, fmt.Errorf("kldbase: %s: n_ctx %d, want 3 to 2^31-1", path, nCtx)
	}
	if nVocab < 1 || nVocab > 1<<31-1 {
		return nil, fmt.Errorf("kldbase: %s: n_vocab %d, want 1 to 2^31-1", path, nVocab)
	}
	nChunk := len(tokens) / nCtx
	if nChunk < 1 {
		return nil, fmt.Errorf("kldbase: %s: %d tokens do not fill one chunk of n_ctx %d", path, len(tokens), nCtx)
	}
	if nChunk > 1<<31-1 {
		return nil, fmt.Errorf("kldbase: %s: %d chunks do not fit the int32 n_chunk", path, nChunk)
	}
	tokens = tokens[:nChunk*nCtx]
	for i, t := range tokens {
		if t < 0 || int(t) >= nVocab {
			return nil, fmt.Errorf("kldbase: %s: tokens[%d] = %d outside the vocabulary of %d", path, i, t, nVocab)
		}
	}
	f, err := atomicfile.Create(path)
	if err != nil {
		return nil, fmt.Errorf("kldbase: %w", err)
	}
	w := &Writer{
		path: path, f: f, bw: bufio.NewWriterSize(f, 1<<20),
		nCtx: nCtx, nVocab: nVocab, nChunk: nChunk,
		tokens: append([]int32(nil), tokens...),
		buf:    make([]byte, RecordBytes(nVocab)),
	}
	hdr := make([]byte, HeaderSize, HeaderSize+4*len(tokens))
	copy(hdr, Magic)
	binary.LittleEndian.PutUint32(hdr[8:], uint32(nCtx))
	binary.LittleEndian.PutUint32(hdr[12:], uint32(nVocab))
	binary.LittleEndian.PutUint32(hdr[16:], uint32(nChunk))
	for _, t := range tokens {
		hdr = binary.LittleEndian.AppendUint32(hdr, uint32(t))
	}
	if _, err := w.bw.Write(hdr); err != nil {
		w.Abort()
		return nil, fmt.Errorf("kldbase: writing %s: %w", path, err)
	}
	return w, nil
}

// Records is the number of records the file needs: n_chunk·PerChunk(n_ctx).
func (w *Writer) Records() int { return w.nChunk * PerChunk(w.nCtx) }

// NChunk is the number of chunks the file holds.
func (w *Writer) NChunk() int { return w.nChunk }

// Next returns the chunk and position of the next record to write.
func (w *Writer) Next() (chunk, k int) {
	return w.written / PerChunk(w.nCtx), w.written % PerChunk(w.nCtx)
}

// WriteRecord encodes the logits of the next scored position (see Encode)
// and appends the record.
func (w *Writer) WriteRecord(logits []float32) error {
	if w.err != nil {
		return w.err
	}
	if w.finished {
		return fmt.Errorf("kldbase: %s: write after Close", w.path)
	}
	if len(logits) != w.nVocab {
		return fmt.Errorf("kldbase: %s: logit row has %d entries, n_vocab is %d", w.path, len(logits), w.nVocab)
	}
	if w.written >= w.Records() {
		return fmt.Errorf("kldbase: %s: all %d records already written", w.path, w.Records())
	}
	chunk, k := w.Next()
	target := w.tokens[chunk*w.nCtx+w.nCtx/2+k+1]
	Encode(logits, target, &w.rec)
	MarshalRecord(&w.rec, w.buf)
	if _, err := w.bw.Write(w.buf); err != nil {
		w.err = fmt.Errorf("kldbase: writing %s: %w", w.path, err)
		return w.err
	}
	w.written++
	return nil
}

// Close finishes the file: it fails, leaving no file, unless every record
// was written. Close after Close or Abort returns nil.
func (w *Writer) Close() error {
	if w.finished {
		return nil
	}
	if w.err != nil {
		w.Abort()
		return w.err
	}
	if w.written != w.Records() {
		w.Abort()
		return fmt.Errorf("kldbase: %s: %d of %d records written", w.path, w.written, w.Records())
	}
	w.finished = true
	err := w.bw.Flush()
	if err != nil {
		w.f.Abort()
	} else {
		err = w.f.Commit()
	}
	if err != nil {
		return fmt.Errorf("kldbase: finishing %s: %w", w.path, err)
	}
	return nil
}

// Abort discards the file being written.
func (w *Writer) Abort() {
	if w.finished {
		return
	}
	w.finished = true
	w.f.Abort()
}
