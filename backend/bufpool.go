package backend

import (
	"math/bits"
	"sync"

	"google.golang.org/grpc/encoding"
	"google.golang.org/grpc/encoding/proto"
	"google.golang.org/grpc/mem"
	protobuf "google.golang.org/protobuf/proto"

	"github.com/evalrun/evalrun/backend/internal/backendpb"
)

// rowPool is the buffer pool of the host's and the plugins' gRPC transport.
// gRPC's default pool clears every buffer it hands out (1 MB for a row of
// 0.5 MB); its users here overwrite what they get (a frame read from the
// socket, a message marshaled into it), so this one does not: clearing is
// a large share of the CPU time of moving a row (measured:
// docs/design-notes.md).
var rowPool mem.BufferPool = &dirtyPool{}

// dirtyPool keeps buffers in classes of powers of two, from 256 bytes to
// 16 MB; a buffer of class k has a capacity of 2^k at least.
type dirtyPool struct {
	classes [maxClass + 1]sync.Pool
}

const minClass, maxClass = 8, 24

func (p *dirtyPool) Get(length int) *[]byte {
	k := max(minClass, bits.Len(uint(max(length-1, 0))))
	if k > maxClass {
		b := make([]byte, length)
		return &b
	}
	if b, ok := p.classes[k].Get().(*[]byte); ok {
		*b = (*b)[:length]
		return b
	}
	b := make([]byte, length, 1<<k)
	return &b
}

func (p *dirtyPool) Put(b *[]byte) {
	k := bits.Len(uint(cap(*b))) - 1 // the class whose size it covers
	if k < minClass || k > maxClass {
		return
	}
	p.classes[k].Put(b)
}

// chunkCodec is the plugins' server codec: an EvalChunk is marshaled into a
// buffer of rowPool (gRPC's proto codec takes a cleared one from its own);
// every other message goes through the proto codec.
type chunkCodec struct{}

func (chunkCodec) Name() string { return proto.Name }

func (chunkCodec) Marshal(v any) (mem.BufferSlice, error) {
	chunk, ok := v.(*backendpb.EvalChunk)
	if !ok {
		return encoding.GetCodecV2(proto.Name).Marshal(v)
	}
	opts := protobuf.MarshalOptions{}
	b := rowPool.Get(opts.Size(chunk))
	out, err := opts.MarshalAppend((*b)[:0], chunk)
	if err != nil {
		rowPool.Put(b)
		return nil, err
	}
	*b = out
	return mem.BufferSlice{mem.NewBuffer(b, rowPool)}, nil
}

func (chunkCodec) Unmarshal(data mem.BufferSlice, v any) error {
	return encoding.GetCodecV2(proto.Name).Unmarshal(data, v)
}
