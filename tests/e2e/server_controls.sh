#!/usr/bin/env bash
# server_controls.sh — per-request verification ring and KV slicing controls of
# `zerolayer serve` (tests/compat/controls.mjs).  usage: server_controls.sh BIN ROOT
# Skipped (exit 77) when the npm clients are not installed (make sdks).
# needs: loopback
# labels: npm
# needs: test-hooks (ZL_TEST_STEP_MS)
set -euo pipefail
BIN=$(cd "$(dirname "$1")" && pwd)/$(basename "$1")
ROOT=$(cd "$2" && pwd)
DIR="$ROOT/tests/compat"
"$DIR/need_sdks.sh" node || exit $?
cd "$DIR"
exec node controls.mjs "$BIN" "$ROOT/models/stories260K.gguf"
