"""chat_real.py — chat on a trained model through the official Python OpenAI
and Anthropic SDKs (pinned in requirements.txt), against a running
`zerolayer serve` (tests/real/chat_sdk.sh starts it).  chat_real.mjs makes the
same checks with the npm SDKs.

usage: python3 chat_real.py BASE_URL OUT_JSON MODEL_NAME

For each prompt of prompts.json, greedy (temperature 0): the non-streamed
answer is non-empty with no chat-template token; streamed deltas are each
well-formed text (strict UTF-8 encodable, no U+FFFD, no template token) and
reassemble exactly the non-streamed text with the same finish reason; turns
that must end do so with "stop" / "end_turn" before max_tokens.  Besides the
SDKs, every server-sent event of a raw streamed request is checked to be
valid UTF-8 on the wire, byte for byte.  Writes the answers to OUT_JSON.
A model listed in prompts.json "models" with answer_checks false skips the
answer checks (expect, ends_turn, chars).
"""
import json
import os
import re
import sys
import time
import traceback
import urllib.request

import anthropic
import openai

URL, OUT, MODEL = sys.argv[1:4]
HERE = os.path.dirname(os.path.abspath(__file__))
with open(os.path.join(HERE, 'prompts.json'), encoding='utf-8') as f:
    SPEC = json.load(f)
ANSWERS = SPEC.get('models', {}).get(MODEL, {}).get('answer_checks', True)
CAP = SPEC.get('models', {}).get(MODEL, {}).get('max_tokens_cap')
if not ANSWERS:
    print('# %s: no answer checks (%s)' % (MODEL, SPEC['models'][MODEL]['why']))
oai = openai.OpenAI(base_url=URL + '/v1', api_key='none', max_retries=0, timeout=600)
ant = anthropic.Anthropic(base_url=URL, api_key='none', max_retries=0, timeout=600)
# the Anthropic Python SDK has no temperature argument: sent in the body
GREEDY = {'temperature': 0}

passed = failed = 0


def check(name, fn):
    global passed, failed
    t0 = time.time()
    try:
        fn()
        passed += 1
        print('ok   %s (%d ms)' % (name, (time.time() - t0) * 1000), flush=True)
    except Exception:
        failed += 1
        print('FAIL %s\n     %s' % (name, traceback.format_exc().replace('\n', '\n     ')), flush=True)


def clean(s, what):
    assert isinstance(s, str), '%s: not a string: %r' % (what, s)
    for t in SPEC['template_tokens']:
        assert t not in s, '%s contains the template token %s: %r' % (what, t, s)
    assert '\ufffd' not in s, '%s contains U+FFFD: %r' % (what, s)
    s.encode('utf-8')  # raises on a lone surrogate


def answer_checks(p, text, what):
    clean(text, what)
    assert text.strip(), '%s: empty answer' % what
    if ANSWERS and p.get('expect'):
        assert re.search(p['expect'], text), '%s: %r' % (what, text)


def raw_stream(path, body):
    """The data payloads of a streamed request, as bytes, each strictly UTF-8."""
    req = urllib.request.Request(URL + path, data=json.dumps(body).encode(), method='POST',
                                 headers={'content-type': 'application/json'})
    with urllib.request.urlopen(req, timeout=600) as r:
        raw = r.read()
    events = []
    for e in raw.split(b'\n\n'):
        for line in e.split(b'\n'):
            if line.startswith(b'data: '):
                d = line[6:]
                d.decode('utf-8', errors='strict')
                events.append(d)
    return events


out = {}
for p in SPEC['prompts']:
    p = dict(p, max_tokens=min(p['max_tokens'], CAP or p['max_tokens']))
    system = '\n'.join(m['content'] for m in p['messages'] if m['role'] == 'system')
    turns = [m for m in p['messages'] if m['role'] != 'system']
    oq = dict(model='real', messages=p['messages'], max_tokens=p['max_tokens'], temperature=0)
    aq = dict(model='real', messages=turns, max_tokens=p['max_tokens'], extra_body=GREEDY)
    if system:
        aq['system'] = system
    res = out[p['name']] = {}
    n = p['name']

    def openai_plain():
        r = oai.chat.completions.create(**oq)
        c = r.choices[0]
        res['openai'], res['openai_finish'] = c.message.content, c.finish_reason
        answer_checks(p, c.message.content, 'openai content')
        if ANSWERS and p.get('ends_turn'):
            assert c.finish_reason == 'stop', 'finish_reason %s for %r' % (c.finish_reason, c.message.content)
            assert r.usage.completion_tokens < p['max_tokens'], r.usage
        else:
            assert c.finish_reason in ('stop', 'length'), c.finish_reason

    def openai_stream():
        deltas, finish = [], None
        for ch in oai.chat.completions.create(**oq, stream=True):
            if not ch.choices:
                continue
            d = ch.choices[0].delta.content
            if d:
                clean(d, 'delta %d' % len(deltas))
                deltas.append(d)
            finish = ch.choices[0].finish_reason or finish
        assert deltas, 'no deltas'
        assert ''.join(deltas) == res['openai'], (deltas, res['openai'])
        assert finish == res['openai_finish'], finish

    def anthropic_plain():
        m = ant.messages.create(**aq)
        assert len(m.content) == 1 and m.content[0].type == 'text', m.content
        res['anthropic'], res['anthropic_stop'] = m.content[0].text, m.stop_reason
        answer_checks(p, m.content[0].text, 'anthropic text')
        if ANSWERS and p.get('ends_turn'):
            assert m.stop_reason == 'end_turn', 'stop_reason %s for %r' % (m.stop_reason, m.content[0].text)
            assert m.usage.output_tokens < p['max_tokens'], m.usage
        else:
            assert m.stop_reason in ('end_turn', 'max_tokens'), m.stop_reason

    def anthropic_stream():
        deltas = []
        with ant.messages.stream(**aq) as st:
            for d in st.text_stream:
                clean(d, 'delta %d' % len(deltas))
                deltas.append(d)
            fin = st.get_final_message()
        assert deltas, 'no deltas'
        assert ''.join(deltas) == res['anthropic'], (deltas, res['anthropic'])
        assert fin.stop_reason == res['anthropic_stop'], fin.stop_reason

    def wire_utf8():
        ev = raw_stream('/v1/chat/completions', dict(oq, stream=True))
        text = ''
        for d in ev:
            if d == b'[DONE]':
                continue
            j = json.loads(d)
            if j.get('choices'):
                t = j['choices'][0]['delta'].get('content') or ''
                clean(t, 'raw delta')
                text += t
        assert text == res['openai'], (text, res['openai'])
        body = {k: v for k, v in aq.items() if k != 'extra_body'}
        ev = raw_stream('/v1/messages', dict(body, **GREEDY, stream=True))
        text = ''
        for d in ev:
            j = json.loads(d)
            if j.get('type') == 'content_block_delta':
                clean(j['delta']['text'], 'raw delta')
                text += j['delta']['text']
        assert text == res['anthropic'], (text, res['anthropic'])

    check('%s: openai chat.completions, greedy' % n, openai_plain)
    check('%s: openai streaming reassembles the greedy text' % n, openai_stream)
    check('%s: anthropic messages, greedy' % n, anthropic_plain)
    check('%s: anthropic messages.stream reassembles the greedy text' % n, anthropic_stream)
    check('%s: raw SSE events are valid UTF-8 on the wire' % n, wire_utf8)
    if ANSWERS and p.get('chars'):
        def chars():
            assert any(lo <= ord(c) <= hi for c in res.get('openai') or '' for lo, hi in p['chars']), res.get('openai')
        check('%s: the answer has the characters the prompt asks for' % n, chars)

with open(OUT, 'w', encoding='utf-8') as f:
    json.dump(out, f, ensure_ascii=False, indent=1)
print('python SDKs: %d passed, %d failed' % (passed, failed))
sys.exit(1 if failed else 0)
