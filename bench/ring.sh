#!/usr/bin/env bash
# Verification ring: end-to-end tokens/s with the ring vs plain decoding.
#   bench/ring.sh [ZEROLAYER] [MODEL] [THREADS]
# env: RUNS (interleaved runs per mode; the best is reported, as the run least disturbed by other
#      load on the machine, and the median; default 15), N (tokens, default 200),
#      CURVE (verify cost of a forward over k = 1, 2, ... tokens relative to k = 1, comma-separated;
#      default: the synthetic 1.1B Q4_0 model, see below),
#      TASKS (tasks timed with --spec lookup, space-separated; default all six below; empty: none),
#      RING_EXTRA (more `zerolayer run` flags for the lookup ring, e.g. "--ring-cost $CURVE"),
#      DRAFT_LAYERS (also time --spec draft --draft-layers N), DRAFT_MODEL (also time --spec draft
#      --draft-model FILE), DRAFT_TASKS (tasks of the draft sections; default "self-quote-1 ungrounded").
#
# Tasks (greedy, so the text is identical in every mode and only the speed differs):
#   self-quote-*  input-grounded: the prompt holds a passage the model itself wrote after a seed
#                 sentence, then restarts the seed; the continuation re-tells (quotes) the passage,
#                 which is what prompt-lookup drafting exploits.  Built at run time from MODEL's own
#                 greedy text, so it works for any model.
#   grounded-*    a passage written by hand, restarted (stories260K does not copy these closely)
#   ungrounded    free generation from BOS: the ring must not cost more than 5%
# Columns: tok/s plain and ring, best (median); acceptance = accepted / drafted over the ring's verify steps
# (all runs); steps verified = share of the ring's steps that had a draft to verify (the rest are plain
# steps: no n-gram match, or drafting paused); tokens per verify step; "projected" = what the ring's steps
# yield on the CURVE model: all tokens / (plain steps + verify steps x cost(1 + drafted per verify step)),
# the cost of a plain step being 1.  stories260K itself is compute-bound
# (a forward over k tokens costs ~k x one token: bench --verify-curve), so its ring/plain ratio stays
# near 1 whatever the acceptance; the projection is the figure that carries over to a model whose
# decode is bound by reading weights (on such a model, e.g. bench/ring_1b.sh's, the measured ratio is the
# figure; the projection then checks the curve).  On a compute-bound model the ring's own cost model stops
# drafting where it does not pay there; RING_EXTRA="--ring-cost $CURVE" makes it draft what it would on the
# CURVE model, which is the acceptance the projection should see (its guard still pauses drafting that measures
# slower, so the projection stays conservative).  For the draft sections the projection leaves out the
# drafter's own cost.
set -euo pipefail
ZL=${1:-build/bin/zerolayer}
MODEL=${2:-models/stories260K.gguf}
T=${3:-1}
RUNS=${RUNS:-15}
N=${N:-200}
# time of one forward over k tokens / over 1 token on the synthetic 1.1B Q4_0 model (2-core AVX-512
# VM, 2026-12-01, with the matmul's weight prefetch, `bench --verify-curve -t 2`; beyond 16 extrapolated linearly)
CURVE=${CURVE:-1,1.06,1.15,1.26,1.34,1.44,1.60,1.81,2.21,2.48,2.44,2.55,2.65,2.76,3.03,3.23}

greedy() { "$ZL" run -m "$MODEL" -p "$1" -n "$2" --temp 0 --ignore-eos -t "$T" --spec off 2>/dev/null | tr '\n' ' ' | sed 's/ *$//'; }
S1="Tom and his mom went to the store."
S2="Lily and Ben went to the park."
S3="Ben saw a bird."
P1="Once upon a time, there was a little girl named Lily. She loved to play outside in the sunshine. One day, she saw a big, red ball in the park. She ran to the ball and kicked it. The ball went very high. Lily laughed and clapped her hands. Once upon a time, there was a little girl named Lily. She loved to play"
P2="Tom and his mom went to the store. They bought apples, milk and bread. Tom carried the bag home. He was very proud. Tom and his mom went to the store. They bought"

# one run -> "tok/s steps verify_steps drafted accepted"
run() {
  local prompt="$1"; shift
  "$ZL" run -m "$MODEL" -p "$prompt" -n "$N" --temp 0 --ignore-eos -t "$T" "$@" 2>&1 >/dev/null |
    sed -nE -e 's/.*generated [0-9]+ tokens in [0-9.]+ ms \(([0-9.]+) tok\/s\).*/R \1/p' \
        -e 's/.*ring: ([0-9]+) steps, ([0-9]+) verify steps, drafted ([0-9]+), accepted ([0-9]+).*/S \1 \2 \3 \4/p' |
    awk '$1=="R" {r=$2} $1=="S" {s=$2; v=$3; d=$4; a=$5} END {printf "%s %d %d %d %d\n", r, s, v, d, a}'
}
median() { sort -g | awk '{x[NR]=$1} END {print (NR%2 ? x[(NR+1)/2] : (x[NR/2]+x[NR/2+1])/2)}'; }
best() { sort -g | tail -1; }
cost() { # k (may be fractional) -> interpolated CURVE value
  awk -v k="$1" -v c="$CURVE" 'BEGIN {n=split(c,v,","); if (k<=1) {print 1; exit}
    if (k>=n) {print v[n]+(k-n)*(v[n]-v[n-1]); exit} i=int(k); f=k-i; print v[i]+f*(v[i+1]-v[i])}'
}

task() { # name prompt
  local name="$1" prompt="$2" plain=() ring=() s=0 v=0 d=0 a=0
  for ((r = 0; r < RUNS; r++)); do
    read -r x _ < <(run "$prompt" --spec off); plain+=("$x")
    read -r x rs rv rd ra < <(run "$prompt" "${RING_ARGS[@]}"); ring+=("$x")
    s=$((s + rs)); v=$((v + rv)); d=$((d + rd)); a=$((a + ra))
  done
  local mp mr bp br
  mp=$(printf '%s\n' "${plain[@]}" | median); mr=$(printf '%s\n' "${ring[@]}" | median)
  bp=$(printf '%s\n' "${plain[@]}" | best); br=$(printf '%s\n' "${ring[@]}" | best)
  local ntok; ntok=$("$ZL" tokenize -m "$MODEL" "$prompt" | wc -w)
  if [ "$v" -gt 0 ]; then
    local tpv dpv c
    tpv=$(awk "BEGIN{printf \"%.2f\", ($v+$a)/$v}"); dpv=$(awk "BEGIN{printf \"%.2f\", $d/$v}")
    c=$(cost "$(awk "BEGIN{print 1+$d/$v}")")
    # projected: all tokens over the cost of all steps, plain steps (no draft found, or drafting paused)
    # counting 1 and verify steps cost(1 + drafted)
    echo "| $name | $ntok | $bp ($mp) | $br ($mr) | $(awk "BEGIN{printf \"%.2f (%.2f)\", $br/$bp, $mr/$mp}") | $(awk "BEGIN{printf \"%.0f%%\", 100*$a/$d}") ($a/$d) | $(awk "BEGIN{printf \"%.0f%%\", 100*$v/$s}") | $tpv | $dpv | $(awk "BEGIN{printf \"%.2f\", ($s+$a)/(($s-$v)+$v*$c)}")x |"
  else
    echo "| $name | $ntok | $bp ($mp) | $br ($mr) | $(awk "BEGIN{printf \"%.2f (%.2f)\", $br/$bp, $mr/$mp}") | no verify step | 0% | - | - | - |"
  fi
}

# task prompts, built once (self-quote prompts cost a greedy run of MODEL each)
declare -A PROMPT
need() {
  [ -n "${PROMPT[$1]+x}" ] && return
  case "$1" in
    self-quote-1) PROMPT[$1]="$S1 $(greedy "$S1" 160) $S1" ;;
    self-quote-2) PROMPT[$1]="$S2 $(greedy "$S2" 160) $S2" ;;
    self-quote-3) PROMPT[$1]="$S3 $(greedy "$S3" 80) $S3" ;;
    grounded-1) PROMPT[$1]="$P1" ;;
    grounded-2) PROMPT[$1]="$P2" ;;
    ungrounded) PROMPT[$1]="" ;;
    *) echo "ring.sh: unknown task '$1' (self-quote-1..3, grounded-1..2, ungrounded)" >&2; exit 1 ;;
  esac
}
tasks() { for t in $1; do need "$t"; task "$t" "${PROMPT[$t]}"; done; }
header() {
  echo "| task | prompt tokens | plain tok/s | ring tok/s | ring/plain | acceptance | steps verified | tokens/verify step | drafted/verify step | projected |"
  echo "|---|---|---|---|---|---|---|---|---|---|"
}
TASKS=${TASKS-self-quote-1 self-quote-2 self-quote-3 grounded-1 grounded-2 ungrounded}
DRAFT_TASKS=${DRAFT_TASKS:-self-quote-1 ungrounded}

echo "model: $MODEL, threads $T, $N greedy tokens, best (median) of $RUNS interleaved runs per mode; projection curve: $CURVE"
if [ -n "$TASKS" ]; then
  echo
  header
  RING_ARGS=(--spec lookup ${RING_EXTRA:-})
  tasks "$TASKS"
fi
if [ -n "${DRAFT_LAYERS:-}" ]; then
  RING_ARGS=(--spec draft --draft-layers "$DRAFT_LAYERS")
  echo
  echo "ring = --spec draft with the model's own first $DRAFT_LAYERS layers (self-speculation):"
  echo
  header
  tasks "$DRAFT_TASKS"
fi
if [ -n "${DRAFT_MODEL:-}" ]; then
  RING_ARGS=(--spec draft --draft-model "$DRAFT_MODEL")
  echo
  echo "ring = --spec draft with the draft model $DRAFT_MODEL:"
  echo
  header
  tasks "$DRAFT_TASKS"
fi
