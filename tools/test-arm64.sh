#!/bin/sh
# The arm64 (RK3588 boards are aarch64) tests under Debian's qemu-user-static:
#  1. the pure-Go numeric packages (engine, NPU simulator, offload, metrics)
#     built for GOARCH=arm64, so the NEON kernels and the libm loading
#     (purego) are checked on the boards' architecture: the goldens run the
#     NEON set (every AArch64 core has AdvSIMD), and engine/ggml's kernel
#     tests hold it bit for bit to the generic code it delegates the rest
#     to. Pure integer and bookkeeping logic (the walk of llama.cpp's keys
#     and tensors, the NPU operands' layout walk) is the same Go on every
#     architecture and runs natively only: 10-100x slower under qemu;
#  2. the cgo RKNN driver cross-compiled for aarch64 against the fake
#     librknnrt (cross gcc), so the declared ABI is exercised with aarch64's
#     struct layout and calling convention.
# Needs qemu-user-static and libc6-arm64-cross (2. also gcc-aarch64-linux-gnu);
# without them it says what it skipped and succeeds.
set -eu
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
GO=${GO:-go}
sysroot=/usr/aarch64-linux-gnu
if ! command -v qemu-aarch64-static >/dev/null || [ ! -e "$sysroot/lib/ld-linux-aarch64.so.1" ]; then
	echo "arm64: SKIPPED the arm64 tests: needs qemu-user-static and libc6-arm64-cross (apt-get install qemu-user-static libc6-arm64-cross)"
	exit 0
fi
qemu="qemu-aarch64-static -L $sysroot"

echo "arm64: pure-Go packages under $qemu"
# -short: under qemu the tests' long loops sample fewer points, fewer
# prompts and thread counts, and tables that cannot fail are left out;
# every golden model and numerics, and every digest, is still checked.
GOARCH=arm64 CGO_ENABLED=0 $GO test -count=1 -short -timeout 30m -exec "$qemu" -skip 'TestCgoDriverAgainstFakeLibrary|TestEveryLlamaCppKeyAndTensorIsModelledOrRefused|TestContiguousRunsAreConsecutive' \
	./engine/... ./plugins/rknn/npu/... ./plugins/rknn/offload/ ./plugins/rknn/kernels/ \
	./pipeline/metrics/ ./pipeline/kldbase/ ./pipeline/dataset/

if ! command -v aarch64-linux-gnu-gcc >/dev/null; then
	echo "arm64: SKIPPED the cgo RKNN driver on aarch64: needs gcc-aarch64-linux-gnu"
	exit 0
fi
echo "arm64: cgo RKNN driver against the fake librknnrt, aarch64"
# A directory kept between runs, as run-fake-test.sh's: CGO_LDFLAGS names
# it, and a new one each time recompiled the cgo packages.
sub=evalrun-fakerknnrt/$(printf %s "$root" | cksum | cut -d' ' -f1)/aarch64-cross
dir=${XDG_CACHE_HOME:-${HOME:-/nonexistent}/.cache}/$sub
mkdir -p "$dir" 2>/dev/null || { dir=${TMPDIR:-/tmp}/$sub; mkdir -p "$dir"; } # a read-only home
make -s -C plugins/rknn/npu/rknnrt/testdata/fakerknnrt CC=aarch64-linux-gnu-gcc OUT="$dir"
EVALRUN_RKNNRT_FAKE=1 GOARCH=arm64 CGO_ENABLED=1 CC=aarch64-linux-gnu-gcc CGO_LDFLAGS="-L$dir" \
	LD_LIBRARY_PATH="$dir" $GO test -count=1 -tags rknpu -exec "$qemu" ./plugins/rknn/npu/rknnrt/ ./plugins/rknn/offload/
