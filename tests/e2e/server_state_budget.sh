#!/usr/bin/env bash
# server_state_budget.sh — coded idle sessions count their code against
# --session-kv-mb, so more sessions fit (`serve --codec --compress-idle`,
# src/runtime/session.c) on stories260K: eight sessions of ~322 tokens
# (640 bytes a token exact: 1.65 MB) under a 1 MiB budget — without a codec
# the least recently used are evicted (only 5 fit); with a 1/4 codec and
# --compress-idle 0.2 every one is held coded (about a quarter of the bytes)
# and none is evicted; their next turns continue with the re-prefill text.
# usage: server_state_budget.sh BIN ROOT
# needs: loopback
set -uo pipefail
BIN=$(cd "$(dirname "$1")" && pwd)/$(basename "$1")
ROOT=$(cd "$2" && pwd)
. "$ROOT/tests/real/serve_lib.sh"
export ZL_E2E_DIR="$ROOT/tests/e2e" # state_client.py
MODEL="$ROOT/models/stories260K.gguf"
TEXT=/usr/share/common-licenses/GPL-3
[ -f "$TEXT" ] || TEXT="$ROOT/README.md"
"$BIN" codec train -m "$MODEL" -f "$TEXT" --tokens 400 --ratio 1/4 -o "$T/c.zlc" >/dev/null || { echo "FAIL: codec train"; exit 1; }
cat >"$T/fit.py" <<'PY'
import json, sys, time, urllib.request, urllib.error
URL, coded = sys.argv[1], sys.argv[2] == 'coded'
import os; sys.path.insert(0, os.environ['ZL_E2E_DIR']); from state_client import requester
req = requester(URL)
def complete(prompt, token=None):
    st, j = req('/v1/completions', {'prompt': prompt, 'max_tokens': 8, 'temperature': 0}, token)
    assert st == 200, (st, j)
    return j['choices'][0]['text'], j['timings']['cached_tokens']
def metrics():
    m = urllib.request.urlopen(URL + '/metrics').read().decode()
    return {l.split()[0]: float(l.split()[1]) for l in m.splitlines() if l and l[0] != '#'}
P = 'Once upon a time there was a little girl named Lily. She loved to play outside in the sun with her friends.' * 9
ss, texts = [], []
for i in range(8):
    st, s = req('/v1/sessions', {})
    assert st == 200, (st, s)
    texts.append(complete(P + str(i), s['token'])[0])
    ss.append(s)
    time.sleep(0.5)  # idle past --compress-idle before the next one
time.sleep(0.5)
alive, held = [], 0
for s in ss:
    st, info = req('/v1/sessions/' + s['id'], None, s['token'], 'GET')
    if st == 200 and info['cached_tokens'] > 300: alive.append(s); held += info['kv_bytes']
m = metrics()
fails = 0
def check(ok, what):
    global fails
    print(('ok   ' if ok else 'FAIL ') + what)
    fails += not ok
if coded:
    check(len(alive) == 8 and m['zerolayer_sessions_evicted_total'] == 0 and m['zerolayer_sessions_coded'] == 8
          and held < 8 * 322 * 640 / 3,
          'with the codec all 8 sessions stay, coded: %d bytes held (%d alive, %d evicted)'
          % (held, len(alive), m['zerolayer_sessions_evicted_total']))
    i = ss.index(alive[0]) if alive else 0
    t2, cached = complete(P + str(i) + texts[i] + ' Then', ss[i]['token'])
    ref, _ = complete(P + str(i) + texts[i] + ' Then')
    check(cached > 300 and len(t2) > 0, 'a coded session continues from its cache (%d cached): %r (re-prefill %r)'
          % (cached, t2, ref))
else:
    check(len(alive) < 8 and m['zerolayer_sessions_evicted_total'] >= 1,
          'without a codec the budget holds %d of 8 (%d evicted)' % (len(alive), m['zerolayer_sessions_evicted_total']))
sys.exit(1 if fails else 0)
PY
fails=0
zl_serve_start -m "$MODEL" --ctx 512 --session-kv-mb 1 || exit 1
python3 "$T/fit.py" "$URL" exact || fails=$((fails + 1))
kill "$SRV"; wait "$SRV" 2>/dev/null; SRV=
zl_serve_start -m "$MODEL" --ctx 512 --session-kv-mb 1 --codec "$T/c.zlc" --compress-idle 0.2 || exit 1
python3 "$T/fit.py" "$URL" coded || fails=$((fails + 1))
[ "$fails" = 0 ] || { echo "FAIL: $fails part(s)"; exit 1; }
echo "server_state_budget: all checks passed"
