// chat_page.mjs — the chat page of `zerolayer serve` (GET /) in a real
// browser: Debian's chromium driven by playwright-core (web/node_modules; it
// downloads no browser).  usage: node chat_page.mjs BIN ROOT OUTDIR
// BIN is the test-hooks binary (ZL_TEST_STEP_MS slows each engine step so an
// answer is long enough to stop).  Screenshots go to OUTDIR.
//
// What the page sends and receives is captured below the page, by a fetch
// wrapper installed before its script runs, and parsed here with this file's
// own SSE reader: the figures the page shows are checked against the
// server's `timings` as they came over the wire.
import { createRequire } from 'node:module';
import { mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { join, resolve } from 'node:path';
import assert from 'node:assert/strict';
import { startServer as serveStart, checker, metric } from '../compat/serve.mjs';

const [BIN, ROOT, OUT] = process.argv.slice(2);
if (!OUT) { console.error('usage: node chat_page.mjs BIN ROOT OUTDIR'); process.exit(2); }
const { chromium } = createRequire(resolve(ROOT, 'web/package.json'))('playwright-core');
const CHROMIUM = process.env.ZL_CHROMIUM || '/usr/bin/chromium';
const MODEL = join(ROOT, 'models/stories260K.gguf');
mkdirSync(OUT, { recursive: true });

const servers = [];
async function startServer(args, env) {
  const s = await serveStart(BIN, ['-t', '1', '--ctx', '512', ...args], env);
  servers.push(s);
  return s;
}
const sleep = (ms) => new Promise((r) => setTimeout(r, ms));
async function until(what, fn, ms = 20000) {
  const t0 = Date.now();
  for (;;) {
    const v = await fn();
    if (v) return v;
    if (Date.now() - t0 > ms) throw new Error('timed out waiting for ' + what);
    await sleep(50);
  }
}

// installed before the page's own script: records every chat request (headers,
// body) and the raw bytes of its answer, and every CSP violation
const CAPTURE = () => {
  window.__cap = [];
  window.__csp = [];
  document.addEventListener('securitypolicyviolation', (e) => window.__csp.push(`${e.violatedDirective} ${e.blockedURI} ${e.sourceFile}:${e.lineNumber}:${e.columnNumber} ${e.sample}`));
  const f = window.fetch.bind(window);
  window.fetch = async (url, opts = {}) => {
    const r = await f(url, opts);
    if (!String(url).includes('/v1/chat/completions') || !r.body) return r;
    const rec = { headers: opts.headers || {}, body: opts.body ? JSON.parse(opts.body) : null, status: r.status, text: '', done: false };
    window.__cap.push(rec);
    const [a, b] = r.body.tee();
    (async () => {
      const rd = b.getReader(), dec = new TextDecoder();
      try { for (;;) { const { value, done } = await rd.read(); if (done) break; rec.text += dec.decode(value, { stream: true }); } }
      catch (e) { rec.aborted = String(e); }
      rec.done = true;
    })();
    return new Response(a, { status: r.status, statusText: r.statusText, headers: r.headers });
  };
};
// this test's own reading of an SSE body: the data objects, in order
function sse(text) {
  return text.split('\n\n').map((b) => b.split('\n').filter((l) => l.startsWith('data: ')).map((l) => l.slice(6)).join(''))
    .filter((d) => d && d !== '[DONE]').map((d) => JSON.parse(d));
}

// the last chunk's timings (stream_options.include_usage: the chunk without choices)
const finalTimings = (text) => sse(text).find((j) => Array.isArray(j.choices) && !j.choices.length && j.timings).timings;

const { check, counts } = checker();

const S = await startServer(['-m', MODEL, '--alias', 'tiny-a', '-m', MODEL, '--alias', 'tiny-b', '--prefix-cache-mb', '0'],
  { ZL_TEST_STEP_MS: '15' });
const K = await startServer(['-m', MODEL, '--api-key', 'page-secret-key', '--max-body', '4096']);
const browser = await chromium.launch({ executablePath: CHROMIUM, args: ['--no-sandbox'] });
const pageErrors = [];
async function openPage(url, viewport = { width: 1280, height: 860 }) {
  const ctx = await browser.newContext({ viewport, acceptDownloads: true });
  await ctx.grantPermissions(['clipboard-read', 'clipboard-write'], { origin: url });
  await ctx.addInitScript(CAPTURE);
  const page = await ctx.newPage();
  page.on('pageerror', (e) => pageErrors.push(String(e)));
  const resp = await page.goto(url + '/');
  return { ctx, page, resp };
}
const last = (page) => page.locator('.msg.assistant').last();
const cap = (page) => page.evaluate(() => window.__cap.map((c) => ({ ...c })));
async function setField(page, id, value) {
  await page.fill('#' + id, String(value));
  await page.dispatchEvent('#' + id, 'change');
}
async function sendAndWait(page, text) {
  const n = (await cap(page)).length;
  await page.fill('#input', text);
  await page.press('#input', 'Enter');
  await until('the answer', async () => (await cap(page)).length > n && (await cap(page))[n].done &&
    !(await page.locator('.msg.streaming').count()));
  return (await cap(page))[n];
}
const fig = async (page, k) => (await last(page).locator(`[data-k="${k}"] b`).textContent()).trim();

try {
  const { ctx, page, resp } = await openPage(S.url);
  await page.click('#gear');

  await check('GET / is the bundled page under a hash-only CSP; the model list comes from /v1/models', async () => {
    assert.equal(resp.status(), 200);
    const csp = resp.headers()['content-security-policy'];
    assert.match(csp, /script-src 'sha256-[A-Za-z0-9+/=]+';/);
    assert.doesNotMatch(csp, /unsafe-inline|unsafe-eval/);
    assert.match(resp.headers()['content-type'], /^text\/html/);
    await until('two models', async () => (await page.locator('#model option').count()) === 2);
    assert.deepEqual(await page.locator('#model option').allTextContents(), ['tiny-a', 'tiny-b']);
  });

  await check('a message streams: the answer and its figures grow while it arrives, then equal the API\'s timings', async () => {
    await setField(page, 's-max_tokens', 80);
    await setField(page, 's-temperature', 0);
    await page.fill('#input', 'Hello there');
    await page.press('#input', 'Enter');
    const lens = new Set(), live = new Set();
    await until('streaming', async () => page.locator('.msg.streaming').count());
    while (await page.locator('.msg.streaming').count()) {
      lens.add((await last(page).locator('.body').textContent()).length);
      const g = last(page).locator('[data-k="generated_tokens"] b');
      if (await g.count()) live.add(await g.textContent().catch(() => ''));
      await sleep(40);
    }
    assert.ok([...lens].filter((l) => l > 0).length >= 3, `the text grew in fewer than 3 steps: ${[...lens]}`);
    assert.ok([...live].filter(Boolean).length >= 2, `the token count did not move while streaming: ${[...live]}`);
    const c = (await cap(page))[0];
    await until('the capture', async () => (await cap(page))[0].done);
    const chunks = sse((await cap(page))[0].text), t = finalTimings((await cap(page))[0].text);
    assert.ok(chunks.filter((j) => j.timings).length > 3, 'no timings_per_token');
    assert.deepEqual(await page.evaluate(() => window.__csp), [], 'the page\'s own code broke its CSP');
    assert.ok(chunks.filter((j) => j.choices && j.choices[0] && j.choices[0].delta && j.choices[0].delta.content).length > 3);
    assert.equal(c.body.model, 'tiny-a');
    assert.equal(await fig(page, 'tokens_per_second'), t.tokens_per_second.toFixed(1));
    assert.equal(await fig(page, 'prompt_tokens'), String(t.prompt_tokens));
    assert.equal(await fig(page, 'cached_tokens'), String(t.cached_tokens));
    assert.equal(await fig(page, 'generated_tokens'), String(t.generated_tokens));
    for (const p of ['prep', 'queue', 'prefill', 'decode', 'kv', 'sample'])
      assert.equal(await fig(page, 'phase_' + p), t[p + '_ms'].toFixed(1) + ' ms', p);
    assert.equal(await fig(page, 'kv_policy'), t.kv_policy);
    assert.match(await fig(page, 'ttft'), /^\d+ ms$/);
    assert.equal(await fig(page, 'ring'), t.ring ? `${t.ring_accepted_tokens}/${t.ring_drafted_tokens} accepted (${(100 * t.ring_acceptance).toFixed(0)}%)` : 'off');
    const text = chunks.map((j) => (j.choices && j.choices[0] && j.choices[0].delta && j.choices[0].delta.content) || '').join('');
    const alnum = (s) => s.replace(/[^A-Za-z0-9]/g, '');
    assert.ok(alnum(text).length > 0);
    assert.equal(alnum(await last(page).locator('.body').textContent()), alnum(text)); // every streamed word shown
  });

  await check('Stop aborts mid-answer and the server cancels the generation', async () => {
    await setField(page, 's-max_tokens', 480);
    const n = (await cap(page)).length;
    const gen0 = await metric(S.url, 'zerolayer_generated_tokens_total');
    const canc0 = await metric(S.url, 'zerolayer_requests_cancelled_total');
    await page.fill('#input', 'Tell me a long story');
    await page.press('#input', 'Enter');
    await until('some text', async () => (await last(page).locator('.body').textContent()).length > 12);
    await page.click('#stop');
    await until('stopped', async () => (await page.locator('.msg.assistant.stopped').count()) === 1);
    assert.ok(await page.locator('#send').isVisible());
    await until('the server cancelled it', async () => (await metric(S.url, 'zerolayer_requests_cancelled_total')) === canc0 + 1 &&
      (await metric(S.url, 'zerolayer_requests_running')) === 0);
    const gen1 = await metric(S.url, 'zerolayer_generated_tokens_total');
    await sleep(600); // at 15 ms a step an uncancelled answer would add ~40 tokens here
    assert.equal(await metric(S.url, 'zerolayer_generated_tokens_total'), gen1);
    assert.ok(gen1 - gen0 < 480, `${gen1 - gen0} tokens: the answer ran to its end`);
    const c = (await cap(page))[n];
    assert.ok(c.aborted || c.done);
    assert.ok(!sse(c.text).some((j) => Array.isArray(j.choices) && !j.choices.length), 'a stopped answer got to its last chunk');
    assert.ok(Number(await fig(page, 'generated_tokens')) > 0, 'the stopped answer shows no live figures');
  });

  await check('Markdown with a code block is highlighted; a model\'s <img onerror> is inert', async () => {
    await setField(page, 's-max_tokens', 200);
    await setField(page, 's-grammar', 'root ::= "Here:\\n\\n```js\\nconsole.log(1)\\n```\\n\\n<img src=x onerror=\\"window.__pwned=1\\"> <script>window.__pwned=2</script> **done**"');
    const c = await sendAndWait(page, 'Show me code');
    const text = sse(c.text).map((j) => (j.choices && j.choices[0] && j.choices[0].delta && j.choices[0].delta.content) || '').join('');
    assert.match(text, /<img src=x onerror=/, 'the model did not write the payload');
    const body = last(page).locator('.body');
    assert.equal(await body.locator('pre code.hljs').textContent(), 'console.log(1)\n');
    assert.ok(await body.locator('pre code .hljs-built_in, pre code .hljs-title, pre code .hljs-number').count() > 0, 'no highlighting');
    assert.equal(await body.locator('pre .copy').count(), 1);
    await body.locator('pre .copy').click();
    assert.equal(await page.evaluate(() => navigator.clipboard.readText()), 'console.log(1)\n');
    assert.equal(await body.locator('strong').textContent(), 'done');
    assert.equal(await body.locator('script').count(), 0);
    const imgs = await body.locator('img').evaluateAll((els) => els.map((e) => e.getAttributeNames()));
    assert.ok(imgs.length === 1 && !imgs[0].includes('onerror'), JSON.stringify(imgs));
    await sleep(300);
    assert.equal(await page.evaluate(() => window.__pwned), undefined);
    // the sanitiser's parse of the payload is refused by the CSP too (reported, never run)
    const v = await page.evaluate(() => window.__csp);
    assert.ok(v.length > 0 && v.every((x) => x.startsWith('script-src-attr ')), v.join('\n'));
    await page.screenshot({ path: join(OUT, 'webui-desktop.png') });
    await setField(page, 's-grammar', '');
  });

  await check('the layer\'s controls go out as X-Zerolayer-* headers; the ring and KV figures follow the timings', async () => {
    await page.click('#new'); // a short conversation: the context is 512 tokens
    await setField(page, 's-max_tokens', 120);
    await page.selectOption('#s-validation', 'on');
    await page.selectOption('#s-kv_policy', 'window');
    await setField(page, 's-kv_budget', 96);
    const c = await sendAndWait(page, 'Once upon a time');
    assert.equal(c.headers['X-Zerolayer-Validation'], 'on');
    assert.equal(c.headers['X-Zerolayer-KV-Policy'], 'window');
    assert.equal(c.headers['X-Zerolayer-KV-Budget'], '96');
    const t = finalTimings(c.text);
    assert.ok(t.ring && t.ring_drafted_tokens > 0 && t.kv_policy === 'window' && t.kv_evicted_tokens > 0, JSON.stringify(t));
    assert.equal(await fig(page, 'ring'), `${t.ring_accepted_tokens}/${t.ring_drafted_tokens} accepted (${(100 * t.ring_acceptance).toFixed(0)}%)`);
    assert.equal(await fig(page, 'kv_policy'), `window, ${t.kv_evicted_tokens} evicted of budget 96`);
    await page.selectOption('#s-validation', '');
    await page.selectOption('#s-kv_policy', '');
    await setField(page, 's-kv_budget', '');
    // the compute preset picks the policy itself; the system prompt leads the messages
    await page.selectOption('#s-compute', 'aggressive');
    await setField(page, 's-system', 'You are terse.');
    const d = await sendAndWait(page, 'Again');
    assert.equal(d.headers['X-Zerolayer-Compute'], 'aggressive');
    assert.deepEqual(d.body.messages[0], { role: 'system', content: 'You are terse.' });
    const u = finalTimings(d.text);
    assert.match(await fig(page, 'kv_policy'), new RegExp(`^${u.kv_policy}, ${u.kv_evicted_tokens} evicted of budget ${u.kv_budget}$`));
    assert.notEqual(u.kv_policy, 'full');
    await page.selectOption('#s-compute', '');
    await setField(page, 's-system', '');
  });

  await check('a 400 naming a field is shown as a readable message', async () => {
    await setField(page, 's-temperature', -1);
    await page.fill('#input', 'x');
    await page.press('#input', 'Enter');
    await until('the error', async () => page.locator('#error').isVisible());
    const e = await page.locator('#error').textContent();
    assert.match(e, /^400 Bad request — .*temperature/);
    await setField(page, 's-temperature', 0);
  });

  await check('regenerate replaces the last answer; edit puts the last message back in the composer', async () => {
    const n = await page.locator('.msg').count();
    await last(page).locator('.regen').click();
    await until('a new answer', async () => !(await page.locator('.msg.streaming').count()) && !(await page.locator('#error').isVisible()) &&
      (await last(page).locator('[data-k="tokens_per_second"]').count()) === 1);
    assert.equal(await page.locator('.msg').count(), n);
    await page.locator('.msg.user .edit').click();
    assert.equal(await page.inputValue('#input'), 'x');
    assert.equal(await page.locator('.msg').count(), n - 2);
    await page.fill('#input', '');
  });

  await check('the model picker switches the model the request names', async () => {
    await page.selectOption('#model', 'tiny-b');
    const c = await sendAndWait(page, 'Which model?');
    assert.equal(c.body.model, 'tiny-b');
    assert.ok(sse(c.text).every((j) => j.model === 'tiny-b'));
  });

  await check('a session across two turns: the second turn\'s prompt comes from the session\'s KV (cached > 0)', async () => {
    await page.check('#s-session');
    assert.match(await page.locator('#sess-info').textContent(), /first model \(tiny-a\)/); // tiny-b is picked
    await page.selectOption('#model', 'tiny-a');
    await page.click('#new');
    const a = await sendAndWait(page, 'Tell me about a cat.');
    assert.ok(a.headers['X-Zerolayer-Session'], 'no session token sent');
    assert.equal(await fig(page, 'cached_tokens'), '0'); // a new session, and this server has no prefix cache
    const b = await sendAndWait(page, 'What did the dog do?');
    assert.equal(b.headers['X-Zerolayer-Session'], a.headers['X-Zerolayer-Session']);
    const t = finalTimings(b.text);
    assert.ok(t.cached_tokens > 0, JSON.stringify(t));
    assert.equal(await fig(page, 'cached_tokens'), String(t.cached_tokens));
  });

  await check('snapshot download, upload into a new session that continues with cached tokens; flush', async () => {
    await setField(page, 's-passphrase', 'correct horse battery');
    const [dl] = await Promise.all([page.waitForEvent('download'), page.click('#snap')]);
    const file = join(OUT, 'snapshot.json');
    await dl.saveAs(file);
    const snap = JSON.parse(readFileSync(file, 'utf8'));
    assert.ok(snap.state && snap.tokens > 0 && snap.messages.length === 4, JSON.stringify({ ...snap, state: '…' }));
    await page.setInputFiles('#upload', file);
    await until('the restored conversation', async () => (await page.locator('#convs li.active').textContent()).includes('(restored)'));
    assert.equal(await page.locator('.msg').count(), 4);
    const before = (await cap(page)).at(-1).headers['X-Zerolayer-Session'];
    const c = await sendAndWait(page, 'And the ball?');
    assert.ok(c.headers['X-Zerolayer-Session'] && c.headers['X-Zerolayer-Session'] !== before, 'not the restored session');
    const t = finalTimings(c.text);
    // no prefix cache here: what is cached came with the snapshot
    assert.ok(t.cached_tokens > 0, `cached ${t.cached_tokens} of a ${snap.tokens}-token snapshot`);
    await page.click('#flush');
    await until('flushed', async () => /flushed/.test(await page.locator('#sess-info').textContent()));
    assert.ok(!(await page.locator('#error').isVisible()));
  });

  await check('conversations are kept in the browser\'s storage across a reload', async () => {
    const titles = await page.locator('#convs .conv').allTextContents();
    assert.ok(titles.length >= 3, titles.join('|'));
    await page.reload();
    await until('the list', async () => (await page.locator('#convs .conv').count()) === titles.length);
    assert.deepEqual(await page.locator('#convs .conv').allTextContents(), titles);
    assert.ok((await page.locator('.msg.assistant [data-k="cached_tokens"]').count()) > 0);
  });

  await check('phone width: no sideways scrolling, the list is a drawer', async () => {
    await page.setViewportSize({ width: 390, height: 844 });
    await sleep(200);
    assert.ok(await page.evaluate(() => document.documentElement.scrollWidth <= 390));
    assert.ok(!(await page.locator('#side .conv').first().isVisible()) || !(await page.locator('#side').boundingBox()) ||
      (await page.locator('#side').boundingBox()).x < 0);
    assert.ok(await page.locator('#input').isVisible());
    await page.screenshot({ path: join(OUT, 'webui-phone.png') });
    await page.click('#menu');
    await until('the drawer', async () => (await page.locator('#side').boundingBox()).x >= 0);
  });

  await check('after the reload (the payload is stored) the page breaks no CSP rule but the blocked handler', async () => {
    const v = await page.evaluate(() => window.__csp);
    assert.ok(v.every((x) => x.startsWith('script-src-attr ')), v.join('\n'));
  });
  await ctx.close();

  await check('--api-key: the 401 asks for the key once, it is kept in the browser\'s storage; a 413 reads as one', async () => {
    const { ctx: kctx, page: kp } = await openPage(K.url);
    await until('the key dialog', async () => kp.locator('#keydlg').isVisible());
    assert.match(await kp.locator('#error').textContent(), /^401 Unauthorized — .*API key/);
    await kp.fill('#keyin', 'page-secret-key');
    await kp.click('#key-ok');
    await until('the model list', async () => (await kp.locator('#model option').count()) === 1);
    assert.equal(await kp.evaluate(() => JSON.parse(localStorage.getItem('zl.apiKey'))), 'page-secret-key');
    await kp.reload();
    await until('the model list after a reload', async () => (await kp.locator('#model option').count()) === 1);
    assert.ok(!(await kp.locator('#keydlg').isVisible()));
    const c = await sendAndWait(kp, 'Hi');
    assert.equal(c.status, 200);
    assert.equal(c.headers.Authorization, 'Bearer page-secret-key');
    await kp.fill('#input', 'a'.repeat(5000)); // a body over --max-body
    await kp.press('#input', 'Enter');
    await until('the 413', async () => kp.locator('#error').isVisible());
    assert.equal(await kp.locator('#error').textContent(), '413 Request too large — request body exceeds the limit of 4096 bytes');
    await kctx.close();
  });

  await check('no script error on any page', async () => { assert.deepEqual(pageErrors, []); });
} finally {
  await browser.close().catch(() => {});
  for (const s of servers) s.proc.kill('SIGKILL');
}
const { passed, failed } = counts();
console.log(`${passed} passed, ${failed} failed`);
writeFileSync(join(OUT, 'result.txt'), `${passed} passed, ${failed} failed\n`);
process.exit(failed ? 1 : 0);
