package backend_test

import (
	"context"
	"errors"
	"fmt"
	"math"
	"runtime"
	"slices"
	"testing"
	"time"

	"github.com/evalrun/evalrun/backend"
	"github.com/evalrun/evalrun/backend/backendtest"
)

// launchVocab starts the test plugin with shared rows on or off and loads
// a model of vocab values a row.
func launchVocab(t *testing.T, shared bool, vocab int) *backend.Client {
	t.Helper()
	if !shared {
		t.Setenv(backend.SharedRowsEnv, "off")
	}
	c, err := backend.Launch(context.Background(), backend.LaunchConfig{Path: testPlugin, StartTimeout: 20 * time.Second})
	if err != nil {
		t.Fatalf("Launch: %v", err)
	}
	t.Cleanup(c.Kill)
	if _, err := c.Load(context.Background(), backend.LoadRequest{ModelPath: "m", Options: map[string]any{"vocab": vocab}}); err != nil {
		t.Fatalf("Load: %v", err)
	}
	return c
}

// evalRows runs req and returns its rows, each in a buffer of its own;
// slow makes the host take its first rows late, so that a plugin writing
// into a ring of slots has to wait for them.
func evalRows(t *testing.T, c *backend.Client, req backend.EvalRequest, slow bool) [][]float32 {
	t.Helper()
	var rows [][]float32
	err := c.EvalInto(context.Background(), req, nil, func(l backend.Logits) error {
		if slow && len(rows) < 4 {
			time.Sleep(5 * time.Millisecond)
		}
		rows = append(rows, l.Values)
		return nil
	})
	if err != nil {
		t.Fatalf("Eval: %v", err)
	}
	return rows
}

// TestSharedRowsAreTheMessageRows: the rows a plugin writes into shared
// memory are bit for bit the rows it sends in gRPC messages, for a Llama 3
// vocabulary (a score chunk's 63 rows wrap the ring of slots four times,
// the host taking the first ones late) and a tiny one; with
// EVALRUN_PLUGIN_SHM=off every row comes in a message.
func TestSharedRowsAreTheMessageRows(t *testing.T) {
	for _, vocab := range []int{128256, 5} {
		t.Run(fmt.Sprint(vocab), func(t *testing.T) {
			tokens := make([]int32, 64)
			for i := range tokens {
				tokens[i] = int32(i * 7 % vocab)
			}
			reqs := []backend.EvalRequest{
				{Session: "s", Pos: 0, Tokens: tokens, LogitsFrom: 1},
				{Session: "s", Pos: -1, Tokens: []int32{3}},
				{Session: "s", Pos: 10, Tokens: tokens[:20], LogitsFrom: 0},
			}
			got := map[bool][][]float32{}
			for _, shared := range []bool{true, false} {
				c := launchVocab(t, shared, vocab)
				for i, req := range reqs {
					got[shared] = append(got[shared], evalRows(t, c, req, i == 0)...)
				}
				want := int64(0)
				if shared && runtime.GOOS == "linux" {
					want = int64(len(got[shared]))
				}
				if n := c.SharedRows(); n != want {
					t.Errorf("shared %v: %d rows through shared memory, want %d", shared, n, want)
				}
			}
			if len(got[true]) != 63+1+20 || len(got[false]) != len(got[true]) {
				t.Fatalf("%d rows shared, %d in messages, want %d", len(got[true]), len(got[false]), 63+1+20)
			}
			for i := range got[true] {
				if !slices.Equal(floatBits(got[true][i]), floatBits(got[false][i])) {
					t.Fatalf("row %d differs between shared memory and messages", i)
				}
			}
			if msg := backendtest.CheckRow(got[true][62], 63, tokens[63], 64, vocab); msg != "" {
				t.Errorf("last row of the first call: %s", msg)
			}
		})
	}
}

func floatBits(v []float32) []uint32 {
	out := make([]uint32, len(v))
	for i, f := range v {
		out[i] = math.Float32bits(f)
	}
	return out
}

// TestAbandonedCallsRetireTheirLeases: a call the host gives up on keeps
// its lease (the plugin may still write into it), so no later call reads
// its slots; once every lease is gone, rows come in messages, still right.
func TestAbandonedCallsRetireTheirLeases(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("shared rows are created on Linux")
	}
	c := launchVocab(t, true, 1000)
	free := backend.FreeLeases(c)
	if free < 1 {
		t.Fatalf("%d leases to lend", free)
	}
	stop := errors.New("enough")
	tokens := make([]int32, 40)
	for i := range free {
		n := 0
		err := c.Eval(context.Background(), backend.EvalRequest{Session: "s", Pos: 0, Tokens: tokens}, func(backend.Logits) error {
			if n++; n == 2 {
				return stop
			}
			return nil
		})
		if !errors.Is(err, stop) {
			t.Fatalf("abandoned call %d: %v", i, err)
		}
		if got := backend.FreeLeases(c); got != free-i-1 {
			t.Fatalf("after %d abandoned calls %d leases left, want %d", i+1, got, free-i-1)
		}
	}
	before := c.SharedRows()
	rows := evalRows(t, c, backend.EvalRequest{Session: "s", Pos: 0, Tokens: tokens}, false)
	for i, row := range rows {
		if msg := backendtest.CheckRow(row, i, tokens[i], len(tokens), 1000); msg != "" {
			t.Fatalf("row %d: %s", i, msg)
		}
	}
	if c.SharedRows() != before {
		t.Errorf("%d rows through shared memory with no lease left", c.SharedRows()-before)
	}
	// A second Load lends no retired lease again.
	if _, err := c.Load(context.Background(), backend.LoadRequest{ModelPath: "m", Options: map[string]any{"vocab": 1000}}); err != nil {
		t.Fatal(err)
	}
	if got := backend.FreeLeases(c); got != 0 {
		t.Errorf("after Load again %d leases to lend, want 0", got)
	}
}
