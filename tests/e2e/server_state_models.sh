#!/usr/bin/env bash
# server_state_models.sh — state per model when one server serves several
# (`serve -m A -m B`, src/server/models.c, src/server/state_store.c), on
# stories260K (a) and its F16 copy (b: another fingerprint):
#   - --codec repeats and each file goes to the model whose fingerprint it
#     names, whatever the order; a file fitted on no served model and a second
#     file for one model stop the start with a one-line error;
#   - POST /v1/sessions {"model": "b"} makes a session on b; its turns, GET and
#     snapshots go to b without naming it; a turn naming the other model is a
#     409 model_mismatch; each model's learned snapshot is coded with its own
#     codec;
#   - b's snapshot restored with "model": "a" is a 409 model_mismatch; into b
#     it continues with the greedy text of re-prefilling on b;
#   - --state-dir: each model's sessions are written under its own fingerprint
#     (DIR/zerolayer:session:<model>:...), the first model's restored at start,
#     b's when b loads again (after a restart, on the first request naming b),
#     continuing with the re-prefill text; a record of b put under a's key is
#     refused (model_mismatch), never loaded into a.
# usage: server_state_models.sh BIN ROOT
# needs: loopback
set -uo pipefail
BIN=$(cd "$(dirname "$1")" && pwd)/$(basename "$1")
ROOT=$(cd "$2" && pwd)
. "$ROOT/tests/real/serve_lib.sh"
export ZL_E2E_DIR="$ROOT/tests/e2e" # state_client.py
A="$ROOT/models/stories260K.gguf"
B="$ROOT/tests/fixtures/models/stories260K-F16.gguf"
TEXT=/usr/share/common-licenses/GPL-3
[ -f "$TEXT" ] || TEXT="$ROOT/README.md"
D="$T/state"
head -c 48 /dev/urandom >"$T/key"; head -c 32 /dev/urandom >"$T/secret"
fails=0
check() { if [ "$1" = 0 ]; then echo "ok   $2"; else echo "FAIL $2"; fails=$((fails + 1)); fi; }
stop() { kill -TERM "$SRV" 2>/dev/null; wait "$SRV" 2>/dev/null; SRV=; }
for m in a b; do
    f=$A; [ $m = b ] && f=$B
    "$BIN" codec train -m "$f" -f "$TEXT" --tokens 400 --ratio 1/4 -o "$T/$m.zlc" >/dev/null || { echo "FAIL: codec train $m"; exit 1; }
done
"$BIN" codec train -m "$A" -f "$TEXT" --tokens 400 --ratio 1/8 -o "$T/a8.zlc" >/dev/null || { echo "FAIL: codec train a8"; exit 1; }

# start-up errors
"$BIN" serve --port 0 -m "$A" --alias a -m "$A" --alias a2 --codec "$T/b.zlc" 2>"$T/e1" >/dev/null
[ $? != 0 ] && grep -q "^zerolayer: --codec $T/b.zlc: model_mismatch: it was fitted on the model with fingerprint [0-9a-f]\{16\}\.\.\., none of the 2 models served" "$T/e1"
check $? "a codec of no served model stops the start: $(tail -1 "$T/e1")"
"$BIN" serve --port 0 -m "$A" --alias a -m "$B" --alias b --codec "$T/a.zlc" --codec "$T/a8.zlc" 2>"$T/e2" >/dev/null
[ $? != 0 ] && grep -q "^zerolayer: --codec $T/a8.zlc: model 'a' has a codec already ($T/a.zlc)" "$T/e2"
check $? "two codecs for one model stop the start: $(tail -1 "$T/e2")"
"$BIN" serve --port 0 -m "$A" --codec "$T/a.zlc" --codec "$T/a8.zlc" 2>"$T/e3" >/dev/null
[ $? != 0 ] && grep -q "^zerolayer: --codec: 2 files but one model is served" "$T/e3"
check $? "two codecs for one served model: $(tail -1 "$T/e3")"

start() {
    zl_serve_start -m "$A" --alias a -m "$B" --alias b --codec "$T/b.zlc" --codec "$T/a.zlc" --ctx 512 \
        --state-key-file "$T/key" --session-secret-file "$T/secret" --state-dir "$D" --store-idle 0
}
cat >"$T/lib.py" <<'PY'
import json, os, sys, urllib.request, urllib.error
URL, T, D = sys.argv[1], sys.argv[2], sys.argv[3]
fails = 0
def check(ok, what):
    global fails
    print(('ok   ' if ok else 'FAIL ') + what)
    fails += not ok
import os; sys.path.insert(0, os.environ['ZL_E2E_DIR']); from state_client import requester
req = requester(URL)
def complete(prompt, token=None, model=None):
    b = {'prompt': prompt, 'max_tokens': 16, 'temperature': 0}
    if model: b['model'] = model
    return req('/v1/completions', b, token)
def text(j): return j['choices'][0]['text']
def reason(j): return j.get('error', {}).get('code') or j.get('error', {}).get('type')
P1, P2 = 'Once upon a time', ' One day, she went to the park'
PY
py() { python3 - "$URL" "$T" "$D" "$@"; }

start || exit 1
grep -q -- "--codec $T/b.zlc: model 'b'" "$T/server.log" && grep -q -- "--codec $T/a.zlc: model 'a'" "$T/server.log"
check $? "each codec goes to its model: $(grep -- '--codec' "$T/server.log" | tr '\n' ' ')"
py <<'PY'
import sys; exec(open(sys.argv[2] + '/lib.py').read())
st, sa = req('/v1/sessions', {})
st2, sb = req('/v1/sessions', {'model': 'b'})
check(st == 200 and st2 == 200, 'a session on a (no model) and one on b: %d %d' % (st, st2))
st, ja = complete(P1, sa['token'])
st2, jb = complete(P1, sb['token'])
check(st == 200 and st2 == 200 and ja['model'] == 'a' and jb['model'] == 'b',
      "each session's turn runs on its model without naming it: %s %s" % (ja.get('model'), jb.get('model')))
st, e = complete(P1, sb['token'], 'a')
check(st == 409 and reason(e) == 'model_mismatch', "b's session named with model a: %d %s" % (st, e))
st, info = req('/v1/sessions/' + sb['id'], None, sb['token'], 'GET')
check(st == 200 and info['cached_tokens'] > 0, "GET b's session finds it on b: %d %s" % (st, info))
snaps = {}
for name, s in (('a', sa), ('b', sb)):
    st, snap = req('/v1/sessions/%s/snapshot' % s['id'], {}, s['token'])
    check(st == 200 and snap['codec'] == 'learned' and snap['model'] == name,
          "model %s's snapshot is learned with its own codec: %d %s/%s" % (name, st, snap.get('codec'), snap.get('model')))
    snaps[name] = snap
st, ex = req('/v1/sessions/%s/snapshot' % sb['id'], {'codec': 'exact'}, sb['token'])
check(st == 200 and ex['model'] == 'b', 'an exact snapshot of b: %d' % st)
for what, blob in (('learned', snaps['b']['state']), ('exact', ex['state'])):
    st, e = req('/v1/sessions', {'state': blob, 'model': 'a'})
    check(st == 409 and reason(e) == 'model_mismatch', "b's %s snapshot into model a: %d %s" % (what, st, e))
st, e = req('/v1/sessions', {'state': snaps['a']['state'], 'model': 'b'})
check(st == 409 and reason(e) == 'model_mismatch', "a's snapshot into model b: %d %s" % (st, e))
st, r = req('/v1/sessions', {'state': ex['state'], 'model': 'b'})
check(st == 200 and r['tokens'] == ex['tokens'], "b's exact snapshot into b: %d %s" % (st, r))
cont = P1 + text(jb) + P2
st, j1 = complete(cont, r['token'])
st2, ref = complete(cont, None, 'b')
check(st == 200 and j1['model'] == 'b' and text(j1) == text(ref) and j1['timings']['cached_tokens'] > 0,
      'the restored session continues on b with the re-prefill text (%s cached): %r' % (
          j1.get('timings', {}).get('cached_tokens'), text(j1)))
def metrics(q=''):
    try:
        with urllib.request.urlopen(URL + '/metrics' + q, timeout=60) as f:
            return f.status, {l.split()[0]: float(l.split()[1]) for l in f.read().decode().splitlines()
                              if l and not l.startswith('#')}
    except urllib.error.HTTPError as e: return e.code, json.load(e)
st, ma = metrics()
st2, mb = metrics('?model=b')
check(st == 200 and st2 == 200 and ma['zerolayer_sessions_active'] == 1 and mb['zerolayer_sessions_active'] == 2,
      "/metrics counts the first model's sessions, ?model=b b's: %s %s" % (
          ma.get('zerolayer_sessions_active'), mb.get('zerolayer_sessions_active')))
st, e = metrics('?model=nope')
check(st == 404 and e['error']['param'] == 'model', '/metrics?model=nope: %d %s' % (st, e))
st, j2 = complete(P1 + text(jb) + P2, sb['token'])
json.dump({'sa': sa, 'sb': sb, 'ta': text(ja), 'tb': text(jb), 'tb2': text(j2), 'nb': j2['usage']['prompt_tokens']},
          open(T + '/s.json', 'w'))
sys.exit(1 if fails else 0)
PY
check $? "sessions, snapshots and restores per model"
stop
grep -q "saved 1 of 1 sessions .*model 'a'" "$T/server.log" && grep -q "saved 2 of 2 sessions .*model 'b'" "$T/server.log"
check $? "shutdown writes each model's sessions: $(grep 'saved' "$T/server.log" | tr '\n' ' ')"
PRES=$(ls "$D" | cut -d: -f1-3 | sort -u)
[ "$(echo "$PRES" | wc -l)" = 2 ] && [ "$(ls "$D" | wc -l)" = 3 ]; check $? "records under two model prefixes: $(ls "$D" | cut -c1-40 | tr '\n' ' ')"
# b's record of session sb, put under a's key: a must refuse it
SB=$(python3 -c "import json; print(json.load(open('$T/s.json'))['sb']['id'])")
SA=$(python3 -c "import json; print(json.load(open('$T/s.json'))['sa']['id'])")
FB=$(ls "$D" | grep ":$SB.zls$"); PA=$(ls "$D" | grep ":$SA.zls$" | cut -d: -f1-3)
TEN=$(echo "$FB" | cut -d: -f4-5)
cp "$D/$FB" "$D/$PA:$TEN:$SB.zls"

start || exit 1
grep -q "restored 1 sessions .* 1 not (model 'a')" "$T/server.log" && grep -q "$SB.zls not restored: model_mismatch" "$T/server.log"
check $? "restart: a restores its session and refuses b's record under its key: $(grep -E 'restored|not restored' "$T/server.log" | tr '\n' ' ')"
py <<'PY'
import sys; exec(open(sys.argv[2] + '/lib.py').read())
d = json.load(open(T + '/s.json')); sa, sb = d['sa'], d['sb']
st, j = complete(P1 + d['ta'] + P2, sa['token'])
st2, ref = complete(P1 + d['ta'] + P2)
check(st == 200 and text(j) == text(ref) and j['timings']['cached_tokens'] > 0,
      "a's session continues after the restart: %d %r" % (st, text(j) if st == 200 else j))
st, info = req('/v1/sessions/' + sb['id'], None, sb['token'], 'GET')
st2, info2 = req('/v1/sessions/%s?model=b' % sb['id'], None, sb['token'], 'GET')
check(st == 404 and st2 == 200 and info2['cached_tokens'] >= d['nb'],
      "before b loads, GET b's session is a 404; with ?model=b it loads b and finds it: %d %d" % (st, st2))
cont = P1 + d['tb'] + P2 + d['tb2'] + ' Then'
st, j = complete(cont, sb['token'], 'b')
st2, ref = complete(cont, None, 'b')
check(st == 200 and text(j) == text(ref) and j['timings']['cached_tokens'] >= d['nb'],
      "b's session is back when b loads, with the re-prefill text (%s cached of %d): %r" % (
          j.get('timings', {}).get('cached_tokens') if st == 200 else j, d['nb'], text(j) if st == 200 else ''))
st, info = req('/v1/sessions/' + sb['id'], None, sb['token'], 'GET')
check(st == 200, "GET b's session after the restart: %d" % st)
sys.exit(1 if fails else 0)
PY
check $? "restart per model"
grep -q "model 'b'.*restored 2 sessions\|restored 2 sessions .*(model 'b')" "$T/server.log"; check $? "b restored its 2 sessions when it loaded: $(grep "model 'b'" "$T/server.log" | grep restored)"
stop
[ "$fails" = 0 ] || { echo "$fails check(s) failed"; exit 1; }
echo "server_state_models: all checks passed"
