#!/usr/bin/env bash
# server_cors.sh — the body policy and CORS over real HTTP: without --cors a
# POST whose body is not application/json (text/plain, a form: what a web
# page may send cross-site without a preflight) is a 415 in each API's error
# shape and no reply carries Access-Control-*; preflights are then ordinary
# OPTIONS requests (405 with Allow).  With --cors ORIGIN (repeatable, or *)
# a preflight from a listed origin is 204 with Access-Control-Allow-* before
# any key check, replies to that origin carry Access-Control-Allow-Origin,
# other origins get nothing, and the JSON-only rule still holds.
# usage: server_cors.sh BIN ROOT
# needs: loopback
set -euo pipefail
BIN=$(cd "$(dirname "$1")" && pwd)/$(basename "$1")
ROOT=$(cd "$2" && pwd)
MODEL="$ROOT/models/stories260K.gguf"
source "$ROOT/tests/real/serve_lib.sh" # zl_serve_start: URL, SRV, T
TMP="$T"
fail() { echo "FAIL: $*" >&2; cat "$T/server.log" >&2; exit 1; }
command -v curl >/dev/null || { echo "SKIP: no curl"; exit 77; }
start() { # start ARGS...: a fresh server (the previous one stopped)
    [ -z "$SRV" ] || { kill "$SRV"; wait "$SRV" 2>/dev/null || true; SRV=; }
    zl_serve_start -m "$MODEL" -t 1 "$@" || exit 1
}
# call NAME ARGS...: curl into $TMP/NAME.h (headers) and $TMP/NAME.b (body); prints the status
call() { local n=$1; shift; curl -s -D "$TMP/$n.h" -o "$TMP/$n.b" -w '%{http_code}' "$@"; }
hdr() { grep -i "^$2:" "$TMP/$1.h" | head -1 | cut -d' ' -f2- | tr -d '\r'; }
CHAT='{"messages":[{"role":"user","content":"Once"}],"max_tokens":2,"temperature":0}'
MSG='{"model":"m","max_tokens":2,"messages":[{"role":"user","content":"Once"}]}'

start
# 1. JSON only: text/plain and forms are 415, in each API's shape, before any generation
c=$(call p1 "$URL/v1/chat/completions" -H 'Content-Type: text/plain' -d "$CHAT")
[ "$c" = 415 ] || fail "text/plain chat: HTTP $c $(cat "$TMP/p1.b")"
grep -q '"code":"unsupported_media_type"' "$TMP/p1.b" && grep -q 'Content-Type: expected application/json' "$TMP/p1.b" ||
    fail "OpenAI 415 body: $(cat "$TMP/p1.b")"
c=$(call p2 "$URL/v1/chat/completions" -d "$CHAT") # curl's default: a form
[ "$c" = 415 ] || fail "form chat: HTTP $c"
c=$(call p3 "$URL/v1/messages" -H 'Content-Type: text/plain;charset=UTF-8' -d "$MSG")
[ "$c" = 415 ] || fail "text/plain messages: HTTP $c"
grep -q '"type":"error"' "$TMP/p3.b" && grep -q '"type":"invalid_request_error"' "$TMP/p3.b" ||
    fail "Anthropic 415 body: $(cat "$TMP/p3.b")"
c=$(call p4 "$URL/v1/completions" -F "prompt=Once")
[ "$c" = 415 ] || fail "multipart completions: HTTP $c"
n=$(curl -s "$URL/metrics" | sed -n 's/^zerolayer_generated_tokens_total \([0-9]*\).*/\1/p')
[ "${n:-0}" = 0 ] || fail "a refused body generated $n tokens"
c=$(call ok1 "$URL/v1/chat/completions" -H 'Content-Type: application/json; charset=utf-8' -d "$CHAT")
[ "$c" = 200 ] || fail "JSON chat: HTTP $c $(cat "$TMP/ok1.b")"
# 2. no CORS by default: a preflight is an OPTIONS like any other, nothing grants an origin
c=$(call o1 -X OPTIONS "$URL/v1/chat/completions" -H 'Origin: https://app.example' -H 'Access-Control-Request-Method: POST')
[ "$c" = 405 ] || fail "preflight without --cors: HTTP $c"
[ "$(hdr o1 Allow)" = "POST" ] || fail "405 Allow: '$(hdr o1 Allow)'"
c=$(call g1 "$URL/health" -H 'Origin: https://app.example')
[ "$c" = 200 ] && ! grep -qi '^access-control' "$TMP/g1.h" || fail "Access-Control-* without --cors: $(cat "$TMP/g1.h")"
c=$(call m1 "$URL/v1/messages/batches" -X DELETE)
[ "$c" = 405 ] && [ "$(hdr m1 Allow)" = "GET, HEAD, POST" ] || fail "DELETE batches: HTTP $c Allow '$(hdr m1 Allow)'"

# 3. --cors with keys
start --api-key K1 --cors https://app.example --cors http://localhost:3000
c=$(call o2 -X OPTIONS "$URL/v1/chat/completions" -H 'Origin: https://app.example' \
    -H 'Access-Control-Request-Method: POST' -H 'Access-Control-Request-Headers: authorization, content-type')
[ "$c" = 204 ] || fail "preflight: HTTP $c $(cat "$TMP/o2.b")"
[ "$(hdr o2 Access-Control-Allow-Origin)" = "https://app.example" ] || fail "preflight origin: $(cat "$TMP/o2.h")"
[ "$(hdr o2 Access-Control-Allow-Methods)" = "POST, OPTIONS" ] || fail "preflight methods: $(cat "$TMP/o2.h")"
[ "$(hdr o2 Access-Control-Allow-Headers)" = "authorization, content-type" ] || fail "preflight headers: $(cat "$TMP/o2.h")"
[ "$(hdr o2 Vary)" = "Origin" ] || fail "preflight Vary: $(cat "$TMP/o2.h")"
c=$(call o3 -X OPTIONS "$URL/v1/chat/completions" -H 'Origin: https://evil.example' -H 'Access-Control-Request-Method: POST')
[ "$c" = 401 ] && ! grep -qi '^access-control' "$TMP/o3.h" || fail "unlisted origin: HTTP $c $(cat "$TMP/o3.h")"
c=$(call a1 "$URL/v1/chat/completions" -H 'Origin: http://localhost:3000' -H 'Authorization: Bearer K1' \
    -H 'Content-Type: application/json' -d "$CHAT")
[ "$c" = 200 ] && [ "$(hdr a1 Access-Control-Allow-Origin)" = "http://localhost:3000" ] ||
    fail "allowed origin: HTTP $c $(cat "$TMP/a1.h")"
c=$(call a2 "$URL/v1/chat/completions" -H 'Origin: https://app.example' -H 'Authorization: Bearer K1' \
    -H 'Content-Type: text/plain' -d "$CHAT")
[ "$c" = 415 ] && [ "$(hdr a2 Access-Control-Allow-Origin)" = "https://app.example" ] ||
    fail "text/plain from an allowed origin: HTTP $c $(cat "$TMP/a2.h")"
c=$(call a3 "$URL/v1/models" -H 'Origin: https://app.example')
[ "$c" = 401 ] && [ "$(hdr a3 Access-Control-Allow-Origin)" = "https://app.example" ] ||
    fail "401 to an allowed origin: HTTP $c $(cat "$TMP/a3.h")"
c=$(call s1 -N "$URL/v1/messages" -H 'Origin: https://app.example' -H 'x-api-key: K1' \
    -H 'Content-Type: application/json' -d '{"model":"m","max_tokens":2,"stream":true,"messages":[{"role":"user","content":"Once"}]}')
[ "$c" = 200 ] && [ "$(hdr s1 Access-Control-Allow-Origin)" = "https://app.example" ] && grep -q message_stop "$TMP/s1.b" ||
    fail "stream to an allowed origin: HTTP $c $(cat "$TMP/s1.h")"

# 4. --cors '*'
start --cors '*'
c=$(call o4 -X OPTIONS "$URL/v1/messages" -H 'Origin: https://any.example' -H 'Access-Control-Request-Method: POST')
[ "$c" = 204 ] && [ "$(hdr o4 Access-Control-Allow-Origin)" = "*" ] || fail "--cors '*': HTTP $c $(cat "$TMP/o4.h")"
c=$(call o5 -X OPTIONS "$URL/v1/nope" -H 'Origin: https://any.example' -H 'Access-Control-Request-Method: POST')
[ "$c" = 404 ] || fail "preflight of an unknown path: HTTP $c"
echo "server_cors: ok"
