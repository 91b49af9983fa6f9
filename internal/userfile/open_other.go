//go:build !unix

package userfile

import "os"

// open checks the path, then opens it (no non-blocking open here: the name
// is checked, not the file opened).
func open(path string) (*os.File, error) {
	st, err := os.Stat(path)
	if err != nil {
		return nil, err
	}
	if !st.Mode().IsRegular() {
		return nil, notRegular(path, st.Mode())
	}
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	return f, nil
}
