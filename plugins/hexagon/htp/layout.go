// Package htp is a simulated Qualcomm Hexagon HTP (the NPU llama.cpp's
// ggml-hexagon backend drives) for evalrun's engine: weights repacked at
// load into the HTP's row layout, activations quantized to Q8_0 on the
// device, integer block dots with fp32 accumulation, layers split across
// several HTP sessions, and injected faults. See docs/npu-plugins.md ("hexagon")
// for what is modelled and what is a documented choice.
package htp

import (
	"encoding/binary"
	"fmt"

	"github.com/evalrun/evalrun/engine/ggml"
)

// The HTP row layout ("x4x2", ggml-hexagon's repack_row_q4x4x2 and
// friends): a row's quants come first, all of them, then all of its block
// scales, so the device streams 128-byte vectors of quants and one vector of
// scales. Quants are grouped in super-blocks of 256 elements (8 blocks of
// 32):
//
//   - Q8_0: quants are the int8 values in element order (K bytes), then K/32
//     fp16 scales.
//   - Q4_0, MXFP4: super-block s holds L = min(256, K-256s) elements in L/2
//     bytes from byte 128s; byte j has element j of the super-block in its
//     low nibble and element j+L/2 in its high nibble (ggml-hexagon pairs j
//     with j+128; a short last super-block, K not a multiple of 256, pairs
//     j with j+L/2: our choice, ggml-hexagon truncates it). Then K/32 fp16
//     scales (Q4_0) or K/32 E8M0 bytes (MXFP4).
//   - F16, F32: rows as in the file.
//
// Every layout has the size of the ggml row it came from.

// SuperBlock is the number of elements the HTP's quant layout groups.
const SuperBlock = 256

// Supported reports whether the HTP takes weights of type t.
func Supported(t ggml.Type) bool {
	switch t {
	case ggml.Q4_0, ggml.Q8_0, ggml.MXFP4, ggml.F16, ggml.F32:
		return true
	}
	return false
}

// nibbleBlock describes a 4-bit block type: its header (the scale) and
// total size in bytes.
func nibbleBlock(t ggml.Type) (hdr, size int, ok bool) {
	switch t {
	case ggml.Q4_0:
		return 2, 18, true
	case ggml.MXFP4:
		return 1, 17, true
	}
	return 0, 0, false
}

func checkRows(t ggml.Type, k int, src, dst []byte) (rowBytes int, err error) {
	if !Supported(t) {
		return 0, fmt.Errorf("htp: weights of type %s are not supported (Q4_0, Q8_0, MXFP4, F16, F32)", t)
	}
	rb, err := ggml.RowBytes(t, k)
	if err != nil {
		return 0, fmt.Errorf("htp: %w", err)
	}
	if rb == 0 || len(src)%rb != 0 || len(dst) != len(src) {
		return 0, fmt.Errorf("htp: %d bytes of %s are not whole rows of %d elements (%d bytes each), or the destination's %d bytes differ", len(src), t, k, rb, len(dst))
	}
	return rb, nil
}

// Repack converts rows of k elements of type t from ggml's block layout
// (src) into the HTP layout (dst, the same size).
func Repack(t ggml.Type, k int, src, dst []byte) error { return eachRow(t, k, src, dst, repackRow) }

// Unpack is Repack's inverse: HTP rows back to ggml blocks.
func Unpack(t ggml.Type, k int, src, dst []byte) error { return eachRow(t, k, src, dst, unpackRow) }

func eachRow(t ggml.Type, k int, src, dst []byte, convert func(t ggml.Type, k int, src, dst []byte)) error {
	rb, err := checkRows(t, k, src, dst)
	if err != nil {
		return err
	}
	for r := 0; r < len(src); r += rb {
		convert(t, k, src[r:r+rb], dst[r:r+rb])
	}
	return nil
}

func repackRow(t ggml.Type, k int, blocks, row []byte) {
	nb := k / 32
	if t == ggml.Q8_0 {
		for b := range nb {
			blk := blocks[34*b : 34*b+34]
			copy(row[32*b:32*b+32], blk[2:])
			copy(row[k+2*b:k+2*b+2], blk[:2])
		}
		return
	}
	hdr, size, ok := nibbleBlock(t)
	if !ok {
		copy(row, blocks)
		return
	}
	quants, scales := row[:k/2], row[k/2:]
	for s := 0; s < k; s += SuperBlock {
		half := min(SuperBlock, k-s) / 2
		sb := quants[s/2 : s/2+half]
		for e := range 2 * half {
			b, i := (s+e)/32, (s+e)%32
			q := blocks[b*size+hdr+i%16]
			if i >= 16 {
				q >>= 4
			}
			q &= 0xF
			if e < half {
				sb[e] = sb[e]&0xF0 | q
			} else {
				sb[e-half] = sb[e-half]&0x0F | q<<4
			}
		}
	}
	for b := range nb {
		copy(scales[hdr*b:hdr*b+hdr], blocks[b*size:b*size+hdr])
	}
}

const (
	lowNibbles = 0x0F0F0F0F0F0F0F0F
)

// unpackRow decodes one HTP row into ggml blocks. It runs on every matmul
// (the device streams its layout), so the nibble regrouping works on 8
// bytes at a time.
func unpackRow(t ggml.Type, k int, row, blocks []byte) {
	nb := k / 32
	if t == ggml.Q8_0 {
		for b := range nb {
			blk := blocks[34*b : 34*b+34 : 34*b+34]
			*(*[32]byte)(blk[2:34]) = *(*[32]byte)(row[32*b : 32*b+32])
			blk[0], blk[1] = row[k+2*b], row[k+2*b+1]
		}
		return
	}
	hdr, size, ok := nibbleBlock(t)
	if !ok {
		copy(blocks, row)
		return
	}
	quants, scales := row[:k/2], row[k/2:]
	le := binary.LittleEndian
	for b := range nb {
		s := b / 8 * SuperBlock
		half := min(SuperBlock, k-s) / 2
		sb := quants[s/2 : s/2+half]
		o := b*32 - s // the block's first element within its super-block
		blk := blocks[b*size : b*size+size]
		copy(blk[:hdr], scales[hdr*b:hdr*b+hdr])
		qs := blk[hdr:size]
		for i := 0; i < 16; i += 8 {
			lo := nibbles(le.Uint64(sb[(o+i)%half:]), o+i >= half)
			hi := nibbles(le.Uint64(sb[(o+16+i)%half:]), o+16+i >= half)
			le.PutUint64(qs[i:], lo|hi<<4)
		}
	}
}

// nibbles extracts the low (or high) nibble of each of 8 bytes.
func nibbles(v uint64, high bool) uint64 {
	if high {
		v >>= 4
	}
	return v & lowNibbles
}
