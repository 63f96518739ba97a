#!/usr/bin/env bash
# server_hostile.sh — `zerolayer serve` against hostile clients on 127.0.0.1
# (tenant boundaries of batches and sessions, oversized bodies, slowloris,
# idle timeouts; see server_hostile.py).  usage: server_hostile.sh BIN ROOT
# needs: test-hooks (ZL_TEST_STEP_MS)
# needs: loopback
set -euo pipefail
BIN=$(cd "$(dirname "$1")" && pwd)/$(basename "$1")
ROOT=$(cd "$2" && pwd)
exec timeout 300 python3 "$ROOT/tests/e2e/server_hostile.py" "$BIN" "$ROOT/models/stories260K.gguf"
