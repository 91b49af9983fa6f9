package texttable

import (
	"bytes"
	"os"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/olekukonko/tablewriter"
)

// TestWidth: $COLUMNS when set to a width; otherwise, on no terminal (a
// buffer, a pipe: logs and CI), 120.
func TestWidth(t *testing.T) {
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	defer w.Close()
	for columns, want := range map[string]int{"": DefaultWidth, "90": 90, "250": 250, "wide": DefaultWidth, "-3": DefaultWidth} {
		t.Setenv("COLUMNS", columns)
		if got := Width(&bytes.Buffer{}); got != want {
			t.Errorf("COLUMNS=%q, a buffer: %d, want %d", columns, got, want)
		}
		if got := Width(w); got != want {
			t.Errorf("COLUMNS=%q, a pipe: %d, want %d", columns, got, want)
		}
	}
	if DefaultWidth != 120 {
		t.Errorf("DefaultWidth %d", DefaultWidth)
	}
}

// TestTableWidthIsTheDrawnWidth: TableWidth predicts the width New draws,
// in display columns (± and Δ are one each), and NewWithin keeps a table
// whose cells have spaces within its width.
func TestTableWidthIsTheDrawnWidth(t *testing.T) {
	rows := [][]string{{"backend", "KLD mean", "max |Δlogit|"}, {"npu-fp16", "1.04e-06 ± 3.5e-08", "0.0199"}, {"cpu-exact (ref)", "-", "2.24e-05"}}
	widest := func(s string) int {
		n := 0
		for _, l := range strings.Split(strings.TrimSpace(s), "\n") {
			n = max(n, utf8.RuneCountInString(l))
		}
		return n
	}
	draw := func(tab *tablewriter.Table, b *bytes.Buffer) string {
		tab.Header(rows[0])
		for _, r := range rows[1:] {
			if err := tab.Append(r); err != nil {
				t.Fatal(err)
			}
		}
		if err := tab.Render(); err != nil {
			t.Fatal(err)
		}
		return b.String()
	}
	var b bytes.Buffer
	if out := draw(New(&b, false), &b); widest(out) != TableWidth(rows...) || TableWidth(rows...) != 55 {
		t.Errorf("drawn %d columns wide, TableWidth %d, want 55:\n%s", widest(out), TableWidth(rows...), out)
	}
	b.Reset()
	if out := draw(NewWithin(&b, 45), &b); widest(out) > 45 {
		t.Errorf("NewWithin(45) drew %d columns:\n%s", widest(out), out)
	}
}
