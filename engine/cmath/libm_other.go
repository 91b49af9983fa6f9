//go:build !(linux && (amd64 || arm64))

package cmath

func loadLibm() (e, s, c, l func(float32) float32, p func(float32, float32) float32, name string, ok bool) {
	return nil, nil, nil, nil, nil, "", false
}
