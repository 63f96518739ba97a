#!/usr/bin/env bash
# logit_bias.sh — OpenAI logit_bias on SmolLM2-135M through `zerolayer serve`:
#   - greedy with -100 on the token the model picks changes the answer and
#     that token never appears (/v1/completions and /v1/chat/completions);
#   - +100 on a token makes every generated token that token;
#   - the verification ring (zerolayer.ring) under the same bias gives the
#     same greedy text as plain decoding;
#   - bad maps are 400s in OpenAI's shape naming the id and the vocabulary.
# Token ids come from the server's /tokenize; generated tokens from logprobs.
# usage: logit_bias.sh ZL_BINARY ROOT   (run through need_models.sh)
# needs: loopback
set -uo pipefail
BIN=$(cd "$(dirname "$1")" && pwd)/$(basename "$1")
ROOT=$(cd "$2" && pwd)
. "$ROOT/tests/real/serve_lib.sh"
MODEL=$(zl_model_file smollm2-135m) || { echo "FAIL: smollm2-135m is not cached"; exit 1; }
zl_serve_start -m "$MODEL" --parallel 2 --ctx 1024 || exit 1

python3 - "$URL" <<'PY'
import json, sys, urllib.request, urllib.error
URL = sys.argv[1]
fails = 0

def post(path, body):
    req = urllib.request.Request(URL + path, json.dumps(body).encode(), {'content-type': 'application/json'})
    try:
        with urllib.request.urlopen(req, timeout=300) as r:
            return r.status, json.load(r)
    except urllib.error.HTTPError as e:
        return e.code, json.load(e)

def check(ok, what):
    global fails
    print(('ok   ' if ok else 'FAIL ') + what)
    fails += 0 if ok else 1

def token_id(piece):
    """The id of a piece that tokenizes to one token, else None."""
    st, j = post('/tokenize', {'content': piece, 'add_special': False})
    assert st == 200, j
    return j['tokens'][0] if len(j['tokens']) == 1 else None

last_timings = [{}]

def complete(bias=None, extra=None, n=16):
    body = {'prompt': 'The capital of France is', 'max_tokens': n, 'temperature': 0, 'logprobs': 0}
    if bias is not None: body['logit_bias'] = bias
    body.update(extra or {})
    st, j = post('/v1/completions', body)
    assert st == 200, j
    c = j['choices'][0]
    last_timings[0] = j.get('timings', {})
    return c['text'], (c['logprobs'] or {}).get('tokens')

def chat(bias=None, extra=None, n=16):
    body = {'messages': [{'role': 'user', 'content': 'What is the capital of France?'}], 'max_tokens': n,
            'temperature': 0, 'logprobs': True}
    if bias is not None: body['logit_bias'] = bias
    body.update(extra or {})
    st, j = post('/v1/chat/completions', body)
    assert st == 200, j
    c = j['choices'][0]
    last_timings[0] = j.get('timings', {})
    return c['message']['content'], [t['token'] for t in ((c.get('logprobs') or {}).get('content') or [])]

for name, gen in (('completions', complete), ('chat', chat)):
    text, toks = gen()
    first = toks[0]
    tid = token_id(first)
    assert tid is not None, first
    btext, btoks = gen({str(tid): -100})
    check(btext != text, '%s: -100 on the greedy first token %r (id %d) changes %r -> %r' % (name, first, tid, text, btext))
    check(first not in btoks, '%s: the banned token never appears in %r' % (name, btoks))
    # ban every distinct token of the unbiased answer at once
    banned = {t: token_id(t) for t in set(toks)}
    banned = {t: i for t, i in banned.items() if i is not None}
    ctext, ctoks = gen({str(i): -100 for i in banned.values()})
    bad = [t for t in ctoks if t in banned]
    ids = banned
    check(not bad, '%s: %d banned tokens, none of them in %r' % (name, len(ids), ctoks))
    # the ring (no logprobs: a ring job would fall back to plain decoding) keeps the greedy text
    rtext, _ = gen({str(tid): -100}, {'logprobs': False if name == 'chat' else None, 'zerolayer': {'validation': 'on', 'ring': 4}})
    rt = last_timings[0]
    check(rt.get('ring') is True and rtext == btext,
          '%s: ring (drafted %s, accepted %s) under the same bias gives the same text (%r)' %
          (name, rt.get('ring_drafted_tokens'), rt.get('ring_accepted_tokens'), rtext))
    force = token_id(' banana')
    ftext, ftoks = gen({str(force): 100}, n=8)
    check(ftoks == [' banana'] * 8, '%s: +100 on " banana" forces it: %r' % (name, ftoks))

for bias, want in (({'99999999': 1}, ['99999999', '49152']), ({'49152': 1}, ['49152']), ({'7042': 101}, ['101']),
                   ({'7042': -100.5}, ['-100.5']), ({'abc': 1}, ['abc']), ([[7042, 1]], ['object']),
                   ({'7042': 'x'}, ['7042', 'number']), ({'-3': 1}, ['-3'])):
    for path in ('/v1/completions', '/v1/chat/completions'):
        body = {'max_tokens': 2, 'logit_bias': bias}
        body.update({'prompt': 'x'} if 'chat' not in path else {'messages': [{'role': 'user', 'content': 'x'}]})
        st, j = post(path, body)
        e = j.get('error', {})
        ok = (st == 400 and e.get('type') == 'invalid_request_error' and e.get('param') == 'logit_bias' and
              all(w in e.get('message', '') for w in want))
        check(ok, '%s logit_bias=%s: %d %s' % (path, json.dumps(bias), st, e.get('message')))
sys.exit(1 if fails else 0)
PY
rc=$?
if ! kill -0 "$SRV" 2>/dev/null; then echo "FAIL: the server died"; rc=1; fi
exit $rc
