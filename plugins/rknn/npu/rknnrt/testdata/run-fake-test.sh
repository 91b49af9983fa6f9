#!/bin/sh
# Builds the fake librknnrt.so and runs the NPU driver tests with the cgo
# driver compiled in (-tags rknpu), linked against the fake: the two packages
# the tag changes (the others run untagged in make test-go).
# Usage: plugins/rknn/npu/rknnrt/testdata/run-fake-test.sh [go test flags]
set -eu
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../../../../.." && pwd)
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
make -s -C "$here/fakerknnrt" OUT="$dir"
cd "$root"
EVALRUN_RKNNRT_FAKE=1 CGO_ENABLED=1 CGO_LDFLAGS="-L$dir" LD_LIBRARY_PATH="$dir" go test -tags rknpu "$@" ./plugins/rknn/npu/rknnrt/ ./plugins/rknn/offload/
