#!/usr/bin/env bash
# server_jinja.sh — `zerolayer serve --chat-template-file`: the server renders
# chat requests with a Jinja template (src/template), a raise_exception in the
# template is an HTTP 400 in each API's error shape carrying the template's
# message, and bad template options fail at start with one clear line.
# usage: server_jinja.sh BIN ROOT
# needs: loopback
set -euo pipefail
BIN=$(cd "$(dirname "$1")" && pwd)/$(basename "$1")
ROOT=$(cd "$2" && pwd)
MODEL="$ROOT/models/stories260K.gguf"
TPL="$ROOT/tests/fixtures/templates/tpl"
TMP=$(mktemp -d)
PID=
cleanup() { [ -n "$PID" ] && kill "$PID" 2>/dev/null; wait 2>/dev/null || true; rm -rf "$TMP"; }
trap cleanup EXIT
fail() { echo "FAIL: $*" >&2; [ -f "$TMP/log" ] && cat "$TMP/log" >&2; exit 1; }

# options that cannot work are refused before the model loads
if "$BIN" serve -m "$MODEL" --chat-template chatml --chat-template-file "$TPL/gemma3.jinja" 2>"$TMP/e1"; then fail "both options accepted"; fi
grep -q "exclude each other" "$TMP/e1" || fail "no 'exclude each other' in: $(cat "$TMP/e1")"
if "$BIN" serve -m "$MODEL" --port 0 --chat-template-file "$TMP/nope.jinja" 2>"$TMP/e2"; then fail "missing file accepted"; fi
grep -q "cannot open it" "$TMP/e2" || fail "no 'cannot open it' in: $(cat "$TMP/e2")"
printf '{%% for m in messages %%}{{ m.role }' > "$TMP/bad.jinja"
if "$BIN" serve -m "$MODEL" --port 0 --chat-template-file "$TMP/bad.jinja" 2>"$TMP/e3"; then fail "broken template accepted"; fi
grep -q "line 1, column" "$TMP/e3" || fail "no position in: $(cat "$TMP/e3")"

"$BIN" serve -m "$MODEL" --port 0 -t 1 --chat-template-file "$TPL/gemma3.jinja" 2>"$TMP/log" &
PID=$!
PORT=
for _ in $(seq 1 100); do
    PORT=$(sed -n 's#.*listening on http://127.0.0.1:\([0-9]*\).*#\1#p' "$TMP/log")
    [ -n "$PORT" ] && break
    sleep 0.1
done
[ -n "$PORT" ] || fail "server did not start"
grep -q "chat template jinja (.*gemma3.jinja)" "$TMP/log" || fail "start-up line does not name the template"
URL="http://127.0.0.1:$PORT"

code=$(curl -s -o "$TMP/r1" -w '%{http_code}' "$URL/v1/chat/completions" -H 'content-type: application/json' \
    -d '{"messages":[{"role":"user","content":"a"},{"role":"user","content":"b"}],"max_tokens":2}')
[ "$code" = 400 ] || fail "alternation: HTTP $code: $(cat "$TMP/r1")"
grep -q '"message":"messages: chat template: Conversation roles must alternate user/assistant/user/assistant/..."' "$TMP/r1" ||
    fail "OpenAI error body: $(cat "$TMP/r1")"
grep -q '"type":"invalid_request_error"' "$TMP/r1" || fail "OpenAI error type: $(cat "$TMP/r1")"

code=$(curl -s -o "$TMP/r2" -w '%{http_code}' "$URL/v1/messages" -H 'content-type: application/json' \
    -d '{"model":"m","max_tokens":2,"messages":[{"role":"user","content":"a"},{"role":"user","content":"b"}]}')
[ "$code" = 400 ] || fail "anthropic alternation: HTTP $code: $(cat "$TMP/r2")"
grep -q '"type":"error"' "$TMP/r2" && grep -q 'Conversation roles must alternate' "$TMP/r2" ||
    fail "Anthropic error body: $(cat "$TMP/r2")"

code=$(curl -s -o "$TMP/r3" -w '%{http_code}' "$URL/v1/chat/completions" -H 'content-type: application/json' \
    -d '{"messages":[{"role":"system","content":"S"},{"role":"user","content":"Once upon"}],"max_tokens":3,"temperature":0}')
[ "$code" = 200 ] || fail "valid conversation: HTTP $code: $(cat "$TMP/r3")"
grep -q '"completion_tokens":' "$TMP/r3" || fail "no completion: $(cat "$TMP/r3")"
echo "server_jinja: ok"
