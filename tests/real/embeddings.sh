#!/usr/bin/env bash
# embeddings.sh — POST /v1/embeddings on SmolLM2-135M through `zerolayer serve`:
#   - against llama.cpp's llama-embedding (tests/fixtures/real/smollm2-135m/
#     embeddings.json, mean / last / cls pooling, normalised): cosine > 0.999;
#   - near-paraphrases are closer than unrelated texts;
#   - the same text gives the same vector (bit for bit) across calls, alone or
#     batched with others in any order, with generation streaming meanwhile;
#   - token-array input equals the text's; usage.prompt_tokens counts the
#     tokens; base64 decodes to exactly the floats; errors in OpenAI's shape;
#   - the official npm and Python OpenAI clients (which ask for base64 and
#     decode it) get exactly the same vectors (tests/compat/embeddings_real.*).
# usage: embeddings.sh ZL_BINARY ROOT   (run through need_models.sh)
# needs: loopback
# labels: npm python
set -uo pipefail
BIN=$(cd "$(dirname "$1")" && pwd)/$(basename "$1")
ROOT=$(cd "$2" && pwd)
. "$ROOT/tests/real/serve_lib.sh"
MODEL=$(zl_model_file smollm2-135m) || { echo "FAIL: smollm2-135m is not cached"; exit 1; }
COMPAT="$ROOT/tests/compat"
"$COMPAT/need_sdks.sh" node python || exit $?
PY=$("$COMPAT/pyenv.sh" --check) || { echo "FAIL: tests/compat/pyenv.sh --check"; exit 1; }
FIX="$ROOT/tests/fixtures/real/smollm2-135m/embeddings.json"
fails=0

zl_serve_start -m "$MODEL" --parallel 2 --ctx 512 || exit 1
python3 - "$URL" "$FIX" "$T/vectors.json" <<'PY' || fails=$((fails + 1))
import base64, json, math, struct, sys, threading, urllib.request, urllib.error
URL, FIX, OUT = sys.argv[1:4]
ref = json.load(open(FIX))
texts = ref['texts']
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

def embed(inp, **kw):
    st, j = post('/v1/embeddings', dict(kw, input=inp, model='any'))
    assert st == 200, j
    return j

def vecs(j):
    return [d['embedding'] for d in sorted(j['data'], key=lambda d: d['index'])]

def cos(a, b):
    return sum(x * y for x, y in zip(a, b)) / math.sqrt(sum(x * x for x in a) * sum(y * y for y in b))

j = embed(texts)
V = vecs(j)
check(j['object'] == 'list' and all(d['object'] == 'embedding' for d in j['data']) and j['model'] == 'any' and
      [d['index'] for d in j['data']] == list(range(len(texts))) and all(len(v) == 576 for v in V),
      'OpenAI shape: list of %d embeddings of 576 floats' % len(V))
check(all(abs(sum(x * x for x in v) - 1) < 1e-5 for v in V), 'L2-normalised')
cs = [cos(V[i], ref['pooling']['mean'][i]) for i in range(len(texts))]
check(min(cs) > 0.999, 'mean pooling vs llama-embedding --pooling mean --embd-normalize 2: cosine min %.6f' % min(cs))
ntok = sum(len(post('/tokenize', {'content': t, 'add_special': True})[1]['tokens']) for t in texts)
check(j['usage']['prompt_tokens'] == ntok and j['usage']['total_tokens'] == ntok,
      'usage.prompt_tokens %d = the tokens of the inputs (%d)' % (j['usage']['prompt_tokens'], ntok))
# paraphrases: 0~1 (cat on the mat), 3~4 (chocolate cake); 2 and 5 unrelated
c = lambda a, b: cos(V[a], V[b])
check(c(0, 1) > max(c(0, 2), c(0, 5), c(0, 3)) and c(3, 4) > max(c(3, 2), c(3, 5), c(3, 0)),
      'paraphrases closer: cat %.3f vs %.3f/%.3f, cake %.3f vs %.3f/%.3f' %
      (c(0, 1), c(0, 2), c(0, 5), c(3, 4), c(3, 2), c(3, 5)))
# same vectors across calls and batch compositions, with generation running at the same time
stop = []
def chatter():
    while not stop:
        post('/v1/chat/completions', {'messages': [{'role': 'user', 'content': 'Tell me a story.'}], 'max_tokens': 24})
th = threading.Thread(target=chatter)
th.start()
same = True
for i, t in enumerate(texts):
    same &= vecs(embed(t))[0] == V[i]
rev = vecs(embed([texts[5], texts[0], texts[5], texts[3]]))
same &= rev == [V[5], V[0], V[5], V[3]]
stop.append(1)
th.join()
check(same, 'bit-identical alone, batched, reordered and repeated, while a chat generates')
# token arrays
ids = [post('/tokenize', {'content': t, 'add_special': True})[1]['tokens'] for t in texts[:3]]
check(vecs(embed(ids)) == V[:3] and vecs(embed(ids[1]))[0] == V[1], 'token-id arrays give the texts\' vectors')
# base64: little-endian float32
b = embed(texts[:2], encoding_format='base64')
dec = [list(struct.unpack('<576f', base64.b64decode(d['embedding']))) for d in b['data']]
check(dec == V[:2], 'base64 decodes to exactly the float vectors')
json.dump({'texts': texts, 'vectors': V}, open(OUT, 'w'))
# errors in OpenAI's shape
for body, param, want in ((({'input': 'x', 'dimensions': 64}), 'dimensions', '576'),
                          ({'input': ''}, 'input', 'empty'), ({'input': []}, 'input', 'input'),
                          ({'input': [[]]}, 'input', 'input[0]'), ({'input': [1, 49152]}, 'input', '49152'),
                          ({'input': ['a', 3]}, 'input', 'input[1]'), ({}, 'input', 'required'),
                          ({'input': 'x', 'encoding_format': 'int8'}, 'encoding_format', 'int8'),
                          ({'input': 'word ' * 600}, 'input', 'context of 512')):
    st, e = post('/v1/embeddings', body)
    e = e.get('error', {})
    check(st == 400 and e.get('type') == 'invalid_request_error' and e.get('param') == param and want in e.get('message', ''),
          '%s -> %d %s' % (json.dumps(body)[:60], st, e.get('message')))
sys.exit(1 if fails else 0)
PY
node "$COMPAT/embeddings_real.mjs" "$URL" "$T/vectors.json" || fails=$((fails + 1))
"$PY" "$COMPAT/embeddings_real.py" "$URL" "$T/vectors.json" || fails=$((fails + 1))
if ! kill -0 "$SRV" 2>/dev/null; then echo "FAIL: the server died"; fails=$((fails + 1)); fi
zl_serve_cleanup_one() { kill "$SRV" 2>/dev/null; wait "$SRV" 2>/dev/null; SRV=; }
zl_serve_cleanup_one

# the other poolings, chosen by --pooling
for pool in last cls; do
    zl_serve_start -m "$MODEL" --parallel 1 --ctx 512 --pooling "$pool" || { fails=$((fails + 1)); continue; }
    python3 - "$URL" "$FIX" "$pool" <<'PY' || fails=$((fails + 1))
import json, math, sys, urllib.request
URL, FIX, POOL = sys.argv[1:4]
ref = json.load(open(FIX))
R = ref['pooling'][POOL]
req = urllib.request.Request(URL + '/v1/embeddings', json.dumps({'input': ref['texts'][:len(R)]}).encode(),
                             {'content-type': 'application/json'})
V = [d['embedding'] for d in json.load(urllib.request.urlopen(req, timeout=300))['data']]
cos = lambda a, b: sum(x * y for x, y in zip(a, b)) / math.sqrt(sum(x * x for x in a) * sum(y * y for y in b))
cs = [cos(v, r) for v, r in zip(V, R)]
props = json.load(urllib.request.urlopen(URL + '/props', timeout=60))
ok = min(cs) > 0.999 and props['zerolayer']['embedding_pooling'] == POOL
print('%s --pooling %s vs llama-embedding --pooling %s: cosine min %.6f (/props says %s)' %
      ('ok  ' if ok else 'FAIL', POOL, POOL, min(cs), props['zerolayer']['embedding_pooling']))
sys.exit(0 if ok else 1)
PY
    zl_serve_cleanup_one
done
out=$("$BIN" serve -m "$MODEL" --pooling max 2>&1); rc=$?
if [ $rc -ne 0 ] && [ "$(printf '%s\n' "$out" | wc -l)" -eq 1 ] && printf '%s' "$out" | grep -q "^zerolayer: --pooling must be mean, cls or last"; then
    echo "ok   --pooling max: $out"
else
    echo "FAIL --pooling max: rc $rc: $out"; fails=$((fails + 1))
fi
exit $((fails > 0))
