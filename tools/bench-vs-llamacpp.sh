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
#   P, N, D, R   prompt and generated tokens, depth (tokens already in the KV
#                cache, llama-bench's -d) and repetitions (default 128, 64, 0, 3)
#   KV           the KV cache type on both sides (llama-bench -ctk/-ctv,
#                evalrun's kv_cache option; default: each side's own, f16 in
#                llama.cpp, f32 in evalrun)
#   FA           llama-bench's -fa (on|off|auto; default llama-bench's auto,
#                on for the CPU); evalrun's attention has one form
#   OUT          where the jsonl records go (default results/bench-vs-llamacpp)
set -euo pipefail
cd "$(dirname "$0")/.."
LLAMA_BENCH=${LLAMA_BENCH:-}
EVALRUN=${EVALRUN:-bin/evalrun}
THREADS=${THREADS:-1 2}
ROUNDS=${ROUNDS:-5}
OUT=${OUT:-results/bench-vs-llamacpp}
P=${P:-128} N=${N:-64} D=${D:-0} R=${R:-3}
llama_args=(-p "$P" -n "$N" -d "$D" -r "$R")
evalrun_args=(-p "$P" -n "$N" -d "$D" -r "$R")
if [ -n "${KV:-}" ]; then
  if [ -n "$LLAMA_BENCH" ]; then llama_args+=(-ctk "$KV" -ctv "$KV"); else llama_args+=(--option "kv_type=$KV"); fi
  evalrun_args+=(--option "kv_cache={\"key\": \"$KV\", \"value\": \"$KV\"}")
fi
if [ -n "${FA:-}" ]; then
  if [ -n "$LLAMA_BENCH" ]; then llama_args+=(-fa "$FA"); else llama_args+=(--option "flash_attn=$FA"); fi
fi
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
        "$LLAMA_BENCH" -m "$m" -t "$t" "${llama_args[@]}" -o jsonl 2>/dev/null >>"$OUT/llama.jsonl"
      else
        "$EVALRUN" bench -m "$m" --plugin llamacpp -t "$t" "${llama_args[@]}" -o jsonl >>"$OUT/llama.jsonl"
      fi
      "$EVALRUN" bench -m "$m" --plugin cpu -t "$t" "${evalrun_args[@]}" -o jsonl >>"$OUT/exact.jsonl"
      "$EVALRUN" bench -m "$m" --plugin cpu --option numerics=ggml -t "$t" "${evalrun_args[@]}" -o jsonl >>"$OUT/ggml.jsonl"
    done
  done
done
go run ./tools/benchvs -llama "$OUT/llama.jsonl" exact="$OUT/exact.jsonl" ggml="$OUT/ggml.jsonl" | tee "$OUT/ratios.md"
