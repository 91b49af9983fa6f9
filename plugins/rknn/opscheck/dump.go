package opscheck

import (
	"encoding/binary"
	"encoding/json"
	"fmt"
	"math"
	"os"
	"path/filepath"

	"github.com/evalrun/evalrun/engine"
	"github.com/evalrun/evalrun/internal/atomicfile"
	"github.com/evalrun/evalrun/plugins/rknn/npu"
	"github.com/evalrun/evalrun/plugins/rknn/offload"
)

// Sidecar is the JSON file next to one op's dumped buffers: everything needed
// to replay the matmul on a board with the RKNN matmul API and compare.
type Sidecar struct {
	Name     string     `json:"name"`
	M        int        `json:"m"` // tokens (rows of A)
	K        int        `json:"k"`
	N        int        `json:"n"`
	Type     string     `json:"type"`
	Matmul   string     `json:"matmul_type"` // rknn_matmul_type name
	MatmulID int        `json:"matmul_type_id"`
	ALayout  string     `json:"ac_layout"`
	BLayout  string     `json:"b_layout"`
	Cores    []DumpCore `json:"cores"`
	// Normal-layout inputs and the reference, little-endian: activations
	// M×K f32, weights K×N f32 (B normal layout), reference M×N f64.
	InputA    string    `json:"input_a_f32"`
	InputB    string    `json:"input_b_f32"`
	Reference string    `json:"reference_f64"`
	Result    string    `json:"result_f32"` // the offload's gathered output, M×N f32
	AScale    []float32 `json:"a_scale,omitempty"`
	NMSE      float64   `json:"nmse"`
	Pass      bool      `json:"pass"`
}

// DumpCore is one core's context.
type DumpCore struct {
	Core   int       `json:"core"`
	Lo     int       `json:"n_lo"` // output columns [n_lo, n_hi) of the weight
	Hi     int       `json:"n_hi"`
	Mask   uint32    `json:"core_mask"`
	InfoM  int32     `json:"info_m"`
	InfoK  int32     `json:"info_k"` // K padded to 32
	InfoN  int32     `json:"info_n"` // slice padded to the type's N alignment
	A      DumpAttr  `json:"a"`
	B      DumpAttr  `json:"b"`
	C      DumpAttr  `json:"c"`
	BScale []float32 `json:"b_scale,omitempty"`
}

// DumpAttr is one tensor attr and the file holding its raw bytes.
type DumpAttr struct {
	File string   `json:"file"`
	Type string   `json:"type"`
	Dims []uint32 `json:"dims"`
	Size uint32   `json:"size"`
}

// dump writes op index's buffers under cfg.DumpDir/<index>_<name>_m<T>.
// The op runs once more so that the gathered result and the C buffers come
// from the same call.
func dump(cfg Config, index int, r Result, o *offload.MatMuler, op *engine.MatMulOp, d *opData) (string, error) {
	dir := filepath.Join(cfg.DumpDir, fmt.Sprintf("%03d_%s_m%d", index, r.Name, r.T))
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", err
	}
	result := make([]float32, r.T*r.N)
	if err := o.MatMul(op, d.x, result); err != nil {
		return "", err
	}
	cores, aScale, ok := o.Buffers(d.w, r.T)
	if !ok {
		return "", fmt.Errorf("no contexts for %s at M=%d", r.Name, r.T)
	}
	mt := cfg.Type.MatmulType()
	sc := Sidecar{
		Name: r.Name, M: r.T, K: r.K, N: r.N, Type: r.Type, Matmul: mt.String(), MatmulID: int(mt),
		ALayout: cfg.ACLayout.String(), BLayout: npu.LayoutNative.String(),
		InputA: "a.f32", InputB: "b.f32", Reference: "reference.f64", Result: "result.f32",
		AScale: aScale, NMSE: r.NMSE, Pass: r.Pass,
	}
	if math.IsNaN(sc.NMSE) || math.IsInf(sc.NMSE, 0) {
		sc.NMSE = -1 // JSON has no NaN
	}
	for _, c := range cores {
		dc := DumpCore{Core: c.Core, Lo: c.Lo, Hi: c.Hi, Mask: uint32(c.Mask), InfoM: c.Info.M, InfoK: c.Info.K, InfoN: c.Info.N, BScale: c.BScale}
		for _, t := range []struct {
			dst  *DumpAttr
			attr npu.TensorAttr
			data []byte
		}{{&dc.A, c.Attrs.A, c.A}, {&dc.B, c.Attrs.B, c.B}, {&dc.C, c.Attrs.C, c.C}} {
			name := fmt.Sprintf("core%d_%s.bin", c.Core, t.attr.Name)
			if err := atomicfile.WriteFile(filepath.Join(dir, name), t.data); err != nil {
				return "", err
			}
			*t.dst = DumpAttr{File: name, Type: t.attr.Type.String(), Dims: t.attr.Dims, Size: t.attr.Size}
		}
		sc.Cores = append(sc.Cores, dc)
	}
	// B in normal layout is K×N: transpose the N rows of K.
	bNorm := make([]float32, r.K*r.N)
	for n := range r.N {
		for k := range r.K {
			bNorm[k*r.N+n] = d.wf[n*r.K+k]
		}
	}
	for _, f := range []struct {
		name string
		data []byte
	}{{sc.InputA, f32Bytes(d.x)}, {sc.InputB, f32Bytes(bNorm)}, {sc.Reference, f64Bytes(d.ref)}, {sc.Result, f32Bytes(result)}} {
		if err := atomicfile.WriteFile(filepath.Join(dir, f.name), f.data); err != nil {
			return "", err
		}
	}
	js, err := json.MarshalIndent(sc, "", "  ")
	if err != nil {
		return "", err
	}
	return dir, atomicfile.WriteFile(filepath.Join(dir, "op.json"), append(js, '\n'))
}

func f32Bytes(v []float32) []byte {
	b := make([]byte, 4*len(v))
	for i, x := range v {
		binary.LittleEndian.PutUint32(b[4*i:], math.Float32bits(x))
	}
	return b
}

func f64Bytes(v []float64) []byte {
	b := make([]byte, 8*len(v))
	for i, x := range v {
		binary.LittleEndian.PutUint64(b[8*i:], math.Float64bits(x))
	}
	return b
}
