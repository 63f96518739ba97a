#!/usr/bin/env bash
# server_sessions.sh — sessions, prefix cache and typing-ahead prefill of
# `zerolayer serve` (tests/compat/sessions.mjs).  usage: server_sessions.sh BIN ROOT
set -euo pipefail
BIN=$(cd "$(dirname "$1")" && pwd)/$(basename "$1")
ROOT=$(cd "$2" && pwd)
DIR="$ROOT/tests/compat"
if [ ! -d "$DIR/node_modules/openai" ] || [ ! -d "$DIR/node_modules/@anthropic-ai/sdk" ]; then
    (cd "$DIR" && npm ci --no-audit --no-fund)
fi
cd "$DIR"
exec node sessions.mjs "$BIN" "$ROOT/models/stories260K.gguf"
