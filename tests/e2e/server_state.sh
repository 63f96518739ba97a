#!/usr/bin/env bash
# server_state.sh — session snapshots and agent hand-off through `zerolayer
# serve` on stories260K (src/state/snapshot.c, src/server/api_state.c):
#   - POST /v1/sessions/{id}/snapshot returns {state, bytes, tokens,
#     bytes_per_token, codec, model}; POST /v1/sessions {"state"} restores it
#     into a new session holding the same tokens;
#   - a three-agent chain A -> B -> C (each importing the previous agent's
#     exact snapshot and adding a turn) gives, at every step, the greedy text
#     of re-prefilling the same text without a session, and reuses the
#     imported cache (cached_tokens); the sessions are independent (A's later
#     turn does not reach B, B's does not reach A);
#   - errors: another tenant 403 forbidden (unless sealed with a passphrase);
#     a flipped byte anywhere (header, ciphertext, tag), a truncated blob, bad
#     base64, a wrong or missing passphrase: 400 invalid_state and no session;
#     another model (same key): 409 model_mismatch; a learned blob on a server
#     without the codec: 409 codec_mismatch; no --state-key-file and no
#     passphrase: 400 naming `passphrase`; unknown fields, bad codec values:
#     400 naming the field; snapshots of another tenant's session: 403; a
#     --state-key-file under 32 bytes stops the start;
#   - a learned-codec snapshot is smaller than the exact one and restores;
#   - /metrics counts snapshots by result.
# usage: server_state.sh BIN ROOT
# needs: loopback
set -uo pipefail
BIN=$(cd "$(dirname "$1")" && pwd)/$(basename "$1")
ROOT=$(cd "$2" && pwd)
. "$ROOT/tests/real/serve_lib.sh"
MODEL="$ROOT/models/stories260K.gguf"
OTHER="$ROOT/tests/fixtures/models/stories260K-F16.gguf"
TEXT=/usr/share/common-licenses/GPL-3
[ -f "$TEXT" ] || TEXT="$ROOT/README.md"
head -c 48 /dev/urandom >"$T/key"
"$BIN" codec train -m "$MODEL" -f "$TEXT" --tokens 400 --ratio 1/4 -o "$T/c.zlc" >/dev/null || { echo "FAIL: codec train"; exit 1; }
zl_serve_start -m "$MODEL" --state-key-file "$T/key" --codec "$T/c.zlc" --ctx 512 --parallel 2 || exit 1
URL_A=$URL; SRV_A=$SRV
zl_serve_start -m "$OTHER" --state-key-file "$T/key" --ctx 512 || exit 1
URL_B=$URL; SRV_B=$SRV
zl_serve_start -m "$MODEL" --ctx 512 || exit 1
URL_C=$URL; SRV_C=$SRV
zl_serve_start -m "$MODEL" --ctx 512 --codec "$T/c.zlc" --compress-idle 0.3 --state-key-file "$T/key" || exit 1
URL_D=$URL; SRV_D=$SRV
trap 'kill $SRV_A $SRV_B $SRV_C $SRV_D 2>/dev/null; wait 2>/dev/null; rm -rf "$T"' EXIT
"$BIN" serve -m "$MODEL" --port 0 --compress-idle 5 2>"$T/ci.err" >/dev/null
[ $? != 0 ] && grep -q "^zerolayer: .*--compress-idle needs --codec" "$T/ci.err" || { echo "FAIL --compress-idle without --codec: $(cat "$T/ci.err")"; exit 1; }
echo "ok   --compress-idle without --codec: $(cat "$T/ci.err")"
head -c 31 /dev/urandom >"$T/short"
"$BIN" serve -m "$MODEL" --port 0 --state-key-file "$T/short" 2>"$T/sk.err" >/dev/null
[ $? != 0 ] && grep -q "^zerolayer: --state-key-file: .* holds 31 bytes; at least 32 are needed" "$T/sk.err" || { echo "FAIL a 31-byte key file: $(cat "$T/sk.err")"; exit 1; }
echo "ok   a 31-byte --state-key-file: $(cat "$T/sk.err")"

python3 - "$URL_A" "$URL_B" "$URL_C" "$URL_D" <<'PY'
import base64, json, sys, time, urllib.request, urllib.error
A, B, C, D = sys.argv[1:5]
fails = 0

def check(ok, what):
    global fails
    print(('ok   ' if ok else 'FAIL ') + what)
    fails += 0 if ok else 1

def req(url, path, body=None, token=None, method='POST', user=None):
    h = {'content-type': 'application/json'}
    if user: h['X-Zerolayer-User'] = user
    if token: h['X-Zerolayer-Session'] = token
    data = json.dumps(body).encode() if body is not None else None
    r = urllib.request.Request(url + path, data, h, method=method)
    try:
        with urllib.request.urlopen(r, timeout=120) as f:
            return f.status, json.load(f)
    except urllib.error.HTTPError as e:
        return e.code, json.load(e)

def session(url, user, state=None, passphrase=None):
    body = {'user': user}
    if state is not None: body['state'] = state
    if passphrase is not None: body['passphrase'] = passphrase
    return req(url, '/v1/sessions', body)

def complete(url, prompt, token=None, user='alice', n=16):
    st, j = req(url, '/v1/completions', {'prompt': prompt, 'max_tokens': n, 'temperature': 0, 'user': user}, token)
    assert st == 200, (st, j)
    global last_timings
    last_timings = j['timings']
    return j['choices'][0]['text'], j['timings']['cached_tokens']

def snapshot(url, s, user='alice', **kw):
    return req(url, '/v1/sessions/%s/snapshot' % s['id'], dict(user=user, **kw), s['token'])

def code(j):
    return j.get('error', {}).get('code'), j.get('error', {}).get('param')

# ---- the chain: A -> B -> C, each adding a turn; references re-prefill the same text
p1, p2, p3 = 'Once upon a time', ' One day, she went to the park', ' Then they were very happy'
st, a = session(A, 'alice'); check(st == 200, 'agent A opens a session')
t1, _ = complete(A, p1, a['token'])
st, snap = snapshot(A, a, codec='exact')
check(st == 200 and set(snap) >= {'state', 'bytes', 'tokens', 'bytes_per_token', 'codec', 'model'} and
      snap['codec'] == 'exact' and snap['model'] == 'stories260K.gguf', 'snapshot fields: %s' % {k: v for k, v in snap.items() if k != 'state'})
n_a = snap['tokens']
check(n_a > 16 and snap['bytes'] == len(base64.b64decode(snap['state'])) and
      abs(snap['bytes_per_token'] - snap['bytes'] / n_a) < 1e-6, 'tokens %d, bytes %d' % (n_a, snap['bytes']))
st, b = session(A, 'alice', snap['state'])
check(st == 200 and b['tokens'] == n_a and b['cached_tokens'] == n_a and b['id'] != a['id'] and b['codec'] == 'exact',
      'agent B restores A\'s state into its own session (%d tokens)' % b.get('tokens', -1))
t2, cached = complete(A, p1 + t1 + p2, b['token'])
ref2, _ = complete(A, p1 + t1 + p2)
check(t2 == ref2, 'B continues exactly as re-prefilling A\'s text: %r' % t2)
check(cached >= n_a - 1, 'B reused the imported cache (%d cached of %d)' % (cached, n_a))
st, snap_b = snapshot(A, b, codec='exact')
st, c = session(A, 'alice', snap_b['state'])
check(st == 200 and c['tokens'] == snap_b['tokens'], 'agent C restores B\'s state')
t3, cached = complete(A, p1 + t1 + p2 + t2 + p3, c['token'])
ref3, _ = complete(A, p1 + t1 + p2 + t2 + p3)
check(t3 == ref3 and cached >= snap_b['tokens'] - 1, 'C continues exactly as re-prefilling B\'s text (cached %d)' % cached)
print('hand-off: %.1f bytes per token of context (exact, f16 KV of stories260K: 5 layers x 2 x 64 values)' % snap_b['bytes_per_token'])
# independence: A's next turn does not see B's, B's cache does not move with A's turn
ta, _ = complete(A, p1 + t1 + p3, a['token'])
refa, _ = complete(A, p1 + t1 + p3)
check(ta == refa, 'A\'s own next turn is A\'s context only')
st, ib = req(A, '/v1/sessions/' + b['id'], None, b['token'], 'GET', 'alice')
check(st == 200 and ib['cached_tokens'] == snap_b['tokens'], 'B\'s session is untouched by A\'s turn')

# ---- the sealed bytes without base64 (Accept / Content-Type: application/octet-stream)
def raw(url, path, data=None, token=None, user='alice', accept=False, ctype='application/octet-stream', extra=None):
    h = {'content-type': ctype, 'X-Zerolayer-User': user}
    if accept: h['Accept'] = 'application/octet-stream'
    if token: h['X-Zerolayer-Session'] = token
    h.update(extra or {})
    r = urllib.request.Request(url + path, data, h, method='POST')
    try:
        with urllib.request.urlopen(r, timeout=120) as f:
            body = f.read()
            return f.status, f.headers, body if f.headers['content-type'] == 'application/octet-stream' else json.loads(body)
    except urllib.error.HTTPError as e:
        return e.code, e.headers, json.load(e)
st, hd, blob = raw(A, '/v1/sessions/%s/snapshot' % b['id'], json.dumps({'codec': 'exact'}).encode(), b['token'],
                   accept=True, ctype='application/json')
check(st == 200 and isinstance(blob, bytes) and len(blob) == snap_b['bytes'] and hd['X-Zerolayer-State-Tokens'] ==
      str(snap_b['tokens']) and hd['X-Zerolayer-State-Codec'] == 'exact', 'a binary snapshot: %d bytes, headers %s' %
      (len(blob) if isinstance(blob, bytes) else -1, {k: v for k, v in hd.items() if k.startswith('X-Zerolayer-State')}))
st, _, c2 = raw(A, '/v1/sessions', blob)
check(st == 200 and c2['tokens'] == snap_b['tokens'] and c2['codec'] == 'exact', 'restored from the raw bytes')
t3b, cached = complete(A, p1 + t1 + p2 + t2 + p3, c2['token'])
check(t3b == ref3 and cached >= snap_b['tokens'] - 1, 'and continues exactly as re-prefilling (cached %d)' % cached)
bad = bytearray(blob); bad[len(bad) // 2] ^= 1
st, _, j = raw(A, '/v1/sessions', bytes(bad))
check(st == 400 and code(j)[0] == 'invalid_state', 'an altered raw blob: 400 invalid_state')
st, _, j = raw(A, '/v1/sessions', blob, user='bob')
check(st == 403 and code(j)[0] == 'forbidden', 'another tenant\'s raw blob: 403')
st, _, pblob = raw(A, '/v1/sessions/%s/snapshot' % b['id'], json.dumps({'codec': 'exact', 'passphrase': 'pp'}).encode(),
                   b['token'], accept=True, ctype='application/json')
st, _, j = raw(A, '/v1/sessions', pblob, user='bob', extra={'X-Zerolayer-Passphrase': 'pp'})
check(st == 200 and j['tokens'] == snap_b['tokens'], 'a passphrase in X-Zerolayer-Passphrase opens a raw blob for bob')
st, _, j = raw(A, '/v1/sessions', pblob, user='bob', extra={'X-Zerolayer-Passphrase': 'nope'})
check(st == 400 and code(j)[0] == 'invalid_state', 'a wrong header passphrase: 400 invalid_state')
st, _, j = raw(A, '/v1/completions', b'xx')
check(st == 415, 'octet-stream is for restoring a session only: 415 elsewhere (%s)' % j)

# ---- learned codec
st, sl = snapshot(A, a)
st, se = snapshot(A, a, codec='exact')
n = sl['tokens']
# exact f16 rows: 640 bytes a token; learned: 4 exact sink positions, then 160-byte codes (ratio 1/4)
check(st == 200 and sl['codec'] == 'learned' and se['tokens'] == n and sl['bytes'] == se['bytes'] - (n - 4) * 480,
      'learned by default with --codec: %d bytes vs exact %d for %d tokens' % (sl.get('bytes', 0), se['bytes'], n))
st, l = session(A, 'alice', sl['state'])
check(st == 200 and l['codec'] == 'learned' and l['tokens'] == sl['tokens'], 'a learned snapshot restores')
tl, _ = complete(A, p1 + t1 + p3, l['token'])
check(len(tl) > 0, 'and continues: %r' % tl)

# ---- tenants and passphrases
st, j = session(A, 'bob', snap['state'])
check(st == 403 and code(j)[0] == 'forbidden', 'another tenant: 403 (%s)' % j)
st, sp = snapshot(A, a, codec='exact', passphrase='correct horse')
check(st == 200 and sp['sealed_with'] == 'passphrase', 'a passphrase snapshot')
st, j = session(A, 'bob', sp['state'], 'correct horse')
check(st == 200 and j['tokens'] == sp['tokens'], 'bob imports it with the passphrase')
tb, _ = complete(A, p1 + t1 + p2, j['token'], user='bob')
check(tb == ref2, 'and continues exactly')
st, j = session(A, 'bob', sp['state'], 'wrong horse')
check(st == 400 and code(j)[0] == 'invalid_state', 'wrong passphrase: 400 invalid_state')
st, j = session(A, 'bob', sp['state'])
check(st == 400 and code(j)[0] == 'invalid_state' and 'passphrase' in j['error']['message'], 'missing passphrase: %s' % j)

# ---- tampering: every region of the blob
raw = base64.b64decode(snap['state'])
sessions_before = None
for where, at in [('magic', 0), ('version', 8), ('token count', 144), ('nonce', 150), ('tenant digest', 120),
                  ('codec id', 90), ('ciphertext', 400), ('last ciphertext byte', len(raw) - 17), ('tag', len(raw) - 3)]:
    bad = bytearray(raw); bad[at] ^= 0x01
    st, j = session(A, 'alice', base64.b64encode(bytes(bad)).decode())
    check(st == 400 and code(j)[0] == 'invalid_state', 'flipped %s byte: 400 invalid_state (%s)' % (where, j.get('error', {}).get('message')))
bad = bytearray(raw); bad[60] ^= 1
st, j = session(A, 'alice', base64.b64encode(bytes(bad)).decode())
check(st == 409 and code(j)[0] == 'model_mismatch', 'altered fingerprint: 409 model_mismatch')
for n in (0, 10, 170, len(raw) - 1):
    st, j = session(A, 'alice', base64.b64encode(raw[:n]).decode() if n else '')
    check(st == 400 and code(j)[0] == 'invalid_state', 'truncated to %d bytes: 400' % n)
st, j = session(A, 'alice', snap['state'][:-2] + '!!')
check(st == 400 and code(j)[0] == 'invalid_state', 'bad base64: 400')
st, j = session(A, 'alice', 12)
check(st == 400 and code(j)[1] == 'state', 'state not a string: 400 naming state')
st, j = req(A, '/v1/sessions', {'user': 'alice', 'state': snap['state'], 'extra': 1})
check(st == 400 and code(j)[1] == 'extra', 'unknown field on restore: 400 naming it')
st, j = snapshot(A, a, codec='lossy')
check(st == 400 and code(j)[1] == 'codec', 'bad codec value: 400 naming codec')
st, j = snapshot(A, a, passphrase='')
check(st == 400 and code(j)[1] == 'passphrase', 'empty passphrase: 400')
st, j = snapshot(A, a, frobnicate=True)
check(st == 400 and code(j)[1] == 'frobnicate', 'unknown snapshot field: 400')
st, j = snapshot(A, a, user='bob')
check(st == 403, 'snapshot of another tenant\'s session: 403')

# ---- other servers
st, j = session(B, 'alice', snap['state'])
check(st == 409 and code(j)[0] == 'model_mismatch', 'another model with the same key: 409 model_mismatch (%s)' % j)
st, j = session(C, 'alice', snap['state'])
check(st == 400 and code(j)[0] == 'invalid_state', 'a server-key blob on a server without the key: 400')
st, slp = snapshot(A, a, passphrase='pw')
st, j = session(C, 'alice', slp['state'], 'pw')
check(st == 409 and code(j)[0] == 'codec_mismatch', 'a learned blob without the codec: 409 codec_mismatch')
st, j = session(C, 'alice', sp['state'], 'correct horse')
check(st == 200, 'an exact passphrase blob moves to another server of the same model')
st, cs = session(C, 'alice')
complete(C, p1, cs['token'])
st, j = snapshot(C, cs)
check(st == 400 and code(j)[1] == 'passphrase', 'no key and no passphrase: 400 naming passphrase (%s)' % j)
st, j = snapshot(C, cs, codec='learned', passphrase='x')
check(st == 400 and code(j)[1] == 'codec', 'learned without --codec: 400')

# ---- idle sessions held coded (server D: --compress-idle 0.3)
def metrics(url):
    with urllib.request.urlopen(url + '/metrics') as f:
        return {l.split()[0]: float(l.split()[1]) for l in f.read().decode().splitlines() if l and l[0] != '#'}
st, d = session(D, 'alice')
td1, _ = complete(D, p1, d['token'])
time.sleep(1.5)
st, info = req(D, '/v1/sessions/' + d['id'], None, d['token'], 'GET', 'alice')
n = info['cached_tokens']
md = metrics(D)
check(md.get('zerolayer_sessions_coded') == 1 and info['kv_bytes'] == 4 + 4 * n + 4 * 640 + (n - 4) * 160,
      'an idle session is held coded: %d bytes for %d tokens (exact rows: %d)' % (info['kv_bytes'], n, 640 * n))
check(md.get('zerolayer_state_entropy_bits', 0) > 0 and md.get('zerolayer_codec_encoded_bytes_total') == info['kv_bytes'],
      'entropy gauge %.3f bits per element, encoded bytes counted' % md.get('zerolayer_state_entropy_bits', 0))
st, snd = snapshot(D, d, codec='exact')
check(st == 200 and snd['tokens'] == n, 'a coded session snapshots (rebuilt from its code)')
td2, cached = complete(D, p1 + td1 + p2, d['token'])
md = metrics(D)
check(cached >= n - 1 and md.get('zerolayer_sessions_decoded_total') == 1 and md.get('zerolayer_sessions_coded') == 0,
      'its next request rebuilds it and reuses the cache (%d cached): %r' % (cached, td2))
ts = last_timings.get('state', {})
check(ts.get('from') == 'code' and ts.get('rebuilt') is True and ts.get('tokens') == n and ts.get('bytes') == info['kv_bytes']
      and ts.get('exact_bytes') == 640 * n and abs(ts.get('ratio', 0) - info['kv_bytes'] / (640 * n)) < 1e-9
      and ts.get('encode_ms', 0) > 0 and ts.get('decode_ms', 0) > 0,
      'its timings say how: %s' % ts)
check('state' not in complete(D, p1 + td1 + p2 + td2, d['token']) and 'state' not in last_timings,
      'a turn from memory has no state figures')
check(abs(metrics(D).get('zerolayer_sessions_coded_ratio', 0) - info['kv_bytes'] / (640 * n)) < 1e-6,
      '/metrics: the coded ratio')

# ---- metrics
with urllib.request.urlopen(A + '/metrics') as f:
    m = f.read().decode()
def metric(name):
    for line in m.splitlines():
        if line.startswith(name + ' '): return float(line.split()[1])
    return -1
print('\n'.join(l for l in m.splitlines() if 'snapshot' in l or 'codec' in l))
check(metric('zerolayer_state_snapshots_total{result="exported"}') >= 6 and
      metric('zerolayer_state_snapshots_total{result="forbidden"}') >= 1 and
      metric('zerolayer_state_snapshots_total{result="invalid"}') >= 10 and
      metric('zerolayer_codec_encoded_bytes_total') > 0, 'metrics count snapshots by result')
sys.exit(1 if fails else 0)
PY
