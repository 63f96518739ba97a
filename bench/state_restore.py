#!/usr/bin/env python3
"""state_restore.py — restoring a long conversation from a snapshot against
re-prefilling it, and what a hand-off passes per token, through a running
`zerolayer serve` (started with --state-key-file, and --codec for the learned
rows).  A session is filled with TOKENS of TEXT (one completion, max_tokens 1),
then for each codec (exact, learned when the server has one): snapshot it,
restore it into a new session and continue with a short turn; the same
conversation + turn without a session is the re-prefill.  Prints bytes, bytes
per token, the snapshot and restore times, the continuation's server prefill
time and cached tokens, and the re-prefill's.  Repeat with REPEAT=N.

usage: python3 bench/state_restore.py URL TEXT [TOKENS=2000]
e.g.  zerolayer serve -m SmolLM2-135M-Instruct.Q4_1.gguf -t 2 --ctx 4096 --port 8080 \\
        --state-key-file key --codec smollm2.zlc --prefix-cache-mb 0 --max-body 100000000 &
      python3 bench/state_restore.py http://127.0.0.1:8080 /usr/share/common-licenses/GPL-3 2000
(--prefix-cache-mb 0 keeps the re-prefill honest; an exact snapshot of 2,000 SmolLM2 tokens is 46 MB, 61 MB in
base64: give --max-body 100000000)"""
import json, os, sys, time, urllib.request, urllib.error

URL, TEXT = sys.argv[1], sys.argv[2]
N = int(sys.argv[3]) if len(sys.argv) > 3 else 2000
REPEAT = int(os.environ.get('REPEAT', '2'))


def req(path, body=None, token=None, method='POST', raw=None, accept_raw=False):
    h = {'content-type': 'application/json', 'X-Zerolayer-User': 'bench'}
    if token: h['X-Zerolayer-Session'] = token
    if raw is not None: h['content-type'] = 'application/octet-stream'
    if accept_raw: h['Accept'] = 'application/octet-stream'
    data = raw if raw is not None else json.dumps(body).encode() if body is not None else None
    r = urllib.request.Request(URL + path, data, h, method=method)
    t0 = time.perf_counter()
    try:
        with urllib.request.urlopen(r, timeout=3600) as f:
            st = f.status
            if f.headers.get('content-type') == 'application/octet-stream':
                j = {'state_raw': f.read(), 'tokens': int(f.headers['X-Zerolayer-State-Tokens'])}
                j['bytes'] = len(j['state_raw'])
                j['bytes_per_token'] = j['bytes'] / max(j['tokens'], 1)
            else:
                j = json.load(f)
    except urllib.error.HTTPError as e:
        st, j = e.code, json.load(e)
    return st, j, time.perf_counter() - t0


st, tok, _ = req('/tokenize', {'content': open(TEXT).read(), 'add_special': False})
assert st == 200, tok
st, det, _ = req('/detokenize', {'tokens': tok['tokens'][:N]})
history = det['content']
turn = ' And so, in short:'

def complete(prompt, token=None):
    st, j, secs = req('/v1/completions', {'prompt': prompt, 'max_tokens': 1, 'temperature': 0}, token)
    assert st == 200, j
    return j, secs

st, s, _ = req('/v1/sessions', {})
complete(history, s['token'])
for rep in range(REPEAT):
    jr, t_pre = complete(history + turn)  # the re-prefill, once per round
    for codec in ('exact', 'learned'):
        for binary in (False, True):  # base64 in JSON, or the sealed bytes (application/octet-stream)
            st, snap, t_snap = req('/v1/sessions/%s/snapshot' % s['id'], {'codec': codec}, s['token'],
                                   accept_raw=binary)
            if st != 200:
                print('%s: %s' % (codec, snap['error']['message']))
                continue
            if binary:
                st, r, t_restore = req('/v1/sessions', raw=snap['state_raw'])
            else:
                st, r, t_restore = req('/v1/sessions', {'state': snap['state']})
            assert st == 200, r
            j, t_cont = complete(history + turn, r['token'])
            print('%s%s: %d tokens, %d bytes (%.0f per token); snapshot %.0f ms, restore %.0f ms, continuation %.0f ms '
                  '(server prefill %.0f ms, %d cached) = %.0f ms; re-prefill %.0f ms (server prefill %.0f ms, %d cached): '
                  '%.1fx' % (codec, ' binary' if binary else ' base64', snap['tokens'], snap['bytes'],
                             snap['bytes_per_token'], t_snap * 1e3, t_restore * 1e3, t_cont * 1e3,
                             j['timings']['prefill_ms'], j['timings']['cached_tokens'], (t_restore + t_cont) * 1e3,
                             t_pre * 1e3, jr['timings']['prefill_ms'], jr['timings']['cached_tokens'],
                             t_pre / (t_restore + t_cont)))
            req('/v1/sessions/' + r['id'], None, r['token'], 'DELETE')
