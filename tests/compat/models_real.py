"""models_real.py — two models side by side through the official Python OpenAI
SDK (pinned in requirements.txt), against a running `zerolayer serve` with
several models (tests/real/models.sh starts it: stories260K first, SmolLM2
as 'small').  A streamed chat on 'small' and a completion on 'stories260K'
run at once on two threads; each gives the greedy text its model gives alone
(REFS_JSON); models.list() names them all; an unknown model is the SDK's
NotFoundError with code model_not_found.

usage: python3 models_real.py BASE_URL REFS_JSON
"""
import json
import sys
import threading

import openai

URL, REFS = sys.argv[1:3]
refs = json.load(open(REFS))
client = openai.OpenAI(base_url=URL + '/v1', api_key='none')
fails = 0


def check(ok, what):
    global fails
    print(('ok   ' if ok else 'FAIL ') + 'python openai: ' + what)
    fails += 0 if ok else 1


ids = [m.id for m in client.models.list()]
check(ids == ['stories260K', 'small', 'tiny2'], 'models.list(): %s' % ids)
out = {}


def chat():
    s = client.chat.completions.create(model='small', stream=True, temperature=0, max_tokens=12,
                                       messages=[{'role': 'user', 'content': 'What is the capital of France?'}])
    out['chat'] = ''.join((c.choices[0].delta.content or '') for c in s if c.choices)


def comp():
    out['comp'] = client.completions.create(model='stories260K', prompt='Once upon a time', max_tokens=16,
                                            temperature=0).choices[0].text


ts = [threading.Thread(target=chat), threading.Thread(target=comp)]
for t in ts:
    t.start()
for t in ts:
    t.join()
check(out.get('chat') == refs['small'], "streamed chat on 'small' while 'stories260K' completes: %r" % out.get('chat'))
check(out.get('comp') == refs['tiny'], "completion on 'stories260K' at the same time: %r" % out.get('comp'))
try:
    client.chat.completions.create(model='nope', messages=[{'role': 'user', 'content': 'x'}])
    check(False, 'unknown model accepted')
except openai.NotFoundError as e:
    check(e.code == 'model_not_found', 'unknown model: %d %s' % (e.status_code, e.code))
sys.exit(1 if fails else 0)
