//go:build unix && !linux

package gguf

// adviseHugePages does nothing: only Linux has MADV_HUGEPAGE (macOS and the
// BSDs promote large mappings on their own, or not at all).
func adviseHugePages([]byte) {}
