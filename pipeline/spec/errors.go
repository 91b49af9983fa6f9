package spec

import (
	"fmt"
	"strings"
)

// Error is one problem found in a spec. It prints as
// `configs/x.yaml:12: backends[0].threads: must be >= 0, got -1`.
type Error struct {
	File string // the spec path as given to Load
	Line int    // 1-based line in File; 0 when unknown (missing key, default)
	Key  string // key path such as "backends[0].threads"; may be empty
	Env  string // the environment variable that set Key, if any
	Msg  string
}

func (e *Error) Error() string {
	where := e.File
	if e.Line > 0 {
		where += fmt.Sprintf(":%d", e.Line)
	}
	switch {
	case e.Key != "" && e.Env != "":
		where += ": " + e.Key + " (from $" + e.Env + ")"
	case e.Key != "":
		where += ": " + e.Key
	case e.Env != "":
		where += ": $" + e.Env
	}
	return where + ": " + e.Msg
}

// ErrorList is every problem found in one spec, in order of discovery:
// Load reports all of them at once so a user fixes a spec in one pass.
type ErrorList []*Error

func (l ErrorList) Error() string {
	parts := make([]string, len(l))
	for i, e := range l {
		parts[i] = e.Error()
	}
	return strings.Join(parts, "\n")
}

// Unwrap lets errors.As find the individual *Error values.
func (l ErrorList) Unwrap() []error {
	out := make([]error, len(l))
	for i, e := range l {
		out[i] = e
	}
	return out
}

// collector gathers the errors of one spec file, at most 25 (a badly broken
// file would otherwise bury the first ones).
type collector struct {
	file string
	errs ErrorList
}

func (c *collector) add(line int, key, env, msg string) {
	if len(c.errs) < 25 {
		c.errs = append(c.errs, &Error{File: c.file, Line: line, Key: key, Env: env, Msg: msg})
	}
}

func (c *collector) err() error {
	if len(c.errs) == 0 {
		return nil
	}
	return c.errs
}
