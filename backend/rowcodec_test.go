package backend

import (
	"testing"

	"google.golang.org/grpc/mem"
	"google.golang.org/protobuf/proto"

	"github.com/evalrun/evalrun/backend/internal/backendpb"
)

// TestRowCodecDecodesIntoTheCallersRow: a 152k-vocabulary row is decoded
// into the caller's buffer with no allocation, whether gRPC hands the
// message over in one buffer or in several.
func TestRowCodecDecodesIntoTheCallersRow(t *testing.T) {
	const vocab = 152_064
	want := make([]float32, vocab)
	for i := range want {
		want[i] = float32(i)*0.5 - 7
	}
	wire, err := proto.Marshal(&backendpb.EvalChunk{Index: 3, Pos: 9, Logits: encodeFloats(nil, want), ComputeNs: 1234})
	if err != nil {
		t.Fatal(err)
	}
	row := make([]float32, vocab)
	chunk := rowChunk{buf: func(n int) []float32 {
		if n != vocab {
			t.Fatalf("buf(%d), want %d", n, vocab)
		}
		return row
	}}
	third := len(wire) / 3
	for name, data := range map[string]mem.BufferSlice{
		"one buffer":    {mem.SliceBuffer(wire)},
		"three buffers": {mem.SliceBuffer(wire[:third]), mem.SliceBuffer(wire[third : 2*third]), mem.SliceBuffer(wire[2*third:])},
	} {
		clear(row)
		if err := (rowCodec{}).Unmarshal(data, &chunk); err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if chunk.index != 3 || chunk.pos != 9 || chunk.computeNS != 1234 || &chunk.values[0] != &row[0] {
			t.Fatalf("%s: chunk %d/%d/%d, decoded into the caller's row: %v", name, chunk.index, chunk.pos, chunk.computeNS, &chunk.values[0] == &row[0])
		}
		for i := range want {
			if row[i] != want[i] {
				t.Fatalf("%s: value %d = %v, want %v", name, i, row[i], want[i])
			}
		}
		allocs := testing.AllocsPerRun(20, func() {
			if err := (rowCodec{}).Unmarshal(data, &chunk); err != nil {
				t.Fatal(err)
			}
		})
		if allocs != 0 {
			t.Errorf("%s: %.1f allocations per row, want none", name, allocs)
		}
	}
	if err := (rowCodec{}).Unmarshal(mem.BufferSlice{mem.SliceBuffer(wire[:len(wire)-1])}, &chunk); err == nil {
		t.Error("a truncated chunk was accepted")
	}
}

// FuzzRowChunk: any bytes, in any split into buffers, either fail to parse
// or give what the generated protobuf code reads from them (the logits
// being whole float32 values); nothing panics.
func FuzzRowChunk(f *testing.F) {
	wire, _ := proto.Marshal(&backendpb.EvalChunk{Index: 3, Pos: 9, Logits: encodeFloats(nil, []float32{1, -2, 3.5}), ComputeNs: 1234, Hidden: encodeFloats(nil, []float32{7})})
	f.Add(wire, uint16(5))
	f.Add(wire[:len(wire)-2], uint16(1))
	f.Add([]byte{0x18, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01, 0x1a, 0x00}, uint16(3))
	f.Add([]byte{0x2b, 0x2c}, uint16(1)) // a group
	f.Fuzz(func(t *testing.T, b []byte, split uint16) {
		var data mem.BufferSlice
		step := int(split%64) + 1
		for rest := b; len(rest) > 0; {
			n := min(step, len(rest))
			data, rest = append(data, mem.SliceBuffer(rest[:n])), rest[n:]
		}
		chunk := rowChunk{buf: func(n int) []float32 { return make([]float32, n) }}
		err := (rowCodec{}).Unmarshal(data, &chunk)
		var want backendpb.EvalChunk
		if err != nil {
			return
		}
		if perr := proto.Unmarshal(b, &want); perr != nil {
			t.Fatalf("parsed %x, which protobuf refuses: %v", b, perr)
		}
		if chunk.index != want.Index || chunk.pos != want.Pos || chunk.computeNS != want.ComputeNs ||
			string(encodeFloats(nil, chunk.values)) != string(want.Logits) || string(encodeFloats(nil, chunk.hidden)) != string(want.Hidden) {
			t.Fatalf("%x: got %d/%d/%d %v %v, protobuf reads %v", b, chunk.index, chunk.pos, chunk.computeNS, chunk.values, chunk.hidden, &want)
		}
	})
}
