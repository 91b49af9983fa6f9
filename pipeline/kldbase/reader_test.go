package kldbase

import (
	"bytes"
	"encoding/binary"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// smallBase writes a valid base file (n_ctx 6, n_vocab 5, 2 chunks: 2
// records per chunk of 14 bytes) and returns its bytes.
func smallBase(t testing.TB) []byte {
	t.Helper()
	path := filepath.Join(t.TempDir(), "small.kld")
	w, err := Create(path, 6, 5, []int32{1, 2, 3, 4, 0, 1, 2, 3, 4, 0, 1, 2})
	if err != nil {
		t.Fatal(err)
	}
	for i := range w.Records() {
		if err := w.WriteRecord([]float32{float32(i), 1, -3, 0.5, -30}); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func TestSmallBaseLayout(t *testing.T) {
	b := smallBase(t)
	// 20 + 4·6·2 + 2·(2·3+4)·(6−1−3)·2 = 20 + 48 + 80
	if len(b) != 148 {
		t.Fatalf("size %d, want 148", len(b))
	}
	r, err := NewReader(bytes.NewReader(b), int64(len(b)), "small")
	if err != nil {
		t.Fatal(err)
	}
	if r.RecordOffset(1, 1) != 20+48+3*20 {
		t.Errorf("record (1,1) at %d, want %d", r.RecordOffset(1, 1), 20+48+3*20)
	}
	raw, err := r.RawRecord(1, 1, nil)
	if err != nil {
		t.Fatal(err)
	}
	// n_vocab 5 is odd: the pad slot after q[4] is 0.
	if len(raw) != 20 || raw[18] != 0 || raw[19] != 0 {
		t.Errorf("raw record %v: want 20 bytes ending in a zero pad slot", raw)
	}
	var rec Record
	UnmarshalRecord(raw, 5, &rec)
	// Row {3, 1, −3, 0.5, −30}: max 3, mn = 3−16, so −30 is clamped.
	if rec.Q[0] != 65535 || rec.Q[4] != 0 {
		t.Errorf("q %v: want 65535 for the maximum, 0 for the clamped −30", rec.Q)
	}
	if _, err := r.RawRecord(2, 0, nil); err == nil {
		t.Error("record of chunk 2 of 2 read")
	}
	if err := r.Record(0, 0, make([]float32, 4)); err == nil {
		t.Error("decoding into a 4-float buffer for n_vocab 5 succeeded")
	}
}

func TestOpenRejectsMalformed(t *testing.T) {
	good := smallBase(t)
	put := func(off int, v uint32) []byte {
		b := bytes.Clone(good)
		binary.LittleEndian.PutUint32(b[off:], v)
		return b
	}
	cases := []struct {
		name   string
		data   []byte
		field  string
		offset int64
	}{
		{"empty", nil, "magic", 0},
		{"header cut in n_ctx", good[:10], "n_ctx", 8},
		{"header cut in n_chunk", good[:18], "n_chunk", 16},
		{"bad magic", append([]byte("_logitz_"), good[8:]...), "magic", 0},
		{"n_ctx 0", put(8, 0), "n_ctx", 8},
		{"n_ctx 2^32-1", put(8, 0xffffffff), "n_ctx", 8},
		{"n_vocab 0", put(12, 0), "n_vocab", 12},
		{"n_vocab negative", put(12, 0xffffffff), "n_vocab", 12},
		{"n_chunk negative", put(16, 0x80000000), "n_chunk", 16},
		{"n_chunk 0", put(16, 0), "n_chunk", 16},
		{"n_chunk larger than the file", put(16, 0x7fffffff), "tokens", 20},
		{"n_vocab larger than the file", put(12, 0x7fffffff), "record chunk 0 position 0", 68},
		{"cut in the tokens", good[:40], "tokens", 20},
		{"cut in the third record", good[:20+48+2*20+7], "record chunk 1 position 0", 20 + 48 + 2*20},
		{"trailing bytes", append(bytes.Clone(good), 0, 0), "end of records", 148},
		{"token outside the vocabulary", put(20+4*3, 5), "tokens[3]", 32},
		{"negative token", put(20+4*11, 0xfffffffe), "tokens[11]", 64},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "bad.kld")
			if err := os.WriteFile(path, c.data, 0o644); err != nil {
				t.Fatal(err)
			}
			r, err := Open(path)
			if err == nil {
				r.Close()
				t.Fatal("accepted")
			}
			var fe *FormatError
			if !errors.As(err, &fe) {
				t.Fatalf("error %v is not a *FormatError", err)
			}
			if fe.Field != c.field || fe.Offset != c.offset || fe.File != path {
				t.Errorf("error %q: field %q at %d, want %q at %d", err, fe.Field, fe.Offset, c.field, c.offset)
			}
			if !strings.HasPrefix(err.Error(), path+": "+c.field+" at byte ") {
				t.Errorf("error %q does not start with file, field and offset", err)
			}
		})
	}
	if _, err := Open(filepath.Join(t.TempDir(), "missing.kld")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("missing file: %v, want ErrNotExist", err)
	}
}

// FuzzOpen: no input makes the reader panic; what it accepts can be read
// record by record.
func FuzzOpen(f *testing.F) {
	good := smallBase(f)
	f.Add(good)
	f.Add(good[:30])
	f.Add([]byte(Magic))
	f.Add(append([]byte(Magic), 3, 0, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0))
	f.Fuzz(func(t *testing.T, data []byte) {
		r, err := NewReader(bytes.NewReader(data), int64(len(data)), "fuzz")
		if err != nil {
			var fe *FormatError
			if !errors.As(err, &fe) {
				t.Fatalf("error %v is not a *FormatError", err)
			}
			return
		}
		if want, _ := FileSize(r.NCtx(), r.NVocab(), r.NChunk()); want != int64(len(data)) {
			t.Fatalf("accepted %d bytes for a file of %d", len(data), want)
		}
		lp := make([]float32, r.NVocab())
		for c := range r.NChunk() {
			for k := range r.PerChunk() {
				if err := r.Record(c, k, lp); err != nil {
					t.Fatal(err)
				}
				_ = r.Target(c, k)
			}
		}
	})
}
