package sim

import "golang.org/x/sys/unix"

// askHugePages hints that buf be backed by transparent huge pages; without
// THP the pages stay 4 KB.
func askHugePages(buf []byte) { _ = unix.Madvise(buf, unix.MADV_HUGEPAGE) }
