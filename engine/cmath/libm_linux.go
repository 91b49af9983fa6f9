//go:build linux && (amd64 || arm64)

package cmath

import "github.com/ebitengine/purego"

// loadLibm opens the C math library the way a C program linked against it
// would find it.
func loadLibm() (e, s, c, l func(float32) float32, p func(float32, float32) float32, name string, ok bool) {
	for _, name := range []string{"libm.so.6", "libm.so"} {
		h, err := purego.Dlopen(name, purego.RTLD_NOW|purego.RTLD_LOCAL)
		if err != nil {
			continue
		}
		purego.RegisterLibFunc(&e, h, "expf")
		purego.RegisterLibFunc(&s, h, "sinf")
		purego.RegisterLibFunc(&c, h, "cosf")
		purego.RegisterLibFunc(&l, h, "logf")
		purego.RegisterLibFunc(&p, h, "powf")
		return e, s, c, l, p, name, true
	}
	return nil, nil, nil, nil, nil, "", false
}
