# serve_lib.sh — sourced by the tests/real server scripts: start
# `zerolayer serve` on 127.0.0.1 with a free port and stop it on exit.
#   zl_model_file NAME        path of a tools/models.tsv model in $ZL_MODELS
#   zl_serve_start ARGS...    starts "$BIN serve --port 0 ARGS..."; sets URL, SRV, T (a temp dir)
# Needs BIN and ROOT set by the caller.
zl_model_file() {
    local file
    file=$(awk -F'\t' -v n="$1" '$1 == n { print $2 }' "$ROOT/tools/models.tsv")
    [ -n "$file" ] && [ -f "${ZL_MODELS:?run through tests/real/need_models.sh}/$file" ] || return 1
    echo "$ZL_MODELS/$file"
}

T=$(mktemp -d)
SRV=
zl_serve_cleanup() { [ -z "$SRV" ] || { kill "$SRV" 2>/dev/null; wait "$SRV" 2>/dev/null; }; rm -rf "$T"; }
trap zl_serve_cleanup EXIT

zl_serve_start() {
    : > "$T/server.log" # truncated here: the background redirect may come after the first read below
    "$BIN" serve --port 0 -t "${ZL_TEST_THREADS:-2}" "$@" 2> "$T/server.log" &
    SRV=$!
    local port=
    for _ in $(seq 600); do
        port=$(sed -n 's|.*listening on http://[^:]*:\([0-9]*\).*|\1|p' "$T/server.log" | head -1)
        [ -n "$port" ] && break
        kill -0 "$SRV" 2>/dev/null || break
        sleep 0.2
    done
    if [ -z "$port" ]; then echo "FAIL: the server did not start:"; cat "$T/server.log"; return 1; fi
    URL="http://127.0.0.1:$port"
}
