#!/usr/bin/env bash
# make npu-archs: the simulated NPUs on every architecture the engine
# computes (docs/models.md): each layout written by evalrun synth in F32
# (the reference and the RKNN backends) and Q8_0 (the Hexagon backends),
# a kernel list made by `evalrun kernels --spec` for it, and
# configs/npu-archs.yaml run with that list. Prints one line per
# architecture: each backend's mean KLD against the CPU reference and the
# kernel accounting; exits non-zero when a run fails or a listed kernel
# never ran.
#   OUT  where the models and results go (default results/npu-archs)
set -euo pipefail
cd "$(dirname "$0")/.."
EVALRUN=${EVALRUN:-bin/evalrun}
OUT=${OUT:-results/npu-archs}
mkdir -p "$OUT"
shape="--n-embd 256 --n-layer 2 --n-head 4 --n-head-kv 2 --n-ff 768 --n-vocab 512 --seed 5 --norm-noise 0.2 --n-ctx 4096"
variants=(
  "llama3|--arch llama --rope-freqs --rope-base 500000"
  "qwen2|--arch qwen2 --rope-base 1000000"
  "qwen3|--arch qwen3 --rope-base 1000000"
  "gemma2|--arch gemma2 --sliding-window 100"
  "gemma3|--arch gemma3 --sliding-window 100 --swa-pattern 2 --rope-base 1000000 --rope-base-swa 10000"
  "phi3|--arch phi3 --long-rope --rope-orig-ctx 256"
  "minicpm|--arch minicpm --biases"
  "internlm2|--arch internlm2"
  "glm4|--arch glm4"
)
for v in "${variants[@]}"; do
  name=${v%%|*}
  flags=${v#*|}
  # shellcheck disable=SC2086 # the flags are words
  "$EVALRUN" synth $shape $flags --type f32 --out "$OUT/$name-f32.gguf" >/dev/null
  # shellcheck disable=SC2086
  "$EVALRUN" synth $shape $flags --type q8_0 --out "$OUT/$name-q8_0.gguf" >/dev/null
  export EVALRUN_MODEL_PATH="$PWD/$OUT/$name-f32.gguf" EVALRUN_BACKENDS_2_MODEL="$PWD/$OUT/$name-q8_0.gguf" EVALRUN_BACKENDS_3_MODEL="$PWD/$OUT/$name-q8_0.gguf"
  "$EVALRUN" kernels --spec configs/npu-archs.yaml --out "$OUT/$name-kernels.json" >/dev/null 2>&1
  sed "s|kernels: auto|kernels: $PWD/$OUT/$name-kernels.json|; s|\.\./|$PWD/|g" configs/npu-archs.yaml >"$OUT/$name.yaml"
  if ! "$EVALRUN" run "$OUT/$name.yaml" --out "$OUT/$name" --force >"$OUT/$name.txt" 2>"$OUT/$name.log"; then
    cat "$OUT/$name.txt" "$OUT/$name.log" >&2
    echo "npu-archs: $name: the run failed (above)" >&2
    exit 1
  fi
  accounting=$(grep -A1 'npu-int8: kernel accounting' "$OUT/$name.txt" | tail -1)
  case $accounting in
    *" 0 never ran"*) ;;
    *) echo "npu-archs: $name: $accounting" >&2; exit 1 ;;
  esac
  echo "$name: $(grep -E '^\| (npu|htp)-[^|]*\| ok ' "$OUT/$name.txt" | awk -F'|' '{gsub(/ +/," "); printf "%s KLD%s; ", $2, $5}')kernels: $accounting"
done
