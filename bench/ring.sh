#!/usr/bin/env bash
# Verification ring: end-to-end tokens/s with the ring vs plain decoding.
#   bench/ring.sh [ZEROLAYER] [MODEL] [THREADS]
# Grounded tasks: the prompt holds a passage and restarts it, so a faithful
# continuation quotes earlier text (what prompt-lookup drafting exploits);
# ungrounded: free generation from BOS.  Greedy, so the text is identical in
# every mode and only the speed differs.
set -euo pipefail
ZL=${1:-build/bin/zerolayer}
MODEL=${2:-models/stories260K.gguf}
T=${3:-1}
P1="Once upon a time, there was a little girl named Lily. She loved to play outside in the sunshine. One day, she saw a big, red ball in the park. She ran to the ball and kicked it. The ball went very high. Lily laughed and clapped her hands. Once upon a time, there was a little girl named Lily. She loved to play"
P2="Tom and his mom went to the store. They bought apples, milk and bread. Tom carried the bag home. He was very proud. Tom and his mom went to the store. They bought"
P3="The dog said, \"I am hungry.\" The cat said, \"I am hungry too.\" The bird said, \"I am hungry.\" The dog said, \"I am"
run() { # prompt spec extra... -> "tok/s accept%"
  local prompt="$1"; shift
  "$ZL" run -m "$MODEL" -p "$prompt" -n 200 --temp 0 --ignore-eos -t "$T" "$@" 2>&1 >/dev/null |
    awk '/generated/ {for (i=1;i<=NF;i++) if ($i=="tok/s);") {gsub(/[(]/,"",$(i-1)); r=$(i-1)}}
         /ring:/ {for (i=1;i<=NF;i++) if ($i ~ /%\)/) {a=$i; gsub(/[(),%]/,"",a)}}
         END {printf "%s %s\n", r, (a==""?"-":a)}'
}
echo "model: $MODEL, threads $T, 200 greedy tokens, best of 3"
echo
echo "| task | mode | tok/s | acceptance | ring/plain |"
echo "|---|---|---|---|---|"
best() { local b=0 acc=-; for i in 1 2 3; do read -r r a < <(run "$@"); if awk "BEGIN{exit !($r > $b)}"; then b=$r; acc=$a; fi; done; echo "$b $acc"; }
for task in grounded-1 grounded-2 grounded-3 ungrounded; do
  case $task in grounded-1) P="$P1";; grounded-2) P="$P2";; grounded-3) P="$P3";; ungrounded) P="";; esac
  read -r plain _ < <(best "$P" --spec off)
  echo "| $task | off | $plain | - | 1.00 |"
  read -r r a < <(best "$P" --spec lookup)
  echo "| $task | lookup | $r | $a% | $(awk "BEGIN{printf \"%.2f\", $r/$plain}") |"
  if [ -n "${DRAFT_LAYERS:-}" ]; then
    read -r r a < <(best "$P" --spec draft --draft-layers "$DRAFT_LAYERS")
    echo "| $task | draft (first $DRAFT_LAYERS layers) | $r | $a% | $(awk "BEGIN{printf \"%.2f\", $r/$plain}") |"
  fi
done
