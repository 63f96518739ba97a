#!/usr/bin/env bash
# zerolayer serve vs llama-server on one model file, side by side in one run:
# bench/serve_load.mjs at 1/4/8/16 streams against each, then each server's
# peak RSS (VmHWM).  Both get the same threads and 8 parallel sequences of
# 512 positions each (llama-server splits -c 4096 over its 8 slots).
#   bench/serve_compare.sh LLAMA_BUILD_DIR MODEL.gguf
# Env: T (threads, 2), STREAMS (1,4,8,16), TOKENS (64), ROUNDS (3), PORT (18480).
# llama.cpp is never part of this repository: build it elsewhere (e.g. /tmp).
set -euo pipefail
cd "$(dirname "$0")/.."
LLAMA=${1:?usage: bench/serve_compare.sh LLAMA_BUILD_DIR MODEL.gguf}
MODEL=${2:?usage: bench/serve_compare.sh LLAMA_BUILD_DIR MODEL.gguf}
ZL=${ZL:-build/bin/zerolayer}
T=${T:-2}; STREAMS=${STREAMS:-1,4,8,16}; TOKENS=${TOKENS:-64}; ROUNDS=${ROUNDS:-3}; PORT=${PORT:-18480}
pid=
cleanup() { [ -n "$pid" ] && kill "$pid" 2>/dev/null; wait 2>/dev/null || true; }
trap cleanup EXIT
wait_up() {
  for _ in $(seq 1 600); do curl -sf "http://127.0.0.1:$1/health" >/dev/null 2>&1 && return 0; sleep 0.1; done
  echo "server on port $1 did not come up" >&2; exit 1
}
run_one() { # name port cmd...
  local name=$1 port=$2; shift 2
  "$@" >/tmp/serve_compare.$name.log 2>&1 & pid=$!
  wait_up "$port"
  echo "== $name ($*)"
  node bench/serve_load.mjs "http://127.0.0.1:$port" --streams "$STREAMS" --tokens "$TOKENS" --rounds "$ROUNDS"
  echo "peak RSS: $(awk '/VmHWM/ {printf "%.0f MiB", $2/1024}' /proc/$pid/status)"
  kill "$pid"; wait "$pid" 2>/dev/null || true; pid=
}
run_one zerolayer "$PORT" "$ZL" serve -m "$MODEL" --port "$PORT" -t "$T" --parallel 8 --ctx 512
run_one llama-server $((PORT + 1)) "$LLAMA/bin/llama-server" -m "$MODEL" --port $((PORT + 1)) -t "$T" -np 8 -c 4096 \
  --no-webui
