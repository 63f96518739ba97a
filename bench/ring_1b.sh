#!/usr/bin/env bash
# Verification ring on real text at 1.1B memory traffic: stories260K embedded in a TinyLlama-1.1B-shaped
# file (dim 2048, ffn 5632, 22 layers, 32/4 heads; `zerolayer synth --embed-from`, see src/model/embed.c),
# whose logits are stories260K's while every decode step reads ~520 MiB of Q4_0 weights.
#   bench/ring_1b.sh [ZEROLAYER] [THREADS]          (THREADS default 2)
# env: MODELS    directory for the generated files (default /tmp/models; never commit them)
#      SMALL     the embedded model (default models/stories260K.gguf), also the draft model
#      TYPE      weight type of the big files (default Q4_0)
#      PERTURB   --perturb of the second file (default 0.3).  Acceptance in correctness runs (200 greedy
#                tokens, 3 prompts, loaded 2-core VM; the ring's adaptivity makes it load-dependent):
#                  P     stories260K drafting   first 5 layers drafting (--draft-layers 5)
#                  0     65-76%                 100%
#                  0.2   60-73%                 86-92%
#                  0.3   65-68%                 75-87%
#                  0.5   59-64%                 76-77%
#                stories260K's disagreement with even the unperturbed Q4_0 embed is Q4_0's rounding of
#                the small weights (a Q8_0 embed gives stories260K's greedy text exactly); P mostly moves
#                the self-speculation figure.
#      SEED      synth seed (default 1)
#      SECTIONS  any of "lookup self draft" (default all three)
#      DRAFT_TASKS  tasks of the draft sections (default "self-quote-1 grounded-1 ungrounded")
#      RUNS (default 5), N (default 200), CURVE, TASKS: as bench/ring.sh
#
# Files, built once if absent (about a minute each on 2 cores; delete them to rebuild):
#   $MODELS/stories-1b-$TYPE.gguf            the embed: SMALL's function (up to TYPE's rounding)
#   $MODELS/stories-1b-p$PERTURB-$TYPE.gguf  the same with --perturb: the 17 extra layers write into the
#                                            residual, a different model whose first layers are SMALL
# Sections (bench/ring.sh tables: plain and ring interleaved, same greedy text in both):
#   lookup  embed: plain vs --spec lookup on all ring.sh tasks (self-quote-1..3, grounded-1..2, ungrounded)
#   self    embed and perturbed embed: --spec draft --draft-layers <SMALL's layers> (self-speculation;
#           on the embed the draft is the whole function, so acceptance is 100%)
#   draft   perturbed embed and embed: --spec draft --draft-model SMALL (the F32 small model drafting a
#           quantised, and perturbed, big one)
# First a correctness check (no timing): 64 greedy tokens of the embed next to SMALL's.
set -euo pipefail
ZL=${1:-build/bin/zerolayer}
T=${2:-2}
HERE=$(cd "$(dirname "$0")" && pwd)
MODELS=${MODELS:-/tmp/models}
SMALL=${SMALL:-models/stories260K.gguf}
TYPE=${TYPE:-Q4_0}
PERTURB=${PERTURB:-0.3}
SEED=${SEED:-1}
SECTIONS=${SECTIONS:-lookup self draft}
export RUNS=${RUNS:-5} N=${N:-200} DRAFT_TASKS=${DRAFT_TASKS:-self-quote-1 grounded-1 ungrounded}
[ -n "${CURVE:-}" ] && export CURVE
SHAPE=(--dim 2048 --ffn 5632 --layers 22 --heads 32 --kv-heads 4)
EMBED=$MODELS/stories-1b-$TYPE.gguf
PERTURBED=$MODELS/stories-1b-p$PERTURB-$TYPE.gguf

has() { case " $SECTIONS " in *" $1 "*) return 0 ;; *) return 1 ;; esac; }
for s in $SECTIONS; do
  case $s in lookup | self | draft) ;; *) echo "ring_1b.sh: unknown section '$s' (lookup self draft)" >&2; exit 1 ;; esac
done

build() { # out [synth args]
  local out=$1; shift
  [ -f "$out" ] && return
  echo "building $out (synth --embed-from $SMALL $*) ..." >&2
  mkdir -p "$(dirname "$out")"
  if ! "$ZL" synth --embed-from "$SMALL" "${SHAPE[@]}" --type "$TYPE" --seed "$SEED" -o "$out" "$@" 2>"$out.log"; then
    tail -1 "$out.log" >&2
    exit 1
  fi
  tail -1 "$out.log" >&2
}
build "$EMBED"
build "$PERTURBED" --perturb "$PERTURB"
SMALL_LAYERS=$("$ZL" inspect "$SMALL" | awk '$1 ~ /\.block_count$/ && !n {print $3; n = 1}') # reads it all: no SIGPIPE under pipefail

greedy64() { "$ZL" run -m "$1" -p "Once upon a time" -n 64 --temp 0 -t "$T" --spec off 2>/dev/null | tr '\n' ' '; }
a=$(greedy64 "$SMALL")
b=$(greedy64 "$EMBED")
echo "correctness: 64 greedy tokens after \"Once upon a time\""
echo "  $(basename "$SMALL"): $a"
echo "  $(basename "$EMBED"): $b"
if [ "$a" = "$b" ]; then
  echo "  identical"
else
  i=0
  while [ "${a:i:1}" = "${b:i:1}" ]; do i=$((i + 1)); done
  echo "  identical for the first $i characters ($TYPE rounding of the small weights; an F32/F16/Q8_0 embed is exact)"
fi
echo

ring() { # model, then env assignments for ring.sh
  local model=$1; shift
  env "$@" bash "$HERE/ring.sh" "$ZL" "$model" "$T"
  echo
}
DL=""; DM=""
has self && DL=$SMALL_LAYERS
has draft && DM=$SMALL
if has lookup || [ -n "$DL$DM" ]; then
  echo "## target: $(basename "$EMBED") (SMALL's function)"
  echo
  if has lookup; then ring "$EMBED" TASKS="${TASKS-self-quote-1 self-quote-2 self-quote-3 grounded-1 grounded-2 ungrounded}" DRAFT_LAYERS="$DL" DRAFT_MODEL="$DM"
  else ring "$EMBED" TASKS= DRAFT_LAYERS="$DL" DRAFT_MODEL="$DM"; fi
fi
if [ -n "$DL$DM" ]; then
  echo "## target: $(basename "$PERTURBED") (--perturb $PERTURB: a different model)"
  echo
  ring "$PERTURBED" TASKS= DRAFT_LAYERS="$DL" DRAFT_MODEL="$DM"
fi
