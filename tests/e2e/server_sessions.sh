#!/usr/bin/env bash
# server_sessions.sh — sessions, prefix cache and typing-ahead prefill of
# `zerolayer serve` (tests/compat/sessions.mjs).  usage: server_sessions.sh BIN ROOT
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
exec node sessions.mjs "$BIN" "$ROOT/models/stories260K.gguf"
