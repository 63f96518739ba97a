// controls.mjs — per-request verification ring and KV slicing controls of
// `zerolayer serve`: X-Zerolayer-Validation/Ring/KV-Policy/KV-Budget/Compute
// headers and the body object "zerolayer", through the OpenAI and Anthropic
// SDKs and raw fetch.  usage: node controls.mjs ZEROLAYER_BINARY [MODEL]
import { spawnSync } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import assert from 'node:assert/strict';
import OpenAI from 'openai';
import Anthropic from '@anthropic-ai/sdk';
import { startServer as serveStart, checker, metric } from './serve.mjs';

const BIN = process.argv[2];
const MODEL = process.argv[3];
if (!BIN) { console.error('usage: node controls.mjs ZEROLAYER_BINARY [MODEL]'); process.exit(2); }
const CTX = 256;
const FIXTURES = fileURLToPath(new URL('../fixtures/', import.meta.url));

const servers = [];
// stepMs: slow every engine step (ZL_TEST_STEP_MS, a knob of the test build's binary only)
async function startServer(args, { stepMs } = {}) {
  const s = await serveStart(BIN, ['-t', '1', '--ctx', String(CTX), ...(MODEL ? ['-m', MODEL] : []), ...args], stepMs === undefined ? {} : { ZL_TEST_STEP_MS: String(stepMs) });
  servers.push(s);
  return s;
}

const { check, counts } = checker();
async function post(url, path, body, headers = {}) {
  const r = await fetch(url + path, { method: 'POST', headers: { 'content-type': 'application/json', ...headers }, body: JSON.stringify(body) });
  return { status: r.status, json: await r.json() };
}

// Grounded prompts (the ring drafts from repeated text) and free ones.
const PROMPTS = [
  'Once upon a time, there was a little girl named Lily. She loved to play with her toys. One day, Lily',
  'Tom had a big red ball. Tom had a big red ball. Tom had a big red ball. Tom',
  'The sun was shining and the birds were singing. Ben went to the park with his mom.',
  'Sue saw a cat. The cat saw Sue. Sue saw a dog. The dog saw Sue. Sue saw a',
];
const CHATS = [
  'Tell me a story about a dog named Max.',
  'Lily and Ben went to the park. Lily and Ben went to the park. Lily and Ben',
];

const srv = await startServer([]);
const url = srv.url;
const oai = new OpenAI({ baseURL: url + '/v1', apiKey: 'none', maxRetries: 0 });
const ant = new Anthropic({ baseURL: url, apiKey: 'none', maxRetries: 0 });

await check('greedy identity, ring on vs off: /v1/completions (header, body, preset)', async () => {
  let drafted = 0, accepted = 0;
  for (const prompt of PROMPTS) {
    const base = { model: 'm', prompt, max_tokens: 80, temperature: 0 };
    const off = await post(url, '/v1/completions', base);
    assert.equal(off.status, 200, JSON.stringify(off.json));
    assert.equal(off.json.timings.ring, false);
    const variants = [
      await post(url, '/v1/completions', base, { 'X-Zerolayer-Validation': 'on' }),
      await post(url, '/v1/completions', { ...base, zerolayer: { validation: 'on', ring: 3 } }),
      await post(url, '/v1/completions', base, { 'X-Zerolayer-Compute': 'balanced', 'X-Zerolayer-Ring': '16' }),
    ];
    for (const on of variants) {
      assert.equal(on.status, 200, JSON.stringify(on.json));
      assert.equal(on.json.timings.ring, true);
      assert.equal(on.json.choices[0].text, off.json.choices[0].text, prompt);
      assert.equal(on.json.choices[0].finish_reason, off.json.choices[0].finish_reason);
      assert.equal(on.json.usage.completion_tokens, off.json.usage.completion_tokens);
      drafted += on.json.timings.ring_drafted_tokens;
      accepted += on.json.timings.ring_accepted_tokens;
      assert.ok(on.json.timings.ring_acceptance >= 0 && on.json.timings.ring_acceptance <= 1);
    }
  }
  assert.ok(drafted > 0 && accepted > 0, `drafted ${drafted} accepted ${accepted}`);
});

await check('greedy identity, ring on vs off: chat through the OpenAI SDK, streamed and not', async () => {
  for (const content of CHATS) {
    const req = { model: 'm', messages: [{ role: 'user', content }], max_tokens: 60, temperature: 0 };
    const off = await oai.chat.completions.create(req);
    const on = await oai.chat.completions.create(req, { headers: { 'X-Zerolayer-Validation': 'on' } });
    assert.equal(on.choices[0].message.content, off.choices[0].message.content);
    const stream = await oai.chat.completions.create({ ...req, stream: true }, { headers: { 'X-Zerolayer-Validation': 'on', 'X-Zerolayer-Ring': '8' } });
    let text = '';
    for await (const c of stream) text += c.choices[0]?.delta?.content || '';
    assert.equal(text, off.choices[0].message.content);
  }
});

await check('greedy identity, ring on vs off: Anthropic messages through the SDK, streamed and not', async () => {
  for (const content of CHATS) {
    const req = { model: 'm', max_tokens: 60, temperature: 0, messages: [{ role: 'user', content }] };
    const off = await ant.messages.create(req);
    const on = await ant.messages.create({ ...req, zerolayer: { validation: 'on' } });
    assert.equal(on.content[0].text, off.content[0].text);
    assert.equal(on.stop_reason, off.stop_reason);
    assert.equal(on.timings.ring, true);
    const s = ant.messages.stream(req, { headers: { 'X-Zerolayer-Validation': 'on' } });
    const fin = await s.finalMessage();
    assert.equal(fin.content[0].text, off.content[0].text);
  }
});

await check('greedy identity inside continuous batching: ring, plain and bounded requests at once', async () => {
  const ref = [];
  for (const prompt of PROMPTS) ref.push((await post(url, '/v1/completions', { model: 'm', prompt, max_tokens: 50, temperature: 0 })).json.choices[0].text);
  const hdrs = [{}, { 'X-Zerolayer-Validation': 'on' }, { 'X-Zerolayer-Validation': 'on', 'X-Zerolayer-Ring': '2' },
    { 'X-Zerolayer-KV-Policy': 'anchor' }];
  const jobs = [];
  for (let k = 0; k < 3; k++)
    PROMPTS.forEach((prompt, i) => jobs.push(post(url, '/v1/completions', { model: 'm', prompt, max_tokens: 50, temperature: 0 }, hdrs[(i + k) % hdrs.length])
      .then((r) => { assert.equal(r.status, 200); assert.equal(r.json.choices[0].text, ref[i], `prompt ${i}`); })));
  await Promise.all(jobs);
});

await check('ring at the edge of the context: same text and finish_reason as plain decoding', async () => {
  const base = { model: 'm', prompt: PROMPTS[1], max_tokens: 1000, temperature: 0 };
  const off = await post(url, '/v1/completions', base);
  const on = await post(url, '/v1/completions', base, { 'X-Zerolayer-Validation': 'on' });
  assert.equal(off.status, 200);
  assert.equal(on.json.choices[0].text, off.json.choices[0].text);
  assert.equal(on.json.choices[0].finish_reason, off.json.choices[0].finish_reason);
  assert.equal(on.json.usage.completion_tokens, off.json.usage.completion_tokens);
});

await check('ring with logprobs falls back to plain decoding (same text, logprobs present)', async () => {
  const base = { model: 'm', prompt: PROMPTS[0], max_tokens: 20, temperature: 0, logprobs: 2 };
  const off = await post(url, '/v1/completions', base);
  const on = await post(url, '/v1/completions', base, { 'X-Zerolayer-Validation': 'on' });
  assert.equal(on.json.choices[0].text, off.json.choices[0].text);
  assert.equal(on.json.timings.ring, false);
  assert.equal(on.json.choices[0].logprobs.tokens.length, 20);
});

await check('bounded KV policies generate beyond --ctx without error (window, anchor, aggressive preset)', async () => {
  const cases = [
    [{ 'X-Zerolayer-KV-Policy': 'window', 'X-Zerolayer-KV-Budget': '128' }, {}],
    [{}, { zerolayer: { kv_policy: 'anchor', kv_budget: 0.5 } }],
    [{ 'X-Zerolayer-Compute': 'aggressive' }, {}],
  ];
  for (const [headers, extra] of cases) {
    const r = await post(url, '/v1/completions', { model: 'm', prompt: 'Once upon a time', max_tokens: 3 * CTX, temperature: 0, ...extra }, headers);
    assert.equal(r.status, 200, JSON.stringify(r.json));
    assert.equal(r.json.choices[0].finish_reason, 'length');
    assert.equal(r.json.usage.completion_tokens, 3 * CTX);
    assert.ok(r.json.timings.kv_evicted_tokens > 0, JSON.stringify(r.json.timings));
    assert.ok(r.json.timings.kv_bytes_per_token > 0);
  }
  // full KV stops at the context
  const full = await post(url, '/v1/completions', { model: 'm', prompt: 'Once upon a time', max_tokens: 3 * CTX, temperature: 0 });
  assert.ok(full.json.usage.completion_tokens < CTX, JSON.stringify(full.json.usage));
});

await check('bounded policy accepts a prompt longer than the context; full KV rejects it', async () => {
  const long = Array(30).fill('Lily had a red ball and she played with it in the park every day.').join(' ');
  const full = await post(url, '/v1/completions', { model: 'm', prompt: long, max_tokens: 10 });
  assert.equal(full.status, 400);
  const win = await post(url, '/v1/completions', { model: 'm', prompt: long, max_tokens: 10, temperature: 0 }, { 'X-Zerolayer-KV-Policy': 'window' });
  assert.equal(win.status, 200, JSON.stringify(win.json));
  assert.ok(win.json.usage.prompt_tokens > CTX);
  const m = await post(url, '/v1/messages', { model: 'm', max_tokens: 20, messages: [{ role: 'user', content: long }], zerolayer: { kv_policy: 'anchor', anchors: ['red ball'] } });
  assert.equal(m.status, 200, JSON.stringify(m.json));
  assert.ok(m.json.timings.kv_anchor_tokens > 0, JSON.stringify(m.json.timings));
});

await check('metrics: ring and KV counters present and increasing', async () => {
  const d0 = await metric(url, 'zerolayer_ring_drafted_tokens_total');
  const a0 = await metric(url, 'zerolayer_ring_accepted_tokens_total');
  const e0 = await metric(url, 'zerolayer_kv_evicted_tokens_total');
  const g0 = await metric(url, 'zerolayer_kv_anchor_tokens');
  assert.ok(d0 > 0 && a0 >= 0 && e0 > 0 && g0 >= 0, `${d0} ${a0} ${e0} ${g0}`);
  await post(url, '/v1/completions', { model: 'm', prompt: PROMPTS[1], max_tokens: 60, temperature: 0 }, { 'X-Zerolayer-Validation': 'on' });
  await post(url, '/v1/completions', { model: 'm', prompt: 'Once upon a time', max_tokens: 300, temperature: 0 }, { 'X-Zerolayer-KV-Policy': 'window', 'X-Zerolayer-KV-Budget': '100' });
  assert.ok(await metric(url, 'zerolayer_ring_drafted_tokens_total') > d0);
  /* acceptance depends on the adaptive ring's timing-based decisions: never decreasing is what is certain */
  assert.ok(await metric(url, 'zerolayer_ring_accepted_tokens_total') >= a0);
  assert.ok(await metric(url, 'zerolayer_kv_evicted_tokens_total') > e0);
  const text = await (await fetch(url + '/metrics')).text();
  assert.match(text, /# TYPE zerolayer_ring_drafted_tokens_total counter/);
  assert.match(text, /# TYPE zerolayer_kv_anchor_tokens gauge/);
});

await check('400 for bad header and body values, in each API\'s error shape', async () => {
  const bad = [
    ['X-Zerolayer-Validation', 'maybe'], ['X-Zerolayer-Ring', '0'], ['X-Zerolayer-Ring', '17'], ['X-Zerolayer-Ring', 'five'],
    ['X-Zerolayer-KV-Policy', 'lru'], ['X-Zerolayer-KV-Budget', '0'], ['X-Zerolayer-KV-Budget', '1.5'],
    ['X-Zerolayer-KV-Budget', 'abc'], ['X-Zerolayer-Compute', 'turbo'],
  ];
  for (const [h, v] of bad) {
    const o = await post(url, '/v1/chat/completions', { model: 'm', messages: [{ role: 'user', content: 'hi' }], max_tokens: 4 }, { [h]: v, 'X-Zerolayer-KV-Policy': h === 'X-Zerolayer-KV-Budget' ? 'window' : (h === 'X-Zerolayer-KV-Policy' ? v : 'full') });
    assert.equal(o.status, 400, `${h}: ${v}`);
    assert.equal(o.json.error.type, 'invalid_request_error');
    assert.equal(o.json.error.param, h);
    assert.ok(o.json.error.message.includes(h));
    const a = await post(url, '/v1/messages', { model: 'm', max_tokens: 4, messages: [{ role: 'user', content: 'hi' }] }, { [h]: v, 'X-Zerolayer-KV-Policy': h === 'X-Zerolayer-KV-Budget' ? 'window' : (h === 'X-Zerolayer-KV-Policy' ? v : 'full') });
    assert.equal(a.status, 400, `${h}: ${v}`);
    assert.equal(a.json.type, 'error');
    assert.equal(a.json.error.type, 'invalid_request_error');
    assert.ok(a.json.error.message.includes(h), a.json.error.message);
  }
  // a budget too small for a bounded policy names the header
  const small = await post(url, '/v1/completions', { model: 'm', prompt: 'x', max_tokens: 2 }, { 'X-Zerolayer-KV-Policy': 'anchor', 'X-Zerolayer-KV-Budget': '10' });
  assert.equal(small.status, 400);
  assert.equal(small.json.error.param, 'X-Zerolayer-KV-Budget');
  const body = [
    [{ validation: 'sometimes' }, 'zerolayer.validation'], [{ ring: 99 }, 'zerolayer.ring'], [{ kv_policy: 'lru' }, 'zerolayer.kv_policy'],
    [{ kv_budget: -3 }, 'zerolayer.kv_budget'], [{ compute: 'fast' }, 'zerolayer.compute'], [{ anchors: 'x' }, 'zerolayer.anchors'],
    [{ colour: 1 }, 'zerolayer'], [{ kv_policy: 'anchor', anchors: ['not in the prompt at all'] }, 'zerolayer.anchors'],
  ];
  for (const [z, field] of body) {
    const o = await post(url, '/v1/completions', { model: 'm', prompt: 'Once upon a time', max_tokens: 4, zerolayer: z });
    assert.equal(o.status, 400, JSON.stringify(z));
    assert.equal(o.json.error.param, field, JSON.stringify(o.json));
    const a = await post(url, '/v1/messages', { model: 'm', max_tokens: 4, messages: [{ role: 'user', content: 'Once upon a time' }], zerolayer: z });
    assert.equal(a.status, 400, JSON.stringify(z));
    assert.ok(a.json.error.message.includes(field.split('.').pop()), a.json.error.message);
  }
  const zo = await post(url, '/v1/completions', { model: 'm', prompt: 'x', max_tokens: 4, zerolayer: 5 });
  assert.equal(zo.status, 400);
});

await check('server flags set the defaults; headers override them', async () => {
  const s2 = await startServer(['--compute', 'balanced', '--kv-policy', 'window', '--kv-budget', '0.5']);
  const r = await post(s2.url, '/v1/completions', { model: 'm', prompt: PROMPTS[1], max_tokens: 30, temperature: 0 });
  assert.equal(r.status, 200, JSON.stringify(r.json));
  assert.equal(r.json.timings.ring, true);
  assert.equal(r.json.timings.kv_policy, 'window');
  assert.equal(r.json.timings.kv_budget, CTX / 2);
  const x = await post(s2.url, '/v1/completions', { model: 'm', prompt: PROMPTS[1], max_tokens: 30, temperature: 0 }, { 'X-Zerolayer-Compute': 'exact' });
  assert.equal(x.json.timings.ring, false);
  assert.equal(x.json.timings.kv_policy, 'full');
  assert.equal(x.json.choices[0].text, r.json.choices[0].text);
  const y = await post(s2.url, '/v1/completions', { model: 'm', prompt: PROMPTS[1], max_tokens: 30, temperature: 0 }, { 'X-Zerolayer-Compute': 'exact', 'X-Zerolayer-Validation': 'on' });
  assert.equal(y.json.timings.ring, true);
  assert.equal(y.json.timings.kv_policy, 'full');
});

async function histo(url, name) {
  const text = await (await fetch(url + '/metrics')).text();
  const one = text.match(new RegExp('^' + name + '_bucket\\{le="1"\\} ([0-9.e+-]+)$', 'm'));
  const count = text.match(new RegExp('^' + name + '_count ([0-9.e+-]+)$', 'm'));
  return { le1: one ? Number(one[1]) : NaN, count: count ? Number(count[1]) : NaN };
}

// Streams one completion through the OpenAI SDK; returns its text and token count.
async function streamed(client, body, headers) {
  const stream = await client.completions.create({ ...body, stream: true, stream_options: { include_usage: true } }, { headers });
  let text = '', tokens = -1, finish = null;
  for await (const c of stream) {
    if (c.choices?.[0]) { text += c.choices[0].text || ''; finish = c.choices[0].finish_reason || finish; }
    if (c.usage) tokens = c.usage.completion_tokens;
  }
  return { text, tokens, finish };
}

const STREAM_PROMPTS = [
  ...PROMPTS,
  'Lily and Ben went to the park. Lily and Ben went to the park. Lily and Ben',
  'One day, a little bird flew to a big tree. The little bird',
  'She said hello. She said hello. She said hello. She said',
  'Once upon a time',
];

await check('concurrent greedy streams inside one batch: validation on gives exactly the tokens of validation off', async () => {
  // a slow step makes the eight streams share every forward
  const s3 = await startServer(['--parallel', '8'], { stepMs: 3 });
  const client = new OpenAI({ baseURL: s3.url + '/v1', apiKey: 'none', maxRetries: 0 });
  const body = (prompt) => ({ model: 'm', prompt, max_tokens: 64, temperature: 0 });
  const ref = await Promise.all(STREAM_PROMPTS.map((p) => streamed(client, body(p), { 'X-Zerolayer-Validation': 'off' })));
  const d0 = await metric(s3.url, 'zerolayer_ring_drafted_tokens_total');
  const a0 = await metric(s3.url, 'zerolayer_ring_accepted_tokens_total');
  const h0 = await histo(s3.url, 'zerolayer_batch_size');
  for (const ring of ['2', '5', '16']) {
    const on = await Promise.all(STREAM_PROMPTS.map((p) => streamed(client, body(p), { 'X-Zerolayer-Validation': 'on', 'X-Zerolayer-Ring': ring })));
    on.forEach((r, i) => {
      assert.equal(r.text, ref[i].text, `ring ${ring}, prompt ${i}`);
      assert.equal(r.tokens, ref[i].tokens, `ring ${ring}, prompt ${i}: token count`);
      assert.equal(r.finish, ref[i].finish, `ring ${ring}, prompt ${i}: finish_reason`);
    });
  }
  // ring and plain streams mixed in the same batches
  const mixed = await Promise.all(STREAM_PROMPTS.map((p, i) => streamed(client, body(p), { 'X-Zerolayer-Validation': i % 2 ? 'on' : 'off' })));
  mixed.forEach((r, i) => assert.equal(r.text, ref[i].text, `mixed, prompt ${i}`));
  const h1 = await histo(s3.url, 'zerolayer_batch_size');
  const d1 = await metric(s3.url, 'zerolayer_ring_drafted_tokens_total');
  const a1 = await metric(s3.url, 'zerolayer_ring_accepted_tokens_total');
  assert.ok(h1.count - h0.count > h1.le1 - h0.le1, `no step batched two or more sequences: ${JSON.stringify([h0, h1])}`);
  assert.ok(d1 > d0 && a1 > a0, `ring counters: drafted ${d0} -> ${d1}, accepted ${a0} -> ${a1}`);
});

await check('serve --draft-model: same text as plain decoding, drafts counted; a foreign vocabulary is refused at start', async () => {
  const s4 = await startServer(['--parallel', '4', '--spec', 'draft', '--draft-model', join(FIXTURES, 'models/stories260K-F16.gguf')]);
  assert.match(s4.log(), /ring drafts with/);
  let drafted = 0, accepted = 0;
  const jobs = PROMPTS.map(async (prompt) => {
    const base = { model: 'm', prompt, max_tokens: 60, temperature: 0 };
    const off = await post(s4.url, '/v1/completions', base, { 'X-Zerolayer-Validation': 'off' });
    const on = await post(s4.url, '/v1/completions', base);
    assert.equal(on.status, 200, JSON.stringify(on.json));
    assert.equal(on.json.timings.ring, true);
    assert.equal(off.json.timings.ring, false);
    assert.equal(on.json.choices[0].text, off.json.choices[0].text, prompt);
    assert.equal(on.json.usage.completion_tokens, off.json.usage.completion_tokens);
    drafted += on.json.timings.ring_drafted_tokens;
    accepted += on.json.timings.ring_accepted_tokens;
  });
  await Promise.all(jobs);
  // the F16 copy of the model agrees with it almost always
  assert.ok(drafted > 0 && accepted / drafted > 0.6, `drafted ${drafted} accepted ${accepted}`);
  const dir = mkdtempSync(join(tmpdir(), 'zl-draft-'));
  try {
    const foreign = join(dir, 'gpt2-vocab.gguf');
    const syn = spawnSync(BIN, ['synth', '--vocab-from', join(FIXTURES, 'tokenizer/ggml-vocab-gpt-2.gguf'), '--dim', '64', '--ffn', '128',
      '--layers', '1', '--heads', '2', '-o', foreign, '-t', '1'], { encoding: 'utf8' });
    assert.equal(syn.status, 0, syn.stderr);
    const bad = spawnSync(BIN, ['serve', '--port', '0', '-t', '1', ...(MODEL ? ['-m', MODEL] : []), '--draft-model', foreign], { encoding: 'utf8', timeout: 30000 });
    assert.equal(bad.status, 1, bad.stderr);
    assert.match(bad.stderr, /^zerolayer: --draft-model .*gpt2-vocab\.gguf: draft model vocabulary has 50257 tokens, the target's has 512\n$/);
    const flags = spawnSync(BIN, ['serve', '--port', '0', '-t', '1', '--spec', 'draft'], { encoding: 'utf8', timeout: 30000 });
    assert.equal(flags.status, 1);
    assert.match(flags.stderr, /--spec draft needs --draft-model FILE or --draft-layers N/);
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});

await check('serve --ring-cost: a given or measured verify-cost curve, same text as plain decoding; bad values refused', async () => {
  for (const curve of ['1,1.46,1.81,1.39,1.63,1.87,2.11,2.35', 'measure']) {
    const s5 = await startServer(['--parallel', '4', '--ring-cost', curve]);
    assert.match(s5.log(), /ring verify cost \(forward over 1, 2, \.\. tokens \/ 1\): 1\.00( [0-9.]+){3,}/);
    const jobs = PROMPTS.map(async (prompt) => {
      const base = { model: 'm', prompt, max_tokens: 60, temperature: 0 };
      const off = await post(s5.url, '/v1/completions', base);
      const on = await post(s5.url, '/v1/completions', base, { 'X-Zerolayer-Validation': 'on' });
      assert.equal(on.json.timings.ring, true);
      assert.equal(on.json.choices[0].text, off.json.choices[0].text, `${curve}: ${prompt}`);
    });
    await Promise.all(jobs);
  }
  for (const bad of ['1,x', '0', '1,-2', '']) {
    const r = spawnSync(BIN, ['serve', '--port', '0', '-t', '1', '--ring-cost', bad], { encoding: 'utf8', timeout: 30000 });
    assert.equal(r.status, 1, bad);
    assert.match(r.stderr, /--ring-cost/);
  }
});

for (const s of servers) s.proc.kill('SIGTERM');
const { passed, failed } = counts();
console.log(`\n${passed} passed, ${failed} failed`);
process.exit(failed ? 1 : 0);
