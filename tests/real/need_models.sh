#!/usr/bin/env bash
# need_models.sh ROOT NAME... -- COMMAND...
# Runs COMMAND when every named model (tools/models.tsv) is in the model
# cache; otherwise prints which one is missing and exits 77, which ctest
# reports as a skipped test (never as a pass); under ZL_TEST_STRICT=1 (CI)
# it is a failure.
set -u
ROOT="$1"; shift
dir="${ZL_MODELS:-${XDG_CACHE_HOME:-$HOME/.cache}/zerolayer/models}"
while [ $# -gt 0 ] && [ "$1" != "--" ]; do
  file=$(awk -F'\t' -v n="$1" '$1 == n { print $2 }' "$ROOT/tools/models.tsv")
  if [ -z "$file" ]; then echo "need_models.sh: unknown model '$1'" >&2; exit 2; fi
  if [ ! -f "$dir/$file" ]; then
    if [ "${ZL_TEST_STRICT:-0}" = 1 ]; then
      echo "FAIL: model $1 is not in $dir (ZL_TEST_STRICT=1: CI fetches every model)"; exit 1
    fi
    echo "SKIPPED: model $1 is not in $dir (fetch it with: tools/models.sh $1)"
    exit 77
  fi
  shift
done
shift
export ZL_MODELS="$dir"
exec "$@"
