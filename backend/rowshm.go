package backend

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"os"
	"runtime/debug"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"
	"unsafe"

	"github.com/evalrun/evalrun/backend/internal/backendpb"
)

// Shared rows: a local plugin writes its logits rows into memory the host
// shares with it, and the gRPC message carries only where (offsets and
// lengths). The host creates the region before it starts the plugin (a
// sealed memfd on Linux: its size can change no more) and hands it over as
// a file descriptor named by $EVALRUN_PLUGIN_ROWS_FD; the plugin maps it
// and proves it did at Load (LoadResponse.shared_rows_token: the first 16
// bytes, random, the host wrote). Each Eval call then borrows a lease, a
// ring of slots one row wide (EvalRequest.shared_rows). Everything else —
// an older plugin, a plugin in another language that does not map the
// region, a reattached or remote one, another OS — moves rows in the
// message as before.
//
// The region is the plugin's to write: the host reads nothing from it but
// the rows it copies out, each from the exact slot it expects, with a
// length it checks against the slot; it never reads a length or an offset
// from shared memory. A slot is copied once into the host's own row, so a
// plugin scribbling on it later changes nothing the host computes.

// RowsFDEnv names the variable that tells a plugin which of its file
// descriptors is the shared rows region.
const RowsFDEnv = "EVALRUN_PLUGIN_ROWS_FD"

// SharedRowsEnv turns the shared rows off when "0" or "off" (rows then
// move in the gRPC messages); unset, "1" or "on" is on.
const SharedRowsEnv = "EVALRUN_PLUGIN_SHM"

// SharedRowsFromEnv reads SharedRowsEnv as MTLSFromEnv reads its variable.
func SharedRowsFromEnv() (bool, error) {
	switch m := strings.ToLower(strings.TrimSpace(os.Getenv(SharedRowsEnv))); m {
	case "", "1", "on", "true":
		return true, nil
	case "0", "off", "false":
		return false, nil
	default:
		return false, fmt.Errorf("$%s=%q: want on or off (1/0, true/false)", SharedRowsEnv, os.Getenv(SharedRowsEnv))
	}
}

// The region's layout: a header page (the token, then one 8-byte counter
// per lease on a cache line of its own), then the leases.
const (
	rowsTokenLen   = 16
	rowsHeader     = 4096
	rowsLeases     = 2
	rowsLeaseBytes = 8 << 20
	rowsMaxSlots   = 16
	rowsRegion     = rowsHeader + rowsLeases*rowsLeaseBytes
	rowsSlotAlign  = 64
)

// rowsCounter is the offset of lease i's counter.
func rowsCounter(i int) int64 { return int64(64 * (1 + i)) }

// rowRegion is the mapped region, on either side. The host's readers copy
// under mu's read lock so that closing (unmapping) waits for them.
type rowRegion struct {
	mu     sync.RWMutex
	mem    []byte
	token  []byte // the host's own copy of what it wrote (host side only)
	closed bool
	unmap  func([]byte) error
}

// close unmaps the region once no copy is under way.
func (r *rowRegion) close() {
	if r == nil {
		return
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.closed {
		return
	}
	r.closed = true
	if r.unmap != nil {
		r.unmap(r.mem)
	}
	r.mem = nil
}

// newHostRows creates the region for one plugin: the mapping, and the file
// the plugin inherits (the caller closes it once the plugin has started).
// nil, nil when shared memory is not available here.
func newHostRows() (*rowRegion, *os.File, error) {
	if !littleEndian {
		return nil, nil, nil // the counters and rows are little-endian
	}
	r, f, err := createRows(rowsRegion)
	if r == nil || err != nil {
		return nil, nil, err
	}
	r.token = make([]byte, rowsTokenLen)
	rand.Read(r.token)
	copy(r.mem, r.token)
	// The first lease, which calls one at a time always take, is the
	// host's memory before the plugin starts: the host's first reads of
	// its slots would otherwise fault a page in every 4 KiB.
	for i := rowsHeader; i < rowsHeader+rowsLeaseBytes; i += 4096 {
		r.mem[i] = 0
	}
	return r, f, nil
}

// pluginRows maps the region the host handed the plugin, if it did
// (RowsFDEnv), and closes the descriptor: the plugin's own children do not
// get it. nil, nil: no region.
func pluginRows() (*rowRegion, error) {
	s := os.Getenv(RowsFDEnv)
	os.Unsetenv(RowsFDEnv)
	if s == "" {
		return nil, nil
	}
	fd, err := strconv.Atoi(s)
	if err != nil || fd < 3 {
		return nil, fmt.Errorf("$%s=%q: not a file descriptor", RowsFDEnv, s)
	}
	if !littleEndian {
		return nil, errors.New("shared rows: not on a big-endian machine")
	}
	f := os.NewFile(uintptr(fd), "shared rows")
	defer f.Close()
	return mapRows(f)
}

// pluginToken is what the plugin's Load answers: the region's first bytes.
func (r *rowRegion) pluginToken() []byte {
	if r == nil || len(r.mem) < rowsTokenLen {
		return nil
	}
	return append([]byte(nil), r.mem[:rowsTokenLen]...)
}

// bytes is the mapping (nil: none).
func (r *rowRegion) bytes() []byte {
	if r == nil {
		return nil
	}
	return r.mem
}

// counter is the uint64 at off (8-aligned, inside the region).
func (r *rowRegion) counter(off int64) *uint64 {
	return (*uint64)(unsafe.Pointer(&r.mem[off]))
}

// rowLeases are the host's leases on one plugin's region.
type rowLeases struct {
	region *rowRegion
	mu     sync.Mutex
	// Set by enable (the plugin's Load answered the token): the geometry
	// of every lease, and the ones not lent out.
	slotBytes, slots int64
	free             []int
	retired          [rowsLeases]bool // leases never lent again (release)
	taken            atomic.Int64     // rows copied out of the region
}

// enable turns the leases on for rows of nVocab values after the plugin's
// Load answered token; it is off when the token is not the region's (an
// older plugin answers none) or a row is too large for two slots a lease.
func (l *rowLeases) enable(token []byte, nVocab int) {
	if l == nil || l.region == nil || len(token) != rowsTokenLen || string(token) != string(l.region.token) {
		l.disable()
		return
	}
	slot := (int64(nVocab)*4 + rowsSlotAlign - 1) / rowsSlotAlign * rowsSlotAlign
	if nVocab <= 0 || slot > rowsLeaseBytes/2 {
		l.disable()
		return
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	l.slotBytes, l.slots = slot, min(rowsMaxSlots, rowsLeaseBytes/slot)
	l.free = l.free[:0]
	for i := range rowsLeases {
		if !l.retired[i] {
			l.free = append(l.free, i)
		}
	}
}

func (l *rowLeases) disable() {
	if l == nil {
		return
	}
	l.mu.Lock()
	l.slots, l.free = 0, nil
	l.mu.Unlock()
}

// rowLease is one call's ring.
type rowLease struct {
	owner                    *rowLeases
	i                        int
	offset, slotBytes, slots int64
	consumedOff              int64
	consumed                 int64 // rows of the call the host has taken
}

// acquire lends a lease, its counter reset; nil when none is free (the
// call moves its rows in the messages).
func (l *rowLeases) acquire() *rowLease {
	if l == nil {
		return nil
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.slots == 0 || len(l.free) == 0 {
		return nil
	}
	i := slices.Min(l.free)
	l.free = slices.DeleteFunc(l.free, func(k int) bool { return k == i })
	x := &rowLease{owner: l, i: i, offset: rowsHeader + int64(i)*rowsLeaseBytes, slotBytes: l.slotBytes, slots: l.slots, consumedOff: rowsCounter(i)}
	if !x.publish(0) {
		return nil
	}
	return x
}

// release returns a lease after its call. Only a call that ended cleanly
// (the plugin's handler returned) gives it back: a call the host gave up
// on may still have a writer in the plugin, and a later call must not read
// what it writes, so its lease is never lent again.
func (x *rowLease) release(clean bool) {
	if x == nil {
		return
	}
	l := x.owner
	l.mu.Lock()
	defer l.mu.Unlock()
	switch {
	case !clean:
		l.retired[x.i] = true
	case l.slots == x.slots && l.slotBytes == x.slotBytes:
		l.free = append(l.free, x.i)
	}
}

// request is the lease as EvalRequest.shared_rows.
func (x *rowLease) request() *backendpb.SharedRows {
	if x == nil {
		return nil
	}
	return &backendpb.SharedRows{Offset: x.offset, SlotBytes: x.slotBytes, Slots: x.slots, ConsumedOffset: x.consumedOff}
}

// publish stores the count of rows taken for the plugin to read.
func (x *rowLease) publish(n int64) bool {
	r := x.owner.region
	r.mu.RLock()
	defer r.mu.RUnlock()
	if r.closed {
		return false
	}
	x.consumed = n
	atomic.StoreUint64(r.counter(x.consumedOff), uint64(n))
	return true
}

// errSharedRow is the prefix of every refusal of a shared row.
var errSharedRow = errors.New("shared memory row")

// take copies the row a chunk placed at off (n bytes) into dst(n/4), after
// checking that it is exactly the slot of the call's next row and fits it;
// the row then counts as taken.
func (x *rowLease) take(off, n int64, dst func(n int) []float32) ([]float32, error) {
	j := x.consumed
	slot := x.offset + j%x.slots*x.slotBytes
	switch {
	case n <= 0 || n%4 != 0 || n > x.slotBytes:
		return nil, fmt.Errorf("%w: the plugin reports %d bytes; want a whole number of float32 values, at most the slot's %d", errSharedRow, n, x.slotBytes)
	case off != slot:
		return nil, fmt.Errorf("%w: the plugin reports offset %d; row %d of the call belongs at %d (slot %d of %d, %d bytes each, from %d)", errSharedRow, off, j, slot, j%x.slots, x.slots, x.slotBytes, x.offset)
	}
	row := dst(int(n / 4))
	if len(row) != int(n/4) {
		return nil, fmt.Errorf("%w: no buffer of %d values", errSharedRow, n/4)
	}
	if err := x.owner.region.copyOut(floatBytes(row), slot); err != nil {
		return nil, err
	}
	x.owner.taken.Add(1)
	return row, nil
}

// copyOut copies len(dst) bytes at off, which the caller checked lie in the
// region. The region is sealed where it is created (Linux): nothing can
// shrink it under the mapping. A fault (elsewhere) is an error, not a
// crash of the host.
func (r *rowRegion) copyOut(dst []byte, off int64) (err error) {
	r.mu.RLock()
	defer r.mu.RUnlock()
	if r.closed {
		return fmt.Errorf("%w: the region is closed (the plugin was stopped)", errSharedRow)
	}
	if off < 0 || off > int64(len(r.mem)) || int64(len(dst)) > int64(len(r.mem))-off {
		return fmt.Errorf("%w: %d bytes at %d: outside the region of %d bytes", errSharedRow, len(dst), off, len(r.mem))
	}
	defer debug.SetPanicOnFault(debug.SetPanicOnFault(true))
	defer func() {
		if p := recover(); p != nil {
			err = fmt.Errorf("%w: reading %d bytes at %d: %v", errSharedRow, len(dst), off, p)
		}
	}()
	copy(dst, r.mem[off:off+int64(len(dst))])
	return nil
}

// rowWriter is the plugin's side of a lease: it writes the call's rows
// into their slots.
type rowWriter struct {
	region                   *rowRegion
	offset, slotBytes, slots int64
	consumed                 *uint64
	j                        int64 // rows sent so far in the call
}

// newRowWriter checks the host's lease against the plugin's region; nil
// (rows in the messages) when there is no lease, no region, or it does
// not fit.
func newRowWriter(r *rowRegion, pb *backendpb.SharedRows) *rowWriter {
	if r == nil || pb == nil {
		return nil
	}
	size := int64(len(r.mem))
	off, sb, n, c := pb.Offset, pb.SlotBytes, pb.Slots, pb.ConsumedOffset
	if off < 0 || sb <= 0 || n <= 0 || sb > size || n > size/sb || off > size-n*sb ||
		c < 0 || c%8 != 0 || c > size-8 {
		return nil
	}
	return &rowWriter{region: r, offset: off, slotBytes: sb, slots: n, consumed: r.counter(c)}
}

// slotWait is the longest sleep between two looks at the host's counter.
const slotWait = 200 * time.Microsecond

// put writes the call's next row into its slot, once the host has taken
// the slot's previous row, and says where it is; ok is false (send the row
// in the message) when it does not fit a slot. Every row of the call, in a
// slot or not, goes through put, in order: the host counts them all.
func (w *rowWriter) put(ctx context.Context, v []float32) (off, n int64, ok bool, err error) {
	if w == nil {
		return 0, 0, false, nil
	}
	j := w.j
	w.j++
	b := floatBytes(v)
	if int64(len(b)) > w.slotBytes || len(b) == 0 {
		return 0, 0, false, nil
	}
	// Slot j mod slots held row j-slots: wait until the host took it.
	for sleep := time.Microsecond; j >= w.slots && int64(atomic.LoadUint64(w.consumed)) < j-w.slots+1; sleep = min(2*sleep, slotWait) {
		if err := ctx.Err(); err != nil {
			return 0, 0, false, err
		}
		time.Sleep(sleep)
	}
	off = w.offset + j%w.slots*w.slotBytes
	copy(w.region.mem[off:off+int64(len(b))], b)
	return off, int64(len(b)), true, nil
}
