"""embeddings_real.py — /v1/embeddings through the official Python OpenAI SDK
(pinned in requirements.txt), against a running `zerolayer serve`
(tests/real/embeddings.sh starts it).  Left to itself the SDK asks for
base64 and decodes it; that, and encoding_format "float", must give exactly
the vectors of VECTORS_JSON (what embeddings.sh read with plain HTTP); a
refused `dimensions` is the SDK's BadRequestError.

usage: python3 embeddings_real.py BASE_URL VECTORS_JSON
"""
import json
import struct
import sys

import openai

URL, VEC = sys.argv[1:3]
ref = json.load(open(VEC))
client = openai.OpenAI(base_url=URL + '/v1', api_key='none')
fails = 0


def check(ok, what):
    global fails
    print(('ok   ' if ok else 'FAIL ') + 'python openai: ' + what)
    fails += 0 if ok else 1


def f32(v):
    return [struct.unpack('<f', struct.pack('<f', x))[0] for x in v]


r = client.embeddings.create(model='smollm2', input=ref['texts'])
got = [list(d.embedding) for d in r.data]
check(len(got) == len(ref['texts']) and all(f32(g) == v and g == v for g, v in zip(got, ref['vectors'])),
      'default encoding: %d vectors equal the plain-HTTP floats' % len(got))
check(r.usage.prompt_tokens > 0 and r.usage.total_tokens == r.usage.prompt_tokens, 'usage %s' % r.usage)
r = client.embeddings.create(model='smollm2', input=[ref['texts'][4]], encoding_format='float')
check(list(r.data[0].embedding) == ref['vectors'][4], 'encoding_format float')
r = client.embeddings.create(model='smollm2', input=[ref['texts'][1]], encoding_format='base64')
check(list(struct.unpack('<576f', __import__('base64').b64decode(r.data[0].embedding))) == ref['vectors'][1],
      'encoding_format base64, decoded here')
try:
    client.embeddings.create(model='smollm2', input='x', dimensions=8)
    check(False, 'dimensions: accepted')
except openai.BadRequestError as e:
    check(e.status_code == 400 and 'dimensions' in str(e), 'dimensions: %d %s' % (e.status_code, e))
sys.exit(1 if fails else 0)
