#!/usr/bin/env bash
# server_prefill.sh — a session's typing-ahead prefill reads its messages as
# the chat route does (src/server/api_sessions.c through the pipeline), on
# stories260K under the chatml template:
#   - content arrays of text parts and a developer turn: the prefill's
#     cached_tokens equal a chat request's usage.prompt_tokens on the same
#     messages, and the next chat turn on the session reuses them with the
#     greedy text of the stateless request; `system`, `text` and `prompt`
#     (text or token ids) count as the chat and completions routes count;
#   - a malformed message, a non-array `messages`, a tool turn: the same 400
#     (message and param) as the chat route (on a session for the tool turn);
#   - the prefill-only errors keep their text.
# usage: server_prefill.sh BIN ROOT
# needs: loopback
set -uo pipefail
BIN=$(cd "$(dirname "$1")" && pwd)/$(basename "$1")
ROOT=$(cd "$2" && pwd)
. "$ROOT/tests/real/serve_lib.sh"
export ZL_E2E_DIR="$ROOT/tests/e2e" # state_client.py
zl_serve_start -m "$ROOT/models/stories260K.gguf" --ctx 512 --chat-template chatml || exit 1
python3 - "$URL" <<'PY'
import os, sys
sys.path.insert(0, os.environ['ZL_E2E_DIR'])
from state_client import requester
req = requester(sys.argv[1])
fails = 0


def check(ok, what):
    global fails
    print(('ok   ' if ok else 'FAIL ') + what)
    fails += 0 if ok else 1


def session():
    st, s = req('/v1/sessions', {})
    assert st == 200, (st, s)
    return s


def prefill(s, body):
    return req('/v1/sessions/%s/prefill' % s['id'], body, s['token'])


def chat(messages, token=None, **extra):
    return req('/v1/chat/completions', dict(messages=messages, max_tokens=8, temperature=0, **extra), token)


MSGS = [{'role': 'developer', 'content': 'You tell short stories.'},
        {'role': 'user', 'content': [{'type': 'text', 'text': 'Once upon a time, '},
                                     {'type': 'text', 'text': 'there was a cat named Tom.'}]}]

# ---- the same tokens as the chat route
st, ref = chat(MSGS)
n_chat = ref['usage']['prompt_tokens'] if st == 200 else -1
one_part = [MSGS[0], {'role': 'user', 'content': 'Once upon a time, '}]
n_one = chat(one_part)[1]['usage']['prompt_tokens']
s = session()
st, p = prefill(s, {'messages': MSGS})
check(st == 200 and p['cached_tokens'] == n_chat and p['reused_tokens'] + p['prefilled_tokens'] == n_chat and n_chat > n_one,
      'developer + two text parts: prefill cached_tokens %s = chat usage.prompt_tokens %d (one part: %d)'
      % (p.get('cached_tokens', p), n_chat, n_one))
st, a = chat(MSGS, s['token'])
cached = a['usage']['prompt_tokens_details']['cached_tokens'] if st == 200 else -1
check(st == 200 and a['choices'][0]['message']['content'] == ref['choices'][0]['message']['content']
      and cached >= n_chat - 1,
      'the next chat turn on the session reuses the prefill (%d of %d cached) with the stateless greedy text'
      % (cached, n_chat))

as_system = [{'role': 'system', 'content': 'You tell short stories.'}] + MSGS[1:]
st, p = prefill(session(), {'system': 'You tell short stories.', 'messages': MSGS[1:]})
n_sys = chat(as_system)[1]['usage']['prompt_tokens']
check(st == 200 and p['cached_tokens'] == n_sys == n_chat,
      'top-level system = a system turn = a developer turn: %s = %d tokens' % (p.get('cached_tokens', p), n_sys))
st, p = prefill(session(), {'messages': [MSGS[0]], 'text': 'Once upon a time, there was a cat named Tom.'})
check(st == 200 and p['cached_tokens'] == n_chat,
      '`text` after messages is the user turn: %s = %d tokens' % (p.get('cached_tokens', p), n_chat))
st, c = req('/v1/completions', {'prompt': 'Once upon a time', 'max_tokens': 1})
n_text = c['usage']['prompt_tokens']
st, p = prefill(session(), {'prompt': 'Once upon a time'})
check(st == 200 and p['cached_tokens'] == n_text,
      '`prompt` text: %s = completions usage.prompt_tokens %d' % (p.get('cached_tokens', p), n_text))
st, p = prefill(session(), {'prompt': [1, 2, 3, 4, 5]})
check(st == 200 and p['cached_tokens'] == 5, '`prompt` token ids: %s tokens' % p.get('cached_tokens', p))

# ---- the same 400s as the chat route
BAD = [
    ('an unknown role', [{'role': 'wizard', 'content': 'hi'}]),
    ('an image part', [{'role': 'user', 'content': [{'type': 'image_url', 'image_url': {'url': 'x'}}]}]),
    ('a part without text', [{'role': 'user', 'content': [{'type': 'text'}]}]),
    ('no content', [{'role': 'user'}]),
    ('null content', [{'role': 'user', 'content': None}]),
    ('a number as content', [{'role': 'user', 'content': 7}]),
    ('a message that is not an object', ['hi']),
    ('tool_calls on a user turn', [{'role': 'user', 'content': 'x', 'tool_calls': []}]),
    ('a tool turn without tool_call_id', [{'role': 'tool', 'content': 'x'}]),
    ('messages not an array', 'hi'),
    ('messages empty', []),
]
for what, msgs in BAD:
    sc, ec = chat(msgs)
    sp, ep = prefill(session(), {'messages': msgs})
    check(sc == sp == 400 and ec['error']['message'] == ep['error']['message']
          and ec['error']['param'] == ep['error']['param'],
          '%s: prefill %d %r = chat %d %r' % (what, sp, ep['error']['message'], sc, ec['error']['message']))

tool_turns = [{'role': 'user', 'content': 'Weather?'},
              {'role': 'assistant', 'content': None,
               'tool_calls': [{'id': 'c1', 'type': 'function',
                               'function': {'name': 'w', 'arguments': '{"city":"Paris"}'}}]},
              {'role': 'tool', 'tool_call_id': 'c1', 'content': 'sunny'}]
s = session()
sc, ec = chat(tool_turns, s['token'])
sp, ep = prefill(s, {'messages': tool_turns})
check(sc == sp == 400 and ec['error']['message'] == ep['error']['message'] and ep['error']['param'] == 'tools',
      'tool turns on a session: prefill %d %r = chat %d %r' % (sp, ep['error']['message'], sc, ec['error']['message']))

# ---- the prefill's own fields
for body, param, msg in [({}, 'messages', 'prefill needs `messages`, `text` or `prompt`'),
                         ({'text': 3}, 'text', 'text: expected a string'),
                         ({'messages': [], 'text': 'hi', 'system': 3}, 'system',
                          'system: expected a string or an array of content parts'),
                         ({'prompt': 3}, 'prompt', 'prompt: expected a string or an array of token ids')]:
    sp, ep = prefill(session(), body)
    check(sp == 400 and ep['error']['param'] == param and ep['error']['message'] == msg,
          '%s: %d %r' % (sorted(body), sp, ep['error']['message']))
st, p = prefill(session(), {'messages': [], 'text': 'hi'})
check(st == 200 and p['cached_tokens'] > 0, 'empty messages before `text`: %s tokens' % p.get('cached_tokens', p))
sys.exit(1 if fails else 0)
PY
