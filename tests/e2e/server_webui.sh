#!/usr/bin/env bash
# server_webui.sh — GET / of `zerolayer serve` without a browser: the page and
# its headers (a hash-only Content-Security-Policy, nosniff, the gzip form
# equal to the plain one), HEAD, 405 on POST, --no-webui (a 404 in the API's
# error shape, /health and the API unchanged); and the page a build without
# node or web/node_modules embeds (cmake/webui.cmake's fallback, compiled here).
# usage: server_webui.sh BIN ROOT
# needs: loopback
set -uo pipefail
BIN=$(cd "$(dirname "$1")" && pwd)/$(basename "$1")
ROOT=$(cd "$2" && pwd)
. "$ROOT/tests/real/serve_lib.sh"
MODEL="$ROOT/models/stories260K.gguf"
fails=0
fail() { echo "FAIL: $*"; fails=$((fails + 1)); }
stop_server() { kill "$SRV" 2>/dev/null; wait "$SRV" 2>/dev/null; SRV=; }
hdr() { grep -i "^$1:" "$2" | head -1 | cut -d' ' -f2- | tr -d '\r'; }

zl_serve_start -m "$MODEL" -t 1 || exit 1
code=$(curl -s -o "$T/page.html" -D "$T/h" -w '%{http_code}' "$URL/")
[ "$code" = 200 ] || fail "GET /: $code"
case "$(hdr Content-Type "$T/h")" in "text/html; charset=utf-8") ;; *) fail "GET /: Content-Type $(hdr Content-Type "$T/h")" ;; esac
[ "$(hdr X-Content-Type-Options "$T/h")" = nosniff ] || fail "no nosniff"
csp=$(hdr Content-Security-Policy "$T/h")
case "$csp" in *"default-src 'none'"*"frame-ancestors 'none'"*) ;; *) fail "CSP: '$csp'" ;; esac
case "$csp" in *unsafe-inline*|*unsafe-eval*) fail "CSP allows inline script: $csp" ;; esac
if grep -q 'id="composer"' "$T/page.html"; then
    echo "the bundled page ($(wc -c < "$T/page.html") bytes)"
    # the policy names the page's one script and one style by their SHA-256
    python3 - "$T/page.html" "$csp" <<'PY' || fail "the CSP hashes are not the page's script and style"
import base64, hashlib, re, sys
page, csp = open(sys.argv[1], encoding="utf-8").read(), sys.argv[2]
scripts = re.findall(r"<script>(.*?)</script>", page, re.S)
styles = re.findall(r"<style>(.*?)</style>", page, re.S)
h = lambda s: "'sha256-" + base64.b64encode(hashlib.sha256(s.encode()).digest()).decode() + "'"
assert len(scripts) == 1 and len(styles) == 1, (len(scripts), len(styles))
assert "script-src " + h(scripts[0]) + ";" in csp and "style-src " + h(styles[0]) + ";" in csp, csp
PY
    curl -s -H 'Accept-Encoding: gzip' -D "$T/hz" -o "$T/page.gz" "$URL/"
    [ "$(hdr Content-Encoding "$T/hz")" = gzip ] || fail "Accept-Encoding: gzip got no gzip"
    gunzip -c "$T/page.gz" | cmp -s - "$T/page.html" || fail "the gzip form is not the page"
    echo "gzipped: $(wc -c < "$T/page.gz") bytes"
    curl -s -H 'Accept-Encoding: gzip;q=0, deflate' -D "$T/hq" -o /dev/null "$URL/"
    [ -z "$(hdr Content-Encoding "$T/hq")" ] || fail "gzip;q=0 still got gzip"
else
    grep -q 'make webui' "$T/page.html" || fail "neither the page nor the fallback message: $(head -c 300 "$T/page.html")"
    echo "this build embeds the fallback page (no web/node_modules at build time)"
fi
[ "$(curl -s -o /dev/null -w '%{http_code}' -I "$URL/")" = 200 ] || fail "HEAD /"
[ "$(curl -s -o /dev/null -w '%{http_code}' -X POST -H 'content-type: application/json' -d '{}' "$URL/")" = 405 ] || fail "POST / is not a 405"
stop_server

zl_serve_start -m "$MODEL" -t 1 --no-webui || exit 1
body=$(curl -s -w ' %{http_code}' "$URL/")
case "$body" in *'"error"'*'no route for GET /'*' 404') ;; *) fail "--no-webui: GET / answered $body" ;; esac
[ "$(curl -s -o /dev/null -w '%{http_code}' "$URL/health")" = 200 ] || fail "--no-webui: /health"
[ "$(curl -s -o /dev/null -w '%{http_code}' "$URL/v1/models")" = 200 ] || fail "--no-webui: /v1/models"
stop_server

# the fallback: without node, and with node but no web/node_modules; each compiles
mkdir -p "$T/src/web"
for node in "" "$(command -v node || echo /usr/bin/node)"; do
    cmake -DSRC="$T/src" -DOUT="$T/asset.c" -DNODE="$node" -P "$ROOT/cmake/webui.cmake" || fail "webui.cmake (NODE='$node')"
    grep -q 'zl_webui_bundled = 0' "$T/asset.c" && grep -q 'make webui' "$T/asset.c" || fail "fallback page (NODE='$node'): $(cat "$T/asset.c")"
    cc -std=c11 -Wall -Wextra -Werror -c -I"$ROOT/src" "$T/asset.c" -o "$T/asset.o" || fail "the fallback page does not compile"
    rm -f "$T/asset.c"
done
[ "$fails" = 0 ] && echo "ok: GET /, --no-webui, the fallback page" || exit 1
