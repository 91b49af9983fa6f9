#!/usr/bin/env bash
# make oracle-archs: every architecture and variant the engine computes
# (docs/models.md), written by evalrun synth in F32, F16, Q8_0 and Q4_0, run
# through configs/llamacpp-oracle-long.yaml: the llamacpp plugin's libllama
# as the reference, the cpu plugin in ggml numerics (must be bit-identical)
# and in exact numerics, over 2048-token chunks. Prints one line per file;
# exits non-zero at the first run whose verdict is not pass.
#   OUT  where the models and results go (default results/oracle-archs)
set -euo pipefail
cd "$(dirname "$0")/.."
EVALRUN=${EVALRUN:-bin/evalrun}
OUT=${OUT:-results/oracle-archs}
mkdir -p "$OUT"
shape="--n-embd 256 --n-layer 2 --n-head 4 --n-head-kv 2 --n-ff 768 --n-vocab 512 --seed 5 --norm-noise 0.2"
variants=(
  "llama3-rope-freqs|--arch llama --rope-freqs --rope-base 500000 --n-ctx 4096"
  "llama-biases-headdim|--arch llama --biases --head-dim 128 --n-ctx 4096"
  "llama-linear|--arch llama --rope-scaling linear --rope-factor 4 --n-ctx 4096"
  "llama-yarn|--arch llama --rope-scaling yarn --rope-factor 4 --rope-orig-ctx 512 --n-ctx 4096"
  "qwen2|--arch qwen2 --rope-base 1000000 --n-ctx 4096"
  "qwen2-yarn|--arch qwen2 --rope-scaling yarn --rope-factor 4 --rope-orig-ctx 512 --n-ctx 4096"
  "qwen3|--arch qwen3 --rope-base 1000000 --n-ctx 4096"
  "qwen3-biases-headdim|--arch qwen3 --biases --head-dim 128 --n-ctx 4096"
  "gemma2|--arch gemma2 --sliding-window 100 --n-ctx 4096"
  "gemma3|--arch gemma3 --sliding-window 100 --swa-pattern 2 --rope-base 1000000 --rope-base-swa 10000 --rope-scaling linear --rope-factor 8 --n-ctx 4096"
  "gemma3-full|--arch gemma3 --sliding-window 100 --swa-pattern 2 --rope-base 1000000 --rope-base-swa 10000 --n-ctx 4096"
  "phi3|--arch phi3 --n-ctx 4096"
  "gemma2-full|--arch gemma2 --sliding-window 300 --n-ctx 4096"
  "phi3-longrope|--arch phi3 --long-rope --rope-orig-ctx 512 --n-ctx 4096"
  "phi4-mini|--arch phi3 --long-rope --rope-orig-ctx 512 --rope-dim 48 --n-ctx 4096"
  "minicpm-biases|--arch minicpm --biases --n-ctx 4096"
  "internlm2|--arch internlm2 --rope-base 1000000 --n-ctx 4096"
  "glm4|--arch glm4 --n-ctx 4096"
)
for v in "${variants[@]}"; do
  name=${v%%|*}
  flags=${v#*|}
  for t in f32 f16 q8_0 q4_0; do
    m="$OUT/$name-$t.gguf"
    # shellcheck disable=SC2086 # the flags are words
    "$EVALRUN" synth $shape $flags --type "$t" --out "$m" >/dev/null
    spec=configs/llamacpp-oracle-long.yaml
    case $name in
      *-full) # libllama's default full-size sliding-window cache, in both plugins
        spec="$OUT/full.yaml"
        sed 's|kv_type: f32}|kv_type: f32, swa_full: true}|; s|{numerics: \([a-z]*\)}|{numerics: \1, swa_full: true}|; s|\.\./|'"$PWD"'/|g' \
          configs/llamacpp-oracle-long.yaml >"$spec" ;;
    esac
    if ! EVALRUN_MODEL_PATH="$PWD/$m" "$EVALRUN" run "$spec" --out "$OUT/$name-$t" --force >"$OUT/$name-$t.txt" 2>"$OUT/$name-$t.log"; then
      cat "$OUT/$name-$t.txt" "$OUT/$name-$t.log" >&2
      echo "oracle-archs: $name $t: not bit-identical (above)" >&2
      exit 1
    fi
    echo "$name $t: $(grep -m2 -E '^\| cpu-(ggml|exact)' "$OUT/$name-$t.txt" | awk -F'|' '{gsub(/ +/," "); printf "%s KLD%s same top%s%s; ", $2, $4, $5, $7}')"
  done
done
