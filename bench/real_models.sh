#!/usr/bin/env bash
# zerolayer vs llama.cpp on the trained models of tools/models.tsv, side by
# side in one run: pp and tg tokens/s per thread count, load time, peak RSS.
#   bench/real_models.sh LLAMA_BUILD_DIR [MODEL_NAME...]
# (default models: all of tools/models.tsv).  Env: T (threads, "1 2"), P
# (prompt length, 512), N (generated tokens, 128), R (repetitions, 3).
# Both engines read the same cached file with the same thread count; the
# rounds interleave the engines so that a noisy machine hits both alike.
# llama.cpp is never part of this repository: build it elsewhere (e.g. /tmp).
set -euo pipefail
cd "$(dirname "$0")/.."
LLAMA=${1:?usage: bench/real_models.sh LLAMA_BUILD_DIR [MODEL...]}; shift
ZL=${ZL:-build/bin/zerolayer}
T=${T:-1 2}; P=${P:-512}; N=${N:-128}; R=${R:-3}
names=("$@")
[ ${#names[@]} -gt 0 ] || mapfile -t names < <(awk -F'\t' '!/^#/ { print $1 }' tools/models.tsv)
field() { grep -o "\"test\":\"$1\"[^}]*" | sed "s/.*\"$2\":\([0-9.]*\).*/\1/"; }
lfield() { tr -d ' \n' | grep -o "\"n_prompt\":$1,\"n_gen\":$2[^}]*" | grep -o '"avg_ts":[0-9.]*' | cut -d: -f2; }
printf "| model | threads | zerolayer pp%s | llama.cpp pp%s | ratio | zerolayer tg%s | llama.cpp tg%s | ratio | zerolayer load ms / peak RSS MiB |\n" $P $P $N $N
echo "|---|---|---|---|---|---|---|---|---|"
for name in "${names[@]}"; do
  f=$(tools/models.sh "$name")
  for t in $T; do
    zj=$("$ZL" bench -m "$f" -p "$P" -n "$N" -t "$t" -r "$R" --json)
    lj=$("$LLAMA/bin/llama-bench" -m "$f" -p "$P" -n "$N" -t "$t" -r "$R" -o json 2>/dev/null)
    zpp=$(echo "$zj" | field "pp$P" tps_mean); ztg=$(echo "$zj" | field "tg$N" tps_mean)
    lpp=$(echo "$lj" | lfield "$P" 0); ltg=$(echo "$lj" | lfield 0 "$N")
    load=$(echo "$zj" | grep -o '"load_ms":[0-9.]*' | head -1 | cut -d: -f2)
    rss=$(echo "$zj" | grep -o '"peak_rss_mib":[0-9.]*' | head -1 | cut -d: -f2)
    printf "| %s | %s | %.1f | %.1f | **%.2f** | %.1f | %.1f | **%.2f** | %s / %s |\n" "$name" "$t" "$zpp" "$lpp" \
      "$(awk "BEGIN{print $zpp/$lpp}")" "$ztg" "$ltg" "$(awk "BEGIN{print $ztg/$ltg}")" "${load:--}" "${rss:--}"
  done
done
