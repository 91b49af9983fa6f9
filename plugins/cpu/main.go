// Command evalrun-plugin-cpu is the reference backend: the evalrun engine with
// every matmul on the CPU. The host launches it; it is not run by hand.
//
// Options: numerics (exact | ggml, default exact).
package main

import (
	"github.com/evalrun/evalrun/backend"
	"github.com/evalrun/evalrun/plugins/enginebackend"
)

// version is set at build time with -ldflags "-X main.version=...".
var version = "dev"

func main() {
	log := backend.NewPluginLogger("cpu")
	backend.Serve(enginebackend.New(enginebackend.Config{
		Name:         "cpu",
		Version:      version,
		Device:       "cpu",
		Capabilities: []string{"eval", "bench", "sessions"},
		Options:      enginebackend.NoOptions(),
		Logger:       log,
	}), backend.WithLogger(log))
}
