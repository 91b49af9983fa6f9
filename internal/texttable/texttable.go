// Package texttable makes the tables evalrun prints and writes: Unicode
// borders on a terminal, ASCII otherwise (logs and CI), Markdown for .md
// files; and says how wide a printed table may be.
package texttable

import (
	"io"
	"os"
	"strconv"

	"github.com/mattn/go-isatty"
	"github.com/olekukonko/tablewriter"
	"github.com/olekukonko/tablewriter/pkg/twwidth"
	"github.com/olekukonko/tablewriter/renderer"
	"github.com/olekukonko/tablewriter/tw"
	"golang.org/x/term"
)

// New makes a table writing to w, in Markdown when markdown is set.
func New(w io.Writer, markdown bool) *tablewriter.Table {
	return newTable(w, markdown)
}

// NewWithin makes a table like New's outside Markdown whose cells wrap at
// spaces to keep it within width display columns, as far as its words
// allow: for a table too wide even with its key columns only.
func NewWithin(w io.Writer, width int) *tablewriter.Table {
	return newTable(w, false, tablewriter.WithMaxWidth(width),
		tablewriter.WithRowAutoWrap(tw.WrapNormal), tablewriter.WithHeaderAutoWrap(tw.WrapNormal))
}

func newTable(w io.Writer, markdown bool, more ...tablewriter.Option) *tablewriter.Table {
	opts := []tablewriter.Option{tablewriter.WithHeaderAutoFormat(tw.Off), tablewriter.WithRowAutoWrap(tw.WrapNone)}
	switch {
	case markdown:
		opts = append(opts, tablewriter.WithRenderer(renderer.NewMarkdown()))
	case !isTerminal(w):
		opts = append(opts, tablewriter.WithRenderer(renderer.NewBlueprint(tw.Rendition{Symbols: tw.NewSymbols(tw.StyleASCII)})))
	}
	return tablewriter.NewTable(w, append(opts, more...)...)
}

func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	return ok && (isatty.IsTerminal(f.Fd()) || isatty.IsCygwinTerminal(f.Fd()))
}

// DefaultWidth is the width printed tables fit in when the output is no
// terminal and $COLUMNS is unset: a log, CI, a pipe.
const DefaultWidth = 120

// Width is the number of display columns tables printed to w should fit
// in: $COLUMNS when it is a positive number, else the terminal's width when
// w is one, else DefaultWidth.
func Width(w io.Writer) int {
	if n, err := strconv.Atoi(os.Getenv("COLUMNS")); err == nil && n > 0 {
		return n
	}
	if f, ok := w.(*os.File); ok && isTerminal(w) {
		if n, _, err := term.GetSize(int(f.Fd())); err == nil && n > 0 {
			return n
		}
	}
	return DefaultWidth
}

// TableWidth is the display width of a table of these rows (its header one
// of them) as New draws it outside Markdown: every column as wide as its
// widest cell, a space either side of it and a border between and around
// the columns.
func TableWidth(rows ...[]string) int {
	var widths []int
	for _, row := range rows {
		for i, cell := range row {
			if i == len(widths) {
				widths = append(widths, 0)
			}
			widths[i] = max(widths[i], DisplayWidth(cell))
		}
	}
	total := 1
	for _, w := range widths {
		total += w + 3
	}
	return total
}

// DisplayWidth is the number of terminal columns s takes, as tables lay
// it out.
func DisplayWidth(s string) int { return twwidth.Width(s) }
