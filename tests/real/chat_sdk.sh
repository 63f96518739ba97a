#!/usr/bin/env bash
# chat_sdk.sh — chat end to end on a trained model: `zerolayer serve -m MODEL`
# answering the official OpenAI and Anthropic SDKs, both the npm clients
# (tests/compat/chat_real.mjs) and the Python ones (tests/compat/chat_real.py,
# in the venv of tests/compat/pyenv.sh), then the two languages' greedy
# answers compared with each other and across the two APIs.
# usage: chat_sdk.sh ZL_BINARY ROOT MODEL_NAME   (run through need_models.sh)
# Skipped (exit 77) when the SDK clients are not installed (make sdks).
# needs: loopback
# labels: npm python
set -uo pipefail
BIN=$(cd "$(dirname "$1")" && pwd)/$(basename "$1")
ROOT=$(cd "$2" && pwd)
NAME=$3
FILE=$(awk -F'\t' -v n="$NAME" '$1 == n { print $2 }' "$ROOT/tools/models.tsv")
MODEL="${ZL_MODELS:?run through tests/real/need_models.sh}/$FILE"
[ -n "$FILE" ] && [ -f "$MODEL" ] || { echo "FAIL: model $NAME is not at $MODEL"; exit 1; }
COMPAT="$ROOT/tests/compat"
"$COMPAT/need_sdks.sh" node python || exit $?
PY=$("$COMPAT/pyenv.sh" --check) || { echo "FAIL: tests/compat/pyenv.sh --check"; exit 1; }

T=$(mktemp -d)
SRV=
cleanup() { [ -z "$SRV" ] || { kill "$SRV" 2>/dev/null; wait "$SRV" 2>/dev/null; }; rm -rf "$T"; }
trap cleanup EXIT
"$BIN" serve -m "$MODEL" --port 0 -t "${ZL_TEST_THREADS:-2}" --parallel 2 --model-id real 2> "$T/server.log" &
SRV=$!
PORT=
for _ in $(seq 600); do
    PORT=$(sed -n 's|.*listening on http://[^:]*:\([0-9]*\).*|\1|p' "$T/server.log" | head -1)
    [ -n "$PORT" ] && break
    kill -0 "$SRV" 2>/dev/null || break
    sleep 0.2
done
if [ -z "$PORT" ]; then echo "FAIL: the server did not start:"; cat "$T/server.log"; exit 1; fi
URL="http://127.0.0.1:$PORT"
echo "# $NAME: $(head -2 "$T/server.log" | tr '\n' ' ')"

fails=0
# a chat model is never rendered as plain "User: / Assistant:" text
if grep -q 'chat template plain' "$T/server.log"; then echo "FAIL: $NAME is served with the plain template"; fails=$((fails + 1)); fi
node "$COMPAT/chat_real.mjs" "$URL" "$T/node.json" "$NAME" || fails=$((fails + 1))
"$PY" "$COMPAT/chat_real.py" "$URL" "$T/python.json" "$NAME" || fails=$((fails + 1))
# the same greedy request gives the same text whichever SDK or API sent it
python3 - "$T/node.json" "$T/python.json" <<'PY' || fails=$((fails + 1))
import json, sys
node, py = (json.load(open(f, encoding='utf-8')) for f in sys.argv[1:3])
bad = 0
for name in node:
    texts = {('node', k): node[name].get(k) for k in ('openai', 'anthropic')}
    texts.update({('python', k): py.get(name, {}).get(k) for k in ('openai', 'anthropic')})
    if len(set(texts.values())) != 1 or None in texts.values():
        bad += 1
        print('FAIL %s: the greedy answers differ across SDKs / APIs:' % name)
        for k, v in texts.items():
            print('     %s %s: %r' % (k[0], k[1], v))
    else:
        print('ok   %s: node and python, openai and anthropic: the same greedy text' % name)
sys.exit(1 if bad else 0)
PY
if ! kill -0 "$SRV" 2>/dev/null; then echo "FAIL: the server died"; fails=$((fails + 1)); fi
if [ $fails != 0 ]; then echo "--- server log:"; tail -30 "$T/server.log"; fi
echo "chat_sdk $NAME: $((5 - fails)) passed, $fails failed"
[ $fails = 0 ]
