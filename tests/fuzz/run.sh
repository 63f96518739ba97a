#!/usr/bin/env bash
# run.sh — run libFuzzer targets one after another and summarise them (make fuzz, make fuzz-campaign).
#   tests/fuzz/run.sh BUILD SECONDS MODE TARGET...
# BUILD: the libFuzzer build (its tests/fuzz_NAME binaries); SECONDS: each target's -max_total_time;
# MODE: append (make fuzz) or write (make fuzz-campaign) BUILD/fuzz-summary.txt.
# Each target runs over BUILD/corpus/NAME (new inputs go there) plus the seeds of tests/fuzz/corpus/NAME,
# with its dictionary; its output goes to BUILD/fuzz-NAME.log and its findings to BUILD/NAME-crash-*
# (NAME-leak-*, NAME-timeout-*, NAME-oom-*).  The summary has one row per target: executions and
# exec/s (libFuzzer's -print_final_stats: stat::number_of_executed_units, stat::average_exec_per_sec),
# the corpus size after the run and the findings of this run.  Every target runs even after one
# found something; the exit status is 1 when any did (or did not start), else 0.
set -u
secs=$2 mode=$3
build=$(cd "$1" && pwd) || exit 1
shift 3
src=$(cd "$(dirname "$0")" && pwd)
summary=$build/fuzz-summary.txt
[ "$mode" = write ] && : >"$summary"
{
  echo "# $(date -u +%Y-%m-%dT%H:%M:%SZ) $secs s per target ($([ "$mode" = write ] && echo make fuzz-campaign || echo make fuzz))"
  printf '%-14s %12s %8s %8s %8s\n' target executions exec/s corpus crashes
} >>"$summary"
status=0
for t in "$@"; do
  dict= leaks=
  case $t in
    gguf) dict=$src/gguf.dict ;;
    anthropic | openai) dict=$src/json.dict ;;
    http) dict=$src/json.dict leaks=-detect_leaks=0 ;;
    grammar) dict=$src/grammar.dict ;;
  esac
  mkdir -p "$build/corpus/$t"
  echo "== fuzz_$t for $secs s"
  before=$(ls "$build" | grep -cE "^$t-(crash|leak|timeout|oom)-")
  log=$build/fuzz-$t.log
  (cd "$build" && ./tests/fuzz_$t -max_total_time="$secs" -rss_limit_mb=4096 -print_final_stats=1 \
     -artifact_prefix="$build/$t-" ${leaks:+"$leaks"} ${dict:+-dict="$dict"} \
     corpus/"$t" "$src/corpus/$t") >"$log" 2>&1
  rc=$?
  after=$(ls "$build" | grep -cE "^$t-(crash|leak|timeout|oom)-")
  found=$((after - before))
  execs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log" | tail -1)
  eps=$(sed -n 's/^stat::average_exec_per_sec: *//p' "$log" | tail -1)
  corpus=$(ls "$build/corpus/$t" | wc -l)
  if [ "$rc" != 0 ] && [ "$found" = 0 ]; then found="failed"; fi # it stopped without a finding (see the log)
  printf '%-14s %12s %8s %8s %8s\n' "$t" "${execs:--}" "${eps:--}" "$corpus" "$found" >>"$summary"
  tail -n 12 "$log"
  [ "$rc" = 0 ] || { status=1; echo "== fuzz_$t: exit $rc, see $log"; }
done
echo "== summary ($summary)"
cat "$summary"
exit $status
