package sim

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/evalrun/evalrun/plugins/internal/faults"
	"github.com/evalrun/evalrun/plugins/rknn/npu"
)

// coreSet creates one context per N (the cores of one matmul) with random
// A and B written into their buffers.
func coreSet(t *testing.T, d *Driver, typ npu.MatmulType, M, K int32, Ns []int32, rng *rand.Rand) []*bound {
	t.Helper()
	var set []*bound
	for _, N := range Ns {
		bd := setup(t, d, mkInfo(typ, M, K, N, npu.LayoutNative, npu.LayoutNative))
		for _, m := range []npu.Mem{bd.a, bd.b} {
			buf := m.Bytes()
			if isFloat(typ) {
				for i := 0; i+1 < len(buf); i += 2 {
					h := npu.F32ToF16(float32(rng.NormFloat64()))
					buf[i], buf[i+1] = byte(h), byte(h>>8)
				}
				continue
			}
			for i := range buf {
				buf[i] = byte(rng.Uint32())
			}
		}
		set = append(set, bd)
	}
	return set
}

func TestRunCoresSameAsRuns(t *testing.T) {
	backwards := func(n, align int, fn func(lo, hi int)) { // smallest aligned ranges, last first
		for hi := n; hi > 0; {
			lo := (hi - 1) / align * align
			fn(lo, hi)
			hi = lo
		}
	}
	types := []npu.MatmulType{npu.Float16MMFloat16ToFloat32, npu.Float16MMFloat16ToFloat16,
		npu.Int8MMInt8ToInt32, npu.Int8MMInt8ToInt8, npu.Int4MMInt4ToInt16}
	for _, typ := range types {
		for _, M := range []int32{1, 5} {
			for _, K := range []int32{96, 8192 + 64} { // one K segment, two
				pools := []Options{{Threads: 2}, {Threads: 2, Parallel: backwards}}
				if testing.Short() {
					pools = pools[1:] // under qemu: the order of the ranges is not the architecture's
				}
				for _, opts := range pools {
					for _, sameA := range []bool{false, true} {
						name := fmt.Sprintf("%s/M=%d/K=%d/pool=%v/sameA=%v", typ, M, K, opts.Parallel != nil, sameA)
						rng := rand.New(rand.NewPCG(uint64(typ), uint64(M*K)))
						d := New(opts)
						align := int32(nAlign(typ))
						set := coreSet(t, d, typ, M, K, []int32{align, 3 * align, 2 * align}, rng)
						if sameA {
							// Cores 0 and 1 read the same activations (one
							// decoding serves both); core 2's differ in their
							// last byte only and must not take it.
							a0 := set[0].a.Bytes()
							copy(set[1].a.Bytes(), a0)
							a2 := set[2].a.Bytes()
							copy(a2, a0)
							a2[len(a0)-1] ^= 0x11
						}
						var want [][]byte
						for _, bd := range set {
							if err := bd.ctx.Run(); err != nil {
								t.Fatal(err)
							}
							want = append(want, bytes.Clone(bd.c.Bytes()))
							clear(bd.c.Bytes())
						}
						runs := d.Stats().Runs
						ctxs := []npu.Context{set[0].ctx, set[1].ctx, set[2].ctx}
						for i, err := range d.RunCores(ctxs) {
							if err != nil {
								t.Fatalf("%s: core %d: %v", name, i, err)
							}
						}
						for i, bd := range set {
							if !bytes.Equal(bd.c.Bytes(), want[i]) {
								t.Fatalf("%s: core %d: C differs from its own Run's", name, i)
							}
						}
						if got := d.Stats().Runs - runs; got != 3 {
							t.Errorf("%s: %d runs counted, want 3", name, got)
						}
					}
				}
			}
		}
	}
}

func TestRunCoresErrorsAndFaults(t *testing.T) {
	d := New(Options{Threads: 2, Faults: armed(faults.Options{NaNAfter: ptr(2)})})
	rng := rand.New(rand.NewPCG(3, 4))
	set := coreSet(t, d, npu.Float16MMFloat16ToFloat32, 1, 64, []int32{16, 32, 16}, rng)
	foreign := coreSet(t, New(Options{}), npu.Float16MMFloat16ToFloat32, 1, 64, []int32{16}, rng)[0]
	errs := d.RunCores([]npu.Context{set[0].ctx, foreign.ctx, set[0].ctx, set[1].ctx, set[2].ctx})
	wantCode(t, "foreign context", errs[1], npu.ErrCtxInvalid, "not created by this driver")
	wantCode(t, "context given twice", errs[2], npu.ErrParamInvalid, "twice")
	if errs[0] != nil || errs[3] != nil || errs[4] != nil {
		t.Fatalf("runs failed: %v, %v, %v", errs[0], errs[3], errs[4])
	}
	// The fault schedule counts the runs in the order given: the third,
	// and only it, is hit.
	for i, bd := range set {
		c := math.Float32frombits(binary.LittleEndian.Uint32(bd.c.Bytes()))
		if math.IsNaN(float64(c)) != (i == 2) {
			t.Errorf("run %d: C[0] = %v; want NaN in run 3 only", i+1, c)
		}
	}
	if d.Stats().Runs != 3 {
		t.Errorf("runs %d, want 3", d.Stats().Runs)
	}
	// A destroyed context fails alone; the others still run.
	d2 := New(Options{Threads: 2})
	set = coreSet(t, d2, npu.Int8MMInt8ToInt32, 2, 64, []int32{32, 32}, rng)
	set[0].ctx.Destroy()
	errs = d2.RunCores([]npu.Context{set[0].ctx, set[1].ctx})
	wantCode(t, "destroyed", errs[0], npu.ErrCtxInvalid, "destroyed")
	if errs[1] != nil {
		t.Fatal(errs[1])
	}
}

// A run that Options.Small calls small (a RunCores call: all its runs
// together, by multiply-adds and B bytes) never reaches Parallel and
// computes the same bits; one it does not is handed over.
func TestSmallRunsStayOffThePool(t *testing.T) {
	const M, K = 5, 96
	for _, typ := range []npu.MatmulType{npu.Float16MMFloat16ToFloat32, npu.Int8MMInt8ToInt32} {
		align := int32(nAlign(typ))
		Ns := []int32{align, 3 * align, 2 * align}
		macs, bBytes := 0, 0
		for _, N := range Ns {
			macs += M * K * int(N)
			b, _ := npu.OperandOf(mkInfo(typ, M, K, N, npu.LayoutNative, npu.LayoutNative), "B")
			bBytes += b.Size()
		}
		below := func(m, b int) func(int, int) bool {
			return func(macs, bBytes int) bool { return macs < m && bBytes < b }
		}
		var want [][]byte
		for _, c := range []struct {
			name   string
			small  func(macs, bBytes int) bool
			cores  bool
			handed bool
		}{
			{"no rule", nil, false, true},
			{"every run below", below(M*K*int(Ns[1])+1, 1<<30), false, false},
			{"the first run at the threshold", below(M*K*int(Ns[0]), 1<<30), false, true},
			{"the call below", below(macs+1, bBytes+1), true, false},
			{"the call at the multiply-adds threshold", below(macs, bBytes+1), true, true},
			{"the call at the bytes threshold", below(macs+1, bBytes), true, true},
		} {
			handed := 0
			d := New(Options{Threads: 2, Small: c.small, Parallel: func(n, align int, fn func(lo, hi int)) {
				handed++
				fn(0, n)
			}})
			set := coreSet(t, d, typ, M, K, Ns, rand.New(rand.NewPCG(1, 2)))
			if c.cores {
				for _, err := range d.RunCores([]npu.Context{set[0].ctx, set[1].ctx, set[2].ctx}) {
					if err != nil {
						t.Fatal(err)
					}
				}
			} else {
				for _, bd := range set {
					if err := bd.ctx.Run(); err != nil {
						t.Fatal(err)
					}
				}
			}
			if (handed > 0) != c.handed {
				t.Errorf("%s: %s: %d jobs handed to Parallel, want handed %v", typ, c.name, handed, c.handed)
			}
			var got [][]byte
			for _, bd := range set {
				got = append(got, bytes.Clone(bd.c.Bytes()))
			}
			if want == nil {
				want = got
			}
			for i := range got {
				if !bytes.Equal(got[i], want[i]) {
					t.Errorf("%s: %s: core %d's C differs", typ, c.name, i)
				}
			}
		}
	}
}
