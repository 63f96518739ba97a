// serve_load.mjs — load generator for `zerolayer serve` (no dependencies).
//
// usage: node bench/serve_load.mjs URL [--streams 1,4,8,16] [--tokens 64] [--rounds 2]
// For each concurrency level it runs `rounds` waves of N concurrent streamed
// /v1/completions requests (different prompts, max_tokens tokens each) and
// reports aggregate generated tokens/s (usage.completion_tokens summed over the
// wave / wall time of the wave), p50/p99 time to first token and p50/p99
// inter-token latency (gap between SSE chunks, one token each here).
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
  let buf = '', ttft = null, last = null, tokens = 0;
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
      if (j.usage) tokens = j.usage.completion_tokens;
      if (j.choices?.length) {
        if (ttft === null) ttft = now - t0;
        else gaps.push(now - last);
        last = now;
      }
    }
  }
  return { ttft, gaps, tokens };
}

const pct = (a, p) => { if (!a.length) return NaN; const s = [...a].sort((x, y) => x - y); return s[Math.min(s.length - 1, Math.floor(p / 100 * s.length))]; };
console.log('streams  agg_tok/s  per_stream_tok/s  ttft_p50_ms  ttft_p99_ms  itl_p50_ms  itl_p99_ms');
await one(0); // warm-up
for (const n of levels) {
  let tokens = 0, wall = 0;
  const ttfts = [], gaps = [];
  for (let r = 0; r < rounds; r++) {
    const t0 = performance.now();
    const res = await Promise.all(Array.from({ length: n }, (_, i) => one(r * n + i)));
    wall += performance.now() - t0;
    for (const x of res) { tokens += x.tokens; ttfts.push(x.ttft); gaps.push(...x.gaps); }
  }
  const agg = tokens / (wall / 1e3);
  console.log(`${String(n).padStart(7)}  ${agg.toFixed(1).padStart(9)}  ${(agg / n).toFixed(1).padStart(16)}  ` +
    `${pct(ttfts, 50).toFixed(1).padStart(11)}  ${pct(ttfts, 99).toFixed(1).padStart(11)}  ` +
    `${pct(gaps, 50).toFixed(2).padStart(10)}  ${pct(gaps, 99).toFixed(2).padStart(10)}`);
}
