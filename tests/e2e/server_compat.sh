#!/usr/bin/env bash
# server_compat.sh — `zerolayer serve` against the official OpenAI and
# Anthropic npm SDKs (tests/compat/run.mjs).  usage: server_compat.sh BIN ROOT
# Installs the pinned SDKs with `npm ci` only when node_modules is missing
# (CI runs `npm ci` in tests/compat beforehand).
set -euo pipefail
BIN=$(cd "$(dirname "$1")" && pwd)/$(basename "$1")
ROOT=$(cd "$2" && pwd)
DIR="$ROOT/tests/compat"
if [ ! -d "$DIR/node_modules/openai" ] || [ ! -d "$DIR/node_modules/@anthropic-ai/sdk" ]; then
    (cd "$DIR" && npm ci --no-audit --no-fund)
fi
cd "$DIR"
exec node run.mjs "$BIN" "$ROOT/models/stories260K.gguf"
