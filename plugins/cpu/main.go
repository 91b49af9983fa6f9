// Command evalrun-plugin-cpu is the reference backend: the evalrun engine with
// every matmul on the CPU. The host launches it; it is not run by hand, except
// for the engine's commands (see tools.go), which evalrun runs with the
// arguments it was given:
//
//	evalrun-plugin-cpu inspect MODEL             GGUF metadata and tensors
//	evalrun-plugin-cpu tokenize --model M TEXT   token ids
//	evalrun-plugin-cpu generate --model M ...    text generation
//	evalrun-plugin-cpu logits --model M ...      raw logits, llama.cpp's golden layout
//	evalrun-plugin-cpu synth --n-embd 768 ...    a synthetic model
//
// Options: numerics (exact | ggml, default exact).
package main

import (
	"os"

	"github.com/evalrun/evalrun/backend"
	"github.com/evalrun/evalrun/internal/toolcmd"
	"github.com/evalrun/evalrun/plugins/enginebackend"
)

// version is set at build time with -ldflags "-X main.version=...".
var version = "dev"

func main() {
	if code, ran := toolcmd.Run(os.Args[1:], tools()...); ran {
		os.Exit(code)
	}
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
