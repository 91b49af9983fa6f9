// Command evalrun-plugin-llamacpp runs a real llama.cpp build (libllama and
// its ggml libraries, loaded without cgo) as an evalrun backend. The host
// launches it; it is not run by hand.
//
// Options: lib_dir, threads, flash_attn, kv_type, swa_full, cpu_variant, n_gpu_layers,
// devices, fault_abort_after (see docs/backends.md, "llamacpp").
package main

import (
	"github.com/evalrun/evalrun/backend"
	"github.com/evalrun/evalrun/plugins/llamacpp/llamaplugin"
)

// version is set at build time with -ldflags "-X main.version=...".
var version = "dev"

func main() {
	log := backend.NewPluginLogger("llamacpp")
	backend.Serve(llamaplugin.New(llamaplugin.Config{Name: "llamacpp", Version: version, Logger: log}), backend.WithLogger(log))
}
