package gguf

import "golang.org/x/sys/unix"

// adviseHugePages asks for transparent huge pages behind b (a hint: EINVAL
// where the kernel has no THP, and nothing changes).
func adviseHugePages(b []byte) { _ = unix.Madvise(b, unix.MADV_HUGEPAGE) }
