//go:build unix && !linux

package sim

// askHugePages: no transparent huge pages to ask for outside Linux (macOS,
// the BSDs); the buffer is aligned all the same.
func askHugePages([]byte) {}
