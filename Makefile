# evalrun — see README.md.
GO      ?= go
BIN     ?= bin
SPEC    ?= configs/default.yaml
VERSION ?= $(shell git describe --tags --always --dirty 2>/dev/null || echo dev)
COMMIT  ?= $(shell git rev-parse --short HEAD 2>/dev/null || echo unknown)
LDFLAGS := -X main.version=$(VERSION) -X main.gitCommit=$(COMMIT)

.PHONY: all build run test test-go test-rknpu vet bench fuzz proto clean

all: build

## build: evalrun and its plugins into bin/ (evalrun finds plugins beside itself)
build:
	$(GO) build -ldflags "$(LDFLAGS)" -o $(BIN)/evalrun ./cmd/evalrun
	$(GO) build -ldflags "$(LDFLAGS)" -o $(BIN)/evalrun-plugin-cpu ./plugins/cpu
	$(GO) build -ldflags "$(LDFLAGS)" -o $(BIN)/evalrun-plugin-rknn ./plugins/rknn

## run: the main job: the default spec on the bundled model
run: build
	$(BIN)/evalrun run $(SPEC)

## test: vet, unit and end-to-end tests, and the cgo NPU driver against the fake librknnrt
test: vet test-go test-rknpu

vet:
	$(GO) vet ./...

test-go:
	$(GO) test -count=1 ./...

test-rknpu:
	plugins/rknn/npu/rknnrt/testdata/run-fake-test.sh

## bench: engine benchmarks and llama-bench style plugin benchmarks
bench: build
	$(GO) test -run='^$$' -bench=. -benchtime=3x ./engine/ ./engine/ggml/
	$(BIN)/evalrun bench --model models/stories260K.gguf --plugin cpu -p 128 -n 64 -r 5

## fuzz: a short run of every fuzz target
fuzz:
	$(GO) test -run='^$$' -fuzz=FuzzParse -fuzztime=60s ./engine/gguf

## proto: regenerate backend/internal/backendpb with pinned generators
proto:
	backend/proto/gen.sh

clean:
	rm -rf $(BIN)
