#!/bin/sh
# qemu-insn-count.sh [KERNEL...]: instructions per call of engine/ggml
# kernels on arm64, counted under qemu-user (Debian's qemu-user-static 7.2
# has no TCG plugins). tools/kernelcount runs a kernel N times between two
# marker functions, with EVALRUN_KERNELS=generic and =neon, on its main
# thread; qemu logs every translation block it translates (-d in_asm: the
# block's instructions) and every one it executes (-d exec, with nochain so
# that none is skipped), and the count is the sum of the sizes of the blocks
# the main thread (qemu's cpu 0) executed from markStart to markEnd,
# divided by N. It counts instructions, not time: speed on a Cortex-A76 is
# not measured by this.
#
# Environment: N (calls, default 4), KERNELS (sets, default "generic neon").
# Without arguments every kernel of `kernelcount -list`.
set -eu
root=$(cd "$(dirname "$0")/.." && pwd)
N=${N:-4}
SETS=${KERNELS:-generic neon}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
cd "$root"
GOARCH=arm64 CGO_ENABLED=0 go build -o "$tmp/kernelcount" ./tools/kernelcount
qemu="qemu-aarch64-static -L /usr/aarch64-linux-gnu"
addr() { go tool nm "$tmp/kernelcount" | awk -v s="$1" '$3 == s { sub(/^0+/, "", $1); print $1 }'; }
start=$(addr main.markStart)
end=$(addr main.markEnd)

# count SET KERNEL: instructions per call.
count() {
	rm -f "$tmp/log"
	mkfifo "$tmp/log"
	awk -v start="$start" -v end="$end" -v n="$N" '
		/^IN:/ { inblk = 1; k = 0; pc = ""; next }
		inblk && /^0x[0-9a-f]+:/ { if (pc == "") pc = substr($1, 3, length($1) - 3); k++; next }
		inblk { if (pc != "") { sub(/^0+/, "", pc); size[pc] = k }; inblk = 0 }
		/^Trace 0:/ {
			split($0, f, "[[/]"); pc = f[3]; sub(/^0+/, "", pc)
			if (pc == start) on = 1
			if (pc == end) on = 0
			if (!on) next
			if (!(pc in size)) missing++
			total += size[pc]
		}
		END { if (missing) print "missing " missing " blocks" > "/dev/stderr"; printf "%d\n", total / n }
	' <"$tmp/log" >"$tmp/count" &
	GOMAXPROCS=1 GOGC=off GODEBUG=asyncpreemptoff=1 EVALRUN_KERNELS=$1 \
		$qemu -d nochain,exec,in_asm -D "$tmp/log" "$tmp/kernelcount" "$2" "$N" 2>/dev/null
	wait
	cat "$tmp/count"
}

if [ $# -eq 0 ]; then
	set -- $($qemu "$tmp/kernelcount" -list)
fi
printf '%-22s' kernel
for s in $SETS; do printf ' %14s' "$s"; done
echo "   (instructions per call, N=$N)"
for k in "$@"; do
	printf '%-22s' "$k"
	for s in $SETS; do
		printf ' %14d' "$(count "$s" "$k")"
	done
	echo
done
