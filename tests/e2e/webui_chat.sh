#!/usr/bin/env bash
# webui_chat.sh — the chat page at / in Debian's chromium through playwright-core
# (tests/webui/chat_page.mjs); screenshots in BUILD/webui.  usage: webui_chat.sh BIN ROOT
# Skipped (exit 77) without node, chromium or web/node_modules (make webui);
# a failure under ZL_TEST_STRICT=1.
# needs: loopback
# labels: npm webui
# needs: test-hooks (ZL_TEST_STEP_MS)
set -euo pipefail
BIN=$(cd "$(dirname "$1")" && pwd)/$(basename "$1")
ROOT=$(cd "$2" && pwd)
"$ROOT/tests/compat/need_sdks.sh" webui || exit $?
OUT=$(cd "$(dirname "$BIN")/.." && pwd)/webui
exec node "$ROOT/tests/webui/chat_page.mjs" "$BIN" "$ROOT" "$OUT"
