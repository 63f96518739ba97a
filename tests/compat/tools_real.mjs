// tools_real.mjs — tool calling and structured output on a trained model
// through the official npm OpenAI and Anthropic SDKs, against a running
// `zerolayer serve` (tests/real/tools_sdk.sh starts it).  tools_real.py makes
// the same round trips with the Python SDKs.
//
// usage: node tools_real.mjs BASE_URL MODE      MODE: forced | auto
// forced (any model; the call is forced so the machinery is what is tested):
//   - OpenAI, tool_choice naming the function, not streamed and streamed:
//     finish_reason tool_calls, one call whose arguments parse and hold the
//     required property; then the round trip (assistant tool_calls + a tool
//     message) gives a text answer;
//   - Anthropic, tool_choice {type: tool}, not streamed and streamed (the
//     SDK's stream helper assembles input_json_delta): stop_reason tool_use,
//     a tool_use block with its input; the tool_result round trip answers;
//   - response_format json_schema at temperature 1 parses and validates;
//   - an unsupported schema keyword is a 400 naming it, on both APIs.
// auto (a model that chooses tools, Qwen2.5-Coder): tool_choice auto on a
//   question that needs the tool makes the call, on both APIs; tool_choice
//   none answers in text.
import assert from 'node:assert/strict';
import OpenAI from 'openai';
import Anthropic from '@anthropic-ai/sdk';

const [URL_, MODE] = process.argv.slice(2);
if (!URL_ || !MODE) { console.error('usage: node tools_real.mjs BASE_URL forced|auto'); process.exit(2); }
const oai = new OpenAI({ baseURL: URL_ + '/v1', apiKey: 'none', maxRetries: 0, timeout: 900000 });
const ant = new Anthropic({ baseURL: URL_, apiKey: 'none', maxRetries: 0, timeout: 900000 });

let failed = 0;
async function check(name, fn) {
  const t0 = Date.now();
  try {
    await fn();
    console.log(`ok   ${name} (${Date.now() - t0} ms)`);
  } catch (e) {
    failed++;
    console.log(`FAIL ${name}\n     ${(e && e.stack) || e}`);
  }
}

const params = {
  type: 'object',
  properties: { city: { type: 'string', maxLength: 24 }, unit: { enum: ['celsius', 'fahrenheit'] } },
  required: ['city'],
};
const oaiTools = [{ type: 'function', function: { name: 'get_weather', description: 'The current weather in a city', parameters: params } }];
const antTools = [{ name: 'get_weather', description: 'The current weather in a city', input_schema: params }];
const question = 'What is the weather in Paris right now? Use the get_weather tool.';

function checkArgs(args) {
  assert.equal(typeof args, 'object');
  assert.equal(typeof args.city, 'string', `no city in ${JSON.stringify(args)}`);
  if ('unit' in args) assert.ok(['celsius', 'fahrenheit'].includes(args.unit));
  for (const k of Object.keys(args)) assert.ok(k in params.properties, `unexpected property ${k}`);
}

async function oaiRoundTrip(call) {
  const r = await oai.chat.completions.create({
    model: 'real', max_tokens: 40, temperature: 0,
    messages: [
      { role: 'user', content: question },
      { role: 'assistant', content: null, tool_calls: [call] },
      { role: 'tool', tool_call_id: call.id, content: '{"temperature": 18, "sky": "clear"}' },
    ],
    tools: oaiTools, tool_choice: 'none',
  });
  const m = r.choices[0].message;
  assert.ok(typeof m.content === 'string' && m.content.length > 0, 'no answer after the tool result');
  assert.ok(!m.tool_calls || m.tool_calls.length === 0, 'tool_choice none made a call');
}

async function antRoundTrip(block) {
  const r = await ant.messages.create({
    model: 'real', max_tokens: 40, temperature: 0, tools: antTools, tool_choice: { type: 'none' },
    messages: [
      { role: 'user', content: question },
      { role: 'assistant', content: [block] },
      { role: 'user', content: [{ type: 'tool_result', tool_use_id: block.id, content: '{"temperature": 18, "sky": "clear"}' }] },
    ],
  });
  const text = r.content.filter((b) => b.type === 'text').map((b) => b.text).join('');
  assert.ok(text.length > 0, 'no answer after the tool result');
  assert.ok(!r.content.some((b) => b.type === 'tool_use'), 'tool_choice none made a call');
}

if (MODE === 'forced') {
  const forced = { type: 'function', function: { name: 'get_weather' } };
  await check('openai: forced call, then the round trip', async () => {
    const r = await oai.chat.completions.create({
      model: 'real', max_tokens: 80, temperature: 0, messages: [{ role: 'user', content: question }],
      tools: oaiTools, tool_choice: forced, parallel_tool_calls: false,
    });
    const c = r.choices[0];
    assert.equal(c.finish_reason, 'tool_calls');
    assert.equal(c.message.tool_calls.length, 1);
    const call = c.message.tool_calls[0];
    assert.equal(call.type, 'function');
    assert.equal(call.function.name, 'get_weather');
    assert.ok(call.id.startsWith('call_'));
    checkArgs(JSON.parse(call.function.arguments));
    await oaiRoundTrip(call);
  });
  await check('openai: forced call streamed (delta.tool_calls)', async () => {
    const s = await oai.chat.completions.create({
      model: 'real', max_tokens: 80, temperature: 0.7, seed: 3, stream: true,
      messages: [{ role: 'user', content: question }], tools: oaiTools, tool_choice: 'required', parallel_tool_calls: false,
    });
    const calls = [];
    let finish = null;
    for await (const ch of s) {
      const d = ch.choices[0]?.delta;
      for (const tc of d?.tool_calls ?? []) {
        calls[tc.index] ??= { id: '', name: '', args: '' };
        if (tc.id) calls[tc.index].id = tc.id;
        if (tc.function?.name) calls[tc.index].name += tc.function.name;
        if (tc.function?.arguments) calls[tc.index].args += tc.function.arguments;
      }
      if (ch.choices[0]?.finish_reason) finish = ch.choices[0].finish_reason;
    }
    assert.equal(finish, 'tool_calls');
    assert.equal(calls.length, 1);
    assert.equal(calls[0].name, 'get_weather');
    checkArgs(JSON.parse(calls[0].args));
    await oaiRoundTrip({ id: calls[0].id, type: 'function', function: { name: calls[0].name, arguments: calls[0].args } });
  });
  await check('anthropic: forced tool_use, then the tool_result round trip', async () => {
    const r = await ant.messages.create({
      model: 'real', max_tokens: 80, temperature: 0, tools: antTools,
      tool_choice: { type: 'tool', name: 'get_weather', disable_parallel_tool_use: true },
      messages: [{ role: 'user', content: question }],
    });
    assert.equal(r.stop_reason, 'tool_use');
    const uses = r.content.filter((b) => b.type === 'tool_use');
    assert.equal(uses.length, 1);
    assert.equal(uses[0].name, 'get_weather');
    assert.ok(uses[0].id.startsWith('toolu_'));
    checkArgs(uses[0].input);
    await antRoundTrip(uses[0]);
  });
  await check('anthropic: forced tool_use streamed (input_json_delta)', async () => {
    const st = ant.messages.stream({
      model: 'real', max_tokens: 80, temperature: 0.7, tools: antTools,
      tool_choice: { type: 'any', disable_parallel_tool_use: true },
      system: [{ type: 'text', text: 'You call tools.', cache_control: { type: 'ephemeral' } }],
      metadata: { user_id: 'tools-test' }, messages: [{ role: 'user', content: question }],
    });
    const m = await st.finalMessage();
    assert.equal(m.stop_reason, 'tool_use');
    const uses = m.content.filter((b) => b.type === 'tool_use');
    assert.equal(uses.length, 1);
    checkArgs(uses[0].input);
    await antRoundTrip(uses[0]);
  });
  await check('openai: response_format json_schema at temperature 1', async () => {
    const schema = {
      type: 'object', additionalProperties: false, required: ['name', 'age', 'hobbies'],
      properties: { name: { type: 'string', maxLength: 20 }, age: { type: 'integer' },
                    hobbies: { type: 'array', items: { type: 'string', maxLength: 16 }, maxItems: 3 } },
    };
    for (let seed = 1; seed <= 3; seed++) {
      const r = await oai.chat.completions.create({
        model: 'real', max_tokens: 200, temperature: 1, seed, messages: [{ role: 'user', content: 'Describe a person as JSON.' }],
        response_format: { type: 'json_schema', json_schema: { name: 'person', schema, strict: true } },
      });
      assert.equal(r.choices[0].finish_reason, 'stop');
      const v = JSON.parse(r.choices[0].message.content);
      assert.equal(typeof v.name, 'string');
      assert.ok(Number.isInteger(v.age));
      assert.ok(Array.isArray(v.hobbies) && v.hobbies.length <= 3);
      assert.deepEqual(Object.keys(v).sort(), ['age', 'hobbies', 'name']);
    }
  });
  await check('unsupported schema keywords are 400s naming them', async () => {
    const bad = { type: 'object', properties: { s: { type: 'string', pattern: '^a' } } };
    await assert.rejects(oai.chat.completions.create({
      model: 'real', max_tokens: 5, messages: [{ role: 'user', content: 'x' }],
      response_format: { type: 'json_schema', json_schema: { name: 'x', schema: bad } },
    }), (e) => e.status === 400 && /pattern/.test(e.message));
    await assert.rejects(ant.messages.create({
      model: 'real', max_tokens: 5, messages: [{ role: 'user', content: 'x' }],
      tools: [{ name: 'f', input_schema: bad }],
    }), (e) => e.status === 400 && /pattern/.test(e.message));
  });
} else {
  const q = 'What is the weather like in Tokyo today?';
  await check('openai: tool_choice auto makes the call', async () => {
    const r = await oai.chat.completions.create({
      model: 'real', max_tokens: 80, temperature: 0, messages: [{ role: 'user', content: q }], tools: oaiTools,
    });
    const c = r.choices[0];
    assert.equal(c.finish_reason, 'tool_calls', JSON.stringify(c.message));
    assert.equal(c.message.tool_calls[0].function.name, 'get_weather');
    checkArgs(JSON.parse(c.message.tool_calls[0].function.arguments));
    await oaiRoundTrip(c.message.tool_calls[0]);
  });
  await check('anthropic: tool_choice auto makes the call (streamed)', async () => {
    const m = await ant.messages.stream({
      model: 'real', max_tokens: 80, temperature: 0, tools: antTools, messages: [{ role: 'user', content: q }],
    }).finalMessage();
    assert.equal(m.stop_reason, 'tool_use', JSON.stringify(m.content));
    const u = m.content.find((b) => b.type === 'tool_use');
    checkArgs(u.input);
    await antRoundTrip(u);
  });
  await check('openai: tool_choice none answers in text', async () => {
    const r = await oai.chat.completions.create({
      model: 'real', max_tokens: 30, temperature: 0, messages: [{ role: 'user', content: q }], tools: oaiTools,
      tool_choice: 'none',
    });
    assert.ok(!r.choices[0].message.tool_calls?.length, 'a call under tool_choice none');
    assert.ok(r.choices[0].message.content.length > 0);
  });
}
console.log(failed ? `tools_real.mjs ${MODE}: ${failed} failed` : `tools_real.mjs ${MODE}: all passed`);
process.exit(failed ? 1 : 0);
