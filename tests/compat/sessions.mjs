// sessions.mjs — sessions, the tenant-isolated prefix cache and typing-ahead
// prefill of `zerolayer serve`, through the OpenAI and Anthropic SDKs and raw
// fetch.  usage: node sessions.mjs ZEROLAYER_BINARY [MODEL]
//
// Every equivalence check compares greedy text against a reference server
// that has the prefix cache off and no sessions in play.
import assert from 'node:assert/strict';
import OpenAI from 'openai';
import Anthropic from '@anthropic-ai/sdk';
import { startServer as serveStart, metric } from './serve.mjs';

const BIN = process.argv[2];
const MODEL = process.argv[3];
if (!BIN) { console.error('usage: node sessions.mjs ZEROLAYER_BINARY [MODEL]'); process.exit(2); }

const servers = [];
// stepMs: slow every engine step (ZL_TEST_STEP_MS, a knob of the test build's binary only)
async function startServer(args, { stepMs } = {}) {
  const s = await serveStart(BIN, ['-t', '1', '--ctx', '512', ...(MODEL ? ['-m', MODEL] : []), ...args], stepMs === undefined ? {} : { ZL_TEST_STEP_MS: String(stepMs) });
  servers.push(s);
  return s;
}

let failed = 0, passed = 0;
async function check(name, fn) {
  const t0 = Date.now();
  try { await fn(); passed++; console.log(`ok   ${name} (${Date.now() - t0} ms)`); }
  catch (e) { failed++; console.log(`FAIL ${name}\n     ${(e && e.stack) || e}`); }
}
const sleep = (ms) => new Promise((r) => setTimeout(r, ms));
async function post(url, path, body, headers = {}) {
  const r = await fetch(url + path, { method: 'POST', headers: { 'content-type': 'application/json', ...headers }, body: JSON.stringify(body) });
  return { status: r.status, json: await r.json() };
}
async function newSession(url, headers = {}, body = {}) {
  const r = await post(url, '/v1/sessions', body, headers);
  assert.equal(r.status, 200, JSON.stringify(r.json));
  assert.match(r.json.id, /^zs_[0-9a-f]+$/);
  assert.ok(r.json.expires_at > Date.now() / 1000);
  return r.json;
}
const chat = (url, messages, extra = {}, headers = {}) =>
  post(url, '/v1/chat/completions', { model: 'm', messages, max_tokens: 24, temperature: 0, ...extra }, headers);
const msg = (url, messages, extra = {}, headers = {}) =>
  post(url, '/v1/messages', { model: 'm', messages, max_tokens: 24, temperature: 0, ...extra }, { 'anthropic-version': '2023-06-01', ...headers });

const REF = await startServer(['--prefix-cache-mb', '0']);
const A = await startServer(['--parallel', '4']);
const KEYS = Array.from({ length: 8 }, (_, i) => `tenant-key-${i}`);
const K = await startServer(['--parallel', '8', ...KEYS.flatMap((k) => ['--api-key', k])]);
const T = await startServer(['--session-ttl', '1', '--prefill-idle', '1', '--sessions-per-tenant', '2'], { stepMs: 40 });
const E = await startServer(['--session-kv-mb', '1']);

const SYS = 'You are a storyteller. You tell short stories about animals, friends and the sun. Keep every story kind and simple.';
const QUESTIONS = ['Tell me about a cat.', 'What did the dog do?', 'Where is the ball?', 'Who is Lily?'];

try {
  // ---------- continuation (both families, full history and append) ----------
  for (const [fam, call, sysIn] of [['openai', chat, true], ['anthropic', msg, false]]) {
    await check(`${fam}: session continuation = stateless (full history and append)`, async () => {
      for (const q of QUESTIONS.slice(0, 3)) {
        const s = await newSession(A.url);
        const H = { 'X-Zerolayer-Session': s.token };
        const base = sysIn ? [{ role: 'system', content: SYS }] : [];
        const extra = sysIn ? {} : { system: SYS };
        const turn1 = [...base, { role: 'user', content: q }];
        const a1 = await call(A.url, turn1, extra, H), r1 = await call(REF.url, turn1, extra);
        assert.equal(a1.status, 200, JSON.stringify(a1.json));
        const text = (x) => (fam === 'openai' ? x.json.choices[0].message.content : x.json.content[0].text);
        const cached = (x) => (fam === 'openai' ? x.json.usage.prompt_tokens_details.cached_tokens : x.json.usage.cache_read_input_tokens);
        assert.equal(text(a1), text(r1));
        const turn2 = [...turn1, { role: 'assistant', content: text(a1) }, { role: 'user', content: 'And then what happened?' }];
        const a2 = await call(A.url, turn2, extra, H), r2 = await call(REF.url, turn2, extra);
        assert.equal(text(a2), text(r2));
        assert.ok(cached(a2) > 20, `turn 2 reused ${cached(a2)} tokens`);
        assert.equal(cached(r2), 0);
        if (fam === 'anthropic') assert.equal(a2.json.usage.input_tokens + cached(a2), r2.json.usage.input_tokens);
        // append mode: only the new message
        const turn3 = [...turn2, { role: 'assistant', content: text(a2) }, { role: 'user', content: 'Thank you!' }];
        const a3 = await call(A.url, [{ role: 'user', content: 'Thank you!' }], extra, { ...H, 'X-Zerolayer-Session-Mode': 'append' });
        const r3 = await call(REF.url, turn3, extra);
        assert.equal(a3.status, 200, JSON.stringify(a3.json));
        assert.equal(text(a3), text(r3));
        assert.ok(cached(a3) > cached(a2));
      }
    });
  }

  await check('openai SDK: session via header and body field, streaming = non-streaming', async () => {
    const s = await newSession(A.url);
    const oai = new OpenAI({ baseURL: A.url + '/v1', apiKey: 'x', maxRetries: 0, defaultHeaders: { 'X-Zerolayer-Session': s.token } });
    const messages = [{ role: 'system', content: SYS }, { role: 'user', content: 'Tell me a story.' }];
    const a = await oai.chat.completions.create({ model: 'm', messages, max_tokens: 24, temperature: 0 });
    const st = await oai.chat.completions.create({ model: 'm', messages, max_tokens: 24, temperature: 0, stream: true, stream_options: { include_usage: true } });
    let text = '', usage;
    for await (const c of st) { for (const ch of c.choices) text += ch.delta.content || ''; if (c.usage) usage = c.usage; }
    assert.equal(text, a.choices[0].message.content);
    assert.ok(usage.prompt_tokens_details.cached_tokens > 0);
    const plain = new OpenAI({ baseURL: A.url + '/v1', apiKey: 'x', maxRetries: 0 });
    const b = await plain.chat.completions.create({ model: 'm', messages, max_tokens: 24, temperature: 0, session: s.token });
    assert.equal(b.choices[0].message.content, a.choices[0].message.content);
  });

  await check('anthropic SDK: session header, usage.cache_read_input_tokens', async () => {
    const s = await newSession(A.url);
    const ant = new Anthropic({ baseURL: A.url, apiKey: 'x', maxRetries: 0, defaultHeaders: { 'X-Zerolayer-Session': s.token } });
    const messages = [{ role: 'user', content: 'Tell me about the sun.' }];
    const a = await ant.messages.create({ model: 'm', system: SYS, messages, max_tokens: 24, temperature: 0 });
    const b = await ant.messages.create({ model: 'm', system: SYS, messages: [...messages, { role: 'assistant', content: a.content[0].text }, { role: 'user', content: 'More!' }], max_tokens: 24, temperature: 0 });
    const ref = await new Anthropic({ baseURL: REF.url, apiKey: 'x', maxRetries: 0 }).messages.create({ model: 'm', system: SYS, messages: [...messages, { role: 'assistant', content: a.content[0].text }, { role: 'user', content: 'More!' }], max_tokens: 24, temperature: 0 });
    assert.equal(b.content[0].text, ref.content[0].text);
    assert.ok(b.usage.cache_read_input_tokens > 0);
  });

  // ---------- prefix cache ----------
  await check('prefix cache: hit reports cached tokens, output = stateless, metrics', async () => {
    const h0 = await metric(A.url, 'zerolayer_prefix_cache_hit_tokens_total');
    const u = 'pc-user-' + Math.random();
    for (const [i, q] of QUESTIONS.entries()) {
      const m = [{ role: 'system', content: SYS }, { role: 'user', content: q }];
      const a = await chat(A.url, m, { user: u }), r = await chat(REF.url, m);
      assert.equal(a.json.choices[0].message.content, r.json.choices[0].message.content);
      const c = a.json.usage.prompt_tokens_details.cached_tokens;
      if (i === 0) assert.equal(c, 0);
      else { assert.ok(c >= 16 && c < a.json.usage.prompt_tokens, `cached ${c}`); } // exact shared prefix, found by 16-token blocks
    }
    const am = await msg(A.url, [{ role: 'user', content: QUESTIONS[0] }], { system: SYS, metadata: { user_id: u } });
    assert.ok(am.json.usage.cache_read_input_tokens > 0);
    assert.ok((await metric(A.url, 'zerolayer_prefix_cache_hit_tokens_total')) > h0);
    assert.ok((await metric(A.url, 'zerolayer_prefix_cache_query_tokens_total')) > 0);
  });

  // ---------- typing-ahead ----------
  await check('typing-ahead prefill: final request = stateless, only the suffix is new; edits truncate', async () => {
    for (const [partial, final] of [['Tell me about a', 'Tell me about a cat and a dog.'], ['Tell me about a big red', 'Tell me about a small blue ball.']]) {
      const s = await newSession(A.url);
      const H = { 'X-Zerolayer-Session': s.token };
      const p = await post(A.url, `/v1/sessions/${s.id}/prefill`, { messages: [{ role: 'system', content: SYS }, { role: 'user', content: partial }] }, H);
      assert.equal(p.status, 200, JSON.stringify(p.json));
      assert.ok(p.json.cached_tokens > 20);
      const m = [{ role: 'system', content: SYS }, { role: 'user', content: final }];
      const a = await chat(A.url, m, {}, H), r = await chat(REF.url, m);
      assert.equal(a.json.choices[0].message.content, r.json.choices[0].message.content);
      assert.ok(a.json.usage.prompt_tokens_details.cached_tokens > 20);
      const pa = await post(A.url, `/v1/sessions/${s.id}/prefill`, { text: 'Now tell me' }, H); // append form
      assert.equal(pa.status, 200, JSON.stringify(pa.json));
      assert.ok(pa.json.reused_tokens > 20);
    }
    const s = await newSession(A.url);
    const am = await msg(A.url, [{ role: 'user', content: 'Tell me about a cat.' }], { system: SYS });
    const p = await post(A.url, `/v1/sessions/${s.id}/prefill`, { system: SYS, messages: [{ role: 'user', content: 'Tell me about a c' }] }, { 'X-Zerolayer-Session': s.token });
    assert.equal(p.status, 200);
    const a = await msg(A.url, [{ role: 'user', content: 'Tell me about a cat.' }], { system: SYS }, { 'X-Zerolayer-Session': s.token });
    assert.equal(a.json.content[0].text, am.json.content[0].text);
  });

  // ---------- isolation ----------
  await check('isolation: 8 tenants concurrently, cross-tenant tokens 403, cached counts never cross tenants', async () => {
    const refText = new Map();
    for (const q of QUESTIONS) refText.set(q, (await chat(REF.url, [{ role: 'system', content: SYS }, { role: 'user', content: q }])).json.choices[0].message.content);
    const sess = await Promise.all(KEYS.map((k) => newSession(K.url, { authorization: `Bearer ${k}` })));
    let crossChecks = 0;
    await Promise.all(KEYS.map(async (k, i) => {
      const auth = { authorization: `Bearer ${k}` };
      await sleep(Math.random() * 200);
      const order = [...QUESTIONS].sort(() => Math.random() - 0.5);
      for (const [n, q] of order.entries()) {
        const m = [{ role: 'system', content: SYS }, { role: 'user', content: q }];
        const r = await chat(K.url, m, {}, auth);
        assert.equal(r.status, 200);
        assert.equal(r.json.choices[0].message.content, refText.get(q));
        // the first request of a tenant can reuse nothing: others' identical prefixes are not theirs
        if (n === 0) assert.equal(r.json.usage.prompt_tokens_details.cached_tokens, 0, `tenant ${i}`);
        // somebody else's session token
        const j = (i + 1 + Math.floor(Math.random() * 7)) % 8;
        const x = await chat(K.url, m, {}, { ...auth, 'X-Zerolayer-Session': sess[j].token });
        assert.equal(x.status, 403);
        const g = await fetch(`${K.url}/v1/sessions/${sess[j].id}`, { headers: { ...auth, 'X-Zerolayer-Session': sess[j].token } });
        assert.equal(g.status, 403);
        crossChecks += 2;
      }
      const own = await chat(K.url, [{ role: 'system', content: SYS }, { role: 'user', content: order[0] }], {}, { ...auth, 'X-Zerolayer-Session': sess[i].token });
      assert.equal(own.status, 200);
      assert.equal(own.json.choices[0].message.content, refText.get(order[0]));
    }));
    assert.equal(crossChecks, 64);
  });

  // ---------- errors ----------
  await check('bad, altered and forged tokens -> 403; unknown -> 404; busy -> 409', async () => {
    const s = await newSession(A.url);
    const m = [{ role: 'user', content: 'hi' }];
    const alt = s.token.slice(0, -1) + (s.token.endsWith('0') ? '1' : '0');
    for (const t of [alt, 'garbage', s.token.replace(/^zs_(.)/, (_, c) => (c === '0' ? 'zs_1' : 'zs_0')), `zs_${'ab'.repeat(12)}.123.${'0'.repeat(64)}`]) {
      const r = await chat(A.url, m, {}, { 'X-Zerolayer-Session': t });
      assert.equal(r.status, 403, t);
      assert.equal(r.json.error.code, 'invalid_token');
    }
    const other = await chat(A.url, m, { user: 'mallory' }, { 'X-Zerolayer-Session': s.token });
    assert.equal(other.status, 403);
    const an = await msg(A.url, m, {}, { 'X-Zerolayer-Session': alt });
    assert.equal(an.status, 403);
    assert.equal(an.json.type, 'error');
    assert.equal((await fetch(`${A.url}/v1/sessions/${s.id}`)).status, 403); // no token
    const p = await post(A.url, `/v1/sessions/${s.id}/prefill`, { text: 'x' }, { 'X-Zerolayer-Session': alt });
    assert.equal(p.status, 403);
    const bad = await chat(A.url, m, {}, { 'X-Zerolayer-Session-Mode': 'append' });
    assert.equal(bad.status, 400);
  });

  await check('flush drops the KV; delete -> 410 deleted', async () => {
    const s = await newSession(A.url);
    const H = { 'X-Zerolayer-Session': s.token };
    await chat(A.url, [{ role: 'user', content: 'Tell me about a cat.' }], {}, H);
    let g = await (await fetch(`${A.url}/v1/sessions/${s.id}`, { headers: H })).json();
    assert.ok(g.cached_tokens > 10 && g.kv_bytes > 0);
    const f = await post(A.url, `/v1/sessions/${s.id}/flush`, {}, H);
    assert.equal(f.status, 200);
    g = await (await fetch(`${A.url}/v1/sessions/${s.id}`, { headers: H })).json();
    assert.equal(g.cached_tokens, 0);
    assert.equal(g.kv_bytes, 0);
    const r = await chat(A.url, [{ role: 'user', content: 'Tell me about a cat.' }], {}, H);
    assert.equal(r.json.usage.prompt_tokens_details.cached_tokens, 0);
    assert.equal((await fetch(`${A.url}/v1/sessions/${s.id}`, { method: 'DELETE', headers: H })).status, 200);
    const d = await chat(A.url, [{ role: 'user', content: 'hi' }], {}, H);
    assert.equal(d.status, 410);
    assert.equal(d.json.error.code, 'deleted');
  });

  // ---------- expiry, eviction ----------
  await check('expiry: 410 expired, prefill on an expired session, metrics', async () => {
    const s = await newSession(T.url);
    const H = { 'X-Zerolayer-Session': s.token };
    assert.equal((await chat(T.url, [{ role: 'user', content: 'hi' }], { max_tokens: 2 }, H)).status, 200);
    await sleep(1600);
    const r = await chat(T.url, [{ role: 'user', content: 'hi' }], {}, H);
    assert.equal(r.status, 410);
    assert.equal(r.json.error.code, 'expired');
    assert.match(r.json.error.message, /expired/);
    const p = await post(T.url, `/v1/sessions/${s.id}/prefill`, { text: 'x' }, H);
    assert.equal(p.status, 410);
    const a = await msg(T.url, [{ role: 'user', content: 'hi' }], {}, H);
    assert.equal(a.status, 410);
    assert.equal(a.json.type, 'error'); // Anthropic's shape: {type: error, error: {type, message}}
    assert.equal(a.json.error.type, 'invalid_request_error');
    assert.equal(a.json.error.reason, 'expired');
    assert.equal(r.json.error.type, 'invalid_request_error'); // OpenAI's: {error: {message, type, param, code}}
    assert.ok((await metric(T.url, 'zerolayer_sessions_expired_total')) >= 1);
    const u = await post(T.url, `/v1/sessions/zs_${'0'.repeat(24)}/prefill`, { text: 'x' }, H);
    assert.equal(u.status, 403); // the token names another session
  });

  // a long stream on a fresh session (ttl 1 s): its body once the session expired under it
  const expiringStream = async (path) => {
    const s = await newSession(T.url);
    const r = await fetch(T.url + path, {
      method: 'POST', headers: { 'content-type': 'application/json', 'X-Zerolayer-Session': s.token },
      body: JSON.stringify({ model: 'm', max_tokens: 400, stream: true, temperature: 0, messages: [{ role: 'user', content: 'Tell me a long story.' }] }),
    });
    return r.text();
  };

  await check('expiry: an open stream ends with the API\'s own error event (Anthropic event: error, OpenAI data: {error})', async () => {
    const body = await expiringStream('/v1/messages');
    const ev = body.match(/event: error\ndata: (\{[^\n]*\})/);
    assert.ok(ev, body.slice(-400));
    const e = JSON.parse(ev[1]);
    assert.equal(e.type, 'error');
    assert.equal(e.error.type, 'invalid_request_error');
    assert.equal(e.error.reason, 'expired');
    assert.match(e.error.message, /expired/);
    assert.doesNotMatch(body, /message_stop/);
  });

  await check('expiry: an open OpenAI stream ends with data: {error} (code expired), no [DONE]', async () => {
    const body = await expiringStream('/v1/chat/completions');
    const ev = body.match(/^data: (\{"error"[^\n]*\})/m);
    assert.ok(ev, body.slice(-400));
    const e = JSON.parse(ev[1]).error;
    assert.equal(e.type, 'invalid_request_error');
    assert.equal(e.code, 'expired');
    assert.match(e.message, /expired/);
    assert.doesNotMatch(body, /event: /);
    assert.doesNotMatch(body, /\[DONE\]/);
  });

  await check('typing-ahead input is discarded after --prefill-idle', async () => {
    const s = await newSession(T.url);
    const H = { 'X-Zerolayer-Session': s.token };
    const p = await post(T.url, `/v1/sessions/${s.id}/prefill`, { messages: [{ role: 'user', content: 'Tell me about' }] }, H);
    assert.equal(p.status, 200);
    let g = await (await fetch(`${T.url}/v1/sessions/${s.id}`, { headers: H })).json();
    assert.equal(g.cached_tokens, p.json.cached_tokens);
    assert.equal(g.committed_tokens, 0);
    await sleep(1300); // idle 1 s: the partial input goes; the session (ttl 1 s, touched by GET) may go too
    const g2 = await fetch(`${T.url}/v1/sessions/${s.id}`, { headers: H });
    if (g2.status === 200) assert.equal((await g2.json()).cached_tokens, 0);
    else assert.equal(g2.status, 410);
  });

  await check('per-tenant bound evicts the LRU idle session (410 evicted)', async () => {
    const a = await newSession(T.url, {}, { user: 'u1' });
    await sleep(20);
    const b = await newSession(T.url, {}, { user: 'u1' });
    const c = await newSession(T.url, {}, { user: 'u1' });
    const r = await chat(T.url, [{ role: 'user', content: 'hi' }], { user: 'u1', max_tokens: 2 }, { 'X-Zerolayer-Session': a.token });
    assert.equal(r.status, 410);
    assert.equal(r.json.error.code, 'evicted');
    for (const x of [b, c]) assert.equal((await chat(T.url, [{ role: 'user', content: 'hi' }], { user: 'u1', max_tokens: 2 }, { 'X-Zerolayer-Session': x.token })).status, 200);
  });

  await check('KV budget evicts the least recently used idle session', async () => {
    const long = 'Once upon a time there was a little cat who liked to play in the sun with her friends. '.repeat(14);
    const ss = [];
    for (let i = 0; i < 6; i++) {
      const s = await newSession(E.url);
      const r = await chat(E.url, [{ role: 'user', content: `${i} ${long}` }], { max_tokens: 2 }, { 'X-Zerolayer-Session': s.token });
      assert.equal(r.status, 200, JSON.stringify(r.json));
      ss.push(s);
    }
    const first = await chat(E.url, [{ role: 'user', content: 'hi' }], { max_tokens: 2 }, { 'X-Zerolayer-Session': ss[0].token });
    assert.equal(first.status, 410);
    assert.equal(first.json.error.code, 'evicted');
    const last = await chat(E.url, [{ role: 'user', content: 'hi' }], { max_tokens: 2 }, { 'X-Zerolayer-Session': ss[5].token });
    assert.equal(last.status, 200);
    assert.ok((await metric(E.url, 'zerolayer_sessions_kv_bytes')) <= 1 << 20);
  });
} finally {
  await Promise.all(servers.map((s) => new Promise((resolve) => {
    const timer = setTimeout(() => { s.proc.kill('SIGKILL'); }, 20000);
    s.proc.on('exit', (code, sig) => {
      clearTimeout(timer);
      if (code !== 0 || /AddressSanitizer|LeakSanitizer|runtime error/.test(s.log())) {
        failed++;
        console.log(`FAIL server ${s.url} shutdown: exit ${code ?? sig}\n${s.log()}`);
      }
      resolve();
    });
    s.proc.kill('SIGTERM');
  })));
}
console.log(`\n${passed} passed, ${failed} failed`);
process.exit(failed ? 1 : 0);
