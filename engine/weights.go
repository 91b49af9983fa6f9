package engine

import (
	"bufio"
	"bytes"
	"fmt"
	"os"
	"strconv"
	"strings"

	"github.com/evalrun/evalrun/engine/gguf"
)

// WeightsLoad is how Open brings a model's weights into memory.
type WeightsLoad int

const (
	// WeightsAuto copies the file into huge pages (WeightsCopy) when the
	// OS offers transparent huge pages and the file takes at most a quarter
	// of the memory available, else maps it (WeightsMmap). The quarter
	// leaves room for the other backends of a run, each of which loads the
	// same file: as memory fills, later ones map it.
	WeightsAuto WeightsLoad = iota
	// WeightsMmap maps the file, as llama.cpp does by default: no copy,
	// pages shared with every process that maps it.
	WeightsMmap
	// WeightsCopy reads the file into memory of the process's own, backed
	// by transparent huge pages where the OS offers them (gguf.OpenCopy):
	// memory-bound decoding streams weights faster.
	WeightsCopy
)

var weightsNames = [...]string{WeightsAuto: "auto", WeightsMmap: "mmap", WeightsCopy: "copy"}

func (w WeightsLoad) String() string {
	if int(w) < len(weightsNames) {
		return weightsNames[w]
	}
	return fmt.Sprintf("WeightsLoad(%d)", int(w))
}

// ParseWeightsLoad parses "auto", "mmap" or "copy".
func ParseWeightsLoad(s string) (WeightsLoad, error) {
	for i, n := range weightsNames {
		if strings.EqualFold(s, n) {
			return WeightsLoad(i), nil
		}
	}
	return 0, fmt.Errorf("%q is not one of auto, mmap, copy", s)
}

// openWeights opens the GGUF file at path as w says.
func openWeights(path string, w WeightsLoad) (*gguf.File, error) {
	if w == WeightsAuto {
		w = WeightsMmap
		if st, err := os.Stat(path); err == nil && copyPays(st.Size(), memAvailable(), hugePagesOffered()) {
			w = WeightsCopy
		}
	}
	if w == WeightsCopy {
		return gguf.OpenCopy(path)
	}
	return gguf.Open(path)
}

// copyPays is WeightsAuto's rule: a copy of size bytes when huge pages are
// offered and it takes at most a quarter of avail (0: unknown, no copy).
func copyPays(size, avail int64, huge bool) bool {
	return huge && size > 0 && avail > 0 && size <= avail/4
}

// memAvailable is MemAvailable of /proc/meminfo in bytes, 0 where there is
// none (not Linux).
func memAvailable() int64 {
	b, err := os.ReadFile("/proc/meminfo")
	if err != nil {
		return 0
	}
	sc := bufio.NewScanner(bytes.NewReader(b))
	for sc.Scan() {
		if rest, ok := strings.CutPrefix(sc.Text(), "MemAvailable:"); ok {
			kb, err := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(rest), " kB"), 10, 64)
			if err != nil {
				return 0
			}
			return kb << 10
		}
	}
	return 0
}

// hugePagesOffered reports whether transparent huge pages may back memory
// that asks for them (Linux's THP mode "always" or "madvise").
func hugePagesOffered() bool {
	b, err := os.ReadFile("/sys/kernel/mm/transparent_hugepage/enabled")
	return err == nil && !bytes.Contains(b, []byte("[never]"))
}
