// run.mjs — `zerolayer serve` against the official OpenAI and Anthropic SDKs.
//
// usage: node run.mjs ZEROLAYER_BINARY [MODEL]
// Starts real servers on random loopback ports (--port 0, the port is read
// from the server's log), drives them with the SDKs and raw fetch, and exits
// non-zero if any check fails.
import http from 'node:http';
import assert from 'node:assert/strict';
import OpenAI from 'openai';
import Anthropic from '@anthropic-ai/sdk';
import { startServer as serveStart, metric } from './serve.mjs';

const BIN = process.argv[2];
const MODEL = process.argv[3];
if (!BIN) { console.error('usage: node run.mjs ZEROLAYER_BINARY [MODEL]'); process.exit(2); }

const servers = [];
// stepMs: slow every engine step (ZL_TEST_STEP_MS, a knob of the test build's binary only)
async function startServer(args, { stepMs } = {}) {
  const s = await serveStart(BIN, ['-t', '1', ...(MODEL ? ['-m', MODEL] : []), ...args], stepMs === undefined ? {} : { ZL_TEST_STEP_MS: String(stepMs) });
  const p = s.proc;
  servers.push(p);
  p.on('exit', (code, sig) => { if (!p.stopping) console.error(`server exited unexpectedly (${code ?? sig}):\n${s.log()}`); });
  return s;
}

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

const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

// A raw streamed request over node:http: the SSE data events and the HTTP
// trailers (fetch does not expose trailers).
function rawStream(url, path, body, headers = {}) {
  return new Promise((resolve, reject) => {
    const u = new URL(url + path);
    const req = http.request({ hostname: u.hostname, port: u.port, path: u.pathname, method: 'POST',
      headers: { 'content-type': 'application/json', TE: 'trailers', ...headers } }, (res) => {
      let buf = '';
      res.setEncoding('utf8');
      res.on('data', (d) => { buf += d; });
      res.on('end', () => {
        const events = buf.split('\n\n').filter((e) => e.includes('data: ')).map((e) => {
          const d = e.slice(e.indexOf('data: ') + 6);
          return d === '[DONE]' ? d : JSON.parse(d);
        });
        resolve({ status: res.statusCode, headers: res.headers, trailers: res.trailers, events, raw: buf });
      });
      res.on('error', reject);
    });
    req.on('error', reject);
    req.end(JSON.stringify(body));
  });
}

const A = await startServer(['--parallel', '16', '--ctx', '512', '--max-body', '65536']);
const B = await startServer(['--parallel', '1', '--queue', '1', '--ctx', '512'], { stepMs: 20 });
const C = await startServer(['--api-key', 'sekret', '--api-key', 'other-key']);
try {
  const oai = new OpenAI({ baseURL: A.url + '/v1', apiKey: 'unused', maxRetries: 0 });
  const ant = new Anthropic({ baseURL: A.url, apiKey: 'unused', maxRetries: 0 });
  const chatMsgs = [{ role: 'system', content: 'You tell stories.' }, { role: 'user', content: 'Tell me about a cat.' }];

  let greedyChat;
  await check('openai chat non-streaming', async () => {
    const r = await oai.chat.completions.create({ model: 'stories', messages: chatMsgs, max_tokens: 24, temperature: 0 });
    assert.equal(r.object, 'chat.completion');
    assert.equal(r.choices.length, 1);
    assert.equal(r.choices[0].message.role, 'assistant');
    assert.equal(typeof r.choices[0].message.content, 'string');
    assert.ok(r.choices[0].message.content.length > 0);
    assert.ok(['length', 'stop'].includes(r.choices[0].finish_reason));
    assert.ok(r.usage.prompt_tokens > 5 && r.usage.completion_tokens > 0);
    assert.equal(r.usage.total_tokens, r.usage.prompt_tokens + r.usage.completion_tokens);
    assert.equal(typeof r.timings.decode_ms, 'number');
    greedyChat = r;
  });

  await check('openai chat streaming = non-streaming (greedy), include_usage', async () => {
    const s = await oai.chat.completions.create({
      model: 'stories', messages: chatMsgs, max_tokens: 24, temperature: 0, stream: true,
      stream_options: { include_usage: true },
    });
    let text = '', finish = null, usage = null, roleSeen = false, n = 0;
    for await (const c of s) {
      n++;
      assert.equal(c.object, 'chat.completion.chunk');
      if (c.usage) usage = c.usage;
      for (const ch of c.choices) {
        if (ch.delta.role) roleSeen = true;
        if (ch.delta.content) text += ch.delta.content;
        if (ch.finish_reason) finish = ch.finish_reason;
      }
    }
    assert.ok(roleSeen && n >= 3);
    assert.equal(text, greedyChat.choices[0].message.content);
    assert.equal(finish, greedyChat.choices[0].finish_reason);
    assert.deepEqual(usage.completion_tokens, greedyChat.usage.completion_tokens);
  });

  await check('openai chat logprobs + top_logprobs', async () => {
    const r = await oai.chat.completions.create({
      model: 'stories', messages: chatMsgs, max_tokens: 8, temperature: 0, logprobs: true, top_logprobs: 3,
    });
    const lp = r.choices[0].logprobs.content;
    assert.equal(lp.length, r.usage.completion_tokens);
    for (const t of lp) {
      assert.ok(t.logprob <= 0);
      assert.equal(t.top_logprobs.length, 3);
      assert.equal(t.top_logprobs[0].logprob, t.logprob); // greedy picks the most likely
    }
    assert.equal(lp.map((t) => t.token).join('').trimStart(), r.choices[0].message.content.trimStart());
  });

  await check('openai chat seed reproduces a sampled answer', async () => {
    const q = { model: 'stories', messages: chatMsgs, max_tokens: 20, temperature: 1, seed: 1234 };
    const a = await oai.chat.completions.create(q), b = await oai.chat.completions.create(q);
    assert.equal(a.choices[0].message.content, b.choices[0].message.content);
  });

  let story;
  await check('openai completions: string prompt', async () => {
    const r = await oai.completions.create({ model: 'stories', prompt: 'Once upon a time', max_tokens: 40, temperature: 0 });
    assert.equal(r.object, 'text_completion');
    assert.ok(r.choices[0].text.length > 20);
    assert.equal(r.choices[0].finish_reason, 'length');
    assert.equal(r.usage.completion_tokens, 40);
    story = r.choices[0].text;
  });

  await check('openai completions: token-array prompt and array of prompts', async () => {
    const tok = await (await fetch(A.url + '/tokenize', { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ content: 'Once upon a time', add_special: true }) })).json();
    const r1 = await oai.completions.create({ model: 'stories', prompt: tok.tokens, max_tokens: 40, temperature: 0 });
    assert.equal(r1.choices[0].text, story);
    const r2 = await oai.completions.create({ model: 'stories', prompt: ['Once upon a time', 'The dog'], max_tokens: 40, temperature: 0 });
    assert.equal(r2.choices.length, 2);
    assert.equal(r2.choices[0].index, 0);
    assert.equal(r2.choices[0].text, story);
    assert.notEqual(r2.choices[1].text, story);
  });

  await check('openai completions: stop sequence (non-streaming and streaming agree)', async () => {
    const words = story.trim().split(' ');
    const stop = ' ' + words[4];
    const cut = story.indexOf(stop);
    assert.ok(cut > 0);
    const r = await oai.completions.create({ model: 'stories', prompt: 'Once upon a time', max_tokens: 40, temperature: 0, stop: [stop, 'zzzz'] });
    assert.equal(r.choices[0].text, story.slice(0, cut));
    assert.equal(r.choices[0].finish_reason, 'stop');
    const s = await oai.completions.create({ model: 'stories', prompt: 'Once upon a time', max_tokens: 40, temperature: 0, stop, stream: true });
    let text = '', fin = null;
    for await (const c of s) { text += c.choices[0]?.text ?? ''; fin = c.choices[0]?.finish_reason ?? fin; }
    assert.equal(text, story.slice(0, cut));
    assert.equal(fin, 'stop');
  });

  await check('openai models list', async () => {
    const list = await oai.models.list();
    const ids = [];
    for await (const m of list) ids.push(m.id);
    assert.equal(ids.length, 1);
  });

  await check('batching invariance: 16 concurrent greedy requests = each alone', async () => {
    const prompts = Array.from({ length: 16 }, (_, i) =>
      ['Once upon a time', 'The little dog', 'Lily wanted', 'One day, Tom', 'The sun was', 'A big red ball',
        'Mom said', 'The bird flew', 'Sam and Sue', 'In the park', 'The cat was sad', 'Ben had a toy',
        'It was a cold day', 'The fish', 'Anna liked to', 'The tree'][i]);
    const one = (p) => oai.completions.create({ model: 'stories', prompt: p, max_tokens: 48, temperature: 0, logprobs: 0 });
    const alone = [];
    for (const p of prompts) alone.push(await one(p));
    const together = await Promise.all(prompts.map(one));
    for (let i = 0; i < 16; i++) {
      assert.equal(together[i].choices[0].text, alone[i].choices[0].text, `prompt ${i}`);
      assert.deepEqual(together[i].choices[0].logprobs.tokens, alone[i].choices[0].logprobs.tokens, `prompt ${i}`);
    }
  });

  let greedyMsg;
  await check('anthropic messages non-streaming', async () => {
    const r = await ant.messages.create({
      model: 'stories', max_tokens: 24, temperature: 0, system: 'You tell stories.',
      messages: [{ role: 'user', content: [{ type: 'text', text: 'Tell me about a cat.' }] }],
      metadata: { user_id: 'u-1' },
    });
    assert.equal(r.type, 'message');
    assert.equal(r.role, 'assistant');
    assert.equal(r.content[0].type, 'text');
    assert.ok(r.content[0].text.length > 0);
    assert.ok(['end_turn', 'max_tokens', 'stop_sequence'].includes(r.stop_reason));
    assert.ok(r.usage.input_tokens > 5 && r.usage.output_tokens > 0);
    assert.equal(r.content[0].text, greedyChat.choices[0].message.content); // same prompt, same template
    greedyMsg = r;
  });

  await check('anthropic messages streaming: exact event sequence, same text', async () => {
    const s = await ant.messages.create({
      model: 'stories', max_tokens: 24, temperature: 0, stream: true, system: [{ type: 'text', text: 'You tell stories.' }],
      messages: [{ role: 'user', content: 'Tell me about a cat.' }],
    });
    const types = [];
    let text = '', stopReason = null, outTokens = 0;
    for await (const ev of s) {
      if (types[types.length - 1] !== ev.type || ev.type !== 'content_block_delta') types.push(ev.type);
      if (ev.type === 'content_block_delta') { assert.equal(ev.delta.type, 'text_delta'); text += ev.delta.text; }
      if (ev.type === 'message_delta') { stopReason = ev.delta.stop_reason; outTokens = ev.usage.output_tokens; }
    }
    // the SDK swallows ping events; the raw stream below checks them
    assert.deepEqual(types, ['message_start', 'content_block_start', 'content_block_delta', 'content_block_stop', 'message_delta', 'message_stop']);
    assert.equal(text, greedyMsg.content[0].text);
    const raw = await fetch(A.url + '/v1/messages', {
      method: 'POST', headers: { 'content-type': 'application/json', 'anthropic-version': '2023-06-01' },
      body: JSON.stringify({ model: 'stories', max_tokens: 24, temperature: 0, stream: true, system: 'You tell stories.', messages: [{ role: 'user', content: 'Tell me about a cat.' }] }),
    });
    assert.equal(raw.headers.get('content-type'), 'text/event-stream');
    const evs = [...(await raw.text()).matchAll(/^event: (\w+)\ndata: (.*)$/gm)].map((m) => [m[1], JSON.parse(m[2]).type]);
    for (const [e, t] of evs) assert.equal(e, t);
    const seq = evs.map((e) => e[0]).filter((e, i, a) => e !== 'content_block_delta' || a[i - 1] !== e);
    assert.deepEqual(seq, ['message_start', 'content_block_start', 'ping', 'content_block_delta', 'content_block_stop', 'message_delta', 'message_stop']);
    assert.equal(stopReason, greedyMsg.stop_reason);
    assert.equal(outTokens, greedyMsg.usage.output_tokens);
  });

  await check('anthropic messages.stream helper + stop_sequences', async () => {
    const words = greedyMsg.content[0].text.split(' ');
    const stop = words.length > 3 ? ' ' + words[2] : words[0];
    const st = ant.messages.stream({ model: 'stories', max_tokens: 24, temperature: 0, system: 'You tell stories.', stop_sequences: [stop], messages: [{ role: 'user', content: 'Tell me about a cat.' }] });
    const msg = await st.finalMessage();
    assert.equal(msg.stop_reason, 'stop_sequence');
    assert.equal(msg.stop_sequence, stop);
    assert.equal(msg.content[0].text, greedyMsg.content[0].text.slice(0, greedyMsg.content[0].text.indexOf(stop)));
  });

  await check('anthropic count_tokens', async () => {
    const r = await ant.messages.countTokens({ model: 'stories', system: 'You tell stories.', messages: [{ role: 'user', content: 'Tell me about a cat.' }] });
    assert.equal(r.input_tokens, greedyMsg.usage.input_tokens);
  });

  await check('anthropic message batches: create, retrieve, list, results (JSONL)', async () => {
    const params = (content) => ({ model: 'stories', max_tokens: 24, temperature: 0, system: 'You tell stories.', messages: [{ role: 'user', content }] });
    const created = await ant.messages.batches.create({ requests: [
      { custom_id: 'a', params: params('Tell me about a cat.') },
      { custom_id: 'b', params: params('Tell me about a dog.') },
      { custom_id: 'bad', params: { model: 'stories', messages: [{ role: 'user', content: 'no max_tokens' }] } },
    ] });
    assert.equal(created.type, 'message_batch');
    assert.match(created.id, /^msgbatch_/);
    let b = created;
    for (let i = 0; i < 200 && b.processing_status !== 'ended'; i++) { await sleep(25); b = await ant.messages.batches.retrieve(created.id); }
    assert.equal(b.processing_status, 'ended');
    assert.deepEqual(b.request_counts, { processing: 0, succeeded: 2, errored: 1, canceled: 0, expired: 0 });
    const seen = {};
    for await (const r of await ant.messages.batches.results(created.id)) seen[r.custom_id] = r.result;
    assert.equal(seen.a.type, 'succeeded');
    assert.equal(seen.a.message.content[0].text, greedyMsg.content[0].text);
    assert.equal(seen.b.type, 'succeeded');
    assert.equal(seen.bad.type, 'errored');
    assert.match(seen.bad.error.error.message, /max_tokens/);
    const ids = [];
    for await (const x of ant.messages.batches.list()) ids.push(x.id);
    assert.ok(ids.includes(created.id));
    await assert.rejects(ant.messages.batches.retrieve('msgbatch_nope'), (e) => e.status === 404);
  });

  await check('errors: 400 naming the field (both APIs)', async () => {
    await assert.rejects(ant.messages.create({ model: 'stories', messages: [{ role: 'user', content: 'hi' }] }), (e) => {
      assert.equal(e.status, 400);
      assert.equal(e.error.type, 'error');
      assert.equal(e.error.error.type, 'invalid_request_error');
      assert.match(e.error.error.message, /max_tokens/);
      return true;
    });
    await assert.rejects(oai.chat.completions.create({ model: 'x', messages: chatMsgs, temperature: 'hot' }), (e) => {
      assert.equal(e.status, 400);
      assert.equal(e.param, 'temperature');
      assert.equal(e.type, 'invalid_request_error');
      return true;
    });
    await assert.rejects(oai.chat.completions.create({ model: 'x', messages: [{ role: 'user', content: [{ type: 'image_url' }] }] }), (e) => {
      assert.equal(e.status, 400);
      assert.match(e.message, /messages\[0\]\.content\[0\]/);
      return true;
    });
    await assert.rejects(ant.messages.create({ model: 'stories', max_tokens: 5, messages: [{ role: 'robot', content: 'hi' }] }), (e) => {
      assert.equal(e.status, 400);
      assert.match(e.error.error.message, /messages\[0\]\.role/);
      return true;
    });
  });

  await check('errors: a body that is not JSON (text/plain, as a cross-site page sends) -> 415 (both APIs)', async () => {
    let r = await fetch(A.url + '/v1/chat/completions', { method: 'POST', body: JSON.stringify({ messages: [{ role: 'user', content: 'hi' }] }) });
    assert.equal(r.status, 415);
    assert.equal((await r.json()).error.code, 'unsupported_media_type');
    r = await fetch(A.url + '/v1/messages', { method: 'POST', body: JSON.stringify({ model: 'm', max_tokens: 1, messages: [{ role: 'user', content: 'hi' }] }) });
    assert.equal(r.status, 415);
    assert.equal((await r.json()).type, 'error');
  });

  await check('errors: invalid JSON and invalid UTF-8 -> 400 naming the field', async () => {
    let r = await fetch(A.url + '/v1/chat/completions', { method: 'POST', headers: { 'content-type': 'application/json' }, body: '{"messages": [' });
    assert.equal(r.status, 400);
    assert.match((await r.json()).error.message, /invalid JSON/);
    const bad = Buffer.concat([Buffer.from('{"model":"m","max_tokens":5,"messages":[{"role":"user","content":"a'), Buffer.from([0xff, 0xfe]), Buffer.from('"}]}')]);
    r = await fetch(A.url + '/v1/messages', { method: 'POST', headers: { 'content-type': 'application/json' }, body: bad });
    assert.equal(r.status, 400);
    const j = await r.json();
    assert.equal(j.type, 'error');
    assert.match(j.error.message, /messages\[0\]\.content: invalid UTF-8/);
  });

  await check('errors: prompt longer than the context -> 400 with token counts', async () => {
    const long = 'Once upon a time there was a cat. '.repeat(200);
    await assert.rejects(oai.completions.create({ model: 'x', prompt: long, max_tokens: 4 }), (e) => {
      assert.equal(e.status, 400);
      assert.match(e.message, /\d+ tokens.*512/);
      return true;
    });
    await assert.rejects(ant.messages.create({ model: 'x', max_tokens: 4, messages: [{ role: 'user', content: long }] }), (e) => {
      assert.equal(e.status, 400);
      assert.match(e.error.error.message, /prompt is too long: \d+ tokens/);
      return true;
    });
  });

  await check('errors: body over the limit -> 413 (both APIs)', async () => {
    const huge = 'x'.repeat(100000);
    await assert.rejects(oai.chat.completions.create({ model: 'x', messages: [{ role: 'user', content: huge }] }), (e) => {
      assert.equal(e.status, 413);
      return true;
    });
    await assert.rejects(ant.messages.create({ model: 'x', max_tokens: 5, messages: [{ role: 'user', content: huge }] }), (e) => {
      assert.equal(e.status, 413);
      assert.equal(e.error.error.type, 'request_too_large');
      return true;
    });
  });

  await check('errors: unknown route 404, wrong method 405', async () => {
    assert.equal((await fetch(A.url + '/v1/nothing')).status, 404);
    assert.equal((await fetch(A.url + '/v1/chat/completions')).status, 405);
  });

  await check('diagnostics: timings + Server-Timing with X-Zerolayer-Diagnostic: full', async () => {
    const r = await fetch(A.url + '/v1/chat/completions', {
      method: 'POST', headers: { 'X-Zerolayer-Diagnostic': 'full', 'Content-Type': 'application/json' },
      body: JSON.stringify({ messages: chatMsgs, max_tokens: 4 }),
    });
    assert.equal(r.status, 200);
    const st = r.headers.get('server-timing');
    for (const k of ['queue', 'prefill', 'decode', 'kv', 'sample']) assert.match(st, new RegExp(k + ';dur=[0-9.]+'));
    const j = await r.json();
    assert.ok(j.timings.prefill_ms >= 0 && j.timings.tokens_per_second >= 0);
  });

  await check('diagnostics: Server-Timing as an HTTP trailer on streamed responses (OpenAI and Anthropic)', async () => {
    const keys = ['queue', 'prefill', 'decode', 'kv', 'sample'];
    const o = await rawStream(A.url, '/v1/chat/completions', { messages: chatMsgs, max_tokens: 4, stream: true },
      { 'X-Zerolayer-Diagnostic': 'full' });
    assert.equal(o.status, 200);
    assert.equal(o.headers['trailer'], 'Server-Timing');
    assert.equal(o.events.at(-1), '[DONE]');
    for (const k of keys) assert.match(o.trailers['server-timing'], new RegExp(k + ';dur=[0-9.]+'));
    const a = await rawStream(A.url, '/v1/messages', { model: 'x', max_tokens: 4, stream: true, messages: [{ role: 'user', content: 'Hi' }] },
      { 'X-Zerolayer-Diagnostic': 'full' });
    assert.equal(a.status, 200);
    assert.equal(a.events.at(-1).type, 'message_stop');
    for (const k of keys) assert.match(a.trailers['server-timing'], new RegExp(k + ';dur=[0-9.]+'));
    // without the diagnostic header: no trailer announced or sent
    const plain = await rawStream(A.url, '/v1/chat/completions', { messages: chatMsgs, max_tokens: 2, stream: true });
    assert.equal(plain.headers['trailer'], undefined);
    assert.equal(plain.trailers['server-timing'], undefined);
  });

  await check('stream buffer: header / body field bound held tokens; a matched stop is never streamed', async () => {
    // a stop of several tokens from the greedy story (multi-word, so it spans tokens)
    const words = story.trim().split(' ');
    const stop = ' ' + words.slice(5, 8).join(' ');
    const cut = story.indexOf(stop);
    assert.ok(cut > 0);
    const q = { prompt: 'Once upon a time', max_tokens: 40, temperature: 0, stream: true, stop };
    const texts = (r) => r.events.filter((e) => e !== '[DONE]' && e.choices?.length).map((e) => e.choices[0].text);
    for (const [hdr, body] of [[{ 'X-Zerolayer-Stream-Buffer': '16' }, {}], [{}, { stream_buffer: 16 }], [{}, {}]]) {
      const r = await rawStream(A.url, '/v1/completions', { ...q, ...body }, hdr);
      assert.equal(r.status, 200);
      const parts = texts(r);
      assert.equal(parts.join(''), story.slice(0, cut));
      assert.ok(!r.raw.includes(stop.trim()), 'the stop sequence was streamed');
      assert.equal(r.events.filter((e) => e.choices?.[0]?.finish_reason).at(-1).choices[0].finish_reason, 'stop');
    }
    // a bound of one token, smaller than the stop: the stop still ends the stream and never arrives whole
    const b1 = await rawStream(A.url, '/v1/completions', { ...q, stream_buffer: 1 });
    const t1 = texts(b1).join('');
    assert.ok(story.startsWith(t1) && t1.length < cut + stop.length && !t1.includes(stop));
    assert.equal(b1.events.filter((e) => e.choices?.[0]?.finish_reason).at(-1).choices[0].finish_reason, 'stop');
    // Anthropic: the header and stop_sequences
    const am = await rawStream(A.url, '/v1/messages', { model: 'x', max_tokens: 40, temperature: 0, stream: true,
      messages: [{ role: 'user', content: 'Tell me about a cat.' }] }, { 'X-Zerolayer-Stream-Buffer': '8' });
    const atext = am.events.filter((e) => e.type === 'content_block_delta').map((e) => e.delta.text).join('');
    const aw = atext.trim().split(' ');
    assert.ok(aw.length > 6, atext);
    {
      const astop = ' ' + aw.slice(3, 5).join(' ');
      const a2 = await rawStream(A.url, '/v1/messages', { model: 'x', max_tokens: 40, temperature: 0, stream: true,
        stop_sequences: [astop], messages: [{ role: 'user', content: 'Tell me about a cat.' }] }, { 'X-Zerolayer-Stream-Buffer': '8' });
      const t2 = a2.events.filter((e) => e.type === 'content_block_delta').map((e) => e.delta.text).join('');
      assert.equal(t2, atext.slice(0, atext.indexOf(astop)));
      assert.equal(a2.events.find((e) => e.type === 'message_delta').delta.stop_reason, 'stop_sequence');
    }
    // invalid values name the header / field
    for (const v of ['-1', 'abc', '1.5']) {
      const r = await fetch(A.url + '/v1/completions', { method: 'POST', headers: { 'content-type': 'application/json', 'X-Zerolayer-Stream-Buffer': v },
        body: JSON.stringify({ prompt: 'x', max_tokens: 1 }) });
      assert.equal(r.status, 400);
      assert.equal((await r.json()).error.param, 'X-Zerolayer-Stream-Buffer');
    }
    const rb = await fetch(A.url + '/v1/completions', { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ prompt: 'x', max_tokens: 1, stream_buffer: -2 }) });
    assert.equal(rb.status, 400);
    assert.equal((await rb.json()).error.param, 'stream_buffer');
    const ra = await fetch(A.url + '/v1/messages', { method: 'POST', headers: { 'content-type': 'application/json', 'X-Zerolayer-Stream-Buffer': 'x' },
      body: JSON.stringify({ model: 'x', max_tokens: 1, messages: [{ role: 'user', content: 'Hi' }] }) });
    assert.equal(ra.status, 400);
    assert.equal((await ra.json()).error.type, 'invalid_request_error');
  });

  await check('tokenize / detokenize round trip, health, preheat', async () => {
    const t = await (await fetch(A.url + '/tokenize', { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ content: 'Hello world' }) })).json();
    const d = await (await fetch(A.url + '/detokenize', { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ tokens: t.tokens }) })).json();
    assert.equal(d.content.trim(), 'Hello world');
    const h = await (await fetch(A.url + '/health')).json();
    assert.equal(h.status, 'ok');
    const p = await (await fetch(A.url + '/v1/preheat', { method: 'POST' })).json();
    assert.ok(p.bytes > 0);
  });

  await check('metrics: Prometheus text format with the required series', async () => {
    const text = await (await fetch(A.url + '/metrics')).text();
    const lines = text.split('\n').filter((l) => l.length);
    const typed = new Map();
    for (const l of lines) {
      if (l.startsWith('# HELP ')) continue;
      if (l.startsWith('# TYPE ')) {
        const [, , name, type] = l.split(' ');
        assert.ok(['counter', 'gauge', 'histogram'].includes(type), l);
        assert.ok(!typed.has(name), 'duplicate TYPE ' + name);
        typed.set(name, type);
        continue;
      }
      const m = l.match(/^([a-zA-Z_:][a-zA-Z0-9_:]*)(\{[a-zA-Z_][a-zA-Z0-9_]*="[^"\\]*"(,[a-zA-Z_][a-zA-Z0-9_]*="[^"\\]*")*\})? (-?[0-9.e+-]+|\+Inf|NaN)$/);
      assert.ok(m, 'bad sample line: ' + l);
      const base = m[1].replace(/_(bucket|sum|count)$/, '');
      assert.ok(typed.has(m[1]) || typed.get(base) === 'histogram', 'sample without TYPE: ' + l);
    }
    for (const [n, t] of [['zerolayer_requests_total', 'counter'], ['zerolayer_request_duration_seconds', 'histogram'],
      ['zerolayer_time_to_first_token_seconds', 'histogram'], ['zerolayer_inter_token_seconds', 'histogram'],
      ['zerolayer_prompt_tokens_total', 'counter'], ['zerolayer_generated_tokens_total', 'counter'],
      ['zerolayer_requests_running', 'gauge'], ['zerolayer_requests_waiting', 'gauge'],
      ['zerolayer_kv_usage_ratio', 'gauge'], ['zerolayer_batch_size', 'histogram']]) assert.equal(typed.get(n), t, n);
    assert.match(text, /zerolayer_requests_total\{route="\/v1\/chat\/completions",status="200"\} \d+/);
    assert.match(text, /zerolayer_requests_total\{route="\/v1\/messages",status="413"\} 1/);
    assert.match(text, /zerolayer_batch_size_bucket\{le="16"\} \d+/);
    // engine time: after the requests above the engine has worked, mostly in forward passes
    const v = (n) => Number(text.match(new RegExp('^zerolayer_engine_' + n + ' ([0-9.e+-]+)$', 'm'))[1]);
    assert.ok(v('steps_total') > 0);
    assert.ok(v('busy_seconds_total') > 0);
    assert.ok(v('forward_seconds_total') > 0 && v('forward_seconds_total') <= v('busy_seconds_total'));
    assert.ok(v('sample_seconds_total') >= 0 && v('forward_seconds_total') + v('sample_seconds_total') <= v('busy_seconds_total') * 1.001);
  });

  // ---- server B: one slot, queue of one, slowed engine ----
  const oaiB = new OpenAI({ baseURL: B.url + '/v1', apiKey: 'x', maxRetries: 0 });
  const antB = new Anthropic({ baseURL: B.url, apiKey: 'x', maxRetries: 0 });

  await check('disconnect mid-stream frees the sequence (visible in /metrics)', async () => {
    const ac = new AbortController();
    const s = await oaiB.completions.create({ model: 'x', prompt: 'Once upon a time', max_tokens: 400, stream: true }, { signal: ac.signal });
    let n = 0, finished = null;
    try {
      for await (const c of s) { finished = c.choices[0]?.finish_reason ?? finished; if (++n === 3) ac.abort(); }
    } catch (e) { /* the SDK may end the iteration quietly or throw on abort */ }
    /* chunks already buffered when abort() runs may still be delivered */
    assert.ok(n >= 3 && n < 20, `read ${n} chunks`);
    assert.equal(finished, null);
    let running = 1;
    for (let i = 0; i < 50 && running; i++) { await sleep(20); running = await metric(B.url, 'zerolayer_requests_running'); }
    assert.equal(running, 0, 'the sequence was not freed');
    assert.equal(await metric(B.url, 'zerolayer_kv_usage_ratio'), 0);
  });

  await check('queue full -> 429 (OpenAI) and 529 overloaded_error (Anthropic) with Retry-After', async () => {
    const long = () => oaiB.completions.create({ model: 'x', prompt: 'Once upon a time', max_tokens: 60 });
    const p1 = long();
    await sleep(100);
    const p2 = long(); // waits in the queue
    await sleep(50);
    await assert.rejects(long(), (e) => { assert.equal(e.status, 429); assert.equal(e.headers.get('retry-after'), '1'); return true; });
    await assert.rejects(antB.messages.create({ model: 'x', max_tokens: 5, messages: [{ role: 'user', content: 'hi' }] }), (e) => {
      assert.equal(e.status, 529);
      assert.equal(e.error.error.type, 'overloaded_error');
      return true;
    });
    const [r1, r2] = await Promise.all([p1, p2]);
    assert.equal(r1.usage.completion_tokens, 60);
    assert.equal(r2.usage.completion_tokens, 60);
  });

  await check('anthropic message batches: cancel', async () => {
    const reqs = Array.from({ length: 4 }, (_, i) => ({ custom_id: 'r' + i, params: { model: 'x', max_tokens: 200, messages: [{ role: 'user', content: 'Story ' + i }] } }));
    const b0 = await antB.messages.batches.create({ requests: reqs });
    await sleep(100);
    const c = await antB.messages.batches.cancel(b0.id);
    assert.ok(['canceling', 'ended'].includes(c.processing_status));
    let b = c;
    for (let i = 0; i < 200 && b.processing_status !== 'ended'; i++) { await sleep(25); b = await antB.messages.batches.retrieve(b0.id); }
    assert.equal(b.processing_status, 'ended');
    assert.ok(b.request_counts.canceled >= 3, JSON.stringify(b.request_counts));
    assert.ok(b.cancel_initiated_at);
  });

  // ---- server C: API keys ----
  await check('auth: Bearer and x-api-key; wrong or missing key -> 401', async () => {
    const bad = new OpenAI({ baseURL: C.url + '/v1', apiKey: 'wrong', maxRetries: 0 });
    await assert.rejects(bad.chat.completions.create({ model: 'x', messages: chatMsgs, max_tokens: 2 }), (e) => e.status === 401);
    const good = new OpenAI({ baseURL: C.url + '/v1', apiKey: 'sekret', maxRetries: 0 });
    const r = await good.chat.completions.create({ model: 'x', messages: chatMsgs, max_tokens: 2 });
    assert.equal(r.usage.completion_tokens, 2);
    const antBad = new Anthropic({ baseURL: C.url, apiKey: 'nope', maxRetries: 0 });
    await assert.rejects(antBad.messages.create({ model: 'x', max_tokens: 2, messages: [{ role: 'user', content: 'hi' }] }), (e) => {
      assert.equal(e.status, 401);
      assert.equal(e.error.error.type, 'authentication_error');
      return true;
    });
    const antGood = new Anthropic({ baseURL: C.url, apiKey: 'other-key', maxRetries: 0 });
    const m = await antGood.messages.create({ model: 'x', max_tokens: 2, messages: [{ role: 'user', content: 'hi' }] });
    assert.equal(m.usage.output_tokens, 2);
    assert.equal((await fetch(C.url + '/v1/models')).status, 401);
    assert.equal((await fetch(C.url + '/health')).status, 200);
  });
} finally {
  // a clean shutdown: exit status 0 and no sanitizer report in the log
  await Promise.all([A, B, C].map((s) => new Promise((resolve) => {
    s.proc.stopping = true;
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
