"""tools_real.py — tool round trips through the official Python OpenAI and
Anthropic SDKs (pinned in requirements.txt), against a running
`zerolayer serve` (tests/real/tools_sdk.sh starts it); tools_real.mjs makes
the same checks, and more, with the npm SDKs.

usage: python3 tools_real.py BASE_URL

The call is forced (tool_choice naming the function), so the machinery is
what is tested, not the model's judgement: on each API, not streamed and
streamed, the call comes back (finish_reason tool_calls / stop_reason
tool_use) with arguments that parse and hold the required property, and the
round trip with the tool's result gives a text answer.
"""
import json
import sys
import traceback

import anthropic
import openai

URL = sys.argv[1]
oai = openai.OpenAI(base_url=URL + '/v1', api_key='none', max_retries=0, timeout=900)
ant = anthropic.Anthropic(base_url=URL, api_key='none', max_retries=0, timeout=900)
PARAMS = {'type': 'object', 'properties': {'city': {'type': 'string', 'maxLength': 24}}, 'required': ['city']}
OAI_TOOLS = [{'type': 'function', 'function': {'name': 'get_weather', 'description': 'The current weather in a city',
                                               'parameters': PARAMS}}]
ANT_TOOLS = [{'name': 'get_weather', 'description': 'The current weather in a city', 'input_schema': PARAMS}]
Q = 'What is the weather in Paris right now? Use the get_weather tool.'
RESULT = '{"temperature": 18, "sky": "clear"}'
failed = 0


def check(name, fn):
    global failed
    try:
        fn()
        print('ok   ' + name)
    except Exception:
        failed += 1
        print('FAIL ' + name + '\n' + traceback.format_exc())


def args_ok(a):
    assert isinstance(a, dict) and isinstance(a.get('city'), str), a
    assert set(a) <= {'city'}, a


def oai_round(call_id, name, arguments):
    r = oai.chat.completions.create(model='real', max_tokens=40, temperature=0, tools=OAI_TOOLS, tool_choice='none',
                                    messages=[{'role': 'user', 'content': Q},
                                              {'role': 'assistant', 'content': None, 'tool_calls': [
                                                  {'id': call_id, 'type': 'function',
                                                   'function': {'name': name, 'arguments': arguments}}]},
                                              {'role': 'tool', 'tool_call_id': call_id, 'content': RESULT}])
    assert r.choices[0].message.content, 'no answer after the tool result'


def oai_plain():
    r = oai.chat.completions.create(model='real', max_tokens=80, temperature=0, messages=[{'role': 'user', 'content': Q}],
                                    tools=OAI_TOOLS, parallel_tool_calls=False,
                                    tool_choice={'type': 'function', 'function': {'name': 'get_weather'}})
    c = r.choices[0]
    assert c.finish_reason == 'tool_calls', c
    tc = c.message.tool_calls[0]
    args_ok(json.loads(tc.function.arguments))
    oai_round(tc.id, tc.function.name, tc.function.arguments)


def oai_stream():
    calls, finish = {}, None
    for ch in oai.chat.completions.create(model='real', max_tokens=80, temperature=0.7, seed=5, stream=True,
                                          messages=[{'role': 'user', 'content': Q}], tools=OAI_TOOLS,
                                          tool_choice='required', parallel_tool_calls=False):
        if not ch.choices:
            continue
        for tc in ch.choices[0].delta.tool_calls or []:
            c = calls.setdefault(tc.index, {'id': '', 'name': '', 'args': ''})
            c['id'] = tc.id or c['id']
            c['name'] += (tc.function.name or '') if tc.function else ''
            c['args'] += (tc.function.arguments or '') if tc.function else ''
        finish = ch.choices[0].finish_reason or finish
    assert finish == 'tool_calls' and len(calls) == 1, (finish, calls)
    args_ok(json.loads(calls[0]['args']))
    oai_round(calls[0]['id'], calls[0]['name'], calls[0]['args'])


def ant_round(block):
    r = ant.messages.create(model='real', max_tokens=40, tools=ANT_TOOLS, tool_choice={'type': 'none'},
                            messages=[{'role': 'user', 'content': Q},
                                      {'role': 'assistant', 'content': [block]},
                                      {'role': 'user', 'content': [{'type': 'tool_result', 'tool_use_id': block['id'],
                                                                    'content': RESULT}]}],
                            extra_body={'temperature': 0})
    assert ''.join(b.text for b in r.content if b.type == 'text'), 'no answer after the tool result'


def ant_plain():
    r = ant.messages.create(model='real', max_tokens=80, tools=ANT_TOOLS, messages=[{'role': 'user', 'content': Q}],
                            tool_choice={'type': 'tool', 'name': 'get_weather', 'disable_parallel_tool_use': True},
                            extra_body={'temperature': 0})
    assert r.stop_reason == 'tool_use', r
    u = [b for b in r.content if b.type == 'tool_use'][0]
    args_ok(u.input)
    ant_round({'type': 'tool_use', 'id': u.id, 'name': u.name, 'input': u.input})


def ant_stream():
    with ant.messages.stream(model='real', max_tokens=80, tools=ANT_TOOLS, messages=[{'role': 'user', 'content': Q}],
                             tool_choice={'type': 'any', 'disable_parallel_tool_use': True}) as st:
        m = st.get_final_message()
    assert m.stop_reason == 'tool_use', m
    u = [b for b in m.content if b.type == 'tool_use'][0]
    args_ok(u.input)
    ant_round({'type': 'tool_use', 'id': u.id, 'name': u.name, 'input': u.input})


check('openai: forced call, round trip', oai_plain)
check('openai: forced call streamed, round trip', oai_stream)
check('anthropic: forced tool_use, round trip', ant_plain)
check('anthropic: forced tool_use streamed, round trip', ant_stream)
print('tools_real.py: %s' % ('%d failed' % failed if failed else 'all passed'))
sys.exit(1 if failed else 0)
