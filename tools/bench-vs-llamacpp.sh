#!/usr/bin/env bash
# make bench-vs-llamacpp: llama.cpp's llama-bench and `evalrun bench` (exact and
# ggml numerics) on the same GGUF files, interleaved round by round so both see
# the same load on a shared machine, then the table of median per-round ratios.
#   LLAMA_BENCH  path to llama-bench; without it the baseline is the llamacpp
#                plugin (`evalrun bench --plugin llamacpp`, the libllama that
#                `make llamacpp` installs: run that first)
#   MODELS       GGUF files (default: evalrun synth 768x12, vocab 32000, in
#                F32/F16/Q8_0/Q4_0, written to models/bench-*.gguf once)
#   THREADS      thread counts (default "1 2"), ROUNDS (default 5)
#   OUT          where the jsonl records go (default results/bench-vs-llamacpp)
set -euo pipefail
cd "$(dirname "$0")/.."
LLAMA_BENCH=${LLAMA_BENCH:-}
EVALRUN=${EVALRUN:-bin/evalrun}
THREADS=${THREADS:-1 2}
ROUNDS=${ROUNDS:-5}
OUT=${OUT:-results/bench-vs-llamacpp}
if [ -z "${MODELS:-}" ]; then
  MODELS=""
  for t in f32 f16 q8_0 q4_0; do
    m=models/bench-768x12-$t.gguf
    [ -f "$m" ] || "$EVALRUN" synth --n-embd 768 --n-layer 12 --n-ff 2048 --n-vocab 32000 --type "$t" --out "$m" >/dev/null
    MODELS="$MODELS $m"
  done
fi
mkdir -p "$OUT"
echo "baseline: ${LLAMA_BENCH:-the llamacpp plugin}" >&2
: >"$OUT/llama.jsonl"; : >"$OUT/exact.jsonl"; : >"$OUT/ggml.jsonl"
for r in $(seq "$ROUNDS"); do
  for m in $MODELS; do
    for t in $THREADS; do
      echo "round $r/$ROUNDS: $(basename "$m") -t $t" >&2
      if [ -n "$LLAMA_BENCH" ]; then
        "$LLAMA_BENCH" -m "$m" -t "$t" -p 128 -n 64 -r 3 -o jsonl 2>/dev/null >>"$OUT/llama.jsonl"
      else
        "$EVALRUN" bench -m "$m" --plugin llamacpp -t "$t" -p 128 -n 64 -r 3 -o jsonl >>"$OUT/llama.jsonl"
      fi
      "$EVALRUN" bench -m "$m" --plugin cpu -t "$t" -p 128 -n 64 -r 3 -o jsonl >>"$OUT/exact.jsonl"
      "$EVALRUN" bench -m "$m" --plugin cpu --option numerics=ggml -t "$t" -p 128 -n 64 -r 3 -o jsonl >>"$OUT/ggml.jsonl"
    done
  done
done
go run ./tools/benchvs -llama "$OUT/llama.jsonl" exact="$OUT/exact.jsonl" ggml="$OUT/ggml.jsonl" | tee "$OUT/ratios.md"
