#!/bin/sh
# Builds the fake librknnrt.so and runs the NPU driver tests with the cgo
# driver compiled in (-tags rknpu), linked against the fake: the two packages
# the tag changes (the others run untagged in make test-go).
# Usage: plugins/rknn/npu/rknnrt/testdata/run-fake-test.sh [go test flags]
set -eu
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../../../../.." && pwd)
# The library goes to a directory kept between runs (one per checkout):
# CGO_LDFLAGS names it and is part of go's build cache key, so a directory
# of its own each time recompiled and relinked the cgo packages (20 s of
# CPU for under a second of tests). make rebuilds the library when its
# sources change.
sub=evalrun-fakerknnrt/$(printf %s "$root" | cksum | cut -d' ' -f1)/$(uname -m)
dir=${XDG_CACHE_HOME:-${HOME:-/nonexistent}/.cache}/$sub
mkdir -p "$dir" 2>/dev/null || { dir=${TMPDIR:-/tmp}/$sub; mkdir -p "$dir"; } # a read-only home
make -s -C "$here/fakerknnrt" OUT="$dir"
cd "$root"
EVALRUN_RKNNRT_FAKE=1 CGO_ENABLED=1 CGO_LDFLAGS="-L$dir" LD_LIBRARY_PATH="$dir" go test -tags rknpu "$@" ./plugins/rknn/npu/rknnrt/ ./plugins/rknn/offload/
