package backend

import (
	"encoding/binary"
	"fmt"
	"math"
	"unsafe"

	"google.golang.org/grpc/encoding"
	"google.golang.org/grpc/encoding/proto"
	"google.golang.org/grpc/mem"
	"google.golang.org/protobuf/encoding/protowire"
)

// rowCodec is the host's codec for Eval calls. Requests go through gRPC's
// proto codec; an EvalChunk is parsed by hand so that its logits bytes are
// decoded once, straight into the buffer the caller hands out (the generic
// codec would first copy them into a freshly allocated []byte per row, 0.6 MB
// for a 152k vocabulary). Its name is "proto", so the plugin's server reads
// the call as any other.
type rowCodec struct{}

func (rowCodec) Name() string { return proto.Name }

func (rowCodec) Marshal(v any) (mem.BufferSlice, error) {
	return encoding.GetCodecV2(proto.Name).Marshal(v)
}

func (rowCodec) Unmarshal(data mem.BufferSlice, v any) error {
	chunk, ok := v.(*rowChunk)
	if !ok {
		return encoding.GetCodecV2(proto.Name).Unmarshal(data, v)
	}
	b := data.MaterializeToBuffer(mem.DefaultBufferPool())
	defer b.Free()
	if err := chunk.parse(b.ReadOnlyData()); err != nil {
		chunk.err = err
		return err
	}
	return nil
}

// rowChunk receives one EvalChunk (proto field numbers 1-5).
type rowChunk struct {
	buf                   func(n int) []float32
	index, pos, computeNS int64
	values                []float32
	hidden                []float32 // field 5, freshly allocated (rare, small)
	err                   error     // a malformed chunk, kept to report it as such
}

func (c *rowChunk) parse(b []byte) error {
	c.index, c.pos, c.computeNS, c.values, c.hidden = 0, 0, 0, nil, nil
	for len(b) > 0 {
		num, typ, n := protowire.ConsumeTag(b)
		if n < 0 {
			return fmt.Errorf("eval chunk: %w", protowire.ParseError(n))
		}
		b = b[n:]
		switch {
		case typ == protowire.VarintType && (num == 1 || num == 2 || num == 4):
			v, n := protowire.ConsumeVarint(b)
			if n < 0 {
				return fmt.Errorf("eval chunk: field %d: %w", num, protowire.ParseError(n))
			}
			switch num {
			case 1:
				c.index = int64(v)
			case 2:
				c.pos = int64(v)
			default:
				c.computeNS = int64(v)
			}
			b = b[n:]
		case typ == protowire.BytesType && num == 3:
			raw, n := protowire.ConsumeBytes(b)
			if n < 0 {
				return fmt.Errorf("eval chunk: logits: %w", protowire.ParseError(n))
			}
			if len(raw)%4 != 0 {
				return fmt.Errorf("eval chunk %d (pos %d): logits: %d bytes is not a whole number of float32 values", c.index, c.pos, len(raw))
			}
			c.values = c.buf(len(raw) / 4)
			decodeFloats(c.values, raw)
			b = b[n:]
		case typ == protowire.BytesType && num == 5:
			raw, n := protowire.ConsumeBytes(b)
			if n < 0 || len(raw)%4 != 0 {
				return fmt.Errorf("eval chunk %d (pos %d): hidden states: malformed (%d bytes)", c.index, c.pos, len(raw))
			}
			c.hidden = make([]float32, len(raw)/4)
			decodeFloats(c.hidden, raw)
			b = b[n:]
		default:
			n := protowire.ConsumeFieldValue(num, typ, b)
			if n < 0 {
				return fmt.Errorf("eval chunk: field %d: %w", num, protowire.ParseError(n))
			}
			b = b[n:]
		}
	}
	if c.values == nil {
		c.values = c.buf(0)
	}
	return nil
}

// littleEndian: the wire format is little-endian float32, the memory layout
// of amd64 and arm64, where a row is one memmove.
var littleEndian = binary.NativeEndian.Uint16([]byte{1, 0}) == 1

func floatBytes(v []float32) []byte {
	return unsafe.Slice((*byte)(unsafe.Pointer(unsafe.SliceData(v))), 4*len(v))
}

// decodeFloats reads len(dst) little-endian float32 values from b.
func decodeFloats(dst []float32, b []byte) {
	if littleEndian {
		copy(floatBytes(dst), b)
		return
	}
	for i := range dst {
		dst[i] = math.Float32frombits(binary.LittleEndian.Uint32(b[4*i:]))
	}
}

// wireFloats is v as little-endian float32 bytes for a message serialized
// before v changes: v's own memory on a little-endian host (no copy of a
// 0.5 MB row), else encoded into *buf.
func wireFloats(buf *[]byte, v []float32) []byte {
	if littleEndian {
		return floatBytes(v)
	}
	*buf = encodeFloats((*buf)[:0], v)
	return *buf
}

// encodeFloats appends v as little-endian float32 bytes.
func encodeFloats(dst []byte, v []float32) []byte {
	if littleEndian {
		return append(dst, floatBytes(v)...)
	}
	for _, f := range v {
		dst = binary.LittleEndian.AppendUint32(dst, math.Float32bits(f))
	}
	return dst
}
