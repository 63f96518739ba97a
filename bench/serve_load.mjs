// serve_load.mjs — load generator for `zerolayer serve` or any OpenAI-compatible server (llama-server too; no
// dependencies).
//
// usage: node bench/serve_load.mjs URL [--streams 1,4,8,16] [--tokens 64] [--rounds 2]
// For each concurrency level it runs `rounds` waves of N concurrent streamed
// /v1/completions requests (different prompts, max_tokens tokens each) and
// reports aggregate generated tokens/s (usage.completion_tokens summed over the
// wave / wall time of the wave), p50/p99 time to first token and p50/p99
// inter-token latency (gap between SSE chunks, one token each here), and the
// CPU this client used (share of one core over the waves: it runs on the
// same cores as the server).  From the server's /metrics (zerolayer_engine_*)
// it also prints, per level: engine steps per second, ms per step, the share
// of the wall time the engine thread worked (busy_%), and the shares of that
// work spent in forward passes (fwd_%) and sampling (smp_%) — the rest of
// busy is scheduler bookkeeping; the rest of the wall time the engine waited.
const args = process.argv.slice(2);
const url = args[0];
if (!url) { console.error('usage: node serve_load.mjs URL [--streams 1,4,8,16] [--tokens 64] [--rounds 2]'); process.exit(2); }
const opt = (k, d) => { const i = args.indexOf(k); return i > 0 ? args[i + 1] : d; };
const levels = opt('--streams', '1,4,8,16').split(',').map(Number);
const maxTokens = Number(opt('--tokens', '64'));
const rounds = Number(opt('--rounds', '2'));
const prompts = ['Once upon a time', 'The little dog', 'Lily wanted', 'One day, Tom', 'The sun was', 'A big red ball',
  'Mom said', 'The bird flew', 'Sam and Sue', 'In the park', 'The cat was sad', 'Ben had a toy', 'It was a cold day',
  'The fish', 'Anna liked to', 'The tree'];

async function one(i) {
  const t0 = performance.now();
  const r = await fetch(url + '/v1/completions', {
    method: 'POST', headers: { 'content-type': 'application/json' },
    body: JSON.stringify({ prompt: prompts[i % prompts.length], max_tokens: maxTokens, temperature: 0.8, seed: i,
      stream: true, stream_options: { include_usage: true } }),
  });
  if (r.status !== 200) throw new Error(`HTTP ${r.status}: ${await r.text()}`);
  const dec = new TextDecoder();
  let buf = '', ttft = null, last = null, usage = null, chunks = 0;
  const gaps = [];
  for await (const chunk of r.body) {
    buf += dec.decode(chunk, { stream: true });
    let k;
    while ((k = buf.indexOf('\n\n')) >= 0) {
      const ev = buf.slice(0, k);
      buf = buf.slice(k + 2);
      if (!ev.startsWith('data: ') || ev === 'data: [DONE]') continue;
      const j = JSON.parse(ev.slice(6));
      const now = performance.now();
      if (j.usage) usage = j.usage.completion_tokens;
      if (j.choices?.length && (j.choices[0].text || j.choices[0].delta?.content)) {
        chunks++;
        if (ttft === null) ttft = now - t0;
        else gaps.push(now - last);
        last = now;
      }
    }
  }
  // usage when the server reports it (zerolayer does), else one token per content chunk
  return { ttft, gaps, tokens: usage ?? chunks };
}

async function engine() {
  try {
    const t = await (await fetch(url + '/metrics')).text();
    const v = (n) => Number((t.match(new RegExp('^zerolayer_engine_' + n + ' ([0-9.e+-]+)$', 'm')) || [])[1]);
    return { steps: v('steps_total'), busy: v('busy_seconds_total'), fwd: v('forward_seconds_total'), smp: v('sample_seconds_total') };
  } catch { return null; }
}

const pct = (a, p) => { if (!a.length) return NaN; const s = [...a].sort((x, y) => x - y); return s[Math.min(s.length - 1, Math.floor(p / 100 * s.length))]; };
console.log('streams  agg_tok/s  per_stream_tok/s  ttft_p50_ms  ttft_p99_ms  itl_p50_ms  itl_p99_ms  client_cpu_%' +
  '  steps/s  ms/step  busy_%  fwd_%  smp_%');
await one(0); // warm-up
for (const n of levels) {
  let tokens = 0, wall = 0;
  const ttfts = [], gaps = [];
  const cpu0 = process.cpuUsage(), e0 = await engine();
  for (let r = 0; r < rounds; r++) {
    const t0 = performance.now();
    const res = await Promise.all(Array.from({ length: n }, (_, i) => one(r * n + i)));
    wall += performance.now() - t0;
    for (const x of res) { tokens += x.tokens; ttfts.push(x.ttft); gaps.push(...x.gaps); }
  }
  const agg = tokens / (wall / 1e3);
  const cpu = process.cpuUsage(cpu0), cpuPct = (cpu.user + cpu.system) / 1e3 / wall * 100, e1 = await engine();
  let eng = '';
  if (e0 && e1 && e1.steps > e0.steps) {
    const st = e1.steps - e0.steps, busy = e1.busy - e0.busy;
    eng = `  ${(st / (wall / 1e3)).toFixed(2).padStart(7)}  ${(busy * 1e3 / st).toFixed(1).padStart(7)}  ` +
      `${(busy * 1e3 / wall * 100).toFixed(1).padStart(6)}  ${((e1.fwd - e0.fwd) / busy * 100).toFixed(1).padStart(5)}  ` +
      `${((e1.smp - e0.smp) / busy * 100).toFixed(1).padStart(5)}`;
  }
  console.log(`${String(n).padStart(7)}  ${agg.toFixed(1).padStart(9)}  ${(agg / n).toFixed(1).padStart(16)}  ` +
    `${pct(ttfts, 50).toFixed(1).padStart(11)}  ${pct(ttfts, 99).toFixed(1).padStart(11)}  ` +
    `${pct(gaps, 50).toFixed(2).padStart(10)}  ${pct(gaps, 99).toFixed(2).padStart(10)}  ${cpuPct.toFixed(1).padStart(12)}` + eng);
}
