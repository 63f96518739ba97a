#!/usr/bin/env bash
# scale_failover.sh — scale-out on loopback with Debian's nginx and Redis
# (deploy/nginx/zerolayer.conf as shipped, ports rewritten): three replicas
# of `serve --state-store redis://...` on stories260K behind nginx, started
# by the test as ordinary processes with their own config and temp dirs.
# What it checks is in scale_failover.py.  Without nginx or redis-server it
# is SKIPPED (exit 77), and a failure under ZL_TEST_STRICT=1 (CI installs
# both: .ci/run, make deps).
# needs: test-hooks (ZL_TEST_STEP_MS)
# needs: loopback
# usage: scale_failover.sh BIN ROOT
set -u
PATH="$PATH:/usr/sbin:/sbin"
missing=
for c in nginx redis-server redis-cli python3; do command -v "$c" >/dev/null 2>&1 || missing="$missing $c"; done
if [ -n "$missing" ]; then
  if [ "${ZL_TEST_STRICT:-0}" = 1 ]; then echo "FAIL: missing:$missing (ZL_TEST_STRICT=1: CI installs them)"; exit 1; fi
  echo "SKIPPED: missing:$missing (apt-get install nginx redis-server, or make deps)"
  exit 77
fi
exec python3 "$(dirname "$0")/scale_failover.py" "$1" "$2"
