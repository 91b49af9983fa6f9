package backend

import (
	"bytes"
	"testing"

	protobuf "google.golang.org/protobuf/proto"

	"github.com/evalrun/evalrun/backend/internal/backendpb"
)

// The pool hands out buffers of the asked length whose capacity covers
// their class, reuses what it is given back and does not clear it (its
// users overwrite every byte).
func TestDirtyPool(t *testing.T) {
	p := &dirtyPool{}
	for _, n := range []int{0, 1, 255, 256, 257, 16 << 10, 513 << 10, 1 << 24, 1<<24 + 1} {
		b := p.Get(n)
		if len(*b) != n {
			t.Fatalf("Get(%d): length %d", n, len(*b))
		}
		p.Put(b)
	}
	b := p.Get(1000)
	(*b)[0] = 42
	p.Put(b)
	for range 100 { // sync.Pool may drop an item; it keeps one here but is not bound to
		c := p.Get(700)
		if cap(*c) < 700 {
			t.Fatalf("Get(700): capacity %d", cap(*c))
		}
		if &(*c)[0] == &(*b)[0] {
			if (*c)[0] != 42 {
				t.Fatal("the reused buffer was cleared")
			}
			return
		}
		p.Put(c)
	}
}

// The plugin's codec marshals an EvalChunk to protobuf's bytes (into a
// pooled buffer whose old content is overwritten) and leaves other
// messages to gRPC's proto codec.
func TestChunkCodecMarshalsProtobuf(t *testing.T) {
	chunk := &backendpb.EvalChunk{Index: 2, Pos: 70, Logits: encodeFloats(nil, []float32{1, 2, 3, -4}), ComputeNs: 99}
	want, err := protobuf.Marshal(chunk)
	if err != nil {
		t.Fatal(err)
	}
	for range 3 { // reused buffers hold the previous message
		got, err := chunkCodec{}.Marshal(chunk)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(got.Materialize(), want) {
			t.Fatalf("marshaled %x, want %x", got.Materialize(), want)
		}
		got.Free()
		chunk.Index++
		want, _ = protobuf.Marshal(chunk)
	}
	req := &backendpb.EvalRequest{Session: "s", Tokens: []int32{1, 2}}
	got, err := chunkCodec{}.Marshal(req)
	if err != nil {
		t.Fatal(err)
	}
	var back backendpb.EvalRequest
	if err := (chunkCodec{}).Unmarshal(got, &back); err != nil || back.Session != "s" || len(back.Tokens) != 2 {
		t.Fatalf("request round trip: %v %v", &back, err)
	}
}
