#!/usr/bin/env bash
# KV slicing quality: perplexity of text sampled from stories260K itself under
# the full / window / anchor policies (issue: KV slicing, "Measure").
#   bench/kv_slicing.sh [ZEROLAYER] [N_STORIES]      (SEED0=S: seeds S+1..S+N)
# Evaluation text: N independent stories, temperature 1, seeds 1..N, at most
# 450 tokens each (inside the model's 512-token training context), each run's
# output appended as it is.  The same command regenerates the same text.
# The anchor policy splits its budget (the mean over layers, i.e. the KV bytes
# of `window` at the same budget) into per-layer budgets rising with depth
# when the engine supports per-layer slices.  Its layers are capped at the
# model's training context: stories260K's GGUF claims 2048 although it was
# trained on 512-token windows, so the last row sets --kv-layer-max 512.
set -euo pipefail
ZL=${1:-build/bin/zerolayer}
N=${2:-24}
SEED0=${SEED0:-0}
OUT=${OUT:-bench/out}
mkdir -p "$OUT"
TEXT="$OUT/stories-eval.txt"
: > "$TEXT"
for s in $(seq $((SEED0 + 1)) $((SEED0 + N))); do
  "$ZL" run --temp 1 --top-k 0 --top-p 1 --min-p 0 --seed "$s" -n 450 --spec off -t 1 2>/dev/null >> "$TEXT"
done
echo "evaluation text: $N stories (seeds $((SEED0 + 1))..$((SEED0 + N))), $(wc -c < "$TEXT") bytes, $("$ZL" tokenize --stdin < "$TEXT" | wc -w) tokens"
ppl() { "$ZL" perplexity -f "$TEXT" -t 1 "$@" 2>/dev/null | sed -n 's/^perplexity: \([0-9.]*\).*/\1/p'; }
echo
echo "| ctx | policy | budget | perplexity |"
echo "|---|---|---|---|"
for ctx in 512 1024 2048; do echo "| $ctx | full | - | $(ppl --ctx $ctx) |"; done
for b in 0.25 0.5; do
  for p in window anchor; do echo "| 512 | $p | $b | $(ppl --ctx 512 --kv-policy $p --kv-budget $b) |"; done
done
for p in window anchor; do echo "| 2048 | $p | 512 | $(ppl --ctx 2048 --kv-policy $p --kv-budget 512) |"; done
echo "| 2048 | anchor, layers capped at 512 (--kv-layer-max 512) | 512 | $(ppl --ctx 2048 --kv-policy anchor --kv-budget 512 --kv-layer-max 512) |"
echo "| 512 | full (kv q8_0 on synth-small-Q8_0 is in the README; stories260K head_dim 8 cannot use q8_0) | - | - |"
