// chat_real.mjs — chat on a trained model through the official npm OpenAI and
// Anthropic SDKs, against a running `zerolayer serve` (tests/real/chat_sdk.sh
// starts it).  chat_real.py makes the same checks with the Python SDKs.
//
// usage: node chat_real.mjs BASE_URL OUT_JSON MODEL_NAME
// Checks, for each prompt of prompts.json, greedy (temperature 0):
//   - the non-streamed answer is non-empty and has no chat-template token;
//   - streamed deltas are each well-formed text (no U+FFFD, no lone
//     surrogate, no template token) and reassemble exactly the non-streamed
//     text, with the same finish reason;
//   - prompts that must end their turn finish with "stop" / "end_turn" before
//     max_tokens, and answers match the prompt's pattern where it has one;
//   - answers to the multi-byte prompts hold the characters asked for, and a
//     reply cut at max_tokens 1..N is a prefix of the full one, made of whole
//     characters (a cut inside an emoji is dropped, never sent as U+FFFD).
// A model listed in prompts.json "models" with answer_checks false (a
// pretrained model that cannot follow a chat) skips the answer checks:
// expect, ends_turn and chars.
// Writes the four answers per prompt to OUT_JSON, so chat_sdk.sh can compare
// them with the Python clients' and across the two APIs.
import assert from 'node:assert/strict';
import fs from 'node:fs';
import OpenAI from 'openai';
import Anthropic from '@anthropic-ai/sdk';

const [URL_, OUT, MODEL] = process.argv.slice(2);
if (!URL_ || !OUT || !MODEL) { console.error('usage: node chat_real.mjs BASE_URL OUT_JSON MODEL_NAME'); process.exit(2); }
const spec = JSON.parse(fs.readFileSync(new URL('./prompts.json', import.meta.url), 'utf8'));
const answers = spec.models?.[MODEL]?.answer_checks ?? true;
const cap = spec.models?.[MODEL]?.max_tokens_cap ?? Infinity;
if (!answers) console.log(`# ${MODEL}: no answer checks (${spec.models[MODEL].why})`);
const oai = new OpenAI({ baseURL: URL_ + '/v1', apiKey: 'none', maxRetries: 0, timeout: 600000 });
const ant = new Anthropic({ baseURL: URL_, apiKey: 'none', maxRetries: 0, timeout: 600000 });

let failed = 0, passed = 0;
async function check(name, fn) {
  const t0 = Date.now();
  try {
    await fn();
    passed++;
    console.log(`ok   ${name} (${Date.now() - t0} ms)`);
  } catch (e) {
    failed++;
    console.log(`FAIL ${name}\n     ${(e && e.stack) || e}`);
  }
}

function clean(s, what) {
  assert.equal(typeof s, 'string', `${what}: not a string`);
  for (const t of spec.template_tokens) assert.ok(!s.includes(t), `${what} contains the template token ${t}: ${JSON.stringify(s)}`);
  assert.ok(!s.includes('\uFFFD'), `${what} contains U+FFFD: ${JSON.stringify(s)}`);
  assert.ok(s.isWellFormed(), `${what} has a lone surrogate: ${JSON.stringify(s)}`);
}

function answerChecks(p, text, what) {
  clean(text, what);
  assert.ok(text.trim().length > 0, `${what}: empty answer`);
  if (answers && p.expect) assert.match(text, new RegExp(p.expect, 'u'), `${what}: ${JSON.stringify(text)}`);
}

const out = {};
for (const p0 of spec.prompts) {
  const p = { ...p0, max_tokens: Math.min(p0.max_tokens, cap) };
  const system = p.messages.filter((m) => m.role === 'system').map((m) => m.content).join('\n');
  const turns = p.messages.filter((m) => m.role !== 'system');
  const oq = { model: 'real', messages: p.messages, max_tokens: p.max_tokens, temperature: 0 };
  const aq = { model: 'real', messages: turns, max_tokens: p.max_tokens, temperature: 0, ...(system ? { system } : {}) };
  const res = (out[p.name] = {});

  await check(`${p.name}: openai chat.completions, greedy`, async () => {
    const r = await oai.chat.completions.create(oq);
    const c = r.choices[0];
    res.openai = c.message.content;
    res.openai_finish = c.finish_reason;
    answerChecks(p, c.message.content, 'openai content');
    if (answers && p.ends_turn) {
      assert.equal(c.finish_reason, 'stop', `finish_reason ${c.finish_reason} for ${JSON.stringify(c.message.content)}`);
      assert.ok(r.usage.completion_tokens < p.max_tokens, `completion_tokens ${r.usage.completion_tokens}`);
    } else assert.ok(['stop', 'length'].includes(c.finish_reason), c.finish_reason);
  });

  await check(`${p.name}: openai streaming reassembles the greedy text`, async () => {
    const s = await oai.chat.completions.create({ ...oq, stream: true });
    const deltas = [];
    let finish = null;
    for await (const ch of s) {
      if (!ch.choices.length) continue;
      const d = ch.choices[0].delta?.content;
      if (d) { clean(d, `delta ${deltas.length}`); deltas.push(d); }
      if (ch.choices[0].finish_reason) finish = ch.choices[0].finish_reason;
    }
    assert.ok(deltas.length > 0, 'no deltas');
    assert.equal(deltas.join(''), res.openai);
    assert.equal(finish, res.openai_finish);
  });

  await check(`${p.name}: anthropic messages, greedy`, async () => {
    const m = await ant.messages.create(aq);
    assert.equal(m.content.length, 1, JSON.stringify(m.content));
    assert.equal(m.content[0].type, 'text');
    res.anthropic = m.content[0].text;
    res.anthropic_stop = m.stop_reason;
    answerChecks(p, m.content[0].text, 'anthropic text');
    if (answers && p.ends_turn) {
      assert.equal(m.stop_reason, 'end_turn', `stop_reason ${m.stop_reason} for ${JSON.stringify(m.content[0].text)}`);
      assert.ok(m.usage.output_tokens < p.max_tokens, `output_tokens ${m.usage.output_tokens}`);
    } else assert.ok(['end_turn', 'max_tokens'].includes(m.stop_reason), m.stop_reason);
  });

  await check(`${p.name}: anthropic messages.stream reassembles the greedy text`, async () => {
    const st = ant.messages.stream(aq);
    const deltas = [];
    st.on('text', (d) => { clean(d, `delta ${deltas.length}`); deltas.push(d); });
    const fin = await st.finalMessage();
    assert.ok(deltas.length > 0, 'no deltas');
    assert.equal(deltas.join(''), res.anthropic);
    assert.equal(fin.content[0].text, res.anthropic);
    assert.equal(fin.stop_reason, res.anthropic_stop);
  });

  if (answers && p.chars) {
    await check(`${p.name}: the answer has the characters the prompt asks for`, async () => {
      const cps = [...(res.openai ?? '')].map((c) => c.codePointAt(0));
      assert.ok(cps.some((c) => p.chars.some(([lo, hi]) => c >= lo && c <= hi)), JSON.stringify(res.openai));
    });
  }

  for (let n = 1; n <= (p.cut_sweep ?? 0); n++) {
    await check(`${p.name}: max_tokens ${n} gives a prefix of whole characters`, async () => {
      const r = await oai.chat.completions.create({ ...oq, max_tokens: n });
      const t = r.choices[0].message.content ?? '';
      clean(t, `max_tokens ${n}`);
      assert.ok((res.openai ?? '').startsWith(t), `${JSON.stringify(t)} is not a prefix of ${JSON.stringify(res.openai)}`);
      if (r.choices[0].finish_reason === 'length') assert.equal(r.usage.completion_tokens, n);
    });
  }
}

fs.writeFileSync(OUT, JSON.stringify(out, null, 1));
console.log(`node SDKs: ${passed} passed, ${failed} failed`);
process.exit(failed ? 1 : 0);
