package enginebackend

import (
	"fmt"

	"github.com/evalrun/evalrun/backend"
	"github.com/evalrun/evalrun/engine"
	"github.com/evalrun/evalrun/engine/ggml"
	"github.com/evalrun/evalrun/engine/gguf"
)

func modelInfo(m *engine.Model) backend.ModelInfo {
	info := backend.ModelInfo{
		Arch:      m.Config.Arch,
		NVocab:    m.Config.NVocab,
		NParams:   m.NParams(),
		NCtxTrain: m.Config.NCtxTrain,
		NLayer:    m.Config.NLayer,
		NEmbd:     m.Config.NEmbd,
	}
	if f := m.File(); f != nil {
		info.SizeBytes = tensorBytes(f)
		info.FileType = fileType(f)
	}
	return info
}

// tensorBytes is llama_model_size: the bytes of the tensors' data, without
// the file's header, metadata and alignment padding.
func tensorBytes(f *gguf.File) int64 {
	var n int64
	for _, t := range f.Tensors {
		n += int64(t.Size)
	}
	return n
}

// ftypeNames are llama.cpp's names for general.file_type (llama_model_ftype_name).
var ftypeNames = map[uint64]string{
	0: "all F32", 1: "F16", 2: "Q4_0", 3: "Q4_1", 7: "Q8_0", 8: "Q5_0", 9: "Q5_1",
	10: "Q2_K - Medium", 11: "Q3_K - Small", 12: "Q3_K - Medium", 13: "Q3_K - Large",
	14: "Q4_K - Small", 15: "Q4_K - Medium", 16: "Q5_K - Small", 17: "Q5_K - Medium",
	18: "Q6_K", 21: "Q2_K - Small", 32: "BF16", 38: "MXFP4 MoE",
}

// fileType names the file's weight type as llama.cpp prints it. Without
// general.file_type it is the most common type among the matrices.
func fileType(f *gguf.File) string {
	if ft, ok := f.Uint("general.file_type"); ok {
		if name, ok := ftypeNames[ft]; ok {
			return name
		}
		return fmt.Sprintf("file_type %d", ft)
	}
	count := map[ggml.Type]int{}
	var best ggml.Type
	for _, t := range f.Tensors {
		if len(t.Dims) != 2 {
			continue
		}
		count[t.Type]++
		if c := count[t.Type]; c > count[best] || (c == count[best] && t.Type < best) {
			best = t.Type
		}
	}
	if len(count) == 0 {
		return ""
	}
	if best == ggml.F32 {
		return "all F32 (guessed)"
	}
	return best.String() + " (guessed)"
}
