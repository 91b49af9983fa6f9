package backend

import (
	"cmp"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math"
	"unsafe"

	"google.golang.org/grpc/encoding"
	"google.golang.org/grpc/encoding/proto"
	"google.golang.org/grpc/mem"
	"google.golang.org/protobuf/encoding/protowire"
)

// rowCodec is the host's codec for Eval calls. Requests go through gRPC's
// proto codec; an EvalChunk is parsed by hand so that its logits bytes are
// copied once, from the HTTP/2 frames gRPC received straight into the
// buffer the caller hands out (the generic codec would first gather the
// frames into one buffer, 0.6 MB for a 152k vocabulary, from a pool that
// clears 1 MB per row, and then copy the logits out of it). A row the
// plugin wrote into the call's shared memory slot (rowshm.go) is copied
// from there, once the place the chunk gives is checked to be that slot.
// Its name is "proto", so the plugin's server reads the call as any other.
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
	if err := chunk.parse(data); err != nil {
		chunk.err = err
		return err
	}
	return nil
}

// rowChunk receives one EvalChunk (proto field numbers 1-7).
type rowChunk struct {
	buf                   func(n int) []float32
	index, pos, computeNS int64
	values                []float32
	hidden                []float32 // field 5, freshly allocated (rare, small)
	err                   error     // a malformed chunk, kept to report it as such
	r                     mem.Reader
	lease                 *rowLease // the call's shared memory slots; nil: none
}

// parse reads the message straight from gRPC's buffers (the frames it
// received): the logits bytes are copied once, into the caller's row,
// whichever buffers they span.
func (c *rowChunk) parse(data mem.BufferSlice) error {
	c.index, c.pos, c.computeNS, c.values, c.hidden = 0, 0, 0, nil, nil
	var sharedOff, sharedBytes int64 // fields 6 and 7: the row in shared memory
	r := &c.r
	r.Reset(data)
	defer r.Close()
	for r.Remaining() > 0 {
		tag, err := readVarint(r)
		if err != nil {
			return fmt.Errorf("eval chunk: %w", err)
		}
		num, typ := protowire.DecodeTag(tag)
		if num < protowire.MinValidNumber || num > protowire.MaxValidNumber {
			return fmt.Errorf("eval chunk: invalid field number %d", num)
		}
		switch typ {
		case protowire.VarintType:
			v, err := readVarint(r)
			if err != nil {
				return fmt.Errorf("eval chunk: field %d: %w", num, err)
			}
			switch num {
			case 1:
				c.index = int64(v)
			case 2:
				c.pos = int64(v)
			case 4:
				c.computeNS = int64(v)
			case 6:
				sharedOff = int64(v)
			case 7:
				sharedBytes = int64(v)
			}
		case protowire.BytesType:
			n, err := readVarint(r)
			if err != nil || n > uint64(r.Remaining()) {
				return fmt.Errorf("eval chunk: field %d: %w", num, cmp.Or(err, io.ErrUnexpectedEOF))
			}
			switch {
			case num == 3 && n%4 != 0:
				return fmt.Errorf("eval chunk %d (pos %d): logits: %d bytes is not a whole number of float32 values", c.index, c.pos, n)
			case num == 3:
				c.values = c.buf(int(n / 4))
				readFloats(r, c.values)
			case num == 5 && n%4 != 0:
				return fmt.Errorf("eval chunk %d (pos %d): hidden states: malformed (%d bytes)", c.index, c.pos, n)
			case num == 5:
				c.hidden = make([]float32, n/4)
				readFloats(r, c.hidden)
			default:
				r.Discard(int(n))
			}
		case protowire.Fixed32Type, protowire.Fixed64Type:
			n := 4
			if typ == protowire.Fixed64Type {
				n = 8
			}
			if _, err := r.Discard(n); err != nil {
				return fmt.Errorf("eval chunk: field %d: %w", num, io.ErrUnexpectedEOF)
			}
		default:
			return fmt.Errorf("eval chunk: field %d: unsupported wire type %d", num, typ)
		}
	}
	if sharedOff != 0 || sharedBytes != 0 {
		if err := c.takeShared(sharedOff, sharedBytes); err != nil {
			return err
		}
	}
	if c.values == nil {
		c.values = c.buf(0)
	}
	if c.lease != nil && !c.lease.publish(c.lease.consumed+1) { // the row is the host's: its slot is free
		return fmt.Errorf("eval chunk %d (pos %d): %w: the region is closed (the plugin was stopped)", c.index, c.pos, errSharedRow)
	}
	return nil
}

// takeShared copies the row a chunk placed in shared memory into the
// caller's buffer, after checking that the host lent the call slots and
// that the place is the next row's slot.
func (c *rowChunk) takeShared(off, n int64) error {
	var err error
	switch {
	case c.lease == nil:
		err = fmt.Errorf("%w: the host lent this call no shared memory", errSharedRow)
	case c.values != nil:
		err = fmt.Errorf("%w: the chunk also carries its logits in the message", errSharedRow)
	default:
		c.values, err = c.lease.take(off, n, c.buf)
	}
	if err != nil {
		return fmt.Errorf("eval chunk %d (pos %d): %w", c.index, c.pos, err)
	}
	return nil
}

// readVarint reads a protobuf varint (at most 10 bytes, the tenth 0 or 1).
func readVarint(r *mem.Reader) (uint64, error) {
	var v uint64
	for i := 0; i < binary.MaxVarintLen64; i++ {
		b, err := r.ReadByte()
		if err != nil {
			return 0, io.ErrUnexpectedEOF
		}
		if i == binary.MaxVarintLen64-1 && b > 1 {
			break
		}
		v |= uint64(b&0x7f) << (7 * i)
		if b < 0x80 {
			return v, nil
		}
	}
	return 0, errors.New("variable length integer overflow")
}

// readFloats reads len(dst) little-endian float32 values from r, which
// holds them all.
func readFloats(r *mem.Reader, dst []float32) {
	b := floatBytes(dst)
	r.Read(b)
	if !littleEndian {
		for i := range dst {
			dst[i] = math.Float32frombits(binary.LittleEndian.Uint32(b[4*i:]))
		}
	}
}

// littleEndian: the wire format is little-endian float32, the memory layout
// of amd64 and arm64, where a row is one memmove.
var littleEndian = binary.NativeEndian.Uint16([]byte{1, 0}) == 1

func floatBytes(v []float32) []byte {
	return unsafe.Slice((*byte)(unsafe.Pointer(unsafe.SliceData(v))), 4*len(v))
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
