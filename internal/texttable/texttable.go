// Package texttable makes the tables evalrun prints and writes: Unicode
// borders on a terminal, ASCII otherwise (logs and CI), Markdown for .md
// files.
package texttable

import (
	"io"
	"os"

	"github.com/mattn/go-isatty"
	"github.com/olekukonko/tablewriter"
	"github.com/olekukonko/tablewriter/renderer"
	"github.com/olekukonko/tablewriter/tw"
)

// New makes a table writing to w, in Markdown when markdown is set.
func New(w io.Writer, markdown bool) *tablewriter.Table {
	opts := []tablewriter.Option{tablewriter.WithHeaderAutoFormat(tw.Off), tablewriter.WithRowAutoWrap(tw.WrapNone)}
	switch {
	case markdown:
		opts = append(opts, tablewriter.WithRenderer(renderer.NewMarkdown()))
	case !isTerminal(w):
		opts = append(opts, tablewriter.WithRenderer(renderer.NewBlueprint(tw.Rendition{Symbols: tw.NewSymbols(tw.StyleASCII)})))
	}
	return tablewriter.NewTable(w, opts...)
}

func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	return ok && (isatty.IsTerminal(f.Fd()) || isatty.IsCygwinTerminal(f.Fd()))
}
