#!/usr/bin/env bash
# server_tools.sh — grammars, structured output and tool calls through
# `zerolayer serve` on the embedded stories260K (no chat template of its own:
# the generic tool format, tools described in the system turn).  The model is
# random text; what is tested is that its output is held to the grammar:
#   - grammar "yes" | "no", response_format json_schema (an enum, an object of
#     enums), at temperature 1 over several seeds: the content is always one
#     of the allowed texts and the turn ends (finish stop);
#   - a forced call (tool_choice required / named, parallel off) always comes
#     back as tool_calls with arguments inside the schema, on both APIs,
#     streamed and not: the stream sends the arguments as they are generated,
#     so what one delta holds depends on how many tokens the engine produced
#     since the connection last took some (under load, every token at once:
#     one delta); what is guaranteed and checked is the call's head once, at
#     least one argument delta, and deltas that concatenate to the
#     non-streamed arguments (OpenAI, same seed; Anthropic, temperature 0);
#     the tool_result / role tool round trip is a 200;
#   - bad input is a 400 naming the field: unsupported schema keyword, grammar
#     syntax (line and column), a grammar over the matcher's work bound (at
#     parse time; mid-generation: a 400 after the fact, or the stream's error
#     event), unknown tool name, tool_choice without tools,
#     unknown block types, server tools, a bad thinking type.
# usage: server_tools.sh BIN ROOT
# needs: loopback
set -uo pipefail
BIN=$(cd "$(dirname "$1")" && pwd)/$(basename "$1")
ROOT=$(cd "$2" && pwd)
. "$ROOT/tests/real/serve_lib.sh"
zl_serve_start -m "$ROOT/models/stories260K.gguf" --parallel 4 --ctx 512 || exit 1
python3 - "$URL" <<'PY'
import json, sys, urllib.request, urllib.error
URL = sys.argv[1]
fails = 0
def post(path, body, stream=False):
    req = urllib.request.Request(URL + path, json.dumps(body).encode(), {'content-type': 'application/json'})
    try:
        r = urllib.request.urlopen(req, timeout=300)
        if stream:
            return r.status, [json.loads(l[6:]) for l in r.read().decode().splitlines() if l.startswith('data: {')]
        return r.status, json.load(r)
    except urllib.error.HTTPError as e:
        return e.code, json.load(e)
def check(ok, what):
    global fails
    print(('ok   ' if ok else 'FAIL ') + what)
    fails += 0 if ok else 1
def chat(extra, seed=1, **kw):
    b = {'model': 'x', 'max_tokens': 160, 'temperature': 1, 'seed': seed, 'messages': [{'role': 'user', 'content': 'Hi'}]}
    b.update(extra)
    return post('/v1/chat/completions', b, **kw)

got = set()
for seed in range(1, 7):
    st, j = chat({'grammar': 'root ::= "yes" | "no"'}, seed)
    c = j['choices'][0] if st == 200 else {}
    check(st == 200 and c['message']['content'] in ('yes', 'no') and c['finish_reason'] == 'stop', f'grammar seed {seed}: {c.get("message")}')
    got.add(c.get('message', {}).get('content'))
schema = {'type': 'object', 'properties': {'color': {'enum': ['red', 'green']}, 'n': {'enum': [1, 2, 3]}},
          'required': ['color'], 'additionalProperties': False}
for seed in range(1, 5):
    st, j = chat({'response_format': {'type': 'json_schema', 'json_schema': {'name': 's', 'schema': schema}}}, seed)
    txt = j['choices'][0]['message']['content'] if st == 200 else ''
    try:
        v = json.loads(txt)
        ok = v['color'] in ('red', 'green') and set(v) <= {'color', 'n'} and v.get('n', 1) in (1, 2, 3)
    except Exception:
        ok = False
    check(st == 200 and ok and j['choices'][0]['finish_reason'] == 'stop', f'json_schema seed {seed}: {txt!r}')
st, ev = chat({'stream': True, 'response_format': {'type': 'json_schema', 'json_schema': {'name': 's', 'schema': {'enum': ['a b', 'c']}}}}, 3, stream=True)
txt = ''.join(c['choices'][0]['delta'].get('content', '') for c in ev if c.get('choices'))
check(st == 200 and txt in ('"a b"', '"c"'), f'json_schema streamed: {txt!r}')

tools = [{'type': 'function', 'function': {'name': 'get_weather', 'parameters': {
    'type': 'object', 'properties': {'city': {'enum': ['Paris', 'Rome']}}, 'required': ['city']}}}]
for seed, choice in ((1, 'required'), (2, {'type': 'function', 'function': {'name': 'get_weather'}})):
    st, j = chat({'tools': tools, 'tool_choice': choice, 'parallel_tool_calls': False}, seed)
    c = j['choices'][0] if st == 200 else {}
    calls = c.get('message', {}).get('tool_calls') or []
    args = json.loads(calls[0]['function']['arguments']) if calls else {}
    check(st == 200 and c['finish_reason'] == 'tool_calls' and len(calls) == 1 and args.get('city') in ('Paris', 'Rome'),
          f'forced call ({choice if isinstance(choice, str) else "named"}): {c.get("message")}')
st, ev = chat({'tools': tools, 'tool_choice': 'required', 'parallel_tool_calls': False, 'stream': True}, 4, stream=True)
tcs = [tc for c in ev if c.get('choices') for tc in c['choices'][0]['delta'].get('tool_calls', [])]
fin = [c['choices'][0]['finish_reason'] for c in ev if c.get('choices') and c['choices'][0]['finish_reason']]
streamed = ''.join(tc['function'].get('arguments', '') for tc in tcs)
# the arguments arrive as they are generated: the head (id, type, name) once, with the first fragment, then
# fragments of arguments only (how many: as many as the stream took turns, one when it took them all at once)
check(st == 200 and len(tcs) >= 1 and all(tc['index'] == 0 for tc in tcs) and tcs[0]['id'].startswith('call_') and
      tcs[0]['type'] == 'function' and tcs[0]['function']['name'] == 'get_weather' and
      all(set(tc) == {'index', 'function'} and set(tc['function']) == {'arguments'} for tc in tcs[1:]) and
      json.loads(streamed)['city'] in ('Paris', 'Rome') and fin == ['tool_calls'],
      f'forced call streamed in fragments: {tcs} {fin}')
st, j = chat({'tools': tools, 'tool_choice': 'required', 'parallel_tool_calls': False}, 4)
whole = j['choices'][0]['message']['tool_calls'][0]['function']['arguments'] if st == 200 else None
check(whole == streamed, f'streamed fragments add up to the whole arguments: {streamed!r} vs {whole!r}')
if calls:
    st, j = chat({'tools': tools, 'messages': [{'role': 'user', 'content': 'Hi'},
                                               {'role': 'assistant', 'content': None, 'tool_calls': calls},
                                               {'role': 'tool', 'tool_call_id': calls[0]['id'], 'content': 'sunny'}]})
    check(st == 200, f'openai round trip: {st}')

ant_tools = [{'name': 'get_weather', 'input_schema': tools[0]['function']['parameters']}]
def msg(extra, **kw):
    b = {'model': 'x', 'max_tokens': 160, 'messages': [{'role': 'user', 'content': 'Hi'}]}
    b.update(extra)
    return post('/v1/messages?beta=true', b, **kw)
st, j = msg({'tools': ant_tools, 'tool_choice': {'type': 'tool', 'name': 'get_weather', 'disable_parallel_tool_use': True}})
uses = [b for b in j.get('content', []) if b['type'] == 'tool_use']
check(st == 200 and j['stop_reason'] == 'tool_use' and len(uses) == 1 and uses[0]['input'].get('city') in ('Paris', 'Rome'),
      f'anthropic forced tool_use: {j.get("content")}')
any_call = {'tools': ant_tools, 'temperature': 0, 'tool_choice': {'type': 'any', 'disable_parallel_tool_use': True}}
st, ev = msg(dict(any_call, stream=True), stream=True)
starts = [e['content_block']['type'] for e in ev if e.get('type') == 'content_block_start']
deltas = [e['delta'] for e in ev if e.get('type') == 'content_block_delta']
parts = ''.join(d.get('partial_json', '') for d in deltas)
stops = [e['delta']['stop_reason'] for e in ev if e.get('type') == 'message_delta']
st2, j2 = msg(any_call)
whole_input = [b['input'] for b in j2.get('content', []) if b['type'] == 'tool_use'] if st2 == 200 else None
try:
    streamed_input = json.loads(parts)
except ValueError:
    streamed_input = None
# at least one input_json_delta; together they are the input the same request gets unstreamed
check(st == 200 and starts == ['tool_use'] and len(deltas) >= 1 and all(d['type'] == 'input_json_delta' for d in deltas) and
      isinstance(streamed_input, dict) and streamed_input.get('city') in ('Paris', 'Rome') and stops == ['tool_use'] and
      whole_input == [streamed_input],
      f'anthropic streamed tool_use in input_json_delta fragments: {starts} {deltas!r} {stops} vs {whole_input}')
if uses:
    st, j = msg({'tools': ant_tools, 'system': [{'type': 'text', 'text': 'S', 'cache_control': {'type': 'ephemeral'}}],
                 'metadata': {'user_id': 'u'},
                 'messages': [{'role': 'user', 'content': 'Hi'}, {'role': 'assistant', 'content': uses},
                              {'role': 'user', 'content': [{'type': 'tool_result', 'tool_use_id': uses[0]['id'],
                                                            'content': [{'type': 'text', 'text': 'sunny'}]},
                                                           {'type': 'text', 'text': 'And now?'}]}]})
    check(st == 200 and j['content'][0]['type'] == 'text', f'anthropic tool_result round trip: {st}')

def bad(status_body, field, words, what):
    st, j = status_body
    m = json.dumps(j)
    check(st == 400 and all(w in m for w in words) and (field is None or field in m), f'400 {what}: {st} {m[:200]}')
bad(chat({'response_format': {'type': 'json_schema', 'json_schema': {'name': 's', 'schema': {'type': 'string', 'pattern': 'a'}}}}),
    'response_format.json_schema.schema', ["'pattern'"], 'unsupported keyword')
bad(chat({'grammar': 'root ::= "a" (\n'}), 'grammar', ['line 1 column 14'], 'grammar syntax')
# the matcher's work bound: a grammar whose start is over it is refused with the other grammar errors; one that
# trips it on a later byte ends the generation with a 400 naming the field (streamed: the error event)
WORK = 'matching one byte needs more than 262144 expansion steps'
OVER = '(((("" | "a"){0,100}){0,100}){0,100})'
bad(chat({'grammar': 'root ::= ' + OVER}), 'grammar', ["rule 'root'", WORK], 'grammar over the work bound')
mid = {'grammar': 'root ::= "a" ' + OVER + ' "b"'}
st, j = chat(mid)
check(st == 400 and j['error']['type'] == 'invalid_request_error' and j['error']['param'] == 'grammar' and
      j['error']['message'].startswith('generation failed: grammar: ' + WORK), f'work bound mid-generation: {st} {j}')
st, ev = chat(dict(mid, stream=True), stream=True)
errs = [e['error'] for e in ev if 'error' in e]
check(st == 200 and len(errs) == 1 and errs[0]['type'] == 'invalid_request_error' and errs[0]['param'] == 'grammar' and
      WORK in errs[0]['message'] and not any(c.get('choices') and c['choices'][0].get('finish_reason') for c in ev),
      f'work bound mid-stream: {st} {ev}')
bad(chat({'tools': tools, 'tool_choice': {'type': 'function', 'function': {'name': 'nope'}}}), 'tool_choice', ["'nope'"], 'unknown tool')
bad(chat({'tool_choice': 'required'}), 'tool_choice', ['requires tools'], 'tool_choice without tools')
bad(chat({'tools': [{'type': 'function', 'function': {'name': 'f', 'parameters': {'type': 'object', 'minProperties': 1}}}]}),
    'tools[0].function.parameters', ["'minProperties'"], 'tool schema keyword')
bad(chat({'response_format': {'type': 'xml'}}), 'response_format', ['xml'], 'response_format type')
bad(msg({'tools': [{'name': 'f', 'input_schema': {'type': 'object', 'properties': {'a': {'type': 'integer', 'minimum': 0}}}}]}),
    None, ["'minimum'"], 'anthropic tool schema keyword')
bad(msg({'tools': [{'type': 'web_search_20250305', 'name': 'web_search'}]}), None, ['web_search_20250305'], 'server tool')
bad(msg({'thinking': {'type': 'sometimes'}}), None, ['thinking'], 'thinking type')
bad(msg({'messages': [{'role': 'user', 'content': [{'type': 'image', 'source': {}}]}]}), None, ["'image'"], 'image block')
sys.exit(1 if fails else 0)
PY
rc=$?
[ $rc = 0 ] && echo PASS
exit $rc
