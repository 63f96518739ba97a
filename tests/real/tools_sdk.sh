#!/usr/bin/env bash
# tools_sdk.sh — tool calling and structured output end to end on a trained
# model: `zerolayer serve -m MODEL` answering the official npm OpenAI and
# Anthropic SDKs (tests/compat/tools_real.mjs) and the Python ones
# (tests/compat/tools_real.py).  On SmolLM2-135M the calls are forced (the
# model is too small to choose a tool); on Qwen2.5-Coder-0.5B tool_choice
# auto is tested too.
# usage: tools_sdk.sh ZL_BINARY ROOT MODEL_NAME   (run through need_models.sh)
# Skipped (exit 77) when the SDK clients are not installed (make sdks).
# needs: loopback
# labels: npm python
set -uo pipefail
BIN=$(cd "$(dirname "$1")" && pwd)/$(basename "$1")
ROOT=$(cd "$2" && pwd)
NAME=$3
. "$ROOT/tests/real/serve_lib.sh"
MODEL=$(zl_model_file "$NAME") || { echo "FAIL: $NAME is not cached"; exit 1; }
COMPAT="$ROOT/tests/compat"
"$COMPAT/need_sdks.sh" node python || exit $?
PY=$("$COMPAT/pyenv.sh" --check) || { echo "FAIL: tests/compat/pyenv.sh --check"; exit 1; }
zl_serve_start -m "$MODEL" --parallel 2 --ctx 2048 --model-id real || exit 1
fails=0
node "$COMPAT/tools_real.mjs" "$URL" forced || fails=$((fails + 1))
"$PY" "$COMPAT/tools_real.py" "$URL" || fails=$((fails + 1))
if [ "$NAME" != smollm2-135m ]; then node "$COMPAT/tools_real.mjs" "$URL" auto || fails=$((fails + 1)); fi
[ $fails = 0 ] && echo PASS
exit $fails
