#!/usr/bin/env bash
# models.sh — several models behind one `zerolayer serve`: stories260K (the
# first), SmolLM2-135M (--alias small) and stories260K again (--alias tiny2),
# --models-max 2:
#   - GET /v1/models lists the three ids (OpenAI and Anthropic shapes);
#   - each model answers as a server of its own does (greedy text compared
#     with single-model servers), through the official npm and Python OpenAI
#     clients, two models side by side at once;
#   - an unknown id is a 404: model_not_found (OpenAI), not_found_error
#     (Anthropic);
#   - loading the third unloads the least recently used idle one, which
#     loads again on its next request; while a stream holds 'small', 'tiny2'
#     cannot load (429) and can once the stream is done;
#   - --models-idle unloads an unused model, --models-mb bounds the loaded
#     files' bytes (LRU idle ones make room; one that can never fit is a 400);
#   - --models-dir serves every .gguf of a directory.
# usage: models.sh ZL_BINARY ROOT   (run through need_models.sh)
# needs: loopback
# labels: npm python
set -uo pipefail
BIN=$(cd "$(dirname "$1")" && pwd)/$(basename "$1")
ROOT=$(cd "$2" && pwd)
. "$ROOT/tests/real/serve_lib.sh"
SMALL=$(zl_model_file smollm2-135m) || { echo "FAIL: smollm2-135m is not cached"; exit 1; }
TINY="$ROOT/models/stories260K.gguf"
COMPAT="$ROOT/tests/compat"
"$COMPAT/need_sdks.sh" node python || exit $?
PY=$("$COMPAT/pyenv.sh" --check) || { echo "FAIL: tests/compat/pyenv.sh --check"; exit 1; }
fails=0
stop_server() { kill "$SRV" 2>/dev/null; wait "$SRV" 2>/dev/null; SRV=; }

# references: each model served alone
CHAT='{"messages":[{"role":"user","content":"What is the capital of France?"}],"max_tokens":12,"temperature":0}'
COMP='{"prompt":"Once upon a time","max_tokens":16,"temperature":0}'
reference() { # model, path, body, out
    zl_serve_start -m "$1" --parallel 2 --ctx 512 || exit 1
    curl -sS "$URL$2" -H 'content-type: application/json' -d "$3" > "$4"
    python3 -c 'import json, sys; json.load(open(sys.argv[1]))["choices"]' "$4" 2>/dev/null ||
        { echo "FAIL: reference $1 $2: $(cat "$4"); server log:"; cat "$T/server.log"; exit 1; }
    stop_server
}
reference "$SMALL" /v1/chat/completions "$CHAT" "$T/ref_small.json"
reference "$TINY" /v1/completions "$COMP" "$T/ref_tiny.json"

zl_serve_start -m "$TINY" -m "$SMALL" --alias small -m "$TINY" --alias tiny2 --models-max 2 --parallel 2 --ctx 512 || exit 1
python3 - "$URL" "$T" <<'PY' || fails=$((fails + 1))
import json, sys, threading, time, urllib.request, urllib.error
URL, T = sys.argv[1:3]
fails = 0
def check(ok, what):
    global fails
    print(('ok   ' if ok else 'FAIL ') + what)
    fails += 0 if ok else 1
def req(path, body=None, headers=None):
    h = {'content-type': 'application/json'}
    h.update(headers or {})
    r = urllib.request.Request(URL + path, json.dumps(body).encode() if body is not None else None, h)
    try:
        with urllib.request.urlopen(r, timeout=300) as resp:
            return resp.status, json.load(resp)
    except urllib.error.HTTPError as e:
        return e.code, json.load(e)
def status():
    return {m['id']: m['meta']['status'] for m in req('/v1/models')[1]['data']}

st, ms = req('/v1/models')
check([m['id'] for m in ms['data']] == ['stories260K', 'small', 'tiny2'], 'GET /v1/models: %s' % [m['id'] for m in ms['data']])
check(status() == {'stories260K': 'loaded', 'small': 'unloaded', 'tiny2': 'unloaded'}, 'only the first is loaded: %s' % status())
st, am = req('/v1/models', headers={'anthropic-version': '2023-06-01'})
check([m['id'] for m in am['data']] == ['stories260K', 'small', 'tiny2'] and am['first_id'] == 'stories260K',
      'Anthropic GET /v1/models lists them too')
ref_small = json.load(open(T + '/ref_small.json'))['choices'][0]['message']['content']
ref_tiny = json.load(open(T + '/ref_tiny.json'))['choices'][0]['text']
chat = {'messages': [{'role': 'user', 'content': 'What is the capital of France?'}], 'max_tokens': 12, 'temperature': 0}
comp = {'prompt': 'Once upon a time', 'max_tokens': 16, 'temperature': 0}
st, j = req('/v1/chat/completions', dict(chat, model='small'))
check(st == 200 and j['model'] == 'small' and j['choices'][0]['message']['content'] == ref_small,
      "model 'small' answers as SmolLM2 alone does: %r" % (j.get('choices') and j['choices'][0]['message']['content']))
st, j = req('/v1/completions', comp)
check(st == 200 and j['choices'][0]['text'] == ref_tiny, 'no model named: the first (%r)' % j['choices'][0]['text'])
st, j = req('/v1/completions', dict(comp, model='stories260K'))
check(st == 200 and j['choices'][0]['text'] == ref_tiny, "model 'stories260K' by id")
for path, body, hdr, want in (('/v1/chat/completions', dict(chat, model='nope'), {}, ('model_not_found', 'invalid_request_error')),
                              ('/v1/completions', dict(comp, model='gpt-4o'), {}, ('model_not_found', 'invalid_request_error')),
                              ('/v1/embeddings', {'model': 'nope', 'input': 'x'}, {}, ('model_not_found', 'invalid_request_error')),
                              ('/v1/messages', {'model': 'nope', 'max_tokens': 4, 'messages': [{'role': 'user', 'content': 'x'}]},
                               {'anthropic-version': '2023-06-01'}, None)):
    st, e = req(path, body, hdr)
    if want:
        ok = st == 404 and e['error']['code'] == want[0] and e['error']['type'] == want[1] and e['error']['param'] == 'model'
    else:
        ok = st == 404 and e['type'] == 'error' and e['error']['type'] == 'not_found_error'
    check(ok and body['model'] in json.dumps(e), '%s unknown model -> %d %s' % (path, st, json.dumps(e)[:140]))
# --models-max 2: loading tiny2 unloads small (idle), small loads again on its next request
st, j = req('/v1/completions', dict(comp, model='tiny2'))
check(st == 200 and j['choices'][0]['text'] == ref_tiny and status() == {'stories260K': 'loaded', 'small': 'unloaded', 'tiny2': 'loaded'},
      'tiny2 loaded in place of the idle small: %s' % status())
st, j = req('/v1/chat/completions', dict(chat, model='small'))
check(st == 200 and j['choices'][0]['message']['content'] == ref_small and status()['tiny2'] == 'unloaded',
      'small reloads (same answer), tiny2 goes: %s' % status())
# a stream holding small: tiny2 cannot load until it is done
body = json.dumps(dict(chat, model='small', stream=True, max_tokens=300, messages=[{'role': 'user', 'content': 'Write a long story about a dragon.'}])).encode()
resp = urllib.request.urlopen(urllib.request.Request(URL + '/v1/chat/completions', body, {'content-type': 'application/json'}), timeout=300)
first = resp.readline()
st, e = req('/v1/completions', dict(comp, model='tiny2'))
check(st == 429 and 'in use' in e['error']['message'], 'while small streams, tiny2 -> %d %s' % (st, e.get('error', {}).get('message')))
rest = resp.read().decode()
check(first.startswith(b'data:') and rest.rstrip().endswith('data: [DONE]'), 'the stream finished')
time.sleep(0.2)
st, j = req('/v1/completions', dict(comp, model='tiny2'))
check(st == 200 and j['choices'][0]['text'] == ref_tiny, 'after the stream, tiny2 loads: %s' % status())
# small loads again, evicting the least recently used idle model; a model still
# finishing its last request is in use, and the answer then is 429 "retry shortly"
for _ in range(100):
    st, p = req('/props?model=small')
    if st != 429: break
    time.sleep(0.1)
check(st == 200, '/props?model=small -> %d %s' % (st, p.get('error')))
check(p['model_alias'] == 'small' and p['zerolayer']['n_vocab'] == 49152 and p['model_path'].endswith('SmolLM2-135M-Instruct.Q4_1.gguf'),
      '/props?model=small describes SmolLM2: %s, %s' % (p['model_alias'], p['zerolayer']['description'][:40]))
p = req('/props')[1]
check(p['model_alias'] == 'stories260K' and p['zerolayer']['n_vocab'] == 512, '/props alone: the first model')
st, e = req('/props?model=nope')
check(st == 404 and e['error']['code'] == 'model_not_found', '/props?model=nope -> %d' % st)
json.dump({'small': ref_small, 'tiny': ref_tiny}, open(T + '/refs.json', 'w'))
sys.exit(1 if fails else 0)
PY
node "$COMPAT/models_real.mjs" "$URL" "$T/refs.json" || fails=$((fails + 1))
"$PY" "$COMPAT/models_real.py" "$URL" "$T/refs.json" || fails=$((fails + 1))
if ! kill -0 "$SRV" 2>/dev/null; then echo "FAIL: the server died"; fails=$((fails + 1)); fi
stop_server
# --models-dir: every .gguf of a directory, in name order (the first is the first model)
mkdir -p "$T/dir" && ln -s "$TINY" "$T/dir/a-tiny.gguf" && ln -s "$SMALL" "$T/dir/b-small.gguf" && touch "$T/dir/notes.txt"
zl_serve_start --models-dir "$T/dir" --parallel 1 --ctx 512 || fails=$((fails + 1))
python3 - "$URL" "$T/refs.json" <<'PY' || fails=$((fails + 1))
import json, sys, urllib.request
URL, REFS = sys.argv[1:3]
refs = json.load(open(REFS))
ids = [m['id'] for m in json.load(urllib.request.urlopen(URL + '/v1/models', timeout=60))['data']]
body = {'model': 'b-small', 'messages': [{'role': 'user', 'content': 'What is the capital of France?'}], 'max_tokens': 12, 'temperature': 0}
r = urllib.request.Request(URL + '/v1/chat/completions', json.dumps(body).encode(), {'content-type': 'application/json'})
text = json.load(urllib.request.urlopen(r, timeout=300))['choices'][0]['message']['content']
ok = ids == ['a-tiny', 'b-small'] and text == refs['small']
print('%s --models-dir: ids %s, b-small answers %r' % ('ok  ' if ok else 'FAIL', ids, text))
sys.exit(0 if ok else 1)
PY
stop_server
# --models-idle: an unused model goes by itself; --models-mb: the loaded files' bytes are bounded
lifecycle() { # label, python check, serve args...
    local label="$1" code="$2"; shift 2
    zl_serve_start -m "$TINY" -m "$SMALL" --alias small -m "$TINY" --alias tiny2 --parallel 1 --ctx 256 "$@" ||
        { fails=$((fails + 1)); return; }
    python3 - "$URL" "$T/refs.json" "$label" "$code" <<'PY' || fails=$((fails + 1))
import json, sys, time, urllib.request, urllib.error
URL, REFS, LABEL, CODE = sys.argv[1:5]
refs = json.load(open(REFS))
def req(path, body=None):
    r = urllib.request.Request(URL + path, json.dumps(body).encode() if body is not None else None,
                               {'content-type': 'application/json'})
    try:
        with urllib.request.urlopen(r, timeout=300) as resp:
            return resp.status, json.load(resp)
    except urllib.error.HTTPError as e:
        return e.code, json.load(e)
def status():
    return {m['id']: m['meta']['status'] for m in req('/v1/models')[1]['data']}
def chat(model):
    return req('/v1/chat/completions', {'model': model, 'max_tokens': 12, 'temperature': 0,
                                        'messages': [{'role': 'user', 'content': 'What is the capital of France?'}]})
def comp(model):
    return req('/v1/completions', {'model': model, 'prompt': 'Once upon a time', 'max_tokens': 16, 'temperature': 0})
fails = 0
def check(ok, what):
    global fails
    print(('ok   ' if ok else 'FAIL ') + LABEL + ': ' + what)
    fails += 0 if ok else 1
exec(CODE)
sys.exit(1 if fails else 0)
PY
    stop_server
}
lifecycle "--models-idle 1" '
st, j = chat("small")
check(st == 200 and j["choices"][0]["message"]["content"] == refs["small"] and status()["small"] == "loaded", "small loaded and answers")
time.sleep(2.5)
check(status() == {"stories260K": "loaded", "small": "unloaded", "tiny2": "unloaded"}, "unused for 2.5 s: unloaded, the first stays: %s" % status())
st, j = chat("small")
check(st == 200 and j["choices"][0]["message"]["content"] == refs["small"], "and loads again on use")
' --models-idle 1
# stories260K is 1.1 MiB, SmolLM2 93.8 MiB: 95 MiB hold the first and small, not tiny2 as well
lifecycle "--models-mb 95" '
st, j = chat("small")
check(st == 200 and status()["small"] == "loaded", "first + small fit: %s" % status())
st, j = comp("tiny2")
check(st == 200 and j["choices"][0]["text"] == refs["tiny"] and status() == {"stories260K": "loaded", "small": "unloaded", "tiny2": "loaded"},
      "tiny2 on top would not: small (idle) made room: %s" % status())
' --models-mb 95
lifecycle "--models-mb 50" '
st, e = chat("small")
check(st == 400 and "does not fit --models-mb 50" in e["error"]["message"], "a model larger than the budget: %d %s" % (st, e["error"]["message"]))
st, j = comp("tiny2")
check(st == 200 and j["choices"][0]["text"] == refs["tiny"], "a small one still loads")
' --models-mb 50
out=$("$BIN" serve -m "$TINY" -m "$TINY" --port 0 2>&1); rc=$?
if [ $rc -ne 0 ] && printf '%s' "$out" | grep -q "two models have the id 'stories260K'"; then echo "ok   same id twice: $out"
else echo "FAIL same id twice: rc $rc: $out"; fails=$((fails + 1)); fi
out=$("$BIN" serve --alias x 2>&1); rc=$?
if [ $rc -ne 0 ] && printf '%s' "$out" | grep -q "^zerolayer: --alias names the -m before it"; then echo "ok   --alias first: $out"
else echo "FAIL --alias first: rc $rc: $out"; fails=$((fails + 1)); fi
exit $((fails > 0))
