#!/usr/bin/env bash
# server_controls.sh — per-request verification ring and KV slicing controls of
# `zerolayer serve` (tests/compat/controls.mjs).  usage: server_controls.sh BIN ROOT
set -euo pipefail
BIN=$(cd "$(dirname "$1")" && pwd)/$(basename "$1")
ROOT=$(cd "$2" && pwd)
DIR="$ROOT/tests/compat"
if [ ! -d "$DIR/node_modules/openai" ] || [ ! -d "$DIR/node_modules/@anthropic-ai/sdk" ]; then
    (cd "$DIR" && npm ci --no-audit --no-fund)
fi
cd "$DIR"
exec node controls.mjs "$BIN" "$ROOT/models/stories260K.gguf"
