#!/usr/bin/env bash
# zerolayer vs llama.cpp on the same files, same threads, side by side.
#   bench/compare.sh [LLAMA_BUILD_DIR] [THREADS]
# Builds TinyLlama-1.1B-shaped random-weight models with `zerolayer synth`
# (vocabulary from ggml-vocab-llama-spm.gguf) in $MODELS (default bench/out),
# runs `zerolayer bench` and, when LLAMA_BUILD_DIR/bin/llama-bench exists,
# `llama-bench` on the very same files, and prints the ratios and each
# engine's decode as a share of the read bandwidth `zerolayer bench` measures
# (tg tokens/s x weight bytes per token / bandwidth).
#   ISA=avx2 bench/compare.sh /tmp/ref-avx2/build 2
# runs zerolayer with ZL_ISA=avx2: pass a llama.cpp built for AVX2 only
# (-DGGML_NATIVE=OFF -DGGML_AVX2=ON -DGGML_AVX512=OFF ..., see BENCHMARKS.md).
# THREADS may be a list (1,2): one row per count.  Env: TYPES, P, N, R, ZL,
# MODELS, ISA (avx512, the default, is the CPU's best level; avx2, scalar).
# llama.cpp is never part of this repository: build it elsewhere (e.g. /tmp).
set -euo pipefail
cd "$(dirname "$0")/.."
LLAMA=${1:-}
THREADS=${2:-2}
ZL=${ZL:-build/bin/zerolayer}
MODELS=${MODELS:-bench/out}
TYPES=${TYPES:-Q4_0 Q8_0 Q4_K_M}
P=${P:-128}
N=${N:-64}
R=${R:-3}
ISA=${ISA:-avx512}
case "$ISA" in avx512 | avx2 | scalar) ;; *) echo "compare.sh: ISA must be avx512, avx2 or scalar" >&2; exit 2 ;; esac
mkdir -p "$MODELS"
for t in $TYPES; do
  f="$MODELS/tinyllama-synth-$t.gguf"
  [ -f "$f" ] || "$ZL" synth --vocab-from tests/fixtures/tokenizer/ggml-vocab-llama-spm.gguf \
      --dim 2048 --ffn 5632 --layers 22 --heads 32 --kv-heads 4 --type "$t" -o "$f" >&2
done
num() { sed -n "s/.*\"$1\":\([0-9.]*\).*/\1/p"; }
ratio() { awk -v a="$1" -v b="$2" 'BEGIN{ if (a == "-" || b == "-" || b == 0) print "-"; else printf "%.2f", a / b }'; }
pct() { awk -v t="$1" -v w="$2" -v bw="$3" 'BEGIN{ if (t == "-" || bw == 0) print "-"; else printf "%.0f%%", 100 * t * w / (bw * 1e9) }'; }
echo "ISA $ISA (zerolayer ZL_ISA=$ISA), llama.cpp: ${LLAMA:-none}, $(date -u '+%Y-%m-%d %H:%M UTC'), $(uname -n)"
printf "| isa | type | threads | zerolayer pp%s | llama.cpp pp%s | ratio | zerolayer tg%s | llama.cpp tg%s | ratio | bandwidth GB/s | zerolayer %% bw | llama.cpp %% bw |\n" $P $P $N $N
echo "|---|---|---|---|---|---|---|---|---|---|---|---|"
for t in $TYPES; do
  f="$MODELS/tinyllama-synth-$t.gguf"
  for th in ${THREADS//,/ }; do
    zj=$(ZL_ISA=$ISA "$ZL" bench -m "$f" -p $P -n $N -t $th -r $R --json)
    zpp=$(echo "$zj" | grep -o "\"test\":\"pp$P\"[^}]*" | num tps_mean)
    ztg=$(echo "$zj" | grep -o "\"test\":\"tg$N\"[^}]*" | num tps_mean)
    bw=$(echo "$zj" | grep -o '"bandwidth_gbs":[0-9.]*' | cut -d: -f2)
    wb=$(echo "$zj" | grep -o '"weight_bytes":[0-9]*' | cut -d: -f2)
    lpp=-; ltg=-
    if [ -n "$LLAMA" ] && [ -x "$LLAMA/bin/llama-bench" ]; then
      lj=$("$LLAMA/bin/llama-bench" -m "$f" -p $P -n $N -t $th -r $R -o json 2>/dev/null | tr -d ' \n')
      lpp=$(echo "$lj" | grep -o "\"n_prompt\":$P,\"n_gen\":0[^}]*" | grep -o '"avg_ts":[0-9.]*' | cut -d: -f2 || true)
      ltg=$(echo "$lj" | grep -o "\"n_prompt\":0,\"n_gen\":$N[^}]*" | grep -o '"avg_ts":[0-9.]*' | cut -d: -f2 || true)
      lpp=${lpp:--}; ltg=${ltg:--}
    fi
    printf "| %s | %s | %s | %.2f | %s | %s | %.2f | %s | %s | %s | %s | %s |\n" "$ISA" "$t" "$th" "$zpp" "$lpp" \
      "$(ratio "$zpp" "$lpp")" "$ztg" "$ltg" "$(ratio "$ztg" "$ltg")" "$bw" "$(pct "$ztg" "$wb" "$bw")" "$(pct "$ltg" "$wb" "$bw")"
  done
done
