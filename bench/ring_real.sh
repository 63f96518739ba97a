#!/usr/bin/env bash
# The verification ring on a real target/draft pair: Qwen2.5-Coder-1.5B with
# the 0.5B as draft model, the n-gram lookup, and self-speculation (the
# target's first DRAFT_LAYERS layers), on the code tasks in bench/tasks/
# (each a user message answered through the model's chat template, greedy
# unless TEMP is set).  For every task and mode: generated tokens/s (median of
# RUNS runs, interleaved with plain decoding), ring/plain, acceptance, and at
# temperature 0 whether the text equals plain decoding's byte for byte.
#   bench/ring_real.sh [TASK...]      env: RUNS (3), N (256), T (2 threads), TEMP (0), DRAFT_LAYERS (8)
set -euo pipefail
cd "$(dirname "$0")/.."
ZL=${ZL:-build/bin/zerolayer}
RUNS=${RUNS:-3}; N=${N:-256}; T=${T:-2}; TEMP=${TEMP:-0}; DL=${DRAFT_LAYERS:-8}
TGT=$(tools/models.sh qwen2.5-coder-1.5b); DRF=$(tools/models.sh qwen2.5-coder-0.5b)
tasks=("$@"); [ ${#tasks[@]} -gt 0 ] || tasks=(edit refactor comments translate quote chat)
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
sys="You are a helpful coding assistant."
one() { # mode task run -> prints tok/s, writes text and stderr
  local mode=$1 task=$2 r=$3 extra=()
  case $mode in
    plain) extra=(--spec off) ;; lookup) extra=(--spec lookup) ;;
    draft) extra=(--spec draft --draft-model "$DRF") ;; self) extra=(--spec draft --draft-layers "$DL") ;;
  esac
  "$ZL" run -m "$TGT" --chat --system "$sys" -p "$(cat "bench/tasks/$task.txt")" -n "$N" --temp "$TEMP" --seed "$r" \
    -t "$T" "${extra[@]}" >"$tmp/$mode.$task.$r.txt" 2>"$tmp/$mode.$task.$r.err"
  grep -o 'generated [0-9]* tokens in [0-9.]* ms ([0-9.]* tok/s)' "$tmp/$mode.$task.$r.err" | sed 's/.*(\([0-9.]*\) tok\/s)/\1/'
}
median() { sort -g | awk '{a[NR]=$1} END {print (NR%2) ? a[(NR+1)/2] : (a[NR/2]+a[NR/2+1])/2}'; }
printf "| task | plain tok/s | mode | ring tok/s | ring/plain (min–max) | acceptance | same text |\n|---|---|---|---|---|---|---|\n"
for task in "${tasks[@]}"; do
  declare -A tps=()
  for r in $(seq 1 "$RUNS"); do
    for mode in plain draft lookup self; do tps[$mode]+="$(one $mode "$task" "$r") "; done
  done
  p=$(echo "${tps[plain]}" | tr ' ' '\n' | grep . | median)
  for mode in draft lookup self; do
    m=$(echo "${tps[$mode]}" | tr ' ' '\n' | grep . | median)
    lo=$(echo "${tps[$mode]}" | tr ' ' '\n' | grep . | sort -g | head -1); hi=$(echo "${tps[$mode]}" | tr ' ' '\n' | grep . | sort -g | tail -1)
    acc=$(grep -o 'accepted [0-9]* ([0-9]*%)' "$tmp/$mode.$task.1.err" | grep -o '[0-9]*%' || echo -)
    same=-; [ "$TEMP" = 0 ] && { cmp -s "$tmp/plain.$task.1.txt" "$tmp/$mode.$task.1.txt" && same=yes || same=NO; }
    printf "| %s | %.1f | %s | %.1f | **%.2f** (%.2f–%.2f) | %s | %s |\n" "$task" "$p" "$mode" "$m" \
      "$(awk "BEGIN{print $m/$p}")" "$(awk "BEGIN{print $lo/$p}")" "$(awk "BEGIN{print $hi/$p}")" "$acc" "$same"
  done
  unset tps
done
