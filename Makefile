# evalrun — see README.md.
GO      ?= go
BIN     ?= bin
SPEC    ?= configs/default.yaml
VERSION ?= $(shell git describe --tags --always --dirty 2>/dev/null || echo dev)
COMMIT  ?= $(shell git rev-parse --short HEAD 2>/dev/null || echo unknown)
LDFLAGS := -X main.version=$(VERSION) -X main.gitCommit=$(COMMIT)

.PHONY: deps fma-peak bench-vs-llamacpp oracle oracle-archs npu-archs all build run test test-go test-avx2 test-rknpu test-arm64 test-darwin test-llamacpp-note vet bench fuzz proto llamacpp clean

all: build

## deps: every Go module the build and the tests use (go.sum-checked), fetched once: the only step that uses
## the network (the Go module proxy); the tests then run with GOPROXY=off, so none downloads anything
deps:
	@$(GO) mod download && cd tools/manifests && $(GO) mod download

## build: evalrun and its plugins into bin/ (evalrun finds plugins beside itself),
## and bin/plugins.sha256, the lock file evalrun checks every plugin against
build: deps
	$(GO) build -ldflags "$(LDFLAGS)" -o $(BIN)/evalrun ./cmd/evalrun
	$(GO) build -ldflags "$(LDFLAGS)" -o $(BIN)/evalrun-plugin-cpu ./plugins/cpu
	$(GO) build -ldflags "$(LDFLAGS)" -o $(BIN)/evalrun-plugin-rknn ./plugins/rknn
	$(GO) build -ldflags "$(LDFLAGS)" -o $(BIN)/evalrun-plugin-hexagon ./plugins/hexagon
	$(GO) build -ldflags "$(LDFLAGS)" -o $(BIN)/evalrun-plugin-llamacpp ./plugins/llamacpp
	cd $(BIN) && if command -v sha256sum >/dev/null; then sha256sum evalrun-plugin-*; else shasum -a 256 evalrun-plugin-*; fi > plugins.sha256.tmp && mv plugins.sha256.tmp plugins.sha256

## run: the main job: the default spec on the bundled model
run: build
	$(BIN)/evalrun run $(SPEC)

## test: vet, unit and end-to-end tests, the cgo NPU driver against the fake librknnrt,
## and the arm64 tests under qemu-user-static (skipped, with a note, where it is missing)
test: deps vet test-go test-avx2 test-manifests test-rknpu test-arm64 test-darwin test-llamacpp-note

# The tests download nothing: a module missing from the cache is an error, not a fetch.
vet test-go test-avx2 test-manifests test-rknpu test-arm64 test-darwin: export GOPROXY = off

vet:
	$(GO) vet ./...

# -timeout: cmd/evalrun alone takes ~5 min quiet, and the default 10 min
# is near beside a CPU hog; the tests bound their own waits.
test-go:
	$(GO) test -count=1 -timeout 20m ./...

## test-manifests: docs/examples' Kubernetes manifests (official API types, strict) and Actions workflow (actionlint)
test-manifests:
	cd tools/manifests && $(GO) vet ./... && $(GO) test -count=1 ./...

## test-avx2: the engine's goldens with the AVX2 kernels forced (on a CPU with AVX-512 the tests pick that set)
test-avx2:
	@if grep -qw avx2 /proc/cpuinfo 2>/dev/null && grep -qw f16c /proc/cpuinfo; then \
		EVALRUN_KERNELS=avx2 $(GO) test -count=1 -skip TestEveryLlamaCppKeyAndTensorIsModelledOrRefused ./engine/; \
	else \
		echo "avx2: SKIPPED the engine tests with EVALRUN_KERNELS=avx2: this CPU has no AVX2/F16C"; \
	fi

test-rknpu:
	plugins/rknn/npu/rknnrt/testdata/run-fake-test.sh -count=1

## test-darwin: everything, tests included, type-checks for macOS (a developer's laptop runs the CPU reference; Linux-only calls need build tags)
test-darwin:
	GOOS=darwin GOARCH=arm64 CGO_ENABLED=0 $(GO) vet ./...

## test-arm64: the numeric packages for GOARCH=arm64 and the cgo NPU driver for aarch64, under qemu
test-arm64:
	GO=$(GO) tools/test-arm64.sh

# The llamacpp plugin's tests need the libraries `make llamacpp` installs;
# without them they skip, and this says so where it cannot be missed.
test-llamacpp-note:
	@if [ -f third_party/llamacpp/v0.5.0/.installed ]; then \
		echo "llamacpp: plugin tests ran against third_party/llamacpp/v0.5.0"; \
	else \
		echo "llamacpp: SKIPPED the llamacpp plugin's library tests: no third_party/llamacpp/v0.5.0 (run make llamacpp)"; \
	fi

## llamacpp: install the pinned llama.cpp libraries (npm @node-llama-cpp/linux-x64) for the llamacpp plugin
llamacpp:
	plugins/llamacpp/install-libs.sh

## bench: engine benchmarks and llama-bench style plugin benchmarks
bench: build
	$(GO) test -run='^$$' -bench=. -benchtime=3x ./engine/ ./engine/ggml/
	$(BIN)/evalrun bench --model models/stories260K.gguf --plugin cpu -p 128 -n 64 -r 5

## bench-vs-llamacpp: llama-bench and evalrun bench (exact, ggml) on the same files, interleaved,
## and the table of median per-round ratios (LLAMA_BENCH=path to llama-bench, else the llamacpp plugin's
## libllama; MODELS, THREADS, ROUNDS, P, N, D, R, KV, FA, OUT optional: tools/bench-vs-llamacpp.sh)
bench-vs-llamacpp: build
	LLAMA_BENCH=$(LLAMA_BENCH) tools/bench-vs-llamacpp.sh

## fma-peak: one core's float32 peak with and without fused multiply-add (what exact numerics may use)
fma-peak:
	mkdir -p bin && $(CC) -O3 -mavx512f -ffp-contract=off -o bin/fmapeak tools/fmapeak/fmapeak.c && bin/fmapeak

## fuzz: a short run of every fuzz target
fuzz:
	$(GO) test -run='^$$' -fuzz=FuzzParse -fuzztime=60s ./engine/gguf
	$(GO) test -run='^$$' -fuzz='^FuzzRowChunk$$' -fuzztime=60s ./backend
	$(GO) test -run='^$$' -fuzz='^FuzzSharedRowChunk$$' -fuzztime=60s ./backend

## oracle: the CPU plugin's ggml numerics against llama.cpp (make llamacpp first), every bundled variant
oracle: build
	@for v in "" -f16 -q8_0 -q4_0; do \
		echo "== stories260K$$v"; \
		EVALRUN_MODEL_PATH=$(CURDIR)/models/stories260K$$v.gguf $(BIN)/evalrun run configs/llamacpp-oracle.yaml || exit $$?; \
	done

## oracle-archs: every architecture and variant the engine computes (synth files, 4 weight types) against
## the llamacpp plugin's libllama at n_ctx 2048 (make llamacpp first): ggml bit-identical, exact's figures
oracle-archs: build
	tools/oracle-archs.sh

## npu-archs: the simulated RKNN (fp16, int8) and Hexagon (Q8_0, Q8_0 KV
## cache) backends on every architecture, with kernel lists from
## `evalrun kernels --spec` (tools/npu-archs.sh, about 30 s)
npu-archs: build
	tools/npu-archs.sh

## asm: regenerate the amd64 kernels with avo (pinned in tools/asmgen/go.mod)
asm:
	cd tools/asmgen && $(GO) run . -set ggml -out ../../engine/ggml/kernels_amd64.s -stubs ../../engine/ggml/kernels_amd64_stubs.go -pkg ggml
	cd tools/asmgen && $(GO) run . -set avx2 -out ../../engine/ggml/kernels_avx2_amd64.s -stubs ../../engine/ggml/kernels_avx2_amd64_stubs.go -pkg ggml
	cd tools/asmgen && $(GO) run . -set npusim -out ../../plugins/rknn/npu/sim/kernels_amd64.s -stubs ../../plugins/rknn/npu/sim/kernels_amd64_stubs.go -pkg sim

## proto: regenerate backend/internal/backendpb with pinned generators
proto:
	backend/proto/gen.sh

clean:
	rm -rf $(BIN)
