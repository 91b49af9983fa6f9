//go:build linux && (amd64 || arm64)

package cmath

import "github.com/ebitengine/purego"

// loadLibm opens the C math library the way a C program linked against it
// would find it.
func loadLibm() (fs libm, name string, ok bool) {
	for _, name := range []string{"libm.so.6", "libm.so"} {
		h, err := purego.Dlopen(name, purego.RTLD_NOW|purego.RTLD_LOCAL)
		if err != nil {
			continue
		}
		purego.RegisterLibFunc(&fs.expf, h, "expf")
		purego.RegisterLibFunc(&fs.sinf, h, "sinf")
		purego.RegisterLibFunc(&fs.cosf, h, "cosf")
		purego.RegisterLibFunc(&fs.logf, h, "logf")
		purego.RegisterLibFunc(&fs.tanhf, h, "tanhf")
		purego.RegisterLibFunc(&fs.powf, h, "powf")
		return fs, name, true
	}
	return libm{}, "", false
}
