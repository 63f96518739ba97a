#!/usr/bin/env bash
# server_state_dir.sh — sessions that survive a restart (`serve --state-dir`,
# the directory state store: src/server/state_store.c, src/runtime/store_dir.c)
# on stories260K:
#   - at shutdown each live session is sealed into its record
#     DIR/zerolayer:session:<model>:<tenant>:<id>.zls (<model>: 16 hex digits of its fingerprint; a deleted one
#     has none); a restart with the same --state-key-file and
#     --session-secret-file restores it: the old token works, it holds the same
#     tokens, and its next turn is the greedy text of re-prefilling;
#   - kill -9 in the middle of a write (ZL_STATE_WRITE_PAUSE_MS holds the
#     write halfway) leaves the previous file whole: the next start removes
#     the partial temporary file and restores the previous state;
#   - a wrong key or a damaged file is reported and skipped, never loaded;
#     the server still starts;
#   - --state-dir without --state-key-file is a one-line error;
#   - a full disk (a 64 KiB tmpfs, when this user may mount one) is a clear
#     error line and leaves no partial file behind;
#   - past --session-kv-mb the LRU idle session is spilled to its record in
#     DIR, not evicted, and its next turn brings it back with the re-prefill
#     text; the record stays (the session as last written); with --codec and
#     writes only at shutdown (--store-idle 0) idle sessions are still held
#     coded, and coded ones spill as learned codes.
# usage: server_state_dir.sh BIN ROOT
# needs: loopback
set -uo pipefail
BIN=$(cd "$(dirname "$1")" && pwd)/$(basename "$1")
ROOT=$(cd "$2" && pwd)
. "$ROOT/tests/real/serve_lib.sh"
export ZL_E2E_DIR="$ROOT/tests/e2e" # state_client.py
MODEL="$ROOT/models/stories260K.gguf"
D="$T/state"
head -c 48 /dev/urandom >"$T/key"; head -c 48 /dev/urandom >"$T/key2"; head -c 32 /dev/urandom >"$T/secret"
fails=0
check() { if [ "$1" = 0 ]; then echo "ok   $2"; else echo "FAIL $2"; fails=$((fails + 1)); fi; }
stop() { kill -TERM "$SRV" 2>/dev/null; wait "$SRV" 2>/dev/null; SRV=; }
start() { zl_serve_start -m "$MODEL" --ctx 512 --state-key-file "${KEY:-$T/key}" --session-secret-file "$T/secret" --state-dir "$D" "$@"; }
py() { python3 - "$URL" "$T" "$D" "$@"; }
cat >"$T/lib.py" <<'PY'
import json, sys, urllib.request, urllib.error
URL, T, D = sys.argv[1], sys.argv[2], sys.argv[3]
import os; sys.path.insert(0, os.environ['ZL_E2E_DIR']); from state_client import requester
req = requester(URL)
def complete(prompt, token=None):
    st, j = req('/v1/completions', {'prompt': prompt, 'max_tokens': 16, 'temperature': 0}, token)
    assert st == 200, (st, j)
    global last_timings
    last_timings = j['timings']
    return j['choices'][0]['text'], j['timings']['cached_tokens']
P1, P2 = 'Once upon a time', ' One day, she went to the park'
P = (P1 + ' there was a little girl named Lily. She loved to play outside in the sun with her friends.') * 11
def record(sid):  # the session's file in the store, or None
    import os
    fs = [f for f in os.listdir(D) if f.startswith('zerolayer:session:') and f.endswith(':' + sid + '.zls')]
    return fs[0] if fs else None
def spilled(s):  # live, its tokens counted, none of them in memory
    st, info = req('/v1/sessions/' + s['id'], None, s['token'], 'GET')
    return st == 200 and info['cached_tokens'] > 0 and info['kv_bytes'] == 0
def metric(name):
    import re
    m = re.search(r'^%s (\S+)$' % name, urllib.request.urlopen(URL + '/metrics').read().decode(), re.M)
    return float(m.group(1))
PY

start || exit 1
py <<'PY'
import sys; exec(open(sys.argv[2] + '/lib.py').read())
st, s = req('/v1/sessions', {})
t1, _ = complete(P1, s['token'])
st, gone = req('/v1/sessions', {})
req('/v1/sessions/' + gone['id'], None, gone['token'], 'DELETE')
st, info = req('/v1/sessions/' + s['id'], None, s['token'], 'GET')
json.dump({'s': s, 't1': t1, 'n': info['cached_tokens']}, open(T + '/s.json', 'w'))
PY
stop
grep -q "saved 1 of 1 sessions" "$T/server.log"; check $? "shutdown saves the live session: $(grep state-dir "$T/server.log")"
[ "$(ls "$D" | wc -l)" = 1 ] && ls "$D"/*.zls >/dev/null; check $? "one file, the deleted session has none: $(ls "$D")"
SUM1=$(sha256sum "$D"/*.zls | cut -d' ' -f1)

ZL_STATE_WRITE_PAUSE_MS=4000 start || exit 1
grep -q "restored 1 sessions" "$T/server.log"; check $? "restart restores it: $(grep state-dir "$T/server.log")"
py <<'PY'
import sys; exec(open(sys.argv[2] + '/lib.py').read())
d = json.load(open(T + '/s.json')); s = d['s']
st, info = req('/v1/sessions/' + s['id'], None, s['token'], 'GET')
ok = st == 200 and info['cached_tokens'] == d['n']
print(('ok   ' if ok else 'FAIL ') + 'the old token works and the session holds its %d tokens (%s)' % (d['n'], info))
t2, cached = complete(P1 + d['t1'] + P2, s['token'])
ref, _ = complete(P1 + d['t1'] + P2)
ok2 = t2 == ref and cached >= d['n'] - 1
print(('ok   ' if ok2 else 'FAIL ') + 'its next turn is the re-prefill greedy text (%d cached): %r' % (cached, t2))
sys.exit(0 if ok and ok2 else 1)
PY
check $? "restored session continues"
# kill -9 halfway through the next save: the previous file must survive
kill -TERM "$SRV"
for _ in $(seq 100); do ls "$D"/.*.tmp >/dev/null 2>&1 && break; sleep 0.05; done
ls "$D"/.*.tmp >/dev/null 2>&1; check $? "a save is in progress (temporary file)"
kill -9 "$SRV"; wait "$SRV" 2>/dev/null; SRV=
[ "$(sha256sum "$D"/*.zls | cut -d' ' -f1)" = "$SUM1" ]; check $? "after kill -9 mid-write the previous file is intact"

start || exit 1
grep -q "restored 1 sessions" "$T/server.log" && ! ls "$D"/.*.tmp >/dev/null 2>&1; check $? "the next start drops the partial file and restores the previous state"
py <<'PY'
import sys; exec(open(sys.argv[2] + '/lib.py').read())
d = json.load(open(T + '/s.json')); s = d['s']
st, info = req('/v1/sessions/' + s['id'], None, s['token'], 'GET')
t2, cached = complete(P1 + d['t1'] + P2, s['token'])
ref, _ = complete(P1 + d['t1'] + P2)
sys.exit(0 if st == 200 and info['cached_tokens'] == d['n'] and t2 == ref else 1)
PY
check $? "and it continues exactly from the previous state"
stop
# wrong key, damaged file
PRE=$(ls "$D" | head -1 | cut -d: -f1-3) # zerolayer:session:<model>: the files this model reads
printf 'ZLSESS1\ngarbage' >"$D/$PRE:zs_broken.zls"
KEY="$T/key2" start || exit 1
grep -q "zs_broken.zls not restored: not a session file" "$T/server.log" && grep -q "not restored: invalid_state" "$T/server.log" &&
  grep -q "restored 0 sessions" "$T/server.log"; check $? "a wrong key and a damaged file are skipped: $(grep 'not restored' "$T/server.log" | head -2)"
py <<'PY'
import sys; exec(open(sys.argv[2] + '/lib.py').read())
d = json.load(open(T + '/s.json'))
st, j = req('/v1/sessions/' + d['s']['id'], None, d['s']['token'], 'GET')
sys.exit(0 if st == 404 else 1)
PY
check $? "nothing was loaded (404)"
kill -9 "$SRV"; wait "$SRV" 2>/dev/null; SRV=
"$BIN" serve -m "$MODEL" --port 0 --state-dir "$D" 2>"$T/nokey.err" >/dev/null
[ $? != 0 ] && grep -q "^zerolayer: .*--state-dir needs --state-key-file" "$T/nokey.err"; check $? "--state-dir without a key: $(cat "$T/nokey.err")"
# a full disk
mkdir -p "$T/full"
if mount -t tmpfs -o size=64k tmpfs "$T/full" 2>/dev/null; then
  D="$T/full" start || exit 1
  py <<'PY'
import sys; exec(open(sys.argv[2] + '/lib.py').read())
st, s = req('/v1/sessions', {})
complete(P1 * 40, s['token'])
PY
  stop
  # the session was written empty when it was created (fits); the full write fails and leaves no partial file
  grep -q "writing .* failed: No space left on device" "$T/server.log" && ! ls -A "$T/full" | grep -q '\.tmp$'; check $? "a full disk: $(grep 'failed' "$T/server.log"), no partial file: $(ls -A "$T/full")"
  umount "$T/full"
else
  echo "SKIP full disk: cannot mount a tmpfs here"
fi
# over --session-kv-mb with --state-dir: the LRU idle session is spilled to its record (not evicted) and its next
# turn brings it back: the same greedy text as re-prefilling, its tokens reused, the record kept
D="$T/spill"
start --session-kv-mb 1 || exit 1
py <<'PY'
import sys, time, os; exec(open(sys.argv[2] + '/lib.py').read())
ss, texts = [], []
for i in range(5):  # ~400 tokens of 640 bytes each: the fourth goes over 1 MB
    st, s = req('/v1/sessions', {}); ss.append(s)
    texts.append(complete(P, s['token'])[0])
for _ in range(100):
    if metric('zerolayer_sessions_spilled') >= 1: break
    time.sleep(0.1)
a = ss[0]
ok = metric('zerolayer_sessions_spilled') >= 1 and metric('zerolayer_sessions_evicted_total') == 0 and spilled(a)
ok = ok and record(a['id']) is not None
print(('ok   ' if ok else 'FAIL ') + 'over the budget the LRU session is spilled to %s, none evicted' % record(a['id']))
st, info = req('/v1/sessions/' + a['id'], None, a['token'], 'GET')
ok2 = st == 200 and info['cached_tokens'] > 0
print(('ok   ' if ok2 else 'FAIL ') + 'the spilled session is still there (%d, %s)' % (st, info))
t2, cached = complete(P + texts[0] + P2, a['token'])
ts = last_timings.get('state', {})
ref, _ = complete(P + texts[0] + P2)
ok3 = t2 == ref and cached >= info['cached_tokens'] - 1 and metric('zerolayer_sessions_unspilled_total') >= 1
ok3 = ok3 and ts.get('from') == 'spill' and ts.get('rebuilt') is True and ts.get('tokens') == info['cached_tokens'] \
    and ts.get('bytes', 0) > ts.get('exact_bytes', 0) > 0 and ts.get('decode_ms', 0) > 0
print(('ok   ' if ok3 else 'FAIL ') + 'its next turn brings it back: re-prefill greedy text, %d tokens reused: %r; timings %s' % (cached, t2, ts))
ok4 = record(a['id']) is not None
print(('ok   ' if ok4 else 'FAIL ') + 'its record stays once it is back (the session as last written)')
sys.exit(0 if ok and ok2 and ok3 and ok4 else 1)
PY
check $? "spill past --session-kv-mb and back"
stop
# the same with --codec: spilled records are learned codes; idle sessions are held coded first (--compress-idle)
# even though they are written only at shutdown (--store-idle 0), and coded ones spill as they are
TEXT=/usr/share/common-licenses/GPL-3
[ -f "$TEXT" ] || TEXT="$ROOT/README.md"
"$BIN" codec train -m "$MODEL" -f "$TEXT" --tokens 400 --ratio 1/2 -o "$T/c.zlc" >/dev/null || { echo "FAIL: codec train"; exit 1; }
D="$T/spill2"
start --session-kv-mb 1 --codec "$T/c.zlc" --compress-idle 0.3 --store-idle 0 || exit 1
py <<'PY'
import sys, time, os; exec(open(sys.argv[2] + '/lib.py').read())
ss, texts = [], []
for i in range(10):  # coded at 1/2 a session still holds ~130 KB: ten go over 1 MB
    st, s = req('/v1/sessions', {}); ss.append(s)
    texts.append(complete(P, s['token'])[0])
    time.sleep(0.5)  # past --compress-idle: the idle ones are coded before the budget is reached
for _ in range(100):
    if metric('zerolayer_sessions_spilled') >= 1: break
    time.sleep(0.1)
out = [s for s in ss if spilled(s)]
coded = metric('zerolayer_sessions_coded_total')
ok = len(out) >= 1 and coded >= 1 and all(record(s['id']) for s in out)
ok = ok and metric('zerolayer_sessions_evicted_total') == 0 and metric('zerolayer_sessions_spill_failed_total') == 0
print(('ok   ' if ok else 'FAIL ') + '%d sessions spilled (learned codes), %d coded in memory first, none evicted' %
      (len(out), coded))
a = out[0] if out else ss[0]
i = ss.index(a)
t2, cached = complete(P + texts[i] + P2, a['token'])
ref, _ = complete(P + texts[i] + P2)
ok2 = cached >= 390 and metric('zerolayer_sessions_unspilled_total') >= 1
print(('ok   ' if ok2 else 'FAIL ') + 'a spilled learned session is brought back, %d tokens reused (re-prefill text %s)' %
      (cached, 'equal' if t2 == ref else 'differs: %r vs %r' % (t2, ref)))
sys.exit(0 if ok and ok2 else 1)
PY
check $? "spill with --codec and back"
stop
echo "fails: $fails"
[ $fails = 0 ]
