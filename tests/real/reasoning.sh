#!/usr/bin/env bash
# reasoning.sh — thinking content on SmolLM2-135M with a template that
# thinks: no model here was trained to think, so the test template is
# SmolLM2's own (tests/fixtures/templates/tpl/smollm2-135m.jinja) with its
# generation prompt opening "<think>\n" — the model's text then starts inside
# the block, which is what the splitter and the budget act on:
#   - Anthropic thinking.budget_tokens 6: a thinking block of at most 6 tokens'
#     text, closed by the server, then a text block; streamed: thinking_delta
#     events before text_delta events, block indices in order;
#   - OpenAI: the thinking goes to message.reasoning_content (and streamed
#     delta.reasoning_content), never into content; reasoning_effort is
#     checked (an unknown value is a 400 naming it).
# usage: reasoning.sh ZL_BINARY ROOT   (run through need_models.sh)
# needs: loopback
set -uo pipefail
BIN=$(cd "$(dirname "$1")" && pwd)/$(basename "$1")
ROOT=$(cd "$2" && pwd)
. "$ROOT/tests/real/serve_lib.sh"
MODEL=$(zl_model_file smollm2-135m) || { echo "FAIL: smollm2-135m is not cached"; exit 1; }
python3 - "$ROOT/tests/fixtures/templates/tpl/smollm2-135m.jinja" "$T/think.jinja" <<'PY' || exit 1
import sys
src = open(sys.argv[1]).read()
old = "{{ '<|im_start|>assistant\n' }}"
assert old in src, "the template's generation prompt moved"
open(sys.argv[2], 'w').write(src.replace(old, "{{ '<|im_start|>assistant\n<think>\n' }}"))
PY
zl_serve_start -m "$MODEL" --parallel 2 --ctx 1024 --chat-template-file "$T/think.jinja" || exit 1
python3 - "$URL" "$MODEL" <<'PY'
import json, sys, urllib.request, urllib.error
URL = sys.argv[1]
fails = 0
def post(path, body, stream=False):
    req = urllib.request.Request(URL + path, json.dumps(body).encode(), {'content-type': 'application/json'})
    try:
        r = urllib.request.urlopen(req, timeout=600)
        if stream:
            return r.status, [json.loads(l[6:]) for l in r.read().decode().splitlines() if l.startswith('data: {')]
        return r.status, json.load(r)
    except urllib.error.HTTPError as e:
        return e.code, json.load(e)
def check(ok, what):
    global fails
    print(('ok   ' if ok else 'FAIL ') + what)
    fails += 0 if ok else 1
def tokens(text):
    st, j = post('/tokenize', {'content': text, 'add_special': False})
    return len(j['tokens'])
msgs = [{'role': 'user', 'content': 'What is 2 + 3?'}]
st, j = post('/v1/messages', {'model': 'x', 'max_tokens': 60, 'temperature': 0, 'messages': msgs,
                              'thinking': {'type': 'enabled', 'budget_tokens': 6}})
kinds = [b['type'] for b in j.get('content', [])]
check(st == 200 and kinds[:1] == ['thinking'] and 'text' in kinds, f'anthropic: thinking then text blocks {kinds}')
th = j['content'][0].get('thinking', '') if kinds else ''
check(0 < tokens(th) <= 8 and '</think>' not in th, f'anthropic: thinking within the budget: {th!r}')
txt = ''.join(b.get('text', '') for b in j.get('content', []) if b['type'] == 'text')
check('<think>' not in txt and '</think>' not in txt and txt.strip() != '', f'anthropic: answer text {txt!r}')
st, ev = post('/v1/messages', {'model': 'x', 'max_tokens': 60, 'temperature': 0, 'messages': msgs, 'stream': True,
                               'thinking': {'type': 'enabled', 'budget_tokens': 6}}, stream=True)
deltas = [(e['index'], e['delta']['type']) for e in ev if e.get('type') == 'content_block_delta']
order = [t for _, t in deltas]
check(order and order[0] == 'thinking_delta' and 'text_delta' in order and
      order.index('text_delta') > max(i for i, t in enumerate(order) if t == 'thinking_delta'),
      'anthropic stream: thinking_delta before text_delta')
check(all(i == 0 for i, t in deltas if t == 'thinking_delta') and all(i == 1 for i, t in deltas if t == 'text_delta'),
      'anthropic stream: block indices 0 (thinking) and 1 (text)')
st_txt = ''.join(e['delta'].get('text', '') for e in ev if e.get('type') == 'content_block_delta')
check(st_txt == txt, 'anthropic stream: the same text as the whole reply')
st, j = post('/v1/chat/completions', {'model': 'x', 'max_tokens': 12, 'temperature': 0, 'messages': msgs})
m = j['choices'][0]['message'] if st == 200 else {}
check(st == 200 and m.get('reasoning_content') and '<think>' not in (m.get('content') or ''),
      f'openai: reasoning_content {m.get("reasoning_content")!r}, content {m.get("content")!r}')
st, ev = post('/v1/chat/completions', {'model': 'x', 'max_tokens': 12, 'temperature': 0, 'messages': msgs, 'stream': True},
              stream=True)
rs = ''.join(c['choices'][0]['delta'].get('reasoning_content', '') for c in ev if c.get('choices'))
check(rs == m.get('reasoning_content'), 'openai stream: delta.reasoning_content reassembles it')
st, j = post('/v1/chat/completions', {'model': 'x', 'max_tokens': 5, 'messages': msgs, 'reasoning_effort': 'extreme'})
check(st == 400 and 'reasoning_effort' in json.dumps(j), f'openai: reasoning_effort extreme is a 400: {st}')
st, j = post('/v1/chat/completions', {'model': 'x', 'max_tokens': 5, 'messages': msgs, 'reasoning_effort': 'low'})
check(st == 200, 'openai: reasoning_effort low accepted')
sys.exit(1 if fails else 0)
PY
rc=$?
[ $rc = 0 ] && echo PASS
exit $rc
