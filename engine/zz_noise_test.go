package engine

import (
	"fmt"
	"math"
	"os"
	"sort"
	"strconv"
	"testing"
	"time"
)

func TestZZAllan(t *testing.T) {
	threads, _ := strconv.Atoi(os.Getenv("ZZT"))
	if threads == 0 {
		t.Skip()
	}
	m := openModel(t, modelPath("F32"), Exact, threads)
	s := m.NewSession(512)
	tok := []int32{300}
	var ends []time.Duration // end time of each token since t0
	t0 := time.Now()
	for time.Since(t0) < 20*time.Second {
		s.Reset()
		for i := 0; i < 64; i++ {
			if err := s.Decode(tok, nil, noEmit); err != nil {
				t.Fatal(err)
			}
			ends = append(ends, time.Since(t0))
		}
	}
	// windows of W: tokens per window -> log rate; robust sigma across windows
	for _, w := range []time.Duration{time.Millisecond, 3 * time.Millisecond, 10 * time.Millisecond, 30 * time.Millisecond, 100 * time.Millisecond, 300 * time.Millisecond, time.Second} {
		var rates []float64
		j := 0
		for start := time.Duration(0); start+w <= ends[len(ends)-1]; start += w {
			c := 0
			for j < len(ends) && ends[j] < start+w {
				c++
				j++
			}
			rates = append(rates, math.Log(float64(c+1)))
		}
		sort.Float64s(rates)
		n := len(rates)
		iqr := (rates[3*n/4] - rates[n/4]) / 1.349
		// sd
		var mu, v float64
		for _, r := range rates {
			mu += r
		}
		mu /= float64(n)
		for _, r := range rates {
			v += (r - mu) * (r - mu)
		}
		sd := math.Sqrt(v / float64(n-1))
		fmt.Printf("W=%-6v n=%5d tokens/win=%.1f  sigma_iqr=%.3f sd=%.3f  sigma^2*W(ms)=%.4f\n", w, n, math.Exp(mu), iqr, sd, sd*sd*float64(w.Milliseconds()))
	}
}
