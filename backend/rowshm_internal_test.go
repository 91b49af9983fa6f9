package backend

import (
	"context"
	"errors"
	"math"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/grpc/mem"
	"google.golang.org/protobuf/proto"

	"github.com/evalrun/evalrun/backend/internal/backendpb"
)

// testLease is a lease on a region in plain memory (the parser's checks do
// not depend on how the region is mapped), for rows of vocab values.
func testLease(t testing.TB, vocab int) (*rowLeases, *rowLease) {
	t.Helper()
	token := []byte("0123456789abcdef")
	l := &rowLeases{region: &rowRegion{mem: make([]byte, rowsRegion), token: token}}
	copy(l.region.mem, token)
	l.enable(token, vocab)
	x := l.acquire()
	if x == nil {
		t.Fatal("no lease")
	}
	return l, x
}

// parseChunk parses one marshaled chunk as the host's codec does, with
// the call's rows counted from taken (the rows the host took before).
func parseChunk(x *rowLease, taken int64, m *backendpb.EvalChunk) ([]float32, error) {
	wire, err := proto.Marshal(m)
	if err != nil {
		panic(err)
	}
	if x != nil {
		x.publish(taken)
	}
	c := rowChunk{buf: func(n int) []float32 { return make([]float32, n) }, lease: x}
	err = (rowCodec{}).Unmarshal(mem.BufferSlice{mem.SliceBuffer(wire)}, &c)
	return c.values, err
}

// TestSharedRowChunksAreChecked: the host takes a row from shared memory
// only from the exact slot of the call's next row and only as long as the
// slot; every other place or length a plugin reports is refused with an
// error that says what it reported, and nothing is read.
func TestSharedRowChunksAreChecked(t *testing.T) {
	const vocab = 1000
	_, x := testLease(t, vocab)
	slot := func(j int64) int64 { return x.offset + j%x.slots*x.slotBytes }
	for i := range vocab {
		x.owner.region.mem[slot(3)+int64(4*i)] = byte(i)
	}
	row, err := parseChunk(x, 3, &backendpb.EvalChunk{Index: 3, SharedOffset: slot(3), SharedBytes: 4 * vocab})
	if err != nil || len(row) != vocab || math.Float32bits(row[7]) != 7 {
		t.Fatalf("the right slot: %d values, %v", len(row), err)
	}
	if x.consumed != 4 || atomic.LoadUint64(x.owner.region.counter(x.consumedOff)) != 4 {
		t.Errorf("after row 3 the host counts %d rows taken, shared %d; want 4", x.consumed, atomic.LoadUint64(x.owner.region.counter(x.consumedOff)))
	}
	size := int64(len(x.owner.region.mem))
	for _, c := range []struct {
		name   string
		lease  bool
		chunk  *backendpb.EvalChunk
		refuse string
	}{
		{"another slot", true, &backendpb.EvalChunk{SharedOffset: slot(1), SharedBytes: 4 * vocab}, "row 0 of the call belongs at"},
		{"inside the slot", true, &backendpb.EvalChunk{SharedOffset: slot(0) + 4, SharedBytes: 4 * vocab}, "row 0 of the call belongs"},
		{"the header", true, &backendpb.EvalChunk{SharedOffset: 16, SharedBytes: 4 * vocab}, "row 0 of the call belongs"},
		{"past the region", true, &backendpb.EvalChunk{SharedOffset: size, SharedBytes: 4}, "row 0 of the call belongs"},
		{"far past the region", true, &backendpb.EvalChunk{SharedOffset: math.MaxInt64, SharedBytes: math.MaxInt64}, "at most the slot's"},
		{"negative offset", true, &backendpb.EvalChunk{SharedOffset: -8, SharedBytes: 4}, "row 0 of the call belongs"},
		{"longer than the slot", true, &backendpb.EvalChunk{SharedOffset: slot(0), SharedBytes: x.slotBytes + 4}, "at most the slot's"},
		{"the whole region", true, &backendpb.EvalChunk{SharedOffset: slot(0), SharedBytes: size}, "at most the slot's"},
		{"negative length", true, &backendpb.EvalChunk{SharedOffset: slot(0), SharedBytes: -4}, "whole number of float32"},
		{"odd length", true, &backendpb.EvalChunk{SharedOffset: slot(0), SharedBytes: 6}, "whole number of float32"},
		{"an offset and no length", true, &backendpb.EvalChunk{SharedOffset: slot(0)}, "reports 0 bytes"},
		{"also in the message", true, &backendpb.EvalChunk{Logits: make([]byte, 8), SharedOffset: slot(0), SharedBytes: 8}, "also carries its logits"},
		{"no lease", false, &backendpb.EvalChunk{SharedOffset: rowsHeader, SharedBytes: 4 * vocab}, "lent this call no shared memory"},
	} {
		t.Run(c.name, func(t *testing.T) {
			lease := x
			if !c.lease {
				lease = nil
			}
			row, err := parseChunk(lease, 0, c.chunk)
			if err == nil || !errors.Is(err, errSharedRow) || !strings.Contains(err.Error(), c.refuse) {
				t.Fatalf("got %d values, error %v; want a refusal saying %q", len(row), err, c.refuse)
			}
			t.Log(err)
		})
	}
	x.owner.region.close()
	if _, err := parseChunk(x, 0, &backendpb.EvalChunk{SharedOffset: slot(0), SharedBytes: 4}); err == nil || !strings.Contains(err.Error(), "closed") {
		t.Errorf("a stopped plugin's region: %v", err)
	}
}

// TestTokenEnablesTheLeases: only a Load that read back the host's token
// turns the shared rows on, and only for rows two of which fit a lease.
func TestTokenEnablesTheLeases(t *testing.T) {
	token := []byte("0123456789abcdef")
	for _, c := range []struct {
		name   string
		token  []byte
		vocab  int
		enable bool
	}{
		{"the token", token, 128256, true},
		{"no token (an older plugin)", nil, 128256, false},
		{"another token", []byte("0123456789abcdeX"), 128256, false},
		{"a prefix", token[:8], 128256, false},
		{"rows too large", token, rowsLeaseBytes/8 + 1, false},
		{"no vocabulary", token, 0, false},
	} {
		l := &rowLeases{region: &rowRegion{mem: make([]byte, rowsRegion), token: token}}
		l.enable(c.token, c.vocab)
		if got := l.acquire() != nil; got != c.enable {
			t.Errorf("%s: a lease %v, want %v", c.name, got, c.enable)
		}
	}
}

// TestRowWriterRefusesLeasesOutsideItsRegion: the plugin's side checks
// the host's lease against the region it mapped (overflows included) and
// then sends its rows in the messages.
func TestRowWriterRefusesLeasesOutsideItsRegion(t *testing.T) {
	r := &rowRegion{mem: make([]byte, 1<<16)}
	ok := &backendpb.SharedRows{Offset: 4096, SlotBytes: 4096, Slots: 15, ConsumedOffset: 64}
	if newRowWriter(r, ok) == nil {
		t.Fatal("a lease inside the region was refused")
	}
	for _, bad := range []*backendpb.SharedRows{
		{Offset: 4096, SlotBytes: 4096, Slots: 16, ConsumedOffset: 64},
		{Offset: -1, SlotBytes: 4096, Slots: 1, ConsumedOffset: 64},
		{Offset: 0, SlotBytes: 0, Slots: 1, ConsumedOffset: 64},
		{Offset: 0, SlotBytes: 1 << 62, Slots: 4, ConsumedOffset: 64},
		{Offset: 0, SlotBytes: 4, Slots: math.MaxInt64, ConsumedOffset: 64},
		{Offset: math.MaxInt64, SlotBytes: 4, Slots: 1, ConsumedOffset: 64},
		{Offset: 4096, SlotBytes: 4096, Slots: 1, ConsumedOffset: 1 << 16},
		{Offset: 4096, SlotBytes: 4096, Slots: 1, ConsumedOffset: 60},
		{Offset: 4096, SlotBytes: 4096, Slots: 1, ConsumedOffset: -8},
	} {
		if newRowWriter(r, bad) != nil {
			t.Errorf("lease %v accepted", bad)
		}
	}
	if newRowWriter(nil, ok) != nil || newRowWriter(r, nil) != nil {
		t.Error("a writer without a region or a lease")
	}
}

// TestRowWriterWaitsForTheHost: a row goes into a slot only once the host
// took the slot's previous row; a row larger than a slot goes in the
// message; a cancelled call stops waiting.
func TestRowWriterWaitsForTheHost(t *testing.T) {
	r := &rowRegion{mem: make([]byte, 1<<16)}
	w := newRowWriter(r, &backendpb.SharedRows{Offset: 4096, SlotBytes: 64, Slots: 2, ConsumedOffset: 64})
	ctx := context.Background()
	row := []float32{1, 2, 3}
	for j := range 2 {
		if off, n, ok, err := w.put(ctx, row); !ok || err != nil || off != 4096+64*int64(j) || n != 12 {
			t.Fatalf("row %d: %d bytes at %d, %v %v", j, n, off, ok, err)
		}
	}
	if _, _, ok, _ := w.put(ctx, make([]float32, 17)); ok {
		t.Fatal("a row larger than its slot was written")
	}
	// Row 3 goes into slot 1, which held row 1: the host must take rows
	// 0 and 1 first.
	done := make(chan int64)
	go func() {
		off, _, _, _ := w.put(ctx, row)
		done <- off
	}()
	atomic.StoreUint64(r.counter(64), 1)
	select {
	case <-done:
		t.Fatal("row 3 written before the host took row 1")
	case <-time.After(20 * time.Millisecond):
	}
	atomic.StoreUint64(r.counter(64), 2)
	if off := <-done; off != 4096+64 {
		t.Fatalf("row 3 at %d", off)
	}
	cctx, cancel := context.WithCancel(ctx)
	go func() { time.Sleep(10 * time.Millisecond); cancel() }()
	if _, _, _, err := w.put(cctx, row); !errors.Is(err, context.Canceled) {
		t.Fatalf("waiting in a cancelled call: %v", err)
	}
}

// FuzzSharedRowChunk: whatever bytes a plugin sends as an EvalChunk, in a
// call lent shared memory or not, the host's parser returns an error or
// what protobuf reads from them, never panics, and takes a row from shared
// memory only from the slot of the call's next row, never longer than the
// slot, counting it taken.
func FuzzSharedRowChunk(f *testing.F) {
	_, x := testLease(f, 100)
	for i := range x.owner.region.mem[rowsHeader:] {
		x.owner.region.mem[rowsHeader+i] = byte(i * 7)
	}
	for _, m := range []*backendpb.EvalChunk{
		{Index: 1, Pos: 2, Logits: make([]byte, 400), ComputeNs: 3},
		{Index: 1, SharedOffset: x.offset, SharedBytes: 400},
		{SharedOffset: x.offset + x.slotBytes, SharedBytes: 400},
		{SharedOffset: x.offset, SharedBytes: 1 << 40},
		{Hidden: make([]byte, 12), SharedOffset: x.offset, SharedBytes: 4},
	} {
		wire, _ := proto.Marshal(m)
		f.Add(wire, uint8(0))
		f.Add(wire, uint8(1))
	}
	f.Fuzz(func(t *testing.T, wire []byte, taken uint8) {
		for _, lease := range []*rowLease{x, nil} {
			if lease != nil {
				lease.publish(int64(taken))
			}
			c := rowChunk{buf: func(n int) []float32 { return make([]float32, n) }, lease: lease}
			if err := (rowCodec{}).Unmarshal(mem.BufferSlice{mem.SliceBuffer(wire)}, &c); err != nil {
				continue
			}
			var want backendpb.EvalChunk
			if err := proto.Unmarshal(wire, &want); err != nil {
				t.Fatalf("parsed %x, which protobuf refuses: %v", wire, err)
			}
			got := string(encodeFloats(nil, c.values))
			if want.SharedOffset == 0 && want.SharedBytes == 0 {
				if got != string(want.Logits) {
					t.Fatalf("%x: logits %v, protobuf reads %v", wire, c.values, &want)
				}
			} else {
				slot := x.offset + int64(taken)%x.slots*x.slotBytes
				if lease == nil || len(want.Logits) != 0 || want.SharedOffset != slot || want.SharedBytes > x.slotBytes ||
					got != string(x.owner.region.mem[slot:slot+want.SharedBytes]) {
					t.Fatalf("%x: took %d values from shared memory for %v (lease %v, next slot at %d)", wire, len(c.values), &want, lease != nil, slot)
				}
			}
			if lease != nil && lease.consumed != int64(taken)+1 {
				t.Fatalf("a parsed row counted %d taken, want %d", lease.consumed, int64(taken)+1)
			}
		}
	})
}
