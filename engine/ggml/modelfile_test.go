package ggml

import (
	"encoding/binary"
	"fmt"
	"os"
	"testing"
)

// A minimal GGUF v3 tensor reader, just enough to pull tensors out of the
// bundled models (engine/ggml cannot import engine/gguf: gguf imports ggml).

type testTensor struct {
	name string
	dims []uint64
	typ  Type
	data []byte
}

func readTestModel(t *testing.T, path string) map[string]testTensor {
	t.Helper()
	buf, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	m, err := parseTestGGUF(buf)
	if err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	return m
}

func parseTestGGUF(b []byte) (map[string]testTensor, error) {
	off := 0
	need := func(n int) error {
		if off+n > len(b) {
			return fmt.Errorf("truncated at byte %d", off)
		}
		return nil
	}
	u32 := func() (uint32, error) {
		if err := need(4); err != nil {
			return 0, err
		}
		v := binary.LittleEndian.Uint32(b[off:])
		off += 4
		return v, nil
	}
	u64 := func() (uint64, error) {
		if err := need(8); err != nil {
			return 0, err
		}
		v := binary.LittleEndian.Uint64(b[off:])
		off += 8
		return v, nil
	}
	str := func() (string, error) {
		n, err := u64()
		if err != nil || need(int(n)) != nil {
			return "", fmt.Errorf("bad string at byte %d", off)
		}
		s := string(b[off : off+int(n)])
		off += int(n)
		return s, nil
	}
	scalarSize := map[uint32]int{0: 1, 1: 1, 2: 2, 3: 2, 4: 4, 5: 4, 6: 4, 7: 1, 10: 8, 11: 8, 12: 8}
	var skip func(typ uint32) error
	skip = func(typ uint32) error {
		if n, ok := scalarSize[typ]; ok {
			off += n
			return need(0)
		}
		switch typ {
		case 8:
			_, err := str()
			return err
		case 9:
			et, err := u32()
			if err != nil {
				return err
			}
			n, err := u64()
			if err != nil {
				return err
			}
			for i := uint64(0); i < n; i++ {
				if err := skip(et); err != nil {
					return err
				}
			}
			return nil
		}
		return fmt.Errorf("bad value type %d at byte %d", typ, off)
	}
	if string(b[:4]) != "GGUF" {
		return nil, fmt.Errorf("not GGUF")
	}
	off = 8
	nt, _ := u64()
	nkv, _ := u64()
	align := uint64(32)
	for i := uint64(0); i < nkv; i++ {
		key, err := str()
		if err != nil {
			return nil, err
		}
		typ, err := u32()
		if err != nil {
			return nil, err
		}
		if key == "general.alignment" && typ == 4 {
			v, _ := u32()
			align = uint64(v)
			continue
		}
		if err := skip(typ); err != nil {
			return nil, err
		}
	}
	type info struct {
		testTensor
		offset uint64
	}
	var infos []info
	for i := uint64(0); i < nt; i++ {
		name, err := str()
		if err != nil {
			return nil, err
		}
		nd, _ := u32()
		dims := make([]uint64, nd)
		for d := range dims {
			dims[d], _ = u64()
		}
		typ, _ := u32()
		o, err := u64()
		if err != nil {
			return nil, err
		}
		infos = append(infos, info{testTensor{name: name, dims: dims, typ: Type(typ)}, o})
	}
	base := (uint64(off) + align - 1) / align * align
	out := map[string]testTensor{}
	for _, in := range infos {
		n := uint64(1)
		for _, d := range in.dims {
			n *= d
		}
		size, err := RowBytes(in.typ, int(n))
		if err != nil {
			return nil, fmt.Errorf("%s: %v", in.name, err)
		}
		start := base + in.offset
		if start+uint64(size) > uint64(len(b)) {
			return nil, fmt.Errorf("%s: data out of file", in.name)
		}
		in.data = b[start : start+uint64(size)]
		out[in.name] = in.testTensor
	}
	return out, nil
}
