package main

// The TestDocs tests keep README.md and docs/*.md true to the code, as
// benchstat's doc test does:
//
//   - ```console blocks are run: each `$ evalrun ...` (or `$ bin/evalrun ...`)
//     line, with the evalrun and plugins this package's TestMain built, in a
//     scratch copy of the repository (its entries linked, results/ empty),
//     and what it prints is compared with the lines after it (see
//     normalize and matchLines for what may differ).
//   - Every other evalrun, make and go test command (```sh blocks and inline
//     code) is checked without running it: the subcommand exists and takes
//     every flag used, make targets are the Makefile's, go test packages and
//     -run/-bench patterns exist.
//   - ```yaml blocks are specs or parts of one: the spec package reads them,
//     and `evalrun validate` a whole one.
//   - Paths, test names and relative links (with #anchors) exist.
//   - README.md stays at most readmeMaxLines long.

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
	"go.yaml.in/yaml/v3"

	"github.com/evalrun/evalrun/internal/testkit"
	"github.com/evalrun/evalrun/pipeline/spec"
	"github.com/evalrun/evalrun/pipeline/speedstat"
)

const readmeMaxLines = 300

// benchReps is EVALRUN_BENCH_REPS for the console blocks' runs, unless the
// block sets it: the fewest with which a test's p95 has its interval, as in
// `make run`'s 300, whose output the README shows; more change only figures
// normalize masks (rates, the NPU call counts), and 300 would take 20 s a
// run.
var benchReps = strconv.Itoa(speedstat.MinRepsFastCI())

// mdFile is a markdown file split into what the tests check.
type mdFile struct {
	rel    string   // path from the repository root
	lines  []string // the file's lines
	blocks []block  // fenced code blocks
	spans  []span   // inline code spans outside the blocks
	links  []span   // link targets outside the blocks
}

// block is a fenced code block; line is the opening fence's (1-based).
type block struct {
	lang  string
	line  int
	lines []string // without the fence's indentation
}

type span struct {
	line int
	text string
}

var (
	fenceRE = regexp.MustCompile("^( *)(```+)\\s*(\\S*)")
	spanRE  = regexp.MustCompile("`([^`]+)`")
	linkRE  = regexp.MustCompile(`\]\(([^)\s]+)\)`)
)

// fenceLangs are the languages a block may have: console is run, sh checked
// statically, yaml read as a spec, text (a listing, not output) left alone.
var fenceLangs = []string{"console", "sh", "yaml", "text"}

func readDocs(t *testing.T) []*mdFile {
	t.Helper()
	names, err := filepath.Glob(testkit.Path("docs", "*.md"))
	if err != nil {
		t.Fatal(err)
	}
	var out []*mdFile
	for _, rel := range append([]string{"README.md"}, relAll(names)...) {
		data, err := os.ReadFile(testkit.Path(rel))
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, parseMarkdown(rel, string(data)))
	}
	return out
}

func relAll(paths []string) []string {
	var out []string
	for _, p := range paths {
		r, _ := filepath.Rel(testkit.Root(), p)
		out = append(out, filepath.ToSlash(r))
	}
	return out
}

func parseMarkdown(rel, text string) *mdFile {
	f := &mdFile{rel: rel, lines: strings.Split(text, "\n")}
	prose := make([]string, len(f.lines)) // the lines outside fences, blanks for the rest
	var cur *block
	indent := ""
	for i, l := range f.lines {
		if cur != nil {
			if strings.TrimSpace(l) == "```" {
				f.blocks = append(f.blocks, *cur)
				cur = nil
			} else {
				cur.lines = append(cur.lines, strings.TrimPrefix(l, indent))
			}
			continue
		}
		if m := fenceRE.FindStringSubmatch(l); m != nil {
			cur, indent = &block{lang: m[3], line: i + 1}, m[1]
			continue
		}
		prose[i] = l
	}
	text = strings.Join(prose, "\n")
	lineAt := func(off int) int { return strings.Count(text[:off], "\n") + 1 }
	for _, m := range spanRE.FindAllStringSubmatchIndex(text, -1) {
		s := strings.ReplaceAll(text[m[2]:m[3]], "\n", " ")
		s = strings.ReplaceAll(s, `\|`, "|") // a table cell's escaped pipe
		f.spans = append(f.spans, span{lineAt(m[0]), s})
	}
	for _, m := range linkRE.FindAllStringSubmatchIndex(text, -1) {
		f.links = append(f.links, span{lineAt(m[0]), text[m[2]:m[3]]})
	}
	return f
}

func TestDocsReadmeLength(t *testing.T) {
	data, err := os.ReadFile(testkit.Path("README.md"))
	if err != nil {
		t.Fatal(err)
	}
	if n := strings.Count(string(data), "\n"); n > readmeMaxLines {
		t.Errorf("README.md: %d lines, more than %d: move the detail to a page of docs/", n, readmeMaxLines)
	}
}

func TestDocsFenceLanguages(t *testing.T) {
	for _, f := range readDocs(t) {
		for _, b := range f.blocks {
			if !slices.Contains(fenceLangs, b.lang) {
				t.Errorf("%s:%d: a ```%s block: use one of %v (console is run, sh checked, yaml a spec, text not checked)",
					f.rel, b.line, b.lang, fenceLangs)
			}
		}
	}
}

// step is a console block's command and the output the doc shows for it.
type step struct {
	line int // the command's line in the file
	cmd  string
	want []string
	wl   []int // want's lines in the file
}

func consoleSteps(f *mdFile, b block) []step {
	var steps []step
	for i, l := range b.lines {
		n := b.line + 1 + i
		if c, ok := strings.CutPrefix(l, "$ "); ok {
			steps = append(steps, step{line: n, cmd: c})
		} else if len(steps) > 0 {
			s := &steps[len(steps)-1]
			s.want, s.wl = append(s.want, l), append(s.wl, n)
		}
	}
	return steps
}

// TestDocsConsole runs every console block and compares the output.
func TestDocsConsole(t *testing.T) {
	for _, f := range readDocs(t) {
		for _, b := range f.blocks {
			if b.lang != "console" {
				continue
			}
			t.Run(fmt.Sprintf("%s:%d", f.rel, b.line), func(t *testing.T) {
				t.Parallel()
				runConsole(t, f, b)
			})
		}
	}
}

// scratchRepo is a directory named evalrun holding a link to every entry of
// the repository but results/ (and bin/, .git), with an empty results/: a
// doc's command runs there as from the root of a checkout, and what it
// writes stays in the test's directory.
func scratchRepo(t *testing.T) string {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "evalrun")
	if err := os.MkdirAll(filepath.Join(dir, "results"), 0o755); err != nil {
		t.Fatal(err)
	}
	entries, err := os.ReadDir(testkit.Root())
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		switch e.Name() {
		case "results", "bin", ".git":
			continue
		}
		if err := os.Symlink(testkit.Path(e.Name()), filepath.Join(dir, e.Name())); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

// docEnv is the environment of a doc's command: the test's, less what would
// change evalrun's output (its own variables, GitHub Actions', the width
// its tables fit in), plus the command's assignments.
func docEnv(assign []string) []string {
	var env []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "EVALRUN_") && !strings.HasPrefix(kv, "GITHUB_") && !strings.HasPrefix(kv, "COLUMNS=") {
			env = append(env, kv)
		}
	}
	env = append(env, "EVALRUN_BENCH_REPS="+benchReps)
	return append(env, assign...)
}

func runConsole(t *testing.T, f *mdFile, b block) {
	dir := scratchRepo(t)
	steps := consoleSteps(f, b)
	if len(steps) == 0 {
		t.Fatalf("%s:%d: a console block without a `$ ` command", f.rel, b.line)
	}
	code := -1 // the last command's exit code, until an `echo $?` checks it
	var last step
	for _, s := range steps {
		if s.cmd == "echo $?" {
			if want := strings.TrimSpace(strings.Join(s.want, "\n")); want != strconv.Itoa(code) {
				t.Errorf("%s:%d: `%s` exits %d, the doc says %q", f.rel, last.line, last.cmd, code, want)
			}
			code = -1
			continue
		}
		checkExit(t, f, last, code)
		words, err := shellWords(s.cmd)
		if err != nil {
			t.Fatalf("%s:%d: %v", f.rel, s.line, err)
		}
		assign, words := cutAssignments(words)
		merge := len(words) > 0 && words[len(words)-1] == "2>&1"
		if merge {
			words = words[:len(words)-1]
		}
		if len(words) == 0 || (words[0] != "evalrun" && words[0] != "bin/evalrun") {
			t.Fatalf("%s:%d: `%s`: a console block runs evalrun commands only (make them ```sh)", f.rel, s.line, s.cmd)
		}
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		cmd := exec.CommandContext(ctx, filepath.Join(binDir, "evalrun"), words[1:]...)
		cmd.Dir, cmd.Env = dir, docEnv(assign)
		var out, errb bytes.Buffer
		cmd.Stdout, cmd.Stderr = &out, &errb
		if merge {
			cmd.Stderr = &out
		}
		err = cmd.Run()
		cancel()
		code = 0
		if ee, ok := err.(*exec.ExitError); ok {
			code = ee.ExitCode()
		} else if err != nil {
			t.Fatalf("%s:%d: %v", f.rel, s.line, err)
		}
		got := strings.Split(strings.ReplaceAll(out.String(), dir, "/repo"), "\n")
		if di, gi, ok := matchLines(normalize(s.want), normalize(got)); !ok {
			at, docLine := "the end of its output", "(nothing)"
			if di < len(s.want) {
				at, docLine = fmt.Sprintf("%s:%d", f.rel, s.wl[di]), s.want[di]
			}
			gotLine := "(nothing)"
			if g := trimBlank(got); gi < len(g) {
				gotLine = g[gi]
			}
			t.Errorf("%s:%d: `%s` printed otherwise; first difference at %s:\n doc: %s\n got: %s\nits output (stderr: %d bytes):\n%s",
				f.rel, s.line, s.cmd, at, docLine, gotLine, errb.Len(), out.String())
		}
		last = s
	}
	checkExit(t, f, last, code)
}

// checkExit fails a command that exited non-zero without an `echo $?` after
// it that shows the code.
func checkExit(t *testing.T, f *mdFile, s step, code int) {
	if code > 0 {
		t.Errorf("%s:%d: `%s` exits %d: show it with `$ echo $?` after its output", f.rel, s.line, s.cmd, code)
	}
}

// shellWords splits a command line as sh would, for the quoting the docs
// use: '...', "..." and backslash escapes outside quotes.
func shellWords(s string) ([]string, error) {
	var words []string
	var w strings.Builder
	in, quote := false, byte(0)
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case quote != 0:
			if c == quote {
				quote = 0
			} else {
				w.WriteByte(c)
			}
		case c == '\'' || c == '"':
			quote, in = c, true
		case c == '\\' && i+1 < len(s):
			i++
			w.WriteByte(s[i])
			in = true
		case c == ' ' || c == '\t':
			if in {
				words, in = append(words, w.String()), false
				w.Reset()
			}
		default:
			w.WriteByte(c)
			in = true
		}
	}
	if quote != 0 {
		return nil, fmt.Errorf("`%s`: unterminated quote", s)
	}
	if in {
		words = append(words, w.String())
	}
	return words, nil
}

var assignRE = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*=`)

// cutAssignments splits a command's leading VAR=value words off.
func cutAssignments(words []string) (assign, rest []string) {
	for len(words) > 0 && assignRE.MatchString(words[0]) {
		assign, words = append(assign, words[0]), words[1:]
	}
	return assign, words
}

var (
	borderRE   = regexp.MustCompile(`^\+[-+]+\+$`)
	spacesRE   = regexp.MustCompile(` {2,}`)
	runIDRE    = regexp.MustCompile(`\b\d{8}-\d{6}\b`)
	numberRE   = regexp.MustCompile(`\d+(\.\d+)?(e[-+]?\d+)?`)
	kernelsRE  = regexp.MustCompile(`\b(avx512|avx2|neon|generic)\b`)
	benchRowRE = regexp.MustCompile(`\| (pp\d+|tg\d+|pp\d+\+tg\d+)( @ d\d+)? \|`)
	// benchCSVRE is a row of bench -o csv: every field quoted.
	benchCSVRE = regexp.MustCompile(`^"[^"]*"(,"[^"]*")+$`)
	npuCallsRE = regexp.MustCompile(`\b\d+ NPU calls\b`)
)

// measured reports whether a line of evalrun's output holds measured
// figures (times, rates, memory, the CPU kernel set): the throughput
// sections of run and compare (to a blank line), the host + IPC line,
// bench's table and csv rows.
func measured(line string, inThroughput bool) bool {
	return inThroughput || strings.HasPrefix(line, "host + IPC:") || benchRowRE.MatchString(line) || benchCSVRE.MatchString(line)
}

// normalize makes the lines comparable: trailing spaces and blank lines at
// either end dropped, runs of spaces one space, a table border's runs of
// '-' one '-' (columns are as wide as their figures), run ids (dates) as
// YYYYMMDD-HHMMSS, the kernel accounting's count of NPU calls (the bench's
// included) as '#'; in measured lines every number is '#' and a CPU kernel
// set KERNELS.
func normalize(lines []string) []string {
	var out []string
	inThroughput := false
	for _, l := range trimBlank(lines) {
		l = strings.TrimRight(l, " \t")
		if l == "" {
			inThroughput = false
		} else if strings.HasPrefix(l, "throughput") {
			inThroughput = true
		}
		l = spacesRE.ReplaceAllString(l, " ")
		if borderRE.MatchString(l) {
			l = regexp.MustCompile(`-+`).ReplaceAllString(l, "-")
		}
		l = runIDRE.ReplaceAllString(l, "YYYYMMDD-HHMMSS")
		l = npuCallsRE.ReplaceAllString(l, "# NPU calls")
		if measured(l, inThroughput) {
			l = kernelsRE.ReplaceAllString(l, "KERNELS")
			l = numberRE.ReplaceAllString(l, "#")
		}
		out = append(out, l)
	}
	return out
}

func trimBlank(lines []string) []string {
	for len(lines) > 0 && strings.TrimSpace(lines[0]) == "" {
		lines = lines[1:]
	}
	for len(lines) > 0 && strings.TrimSpace(lines[len(lines)-1]) == "" {
		lines = lines[:len(lines)-1]
	}
	return lines
}

// matchLines matches the doc's lines against the output's: a doc line "..."
// stands for any number of lines, a "..." within a line for any text. It
// returns, when they do not match, the doc line and the output line where
// the match that went furthest stopped.
func matchLines(want, got []string) (di, gi int, ok bool) {
	type pos struct{ d, g int }
	seen := map[pos]bool{}
	var rec func(d, g int) bool
	rec = func(d, g int) bool {
		if seen[pos{d, g}] {
			return false
		}
		seen[pos{d, g}] = true
		if d > di || (d == di && g > gi) {
			di, gi = d, g
		}
		if d == len(want) {
			return g == len(got)
		}
		if want[d] == "..." {
			for k := g; k <= len(got); k++ {
				if rec(d+1, k) {
					return true
				}
			}
			return false
		}
		return g < len(got) && lineMatches(want[d], got[g]) && rec(d+1, g+1)
	}
	if rec(0, 0) {
		return 0, 0, true
	}
	return di, gi, false
}

func lineMatches(want, got string) bool {
	if !strings.Contains(want, "...") {
		return want == got
	}
	parts := strings.Split(want, "...")
	for i, p := range parts {
		parts[i] = regexp.QuoteMeta(p)
	}
	return regexp.MustCompile("^" + strings.Join(parts, ".*") + "$").MatchString(got)
}

// A command found in the docs, with where.
type docCmd struct {
	file string
	line int
	text string
}

// docCommands are the evalrun, make and go commands of the docs' sh and
// console blocks and inline code, split at && || ; and pipes.
func docCommands(files []*mdFile) []docCmd {
	var out []docCmd
	add := func(f *mdFile, line int, text string) {
		for _, c := range splitCommands(text) {
			out = append(out, docCmd{f.rel, line, c})
		}
	}
	for _, f := range files {
		for _, b := range f.blocks {
			if b.lang != "sh" && b.lang != "console" {
				continue
			}
			for i := 0; i < len(b.lines); i++ {
				l, n := b.lines[i], b.line+1+i
				if b.lang == "console" {
					var ok bool
					if l, ok = strings.CutPrefix(l, "$ "); !ok {
						continue
					}
				}
				for strings.HasSuffix(l, `\`) && i+1 < len(b.lines) { // continued
					i++
					l = strings.TrimSuffix(l, `\`) + " " + b.lines[i]
				}
				if strings.HasPrefix(strings.TrimSpace(l), "#") { // a comment
					continue
				}
				if j := strings.Index(l, " #"); j >= 0 {
					l = l[:j]
				}
				add(f, n, l)
			}
		}
		for _, s := range f.spans {
			add(f, s.line, s.text)
		}
	}
	return out
}

var substRE = regexp.MustCompile(`\$\([^)]*\)`)

// splitCommands splits a line at && || ; and at a pipe into a command (a
// " | " before a flag is the docs' "either flag": kept).
func splitCommands(line string) []string {
	line = substRE.ReplaceAllString(line, "") // $(...) runs something else
	var out []string
	for _, part := range regexp.MustCompile(`&&|\|\||;`).Split(line, -1) {
		words := strings.Fields(part)
		start := 0
		for i, w := range words {
			if w == "|" && (i+1 == len(words) || !strings.HasPrefix(words[i+1], "-")) {
				out = append(out, strings.Join(words[start:i], " "))
				start = i + 1
			}
		}
		out = append(out, strings.Join(words[start:], " "))
	}
	var cmds []string
	for _, c := range out {
		_, words := cutAssignments(strings.Fields(c))
		if len(words) > 0 && (isEvalrun(words[0]) || words[0] == "make" || (words[0] == "go" && len(words) > 1 && words[1] == "test")) {
			cmds = append(cmds, c)
		}
	}
	return cmds
}

func isEvalrun(w string) bool { return w == "evalrun" || w == "bin/evalrun" || w == "./bin/evalrun" }

// TestDocsCommands checks every command of the docs without running it.
func TestDocsCommands(t *testing.T) {
	files := readDocs(t)
	c := &cmdChecker{t: t, flags: map[string]map[string]bool{}, targets: makeTargets(t)}
	checked := 0
	for _, d := range docCommands(files) {
		_, words := cutAssignments(strings.Fields(d.text))
		var err error
		switch {
		case isEvalrun(words[0]):
			err = c.evalrun(words[1:])
		case words[0] == "make":
			err = c.make(words[1:])
		default:
			err = c.goTest(words[2:])
		}
		if err != nil {
			t.Errorf("%s:%d: `%s`: %v", d.file, d.line, d.text, err)
		}
		checked++
	}
	if checked < 50 { // the docs hold well over a hundred: the parser broke
		t.Fatalf("only %d commands found in the docs", checked)
	}
	t.Logf("%d commands checked", checked)
}

type cmdChecker struct {
	t       *testing.T
	flags   map[string]map[string]bool // a command path's flags: name -> takes a value
	targets map[string]bool
}

// flagsOf returns the flags of an evalrun command: cobra's for the host's
// commands, the plugin binary's --help for the commands run in a plugin.
func (c *cmdChecker) flagsOf(cmd *cobra.Command) map[string]bool {
	path := cmd.CommandPath()
	if fl, ok := c.flags[path]; ok {
		return fl
	}
	fl := map[string]bool{"--help": false, "-h": false}
	if cmd.DisableFlagParsing { // a plugin's command
		r := evalrun(c.t, nil, cmd.Name(), "--help")
		if r.code != 0 {
			c.t.Fatalf("evalrun %s --help: exit %d\n%s", cmd.Name(), r.code, r.stderr)
		}
		re := regexp.MustCompile(`(?m)^\s+(?:-(\w), )?--([\w-]+)( \w+)?\s{2,}`)
		for _, m := range re.FindAllStringSubmatch(r.stdout, -1) {
			fl["--"+m[2]] = m[3] != ""
			if m[1] != "" {
				fl["-"+m[1]] = m[3] != ""
			}
		}
	} else {
		add := func(f *pflag.Flag) {
			takes := f.NoOptDefVal == ""
			fl["--"+f.Name] = takes
			if f.Shorthand != "" {
				fl["-"+f.Shorthand] = takes
			}
		}
		cmd.Flags().VisitAll(add)
		cmd.InheritedFlags().VisitAll(add)
	}
	if len(fl) < 3 && cmd.Runnable() && cmd.Name() != "help" && cmd.Name() != "stats" {
		c.t.Fatalf("evalrun %s: found no flags", cmd.Name())
	}
	c.flags[path] = fl
	return fl
}

var placeholderRE = regexp.MustCompile(`^[A-Z][A-Z0-9_]*$`)

// bare strips the docs' notation around a word: [optional], (either | or).
func bare(w string) string { return strings.Trim(w, "[]()") }

// evalrun checks an evalrun command line: the (sub)command exists, every
// flag is one of its flags. Alternatives ("stats|prune") are each checked
// for the command, and a flag must belong to one of them.
func (c *cmdChecker) evalrun(args []string) error {
	root := newRoot()
	root.InitDefaultHelpCmd()
	root.InitDefaultHelpFlag()
	cmds := []*cobra.Command{root}
	i := 0
	for ; i < len(args); i++ {
		w := bare(args[i])
		if w == "" || strings.HasPrefix(w, "-") || !cmds[0].HasSubCommands() {
			break
		}
		if placeholderRE.MatchString(w) {
			return nil // evalrun COMMAND --help: any command
		}
		var next []*cobra.Command
		for _, alt := range strings.Split(w, "|") {
			sub, _, err := cmds[0].Find([]string{alt})
			if err != nil || sub == cmds[0] {
				return fmt.Errorf("%q is not a command of %s", alt, cmds[0].CommandPath())
			}
			next = append(next, sub)
		}
		cmds = next
	}
	if cmds[0].Name() == "help" && i < len(args) { // evalrun help COMMAND
		if sub, _, err := root.Find([]string{bare(args[i])}); err != nil || sub == root {
			return fmt.Errorf("help: %q is not a command", args[i])
		}
		return nil
	}
	for ; i < len(args); i++ {
		w := bare(args[i])
		if !strings.HasPrefix(w, "-") || w == "-" || w == "--" {
			continue // an argument, a placeholder, "|"
		}
		if _, err := strconv.ParseFloat(w, 64); err == nil {
			continue // a negative number
		}
		name, _, hasValue := strings.Cut(w, "=")
		takes, known := false, false
		for _, cmd := range cmds {
			if v, ok := c.flagsOf(cmd)[name]; ok {
				takes, known = v, true
			}
		}
		if !known {
			return fmt.Errorf("%s has no flag %s", cmds[0].CommandPath(), name)
		}
		if takes && !hasValue {
			i++ // its value
		}
	}
	return nil
}

func makeTargets(t *testing.T) map[string]bool {
	data, err := os.ReadFile(testkit.Path("Makefile"))
	if err != nil {
		t.Fatal(err)
	}
	targets := map[string]bool{}
	for _, m := range regexp.MustCompile(`(?m)^([A-Za-z0-9_.-]+)\s*:([^=]|$)`).FindAllStringSubmatch(string(data), -1) {
		targets[m[1]] = true
	}
	return targets
}

// make checks that every target named is one of the Makefile's.
func (c *cmdChecker) make(args []string) error {
	for _, a := range args {
		if !strings.Contains(a, "=") && !strings.HasPrefix(a, "-") && !c.targets[a] {
			return fmt.Errorf("the Makefile has no target %q", a)
		}
	}
	return nil
}

// goTest checks a go test command: its packages exist, and its -run and
// -bench patterns match a function of theirs.
func (c *cmdChecker) goTest(args []string) error {
	var dirs []string
	patterns := map[string]string{} // kind -> pattern
	for i := 0; i < len(args); i++ {
		a := strings.Trim(args[i], `'"`)
		name, value, has := strings.Cut(a, "=")
		if (name == "-run" || name == "-bench") && !has && i+1 < len(args) {
			i++
			value, has = strings.Trim(args[i], `'"`), true
		}
		switch {
		case name == "-run" && has:
			patterns["Test"] = value
		case name == "-bench" && has:
			patterns["Benchmark"] = value
		case strings.HasPrefix(a, "./"):
			d := strings.TrimSuffix(strings.TrimSuffix(a, "..."), "/")
			if fi, err := os.Stat(testkit.Path(d)); err != nil || !fi.IsDir() {
				return fmt.Errorf("no package %s", a)
			}
			dirs = append(dirs, d)
		}
	}
	for kind, p := range patterns {
		re, err := regexp.Compile(strings.Split(p, "/")[0])
		if err != nil {
			return fmt.Errorf("%s pattern %q: %v", kind, p, err)
		}
		if re.MatchString("") {
			continue // matches every function, or (^$) none on purpose
		}
		found := false
		for _, d := range dirs {
			for _, fn := range testFuncs(c.t, d) {
				found = found || (strings.HasPrefix(fn, kind) && re.MatchString(fn))
			}
		}
		if !found {
			return fmt.Errorf("no %s function in %v matches %q", kind, dirs, p)
		}
	}
	return nil
}

var testFuncRE = regexp.MustCompile(`(?m)^func ((?:Test|Benchmark|Fuzz)\w+)\(`)

// testFuncs lists the test functions of the _test.go files under dir.
func testFuncs(t *testing.T, dir string) []string {
	var out []string
	root := testkit.Path(dir)
	err := filepath.WalkDir(root, func(p string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && p != root && (d.Name() == "testdata" || d.Name() == "third_party" || strings.HasPrefix(d.Name(), ".")) {
			return filepath.SkipDir
		}
		if strings.HasSuffix(p, "_test.go") {
			data, err := os.ReadFile(p)
			if err != nil {
				return err
			}
			for _, m := range testFuncRE.FindAllStringSubmatch(string(data), -1) {
				out = append(out, m[1])
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

var (
	// repoPathRE: inline code naming a file or directory of the repository.
	repoPathRE = regexp.MustCompile(`^(\./)?(cmd|pipeline|backend|engine|plugins|internal|tools|configs|datasets|models|docs|testdata)/[^\s]*$`)
	configRE   = regexp.MustCompile(`\bconfigs/[\w.-]+\.ya?ml\b`)
	testNameRE = regexp.MustCompile(`^(Test|Benchmark|Fuzz)[A-Z]\w*$`)
	goIdentRE  = regexp.MustCompile(`\.[A-Z]\w*(\(.*)?$`)
)

// TestDocsPaths checks that the repository's paths, configs/*.yaml and
// the test functions the docs name exist.
func TestDocsPaths(t *testing.T) {
	files := readDocs(t)
	tests := map[string]bool{}
	for _, fn := range testFuncs(t, ".") {
		tests[fn] = true
	}
	exists := func(p string) bool { _, err := os.Stat(testkit.Path(p)); return err == nil }
	for _, f := range files {
		var words []span // inline code, and the words of the commands
		words = append(words, f.spans...)
		for _, d := range docCommands([]*mdFile{f}) {
			for _, w := range strings.Fields(d.text) {
				words = append(words, span{d.line, bare(w)})
			}
		}
		for _, s := range words {
			p := goIdentRE.ReplaceAllString(strings.TrimSuffix(s.text, ":"), "") // backend/backendtest.Fake: the package
			if repoPathRE.MatchString(p) && !strings.ContainsAny(p, "*<>{}$|") && !strings.Contains(p, "...") && !exists(p) {
				t.Errorf("%s:%d: %s does not exist", f.rel, s.line, p)
			}
		}
		for _, s := range f.spans { // (a command's -run pattern is goTest's)
			if testNameRE.MatchString(s.text) && !tests[s.text] {
				t.Errorf("%s:%d: no test function %s", f.rel, s.line, s.text)
			}
		}
		for i, l := range f.lines {
			for _, p := range configRE.FindAllString(l, -1) {
				if !exists(p) {
					t.Errorf("%s:%d: %s does not exist", f.rel, i+1, p)
				}
			}
		}
	}
}

// slug is GitHub's anchor for a heading.
func slug(heading string) string {
	var b strings.Builder
	for _, r := range strings.ToLower(strings.TrimSpace(heading)) {
		switch {
		case r == ' ':
			b.WriteByte('-')
		case r == '-' || r == '_' || (r >= 'a' && r <= 'z') || (r >= '0' && r <= '9') || r > 127 && isLetter(r):
			b.WriteRune(r)
		}
	}
	return b.String()
}

func isLetter(r rune) bool { return strings.ToLower(string(r)) != strings.ToUpper(string(r)) }

// anchors lists a markdown file's heading anchors.
func anchors(f *mdFile) map[string]bool {
	out := map[string]bool{}
	inFence := false
	for _, l := range f.lines {
		if fenceRE.MatchString(l) || (inFence && strings.TrimSpace(l) == "```") {
			inFence = !inFence
			continue
		}
		if h, ok := strings.CutPrefix(strings.TrimLeft(l, "#"), " "); ok && !inFence && strings.HasPrefix(l, "#") {
			out[slug(h)] = true
		}
	}
	return out
}

// TestDocsLinks checks relative links: the file exists, and so does the
// #anchor in a markdown file.
func TestDocsLinks(t *testing.T) {
	files := readDocs(t)
	byPath := map[string]*mdFile{}
	for _, f := range files {
		byPath[f.rel] = f
	}
	for _, f := range files {
		for _, l := range f.links {
			if strings.Contains(l.text, "://") || strings.HasPrefix(l.text, "mailto:") {
				continue
			}
			target, anchor, _ := strings.Cut(l.text, "#")
			rel := f.rel
			if target != "" {
				rel = filepath.ToSlash(filepath.Join(filepath.Dir(f.rel), target))
				if _, err := os.Stat(testkit.Path(rel)); err != nil {
					t.Errorf("%s:%d: link to %s: no such file", f.rel, l.line, l.text)
					continue
				}
			}
			if anchor == "" || !strings.HasSuffix(rel, ".md") {
				continue
			}
			tf := byPath[rel]
			if tf == nil {
				data, err := os.ReadFile(testkit.Path(rel))
				if err != nil {
					t.Fatal(err)
				}
				tf = parseMarkdown(rel, string(data))
			}
			if !anchors(tf)[anchor] {
				t.Errorf("%s:%d: link to %s: %s has no heading #%s", f.rel, l.line, l.text, rel, anchor)
			}
		}
	}
}

// TestDocsSpecs reads every yaml block as a spec: a whole one (with a
// model:) is validated by evalrun validate as if saved in configs/; a part
// is read by the spec package completed with configs/default.yaml's other
// top-level keys.
func TestDocsSpecs(t *testing.T) {
	base, err := os.ReadFile(testkit.Path("configs", "default.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var root yaml.Node
	if err := yaml.Unmarshal(base, &root); err != nil {
		t.Fatal(err)
	}
	sections := topLevel(strings.Split(string(base), "\n"), root.Content[0])
	n := 0
	for _, f := range readDocs(t) {
		for _, b := range f.blocks {
			if b.lang != "yaml" {
				continue
			}
			n++
			at := fmt.Sprintf("%s:%d", f.rel, b.line)
			var doc yaml.Node
			text := strings.Join(b.lines, "\n") + "\n"
			if err := yaml.Unmarshal([]byte(text), &doc); err != nil || len(doc.Content) == 0 || doc.Content[0].Kind != yaml.MappingNode {
				t.Errorf("%s: a yaml block that is not a mapping (%v): the docs' yaml blocks are specs", at, err)
				continue
			}
			keys := map[string]bool{}
			for i := 0; i < len(doc.Content[0].Content); i += 2 {
				keys[doc.Content[0].Content[i].Value] = true
			}
			whole := keys["model"]
			full := text
			if !whole {
				for _, s := range sections {
					if !keys[s.key] {
						full += s.text
					}
				}
			}
			if _, err := spec.Parse([]byte(full), testkit.Path("configs", "example.yaml")); err != nil {
				t.Errorf("%s: the spec example:\n%s", at, specErrors(err, f.rel, b))
				continue
			}
			if whole {
				dir := scratchRepo(t)
				path := filepath.Join("configs-docs", "spec.yaml")
				if err := os.MkdirAll(filepath.Join(dir, "configs-docs"), 0o755); err != nil {
					t.Fatal(err)
				}
				if err := os.WriteFile(filepath.Join(dir, path), []byte(text), 0o644); err != nil {
					t.Fatal(err)
				}
				cmd := exec.Command(filepath.Join(binDir, "evalrun"), "validate", path)
				cmd.Dir, cmd.Env = dir, docEnv(nil)
				if out, err := cmd.CombinedOutput(); err != nil {
					t.Errorf("%s: evalrun validate of the spec (saved in configs/): %v\n%s", at, err, out)
				}
			}
		}
	}
	if n == 0 {
		t.Fatal("no yaml block found in the docs")
	}
}

// specErrors points the spec package's errors at the doc's lines (a line
// past the block is in the part of configs/default.yaml added to it).
func specErrors(err error, rel string, b block) string {
	list, ok := err.(spec.ErrorList)
	if !ok {
		return err.Error()
	}
	var out []string
	for _, e := range list {
		where := "configs/default.yaml's part"
		if e.Line > 0 && e.Line <= len(b.lines) {
			where = fmt.Sprintf("%s:%d", rel, b.line+e.Line)
		}
		if e.Key != "" {
			where += ": " + e.Key
		}
		out = append(out, fmt.Sprintf("  %s: %s", where, e.Msg))
	}
	return strings.Join(out, "\n")
}

type section struct {
	key, text string
}

// topLevel cuts a spec's text into its top-level keys' lines.
func topLevel(lines []string, m *yaml.Node) []section {
	var out []section
	for i := 0; i < len(m.Content); i += 2 {
		from, to := m.Content[i].Line-1, len(lines)
		if i+2 < len(m.Content) {
			to = m.Content[i+2].Line - 1
		}
		out = append(out, section{m.Content[i].Value, strings.Join(lines[from:to], "\n") + "\n"})
	}
	return out
}

// TestDocsMatchLines checks the console comparison itself: what it lets
// differ, and what not.
func TestDocsMatchLines(t *testing.T) {
	out := []string{
		"",
		"accuracy vs reference",
		"| npu-fp16 | ok     | 2210   | 1.04e-06 |",
		"",
		"throughput (llama-bench style)",
		"+-----+--------+",
		"| cpu | avx512 | 0.018  | 16452 [16067–16877] |",
		"+-----+--------+",
		"",
		"392 kernels ran; 229320 NPU calls",
		"results: /tmp/x/results/20261129-024529-default",
	}
	ok := [][]string{
		out,
		{"accuracy vs reference", "| npu-fp16 | ok | 2210 | 1.04e-06 |", "", "throughput (llama-bench style)", // spaces
			"+--+---+", "| cpu | avx2 | 7.1 | 9 [1–2] |", "+-+-+", "", // measured
			"392 kernels ran; 28224 NPU calls", "results: .../results/20261123-141900-default"},
		{"accuracy vs reference", "...", "392 kernels ran; 229320 NPU calls", "results: ..."},
	}
	for i, want := range ok {
		if di, gi, match := matchLines(normalize(want), normalize(out)); !match {
			t.Errorf("case %d: no match at doc line %d, output line %d", i, di, gi)
		}
	}
	bad := []struct {
		want []string
		di   int // the doc line (normalized) where the match stops
	}{
		{[]string{"accuracy vs reference", "| npu-fp16 | ok | 2210 | 1.05e-06 |", "..."}, 1},      // an accuracy figure
		{[]string{"accuracy vs reference", "...", "393 kernels ran; 229320 NPU calls", "..."}, 2}, // a count
		{[]string{"accuracy vs reference", "...", "throughput (llama-bench style)"}, 3},           // the output goes on
		{out[:len(out)-1], 9}, // a line more in the output
	}
	for i, c := range bad {
		if di, gi, match := matchLines(normalize(c.want), normalize(out)); match || di != c.di {
			t.Errorf("bad case %d: match %v, stopped at doc line %d (output line %d), want doc line %d", i, match, di, gi, c.di)
		}
	}
}
