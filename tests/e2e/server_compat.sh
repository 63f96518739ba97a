#!/usr/bin/env bash
# server_compat.sh — `zerolayer serve` against the official OpenAI and
# Anthropic npm SDKs (tests/compat/run.mjs).  usage: server_compat.sh BIN ROOT
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
exec node run.mjs "$BIN" "$ROOT/models/stories260K.gguf"
