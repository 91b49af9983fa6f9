// Package oracle holds the tests that hold the engine's ggml numerics to
// llama.cpp itself (the llamacpp plugin's library), bit for bit.
package oracle
