package npu

import (
	"encoding/binary"
	"math"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
)

func info(t MatmulType, M, K, N int32, b, ac Layout) *MatmulInfo {
	return &MatmulInfo{M: M, K: K, N: N, Type: t, BLayout: b, ACLayout: ac}
}

func mustOperand(t *testing.T, in *MatmulInfo, name string) Operand {
	t.Helper()
	o, err := OperandOf(in, name)
	if err != nil {
		t.Fatal(err)
	}
	return o
}

// Offsets below are worked out by hand from docs rknn-npu.md §5.
func TestOffsetsHandComputed(t *testing.T) {
	cases := []struct {
		what     string
		in       *MatmulInfo
		operand  string
		r, c     int
		want     int
		wantDims []uint32
		wantSize uint32
	}{
		// A native fp16, subK=8, M=3, K=40: (17/8)*3*8 + 2*8 + 17%8 = 48+16+1.
		{"A native fp16", info(1, 3, 40, 16, 0, 1), "A", 2, 17, 65, []uint32{5, 3, 8}, 5 * 3 * 8 * 2},
		{"A norm fp16", info(1, 3, 40, 16, 0, 0), "A", 2, 17, 2*40 + 17, []uint32{3, 40}, 3 * 40 * 2},
		// A native int8, subK=16: (20/16)*2*16 + 1*16 + 4.
		{"A native int8", info(2, 2, 64, 32, 0, 1), "A", 1, 20, 32 + 16 + 4, []uint32{4, 2, 16}, 4 * 2 * 16},
		// A native int4, subK=32 (16 bytes): (40/32)*2*32 + 1*32 + 8.
		{"A native int4", info(10, 2, 64, 64, 0, 1), "A", 1, 40, 64 + 32 + 8, []uint32{2, 2, 32}, 2 * 2 * 32 / 2},
		// B native fp16 K=64 N=32: subN=16, K1=2: ((20/16)*2 + 40/32)*512 + 4*32 + 8.
		{"B native fp16", info(1, 1, 64, 32, 1, 0), "B", 40, 20, 3*512 + 128 + 8, []uint32{2, 2, 16, 32}, 2 * 2 * 16 * 32 * 2},
		// B native int8 subN=32, K=64 N=64: ((40/32)*2 + 33/32)*1024 + 8*32 + 1.
		{"B native int8", info(2, 1, 64, 64, 1, 0), "B", 33, 40, 3*1024 + 256 + 1, []uint32{2, 2, 32, 32}, 2 * 2 * 32 * 32},
		// B native int4 subN=64, K=64 N=128: ((70/64)*2 + 0)*2048 + 6*32 + 5.
		{"B native int4", info(10, 1, 64, 128, 1, 0), "B", 5, 70, 2*2048 + 192 + 5, []uint32{2, 2, 64, 32}, 2 * 2 * 64 * 32 / 2},
		{"B norm", info(1, 1, 64, 32, 0, 0), "B", 5, 7, 5*32 + 7, []uint32{64, 32}, 64 * 32 * 2},
		{"B tp_norm", info(1, 1, 64, 32, 2, 0), "B", 5, 7, 7*64 + 5, []uint32{32, 64}, 64 * 32 * 2},
		// C native fp32 subN=4, M=3: (6/4)*3*4 + 1*4 + 2.
		{"C native fp32", info(1, 3, 32, 16, 0, 1), "C", 1, 6, 12 + 4 + 2, []uint32{4, 3, 4}, 4 * 3 * 4 * 4},
		// C native fp16 subN=8: (13/8)*3*8 + 2*8 + 5.
		{"C native fp16", info(4, 3, 32, 16, 0, 1), "C", 2, 13, 24 + 16 + 5, []uint32{2, 3, 8}, 2 * 3 * 8 * 2},
		// C native int32 subN=4 (type 2), int16 subN=8 (type 10), int8 subN=16 (type 3).
		{"C native int32", info(2, 2, 32, 32, 0, 1), "C", 1, 9, 2*2*4 + 4 + 1, []uint32{8, 2, 4}, 8 * 2 * 4 * 4},
		{"C native int16", info(10, 2, 64, 64, 0, 1), "C", 1, 9, 1*2*8 + 8 + 1, []uint32{8, 2, 8}, 8 * 2 * 8 * 2},
		{"C native int8", info(3, 2, 32, 32, 0, 1), "C", 1, 17, 1*2*16 + 16 + 1, []uint32{2, 2, 16}, 2 * 2 * 16},
		{"C norm", info(1, 3, 32, 16, 0, 0), "C", 2, 5, 2*16 + 5, []uint32{3, 16}, 3 * 16 * 4},
		// K=10240 > 8192: segments of 8192 and 2048. (k=8200, n=3), N=16:
		// segment 1 starts after 1*16*8192 elements; then ((0)*64 + 0)*512 + 3*32 + 8.
		{"B native segment 1", info(1, 1, 10240, 16, 1, 0), "B", 8200, 3, 16*8192 + 3*32 + 8, []uint32{1, 320, 16, 32}, 320 * 16 * 32 * 2},
		// (k=8191, n=17), N=32, segment 0 has K1=256: ((1)*256 + 255)*512 + 1*32 + 31.
		{"B native segment 0", info(1, 1, 10240, 32, 1, 0), "B", 8191, 17, 511*512 + 32 + 31, []uint32{2, 320, 16, 32}, 2 * 320 * 16 * 32 * 2},
		// (k=10239, n=17), N=32: segment 1 (K1=64) after 2*16*8192: ((1)*64 + 63)*512 + 1*32 + 31.
		{"B native segment 1 last", info(1, 1, 10240, 32, 1, 0), "B", 10239, 17, 2*16*8192 + 127*512 + 63, nil, 0},
	}
	for _, tc := range cases {
		o := mustOperand(t, tc.in, tc.operand)
		if got := o.Offset(tc.r, tc.c); got != tc.want {
			t.Errorf("%s: Offset(%d,%d) = %d, want %d", tc.what, tc.r, tc.c, got, tc.want)
		}
		if tc.wantDims != nil {
			a := o.Attr()
			if !slices.Equal(a.Dims, tc.wantDims) || a.Size != tc.wantSize || a.Name != tc.operand {
				t.Errorf("%s: attr %+v, want dims %v size %d", tc.what, a, tc.wantDims, tc.wantSize)
			}
		}
	}
}

// Every logical element maps to a distinct slot inside the buffer.
func TestOffsetsAreABijection(t *testing.T) {
	for _, in := range []*MatmulInfo{
		info(1, 3, 40, 24, 1, 1), info(2, 5, 96, 40, 1, 1), info(10, 3, 96, 72, 1, 1),
		info(1, 2, 10240, 16, 1, 1), info(4, 3, 64, 16, 2, 1),
	} {
		for _, name := range []string{"A", "B", "C"} {
			o := mustOperand(t, in, name)
			seen := make([]bool, o.Elems())
			for r := 0; r < o.Rows; r++ {
				for c := 0; c < o.Cols; c++ {
					off := o.Offset(r, c)
					if off < 0 || off >= len(seen) || seen[off] {
						t.Fatalf("%+v %s: (%d,%d) -> %d out of range or reused", *in, name, r, c, off)
					}
					seen[off] = true
				}
			}
		}
	}
}

func TestAttrs(t *testing.T) {
	io, err := Attrs(info(10, 4, 64, 128, 1, 1))
	if err != nil {
		t.Fatal(err)
	}
	want := IOAttr{
		A: TensorAttr{Name: "A", Dims: []uint32{2, 4, 32}, Size: 2 * 4 * 32 / 2, Type: TensorInt4},
		B: TensorAttr{Name: "B", Dims: []uint32{2, 2, 64, 32}, Size: 2 * 2 * 64 * 32 / 2, Type: TensorInt4},
		C: TensorAttr{Name: "C", Dims: []uint32{16, 4, 8}, Size: 16 * 4 * 8 * 2, Type: TensorInt16},
	}
	for _, p := range [][2]TensorAttr{{io.A, want.A}, {io.B, want.B}, {io.C, want.C}} {
		if p[0].Name != p[1].Name || !slices.Equal(p[0].Dims, p[1].Dims) || p[0].Size != p[1].Size || p[0].Type != p[1].Type {
			t.Errorf("attr %+v, want %+v", p[0], p[1])
		}
	}
	for _, bad := range []*MatmulInfo{nil, info(1, 0, 32, 16, 0, 0), info(99, 1, 32, 16, 0, 0), info(1, 1, 32, 16, 3, 0), info(1, 1, 32, 16, 0, 2), info(1, 1, 32, 16, -1, 0)} {
		if _, err := Attrs(bad); Code(err) != ErrParamInvalid {
			t.Errorf("Attrs(%+v) = %v, want ErrParamInvalid", bad, err)
		}
	}
	// The size must fit the 32-bit attr field.
	if _, err := Attrs(info(1, 1<<20, 8192, 1<<16, 0, 0)); err == nil || !strings.Contains(err.Error(), "32-bit") {
		t.Errorf("huge matmul: %v", err)
	}
}

func TestInt4NibbleOrder(t *testing.T) {
	// A norm int4, M=1 K=64: element 0 low nibble of byte 0, element 1 high.
	in := info(10, 1, 64, 64, 0, 0)
	src := make([]int8, 64)
	src[0], src[1], src[2], src[63] = 3, -2, 7, -8
	dst := make([]byte, 32)
	if err := PackA(in, src, 1, 64, dst); err != nil {
		t.Fatal(err)
	}
	if dst[0] != 0xe3 || dst[1] != 0x07 || dst[31] != 0x80 {
		t.Errorf("bytes % x ... %x, want e3 07 ... 80", dst[:2], dst[31])
	}
	// B native int4 (k=5, n=70) is element 4293: odd, so the high nibble of byte 2146.
	in = info(10, 1, 64, 128, 1, 0)
	b := make([]int8, 64*128)
	b[5*128+70] = -3
	buf := make([]byte, 64*128/2)
	if err := PackB(in, b, 64, 128, buf); err != nil {
		t.Fatal(err)
	}
	for i, v := range buf {
		want := byte(0)
		if i == 2146 {
			want = 0xd0
		}
		if v != want {
			t.Fatalf("byte %d = %#x, want %#x", i, v, want)
		}
	}
}

// The offload code packs a real K (here 172) into the created, padded K=192.
func TestPackPadsWithZeros(t *testing.T) {
	const Kreal, Mreal, K, M, N = 172, 3, 192, 4, 32
	in := info(1, M, K, N, 1, 1)
	a := make([]float32, Mreal*Kreal)
	for i := range a {
		a[i] = float32(i%97 + 1)
	}
	oa := mustOperand(t, in, "A")
	buf := make([]byte, oa.Size())
	for i := range buf {
		buf[i] = 0xff // must be cleared
	}
	if err := PackA(in, a, Mreal, Kreal, buf); err != nil {
		t.Fatal(err)
	}
	for m := 0; m < M; m++ {
		for k := 0; k < K; k++ {
			got := F16ToF32(binary.LittleEndian.Uint16(buf[2*oa.Offset(m, k):]))
			want := float32(0)
			if m < Mreal && k < Kreal {
				want = a[m*Kreal+k]
			}
			if got != want {
				t.Fatalf("A(%d,%d) = %v, want %v", m, k, got, want)
			}
		}
	}
	// Weight rows N×Kreal into native B with K padded.
	w := make([]float32, N*Kreal)
	for i := range w {
		w[i] = float32(i%89) - 40
	}
	ob := mustOperand(t, in, "B")
	bbuf := make([]byte, ob.Size())
	if err := PackBT(in, w, N, Kreal, bbuf); err != nil {
		t.Fatal(err)
	}
	back := make([]float32, K*N)
	if err := UnpackB(in, bbuf, back, K, N); err != nil {
		t.Fatal(err)
	}
	for k := 0; k < K; k++ {
		for n := 0; n < N; n++ {
			want := float32(0)
			if k < Kreal {
				want = w[n*Kreal+k]
			}
			if back[k*N+n] != want {
				t.Fatalf("B(%d,%d) = %v, want %v", k, n, back[k*N+n], want)
			}
		}
	}
}

// PackB with K=10240 writes each segment as its own native block.
func TestPackBSegmented(t *testing.T) {
	const K, N = 10240, 32
	in := info(1, 1, K, N, 1, 0)
	src := make([]uint16, K*N)
	for i := range src {
		src[i] = uint16(i%30000 + 1)
	}
	dst := make([]byte, mustOperand(t, in, "B").Size())
	if err := PackB(in, src, K, N, dst); err != nil {
		t.Fatal(err)
	}
	at := func(off int) uint16 { return binary.LittleEndian.Uint16(dst[2*off:]) }
	// Independent formula: segment s holds [N/16][Ks/32][16][32] after s*N*8192 elements.
	for _, kn := range [][2]int{{0, 0}, {8191, 31}, {8192, 0}, {8200, 3}, {10239, 17}, {9000, 16}} {
		k, n := kn[0], kn[1]
		s, kk := k/8192, k%8192
		segK := min(8192, K-s*8192)
		off := s*N*8192 + ((n/16)*(segK/32)+kk/32)*512 + (n%16)*32 + kk%32
		if got := at(off); got != src[k*N+n] {
			t.Errorf("B(%d,%d) at %d = %d, want %d", k, n, off, got, src[k*N+n])
		}
	}
}

// TestContiguousRunsAreConsecutive: every run Contiguous reports (the
// packers convert runs in bulk) covers consecutive offsets, in every layout
// and both directions, K segments included.
func TestContiguousRunsAreConsecutive(t *testing.T) {
	for _, in := range []*MatmulInfo{
		info(1, 3, 40, 24, 1, 1), info(2, 5, 96, 40, 1, 1), info(10, 3, 96, 72, 1, 1),
		info(1, 2, 10240, 16, 1, 1), info(4, 3, 64, 16, 2, 1), info(1, 3, 64, 48, 0, 0),
		info(10, 2, 8224, 32, 1, 0), info(1, 1, 40, 24, 1, 1), info(3, 1, 96, 40, 1, 1),
	} {
		for _, name := range []string{"A", "B", "C"} {
			o := mustOperand(t, in, name)
			for r := 0; r < o.Rows; r++ {
				for c := 0; c < o.Cols; c++ {
					for _, alongRows := range []bool{false, true} {
						n := o.Contiguous(r, c, alongRows)
						if n < 1 {
							t.Fatalf("%+v %s (%d,%d): run of %d", *in, name, r, c, n)
						}
						for j := 1; j < n; j++ {
							rr, cc := r, c+j
							if alongRows {
								rr, cc = r+j, c
							}
							if rr >= o.Rows || cc >= o.Cols || o.Offset(rr, cc) != o.Offset(r, c)+j {
								t.Fatalf("%+v %s: run of %d from (%d,%d) along rows=%v breaks at %d", *in, name, n, r, c, alongRows, j)
							}
						}
					}
				}
			}
		}
	}
}

// TestUnpackCPartial: the gather of a top-left part of a native 32-bit C
// (the copy fast paths, M = 1 a decode step's) reads exactly the elements
// Offset names.
func TestUnpackCPartial(t *testing.T) {
	for i, typ := range []MatmulType{Float16MMFloat16ToFloat32, Int8MMInt8ToInt32, Float16MMFloat16ToFloat32, Int8MMInt8ToInt32} {
		M, rows := int32(5), 3
		if i >= 2 {
			M, rows = 1, 1
		}
		in := info(typ, M, 64, 48, LayoutNative, LayoutNative)
		o := mustOperand(t, in, "C")
		buf := make([]byte, o.Size())
		for i := 0; i < len(buf); i += 4 {
			binary.LittleEndian.PutUint32(buf[i:], uint32(i/4*7+1))
		}
		cols := 37
		want := make([]uint32, rows*cols)
		for r := range rows {
			for c := range cols {
				want[r*cols+c] = binary.LittleEndian.Uint32(buf[4*o.Offset(r, c):])
			}
		}
		got := make([]uint32, rows*cols)
		if typ == Int8MMInt8ToInt32 {
			d := make([]int32, rows*cols)
			if err := UnpackC(in, buf, d, rows, cols); err != nil {
				t.Fatal(err)
			}
			for i, v := range d {
				got[i] = uint32(v)
			}
		} else {
			d := make([]float32, rows*cols)
			if err := UnpackC(in, buf, d, rows, cols); err != nil {
				t.Fatal(err)
			}
			for i, v := range d {
				got[i] = math.Float32bits(v)
			}
		}
		if !slices.Equal(got, want) {
			t.Errorf("%s M=%d: partial C gather differs from the element offsets", typ, M)
		}
		// Strided into a wider matrix: the same values, the gaps untouched.
		const ld = 50
		wide := make([]float32, (rows-1)*ld+cols)
		for i := range wide {
			wide[i] = -1
		}
		if typ == Float16MMFloat16ToFloat32 {
			if err := UnpackCStrided(in, buf, wide, rows, cols, ld); err != nil {
				t.Fatal(err)
			}
			for r := range rows {
				for c := range ld {
					i := r*ld + c
					if i >= len(wide) {
						break
					}
					if c < cols && math.Float32bits(wide[i]) != want[r*cols+c] || c >= cols && wide[i] != -1 {
						t.Fatalf("strided gather: row %d col %d = %v", r, c, wide[i])
					}
				}
			}
			if err := UnpackCStrided(in, buf, wide[:len(wide)-1], rows, cols, ld); err == nil {
				t.Error("strided gather into a short slice accepted")
			}
		}
	}
}

func TestRoundTripEveryTypeAndLayout(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for _, typ := range []MatmulType{1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 15} {
		for _, bl := range []Layout{LayoutNorm, LayoutNative, LayoutTPNorm} {
			for _, acl := range []Layout{LayoutNorm, LayoutNative} {
				in := info(typ, int32(1+rng.IntN(5)), int32(32*(1+rng.IntN(4))), int32(64*(1+rng.IntN(2))), bl, acl)
				for _, name := range []string{"A", "B", "C"} {
					o := mustOperand(t, in, name)
					roundTrip(t, rng, in, o)
				}
			}
		}
	}
}

func roundTrip(t *testing.T, rng *rand.Rand, in *MatmulInfo, o Operand) {
	t.Helper()
	buf := make([]byte, o.Size())
	pk := map[string]func([]int32) error{
		"A": func(s []int32) error { return PackA(in, s, o.Rows, o.Cols, buf) },
		"B": func(s []int32) error { return PackB(in, s, o.Rows, o.Cols, buf) },
		"C": func(s []int32) error { return PackC(in, s, o.Rows, o.Cols, buf) },
	}
	upk := map[string]func([]int32) error{
		"A": func(d []int32) error { return UnpackA(in, buf, d, o.Rows, o.Cols) },
		"B": func(d []int32) error { return UnpackB(in, buf, d, o.Rows, o.Cols) },
		"C": func(d []int32) error { return UnpackC(in, buf, d, o.Rows, o.Cols) },
	}
	n := o.Rows * o.Cols
	if o.Type.IsFloat() {
		src := make([]float32, n)
		for i := range src {
			src[i] = float32(rng.IntN(255)-127) / 8 // 7 significant bits: exact in fp16 and bf16
		}
		var err error
		switch o.Name {
		case "A":
			err = PackA(in, src, o.Rows, o.Cols, buf)
		case "B":
			err = PackB(in, src, o.Rows, o.Cols, buf)
		default:
			err = PackC(in, src, o.Rows, o.Cols, buf)
		}
		if err != nil {
			t.Fatal(err)
		}
		got := make([]float32, n)
		switch o.Name {
		case "A":
			err = UnpackA(in, buf, got, o.Rows, o.Cols)
		case "B":
			err = UnpackB(in, buf, got, o.Rows, o.Cols)
		default:
			err = UnpackC(in, buf, got, o.Rows, o.Cols)
		}
		if err != nil || !slices.Equal(got, src) {
			t.Fatalf("%+v %s (%s %s): round trip differs (err %v)", *in, o.Name, o.Type, o.Layout, err)
		}
		return
	}
	lo, hi, _ := intRange(o.Type)
	src := make([]int32, n)
	for i := range src {
		src[i] = int32(lo + rng.Int64N(hi-lo+1))
	}
	if err := pk[o.Name](src); err != nil {
		t.Fatal(err)
	}
	got := make([]int32, n)
	if err := upk[o.Name](got); err != nil || !slices.Equal(got, src) {
		t.Fatalf("%+v %s (%s %s): round trip differs (err %v)", *in, o.Name, o.Type, o.Layout, err)
	}
}

func TestPackBTEqualsPackB(t *testing.T) {
	in := info(2, 1, 96, 64, 1, 0)
	rng := rand.New(rand.NewPCG(3, 4))
	kn := make([]int8, 96*64)
	nk := make([]int8, 64*96)
	for k := 0; k < 96; k++ {
		for n := 0; n < 64; n++ {
			v := int8(rng.IntN(256) - 128)
			kn[k*64+n], nk[n*96+k] = v, v
		}
	}
	b1 := make([]byte, 96*64)
	b2 := make([]byte, 96*64)
	if err := PackB(in, kn, 96, 64, b1); err != nil {
		t.Fatal(err)
	}
	if err := PackBT(in, nk, 64, 96, b2); err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(b1, b2) {
		t.Error("PackBT of the transpose differs from PackB")
	}
}

// A weight packed a block of rows at a time (the offload's conversion, which
// avoids a whole-matrix temporary) must give the bytes one PackBT gives,
// for every native B type, N padding and a block size that splits groups.
func TestPackBTRowsEqualsPackBT(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 6))
	for _, mt := range []MatmulType{Float16MMFloat16ToFloat32, Int8MMInt8ToInt32, Int4MMInt4ToInt16} {
		const n, k = 45, 96
		in := info(mt, 1, k, 64, LayoutNative, LayoutNorm)
		o := mustOperand(t, in, "B")
		var whole, blocks []byte
		var err error
		if mt == Float16MMFloat16ToFloat32 {
			src := make([]float32, n*k)
			for i := range src {
				src[i] = rng.Float32()*2 - 1
			}
			whole, blocks = make([]byte, o.Size()), make([]byte, o.Size())
			err = PackBT(in, src, n, k, whole)
			for n0 := 0; n0 < n && err == nil; n0 += 7 {
				rows := min(7, n-n0)
				err = PackBTRows(in, src[n0*k:(n0+rows)*k], n0, rows, k, blocks)
			}
		} else {
			lim := 128
			if mt == Int4MMInt4ToInt16 {
				lim = 8
			}
			src := make([]int8, n*k)
			for i := range src {
				src[i] = int8(rng.IntN(2*lim) - lim)
			}
			whole, blocks = make([]byte, o.Size()), make([]byte, o.Size())
			err = PackBT(in, src, n, k, whole)
			for n0 := 0; n0 < n && err == nil; n0 += 7 {
				rows := min(7, n-n0)
				err = PackBTRows(in, src[n0*k:(n0+rows)*k], n0, rows, k, blocks)
			}
		}
		if err != nil {
			t.Fatalf("%s: %v", mt, err)
		}
		if !slices.Equal(whole, blocks) {
			t.Errorf("%s: B packed in blocks of 7 rows differs from one PackBT", mt)
		}
	}
	in := info(Int8MMInt8ToInt32, 1, 64, 64, LayoutNative, LayoutNorm)
	buf := make([]byte, mustOperand(t, in, "B").Size())
	if err := PackBTRows(in, make([]int8, 8*64), 60, 8, 64, buf); Code(err) != ErrParamInvalid {
		t.Errorf("rows [60,68) of a 64-column B: err %v, want a parameter error", err)
	}
}

func TestPackErrors(t *testing.T) {
	in := info(10, 1, 64, 64, 1, 0)
	buf := make([]byte, 64*64/2)
	src := make([]int8, 64*64)
	src[3*64+9] = 8
	err := PackB(in, src, 64, 64, buf)
	if Code(err) != ErrParamInvalid || !strings.Contains(err.Error(), "B[3,9]") || !strings.Contains(err.Error(), "INT4 [-8,7]") {
		t.Errorf("int4 overflow: %v", err)
	}
	if err := PackB(in, make([]float32, 64*64), 64, 64, buf); err == nil || !strings.Contains(err.Error(), "INT4") {
		t.Errorf("float32 into int4: %v", err)
	}
	if err := PackB(in, make([]int8, 64*64), 64, 64, buf[:10]); err == nil || !strings.Contains(err.Error(), "buffer has 10 bytes") {
		t.Errorf("short buffer: %v", err)
	}
	if err := PackB(in, make([]int8, 65*64), 65, 64, buf); err == nil || !strings.Contains(err.Error(), "does not fit") {
		t.Errorf("too many rows: %v", err)
	}
	if err := PackB(in, make([]int8, 10), 64, 64, buf); err == nil || !strings.Contains(err.Error(), "slice has 10") {
		t.Errorf("short source: %v", err)
	}
	fin := info(1, 1, 32, 16, 0, 0)
	if err := PackA(fin, make([]int8, 32), 1, 32, make([]byte, 64)); err == nil {
		t.Error("int8 into an fp16 tensor accepted")
	}
	if err := UnpackC(fin, make([]byte, 64), make([]int32, 16), 1, 16); err == nil {
		t.Error("fp32 C unpacked into int32")
	}
	if err := UnpackC(info(2, 1, 32, 32, 0, 0), make([]byte, 128), make([]int8, 32), 1, 32); err == nil {
		t.Error("int32 C unpacked into int8")
	}
	// No rows of a one-row native C: nothing read or written.
	none := []float32{7, 7, 7}
	if err := UnpackC(info(1, 1, 32, 16, 0, 1), make([]byte, 64), none, 0, 16); err != nil || none[0] != 7 {
		t.Errorf("zero rows: %v, %v", err, none)
	}
}

func TestHalfRounding(t *testing.T) {
	cases := []struct {
		in   float32
		want float32
	}{
		{2049, 2048}, {2051, 2052}, {1 + 1.0/2048, 1}, {1 + 3.0/2048, 1 + 2.0/1024},
		{65519, 65504}, {65520, float32(math.Inf(1))}, {-65520, float32(math.Inf(-1))},
		{1e-8, 0}, {6e-8, 5.960464477539063e-08}, // smallest subnormal 2^-24
	}
	for _, c := range cases {
		if got := F16ToF32(F32ToF16(c.in)); got != c.want {
			t.Errorf("fp16(%v) = %v, want %v", c.in, got, c.want)
		}
	}
	if !math.IsNaN(float64(F16ToF32(F32ToF16(float32(math.NaN()))))) {
		t.Error("NaN lost")
	}
	// bf16: 8 significant bits. 257 is a tie -> 256; 259 -> 260.
	for _, c := range [][2]float32{{257, 256}, {259, 260}, {1, 1}, {-3.5, -3.5}} {
		if got := BF16ToF32(F32ToBF16(c[0])); got != c[1] {
			t.Errorf("bf16(%v) = %v, want %v", c[0], got, c[1])
		}
	}
	if !math.IsNaN(float64(BF16ToF32(F32ToBF16(float32(math.NaN()))))) {
		t.Error("bf16 NaN lost")
	}
}

// TestPackAActivations: a prefill's A (several rows, native) packed from
// float32 into fp16 and from int8 into int8 puts every element where
// Operand.Offset says, rounded as F32ToF16 rounds it (ties, subnormals,
// NaN, Inf), with the padding cleared, for K ending inside an atom or on
// its edge; PackARows of the rows in two pieces writes the same bytes.
func TestPackAActivations(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 6))
	specials := []float32{float32(math.NaN()), float32(math.Inf(-1)), 65520, 1 + 1.0/2048, 3e-8, -0}
	for _, K := range []int{172, 160, 8} {
		for _, Mreal := range []int{2, 5} {
			const M = 6
			in16 := info(Float16MMFloat16ToFloat32, M, int32(K+31)/32*32, 32, LayoutNative, LayoutNative)
			in8 := info(Int8MMInt8ToInt32, M, int32(K+31)/32*32, 32, LayoutNative, LayoutNative)
			f := make([]float32, Mreal*K)
			q := make([]int8, Mreal*K)
			for i := range f {
				f[i] = float32(rng.NormFloat64() * 100)
				q[i] = int8(rng.Uint32())
			}
			copy(f, specials)
			for _, c := range []struct {
				in   *MatmulInfo
				pack func(buf []byte) error
				want func(m, k int) uint16
				size int // bytes an element
			}{
				{in16, func(buf []byte) error { return PackA(in16, f, Mreal, K, buf) }, func(m, k int) uint16 { return F32ToF16(f[m*K+k]) }, 2},
				{in8, func(buf []byte) error { return PackA(in8, q, Mreal, K, buf) }, func(m, k int) uint16 { return uint16(uint8(q[m*K+k])) }, 1},
			} {
				o := mustOperand(t, c.in, "A")
				buf := make([]byte, o.Size())
				for i := range buf {
					buf[i] = 0xa5
				}
				if err := c.pack(buf); err != nil {
					t.Fatal(err)
				}
				// The same rows packed in two pieces by PackARows.
				rows := make([]byte, len(buf))
				half := Mreal / 2
				for _, r := range [][2]int{{half, Mreal}, {0, half}} {
					var err error
					if c.size == 2 {
						err = PackARows(c.in, f[r[0]*K:r[1]*K], r[0], r[1]-r[0], K, rows)
					} else {
						err = PackARows(c.in, q[r[0]*K:r[1]*K], r[0], r[1]-r[0], K, rows)
					}
					if err != nil {
						t.Fatal(err)
					}
				}
				if !slices.Equal(rows, buf) {
					t.Fatalf("%v K=%d rows=%d: PackARows in two pieces differs from PackA", c.in.Type, K, Mreal)
				}
				for m := 0; m < M; m++ {
					for k := 0; k < o.Cols; k++ {
						var want uint16
						if m < Mreal && k < K {
							want = c.want(m, k)
						}
						got := uint16(buf[o.Offset(m, k)])
						if c.size == 2 {
							got = binary.LittleEndian.Uint16(buf[2*o.Offset(m, k):])
						}
						if got != want {
							t.Fatalf("%v K=%d rows=%d: A(%d,%d) = %#x, want %#x", c.in.Type, K, Mreal, m, k, got, want)
						}
					}
				}
			}
		}
	}
}
