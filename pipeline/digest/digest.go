// Package digest fingerprints the logits a backend returned, exactly: a
// SHA-256 of the raw rows (float32 little-endian, in row order) and of the
// token ids fed, per score chunk or generate prompt, plus a 64-bit xxHash
// per row so that two runs can be told bit-identical, or the first position
// where they differ named, without keeping any logits.
//
// Rows are hashed where the host reads them, from the buffer the plugin's
// message was decoded into: no copy (on little-endian hosts the bytes are
// hashed in place; elsewhere they are converted through a small buffer).
package digest

import (
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"hash"
	"math"
	"unsafe"

	"github.com/cespare/xxhash/v2"

	"github.com/evalrun/evalrun/pipeline/summary"
)

// Prompt is the digest of one backend's logits for one score chunk or
// generate prompt: summary.PromptDigest, the schema's.
type Prompt = summary.PromptDigest

// Hasher accumulates one chunk's or prompt's digest. The zero value is not
// ready: use NewHasher.
type Hasher struct {
	logits  hash.Hash
	tokens  hash.Hash
	from    int
	rows    []string
	scratch []byte
}

// NewHasher starts a digest whose first row is at position logitsFrom.
func NewHasher(logitsFrom int) *Hasher {
	return &Hasher{logits: sha256.New(), tokens: sha256.New(), from: logitsFrom}
}

// Row adds one logits row.
func (h *Hasher) Row(row []float32) {
	b := h.bytes(row)
	h.logits.Write(b)
	h.rows = append(h.rows, hex.EncodeToString(binary.BigEndian.AppendUint64(nil, xxhash.Sum64(b))))
}

// Tokens adds token ids to the tokens digest.
func (h *Hasher) Tokens(ids []int32) {
	if littleEndian && len(ids) > 0 {
		h.tokens.Write(unsafe.Slice((*byte)(unsafe.Pointer(&ids[0])), 4*len(ids)))
		return
	}
	b := h.scratch[:0]
	for _, id := range ids {
		b = binary.LittleEndian.AppendUint32(b, uint32(id))
	}
	h.scratch = b
	h.tokens.Write(b)
}

// bytes views row as little-endian bytes: in place on a little-endian host.
func (h *Hasher) bytes(row []float32) []byte {
	if len(row) == 0 {
		return nil
	}
	if littleEndian {
		return unsafe.Slice((*byte)(unsafe.Pointer(&row[0])), 4*len(row))
	}
	b := h.scratch[:0]
	for _, v := range row {
		b = binary.LittleEndian.AppendUint32(b, math.Float32bits(v))
	}
	h.scratch = b
	return b
}

// Sum returns the digest so far.
func (h *Hasher) Sum() Prompt {
	return Prompt{
		LogitsSHA256: hex.EncodeToString(h.logits.Sum(nil)),
		TokensSHA256: hex.EncodeToString(h.tokens.Sum(nil)),
		LogitsFrom:   h.from,
		RowXXH64:     append([]string{}, h.rows...),
	}
}

// littleEndian is whether float32 and int32 slices are already in the
// digests' byte order (a variable so tests cover the other path).
var littleEndian = func() bool {
	x := uint16(1)
	return *(*byte)(unsafe.Pointer(&x)) == 1
}()

// Run is the digest of a whole run for one backend: summary.RunDigest.
type Run = summary.RunDigest

// RunHasher folds prompt digests into a Run.
type RunHasher struct {
	logits, tokens hash.Hash
	prompts, rows  int
}

// Add folds in one chunk's or prompt's digest, named by dataset and id.
func (r *RunHasher) Add(dataset, id string, p Prompt) {
	if r.logits == nil {
		r.logits, r.tokens = sha256.New(), sha256.New()
	}
	key := dataset + "\x00" + id + "\x00"
	r.logits.Write([]byte(key + p.LogitsSHA256 + "\n"))
	r.tokens.Write([]byte(key + p.TokensSHA256 + "\n"))
	r.prompts++
	r.rows += p.Rows()
}

// Sum returns the run's digest, nil when nothing was hashed.
func (r *RunHasher) Sum() *Run {
	if r.prompts == 0 {
		return nil
	}
	return &Run{
		LogitsSHA256: hex.EncodeToString(r.logits.Sum(nil)),
		TokensSHA256: hex.EncodeToString(r.tokens.Sum(nil)),
		Prompts:      r.prompts, Rows: r.rows,
	}
}
