package atomicfile

import "bufio"

// Lines streams a JSON Lines file (prompts.jsonl) as results
// arrive, so memory does not grow with the run; it appears under its name on
// Commit only. The first write error is kept and returned by Commit. Every
// method does nothing on a nil *Lines (the file was not asked for).
type Lines struct {
	f   *File
	w   *bufio.Writer
	err error
}

// CreateLines starts a JSON Lines file at path.
func CreateLines(path string) (*Lines, error) {
	f, err := Create(path)
	if err != nil {
		return nil, err
	}
	return &Lines{f: f, w: bufio.NewWriter(f)}, nil
}

// File is the file being written (nil for a nil *Lines).
func (l *Lines) File() *File {
	if l == nil {
		return nil
	}
	return l.f
}

// WriteLine appends an encoded line (without its newline).
func (l *Lines) WriteLine(line []byte) {
	if l != nil && l.err == nil {
		if _, l.err = l.w.Write(line); l.err == nil {
			l.err = l.w.WriteByte('\n')
		}
	}
}

// Commit flushes the file and moves it into place, or discards it after a
// write error and returns that.
func (l *Lines) Commit() error {
	if l == nil {
		return nil
	}
	if l.err == nil {
		l.err = l.w.Flush()
	}
	if l.err != nil {
		l.f.Abort()
		return l.err
	}
	return l.f.Commit()
}

// Abort discards the file.
func (l *Lines) Abort() {
	if l != nil {
		l.f.Abort()
	}
}
