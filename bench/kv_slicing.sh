#!/usr/bin/env bash
# KV slicing quality: perplexity of text sampled from stories260K itself under
# the full / window / anchor policies (issue: KV slicing, "Measure").
#   bench/kv_slicing.sh [ZEROLAYER] [N_STORIES]
# Evaluation text: N independent stories, temperature 1, seeds 1..N, at most
# 450 tokens each (inside the model's 512-token training context), joined by
# newlines.  The same command regenerates the same text.
set -euo pipefail
ZL=${1:-build/bin/zerolayer}
N=${2:-24}
OUT=${OUT:-bench/out}
mkdir -p "$OUT"
TEXT="$OUT/stories-eval.txt"
: > "$TEXT"
for s in $(seq 1 "$N"); do
  "$ZL" run --temp 1 --top-k 0 --top-p 1 --min-p 0 --seed "$s" -n 450 --spec off -t 1 2>/dev/null >> "$TEXT"
done
echo "evaluation text: $N stories, $(wc -c < "$TEXT") bytes, $("$ZL" tokenize --stdin < "$TEXT" | wc -w) tokens"
ppl() { "$ZL" perplexity -f "$TEXT" -t 1 "$@" 2>/dev/null | sed -n 's/^perplexity: \([0-9.]*\).*/\1/p'; }
echo
echo "| ctx | policy | budget | perplexity |"
echo "|---|---|---|---|"
for ctx in 512 1024 2048; do echo "| $ctx | full | - | $(ppl --ctx $ctx) |"; done
for b in 0.25 0.5; do
  for p in window anchor; do echo "| 512 | $p | $b | $(ppl --ctx 512 --kv-policy $p --kv-budget $b) |"; done
done
for p in window anchor; do echo "| 2048 | $p | 512 | $(ppl --ctx 2048 --kv-policy $p --kv-budget 512) |"; done
echo "| 512 | full (kv q8_0 on synth-small-Q8_0 is in the README; stories260K head_dim 8 cannot use q8_0) | - | - |"
