#!/usr/bin/env bash
# zerolayer vs llama.cpp on the same files, same threads, side by side.
#   bench/compare.sh [LLAMA_BUILD_DIR] [THREADS]
# Builds TinyLlama-1.1B-shaped random-weight models with `zerolayer synth`
# (vocabulary from ggml-vocab-llama-spm.gguf) in $MODELS (default bench/out),
# runs `zerolayer bench` and, when LLAMA_BUILD_DIR/bin/llama-bench exists,
# `llama-bench` on the very same files, and prints the ratios.
# llama.cpp is never part of this repository: build it elsewhere (e.g. /tmp).
set -euo pipefail
cd "$(dirname "$0")/.."
LLAMA=${1:-}
T=${2:-2}
ZL=${ZL:-build/bin/zerolayer}
MODELS=${MODELS:-bench/out}
TYPES=${TYPES:-Q4_0 Q8_0 Q4_K_M}
P=${P:-128}
N=${N:-64}
R=${R:-3}
mkdir -p "$MODELS"
for t in $TYPES; do
  f="$MODELS/tinyllama-synth-$t.gguf"
  [ -f "$f" ] || "$ZL" synth --vocab-from tests/fixtures/tokenizer/ggml-vocab-llama-spm.gguf \
      --dim 2048 --ffn 5632 --layers 22 --heads 32 --kv-heads 4 --type "$t" -o "$f" >&2
done
printf "| type | zerolayer pp%s | llama.cpp pp%s | ratio | zerolayer tg%s | llama.cpp tg%s | ratio |\n" $P $P $N $N
echo "|---|---|---|---|---|---|---|"
for t in $TYPES; do
  f="$MODELS/tinyllama-synth-$t.gguf"
  zj=$("$ZL" bench -m "$f" -p $P -n $N -t $T -r $R --json)
  zpp=$(echo "$zj" | grep -o "\"test\":\"pp$P\"[^}]*" | sed 's/.*"tps_mean":\([0-9.]*\).*/\1/')
  ztg=$(echo "$zj" | grep -o "\"test\":\"tg$N\"[^}]*" | sed 's/.*"tps_mean":\([0-9.]*\).*/\1/')
  lpp=-; ltg=-; rpp=-; rtg=-
  if [ -n "$LLAMA" ] && [ -x "$LLAMA/bin/llama-bench" ]; then
    lj=$("$LLAMA/bin/llama-bench" -m "$f" -p $P -n $N -t $T -r $R -o json 2>/dev/null)
    lpp=$(echo "$lj" | tr -d ' \n' | grep -o "\"n_prompt\":$P,\"n_gen\":0[^}]*" | grep -o '"avg_ts":[0-9.]*' | cut -d: -f2)
    ltg=$(echo "$lj" | tr -d ' \n' | grep -o "\"n_prompt\":0,\"n_gen\":$N[^}]*" | grep -o '"avg_ts":[0-9.]*' | cut -d: -f2)
    rpp=$(awk "BEGIN{printf \"%.2f\", $zpp/$lpp}"); rtg=$(awk "BEGIN{printf \"%.2f\", $ztg/$ltg}")
  fi
  printf "| %s | %.2f | %s | %s | %.2f | %s | %s |\n" "$t" "$zpp" "$lpp" "$rpp" "$ztg" "$ltg" "$rtg"
done
