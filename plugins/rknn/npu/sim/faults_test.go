package sim

import (
	"encoding/binary"
	"math"
	"testing"

	"github.com/evalrun/evalrun/plugins/internal/faults"
	"github.com/evalrun/evalrun/plugins/rknn/npu"
)

// onesSetup binds A = B = 1 (fp16) so every C element is K.
func onesSetup(t *testing.T, d npu.Driver, typ npu.MatmulType) *bound {
	t.Helper()
	in := mkInfo(typ, 2, 32, 16, npu.LayoutNative, npu.LayoutNative)
	bd := setup(t, d, in)
	ones := make([]float32, 32*16)
	for i := range ones {
		ones[i] = 1
	}
	if err := npu.PackA(in, ones[:2*32], 2, 32, bd.a.Bytes()); err != nil {
		t.Fatal(err)
	}
	if err := npu.PackB(in, ones, 32, 16, bd.b.Bytes()); err != nil {
		t.Fatal(err)
	}
	return bd
}

func cValues(t *testing.T, bd *bound, typ npu.MatmulType) []float32 {
	t.Helper()
	in := mkInfo(typ, 2, 32, 16, npu.LayoutNative, npu.LayoutNative)
	c := make([]float32, 2*16)
	if err := npu.UnpackC(in, bd.c.Bytes(), c, 2, 16); err != nil {
		t.Fatal(err)
	}
	return c
}

// armed is an armed injector of o, as the plugin arms it after Load.
func armed(o faults.Options) *faults.Injector {
	in := faults.New(&o)
	in.Arm()
	return in
}

func ptr(v int) *int { return &v }

// TestFaultsCorruptC: every context run is a device run of the schedule,
// and a run's output faults land in C element (0,0) in C's own type: NaN
// and +Inf in fp32 and fp16 outputs, none in integer ones.
func TestFaultsCorruptC(t *testing.T) {
	for _, typ := range []npu.MatmulType{npu.Float16MMFloat16ToFloat32, npu.Float16MMFloat16ToFloat16} {
		for _, inf := range []bool{false, true} {
			o := faults.Options{NaNAfter: ptr(1)}
			if inf {
				o = faults.Options{InfAfter: ptr(1)}
			}
			d := New(Options{Faults: armed(o)})
			bd := onesSetup(t, d, typ)
			for run := 1; run <= 3; run++ {
				if err := bd.ctx.Run(); err != nil {
					t.Fatal(err)
				}
				c := cValues(t, bd, typ)
				first := float64(c[0])
				switch {
				case run == 1 && first != 32:
					t.Errorf("%s run 1: C[0] = %v, want 32", typ, first)
				case run > 1 && !inf && !math.IsNaN(first):
					t.Errorf("%s run %d: C[0] = %v, want NaN", typ, run, first)
				case run > 1 && inf && !math.IsInf(first, 1):
					t.Errorf("%s run %d: C[0] = %v, want +Inf", typ, run, first)
				}
				for i, v := range c[1:] {
					if v != 32 {
						t.Fatalf("%s run %d: C[%d] = %v, only element 0 is faulty", typ, run, i+1, v)
					}
				}
			}
		}
	}
	// Integer outputs have no NaN: left intact.
	d := New(Options{Faults: armed(faults.Options{NaNAfter: ptr(0), InfAfter: ptr(0)})})
	bd := setup(t, d, mkInfo(npu.Int8MMInt8ToInt32, 1, 32, 32, 0, 0))
	for i := range bd.a.Bytes() {
		bd.a.Bytes()[i] = 1
	}
	for i := range bd.b.Bytes() {
		bd.b.Bytes()[i] = 2
	}
	if err := bd.ctx.Run(); err != nil {
		t.Fatal(err)
	}
	if v := int32(binary.LittleEndian.Uint32(bd.c.Bytes())); v != 64 {
		t.Errorf("int32 C[0] = %d, want 64", v)
	}
}

// TestBitflipInCsType: the bit flips in C's element type; a bit outside it
// is refused when the context is created.
func TestBitflipInCsType(t *testing.T) {
	// fp32 out, bit 31: the sign of C[0] flips from run 2 on.
	d := New(Options{Faults: armed(faults.Options{BitflipAfter: ptr(1), BitflipBit: ptr(31)})})
	bd := onesSetup(t, d, npu.Float16MMFloat16ToFloat32)
	for run, want := range []float32{32, -32, -32} {
		if err := bd.ctx.Run(); err != nil {
			t.Fatal(err)
		}
		if c := cValues(t, bd, npu.Float16MMFloat16ToFloat32); c[0] != want || c[1] != 32 {
			t.Errorf("run %d: C[0], C[1] = %v, %v; want %v, 32", run+1, c[0], c[1], want)
		}
	}
	// int16 out (int4 type), bit 3: 32 -> 40.
	d = New(Options{Faults: armed(faults.Options{BitflipAfter: ptr(0), BitflipBit: ptr(3)})})
	in := mkInfo(npu.Int4MMInt4ToInt16, 1, 32, 64, 0, 0)
	ib := setup(t, d, in)
	for i := range ib.a.Bytes() {
		ib.a.Bytes()[i] = 0x11 // every int4 element = 1
	}
	for i := range ib.b.Bytes() {
		ib.b.Bytes()[i] = 0x11
	}
	if err := ib.ctx.Run(); err != nil {
		t.Fatal(err)
	}
	if v := int16(binary.LittleEndian.Uint16(ib.c.Bytes())); v != 40 {
		t.Errorf("int16 C[0] = %d, want 32 with bit 3 flipped (40)", v)
	}
	// A bit outside the 16-bit element is refused at create.
	d = New(Options{Faults: armed(faults.Options{BitflipAfter: ptr(1), BitflipBit: ptr(20)})})
	_, _, err := d.Create(in)
	wantCode(t, "bit 20 of int16", err, npu.ErrParamInvalid, `option "faults.bitflip_bit": bit 20 is outside the 16-bit output element`, "C is INT16")
}
