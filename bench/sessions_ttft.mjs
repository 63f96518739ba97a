// sessions_ttft.mjs — time to first token for a new turn after a long
// history: cold (stateless) vs session vs prefix-cache hit, and typing-ahead
// (TTFT after the final chunk) vs one decode step.
//
// usage: node bench/sessions_ttft.mjs URL [HISTORY_TOKENS=1500] [TURN_TOKENS=20] [REPS=5] [COLD_RUNS=1]
// Start the server first, e.g.
//   zerolayer serve -m model.gguf -t 2 --parallel 1 --ctx 2048 --port 8080
// Prompts are token arrays on /v1/completions (exact lengths, any vocabulary).
// Every request has max_tokens 1, so the response time is the time to first
// token (measured at the client).  The long prefill is paid COLD_RUNS times
// (a fresh tenant each, so nothing is cached); the prefix cache and the
// session are seeded from the first.  Each warm figure is measured REPS
// times with a new turn each time and reported as the median (and the
// range): on a shared machine single runs are noisy.  The decode step is
// measured the same way at the same depth (a 17-token generation on the
// session: decode time / 16).  Server-side phases per figure (medians):
// prep = request received -> job submitted (body, tokenization), queue =
// submit -> admit, kv = acquire (session / prefix-cache copy), prefill =
// admit -> first token; http = client time - prep - queue - prefill (reply
// and transport).  The session's first continuation (the turn after the
// seeding request) is also shown on its own against the later turns.
const URL_ = process.argv[2] || 'http://127.0.0.1:8080';
const NH = Number(process.argv[3] || 1500), NT = Number(process.argv[4] || 20);
const REPS = Number(process.argv[5] || 5), COLD_RUNS = Number(process.argv[6] || 1);
const UNSEEN = 3; // typing-ahead: tokens of the new turn not sent ahead

async function post(path, body, headers = {}) {
  const t0 = performance.now();
  const r = await fetch(URL_ + path, { method: 'POST', headers: { 'content-type': 'application/json', ...headers }, body: JSON.stringify(body) });
  const j = await r.json();
  if (r.status !== 200) throw new Error(`${path}: ${r.status} ${JSON.stringify(j)}`);
  return { j, ms: performance.now() - t0 };
}
// deterministic "text": token ids in the ordinary range of a 32k vocabulary
let seed = 12345;
const rnd = () => (seed = (seed * 1103515245 + 12345) % 2147483648) / 2147483648;
const toks = (n) => Array.from({ length: n }, () => 300 + Math.floor(rnd() * 20000));
const BOS = 1;
const RUN = 'bench-' + Date.now(); // fresh tenants: nothing cached for them yet
const H = [BOS, ...toks(NH - 1)];
const comp = (user, prompt, extra = {}, headers = {}) =>
  post('/v1/completions', { model: 'm', prompt, max_tokens: 1, temperature: 0, user, ...extra }, headers);
const cachedOf = (x) => x.j.usage.prompt_tokens_details.cached_tokens;
const med = (a) => { const s = [...a].sort((x, y) => x - y); const m = s.length >> 1; return s.length % 2 ? s[m] : (s[m - 1] + s[m]) / 2; };
const phases = (xs) => {
  const T = (x) => x.j.timings, prep = (x) => T(x).prep_ms || 0;
  const pr = med(xs.map(prep)), q = med(xs.map((x) => T(x).queue_ms)), kv = med(xs.map((x) => T(x).kv_ms));
  const pf = med(xs.map((x) => T(x).prefill_ms)), http = med(xs.map((x) => x.ms - prep(x) - T(x).queue_ms - T(x).prefill_ms));
  return `[server: prep ${pr.toFixed(1)} ms, queue ${q.toFixed(1)} ms, kv ${kv.toFixed(1)} ms, prefill ${pf.toFixed(0)} ms; http ${http.toFixed(1)} ms]`;
};
const range = (ms) => `median ${med(ms).toFixed(0)} ms (${Math.min(...ms).toFixed(0)}–${Math.max(...ms).toFixed(0)})`;

// cold: stateless, nothing cached
const colds = [];
for (let i = 0; i < COLD_RUNS; i++) {
  const x = await comp(`${RUN}-cold${i}`, [...H, ...toks(NT)]);
  if (cachedOf(x) !== 0) throw new Error(`cold run reused ${cachedOf(x)} tokens`);
  colds.push(x);
}
const USER = `${RUN}-cold0`; // its prefix-cache entry seeds the rest
const cold = med(colds.map((x) => x.ms));
console.log(`cold:         ${range(colds.map((x) => x.ms))}  (${NH + NT} prompt tokens) ${phases(colds)}`);

// prefix-cache hit: the same history, a new turn each time
const pcs = [];
for (let i = 0; i < REPS; i++) pcs.push(await comp(USER, [...H, ...toks(NT)]));
const pc = med(pcs.map((x) => x.ms));
console.log(`prefix hit:   ${range(pcs.map((x) => x.ms))}  (cached ${pcs.map(cachedOf).join('/')})  ${(cold / pc).toFixed(1)}x ${phases(pcs)}`);

// session: seeded with the history (from the prefix cache), then REPS turns of NT new tokens
const s = (await post('/v1/sessions', { user: USER })).j;
const SH = { 'X-Zerolayer-Session': s.token };
let conv = [...H, ...toks(NT)];
await comp(USER, conv, {}, SH);
const ss = [];
for (let i = 0; i < REPS; i++) {
  conv = [...conv, ...toks(NT)];
  ss.push(await comp(USER, conv, {}, SH));
}
const se = med(ss.map((x) => x.ms));
console.log(`session:      ${range(ss.map((x) => x.ms))}  (cached ${ss.map(cachedOf).join('/')})  ${(cold / se).toFixed(1)}x ${phases(ss)}`);
if (ss.length > 1) {
  const later = med(ss.slice(1).map((x) => x.ms));
  console.log(`  1st turn:   ${ss[0].ms.toFixed(0)} ms = ${(ss[0].ms / later).toFixed(2)}x the later turns' median ${later.toFixed(0)} ms ` +
    `${phases([ss[0]])} vs ${phases(ss.slice(1))}`);
}

// typing-ahead: the client sends all but the last UNSEEN tokens of the new turn while "typing"
const tas = [], pres = [], steps = [];
for (let i = 0; i < REPS; i++) {
  const T = toks(NT);
  pres.push(await post(`/v1/sessions/${s.id}/prefill`, { user: USER, prompt: [...conv, ...T.slice(0, NT - UNSEEN)] }, SH));
  conv = [...conv, ...T];
  tas.push(await comp(USER, conv, {}, SH));
}
// one decode step at the same depth: a 17-token generation on the session, decode time / 16
for (let i = 0; i < REPS; i++) {
  const g = await comp(USER, [...conv, ...toks(UNSEEN)], { max_tokens: 17 }, SH);
  steps.push(g.j.timings.decode_ms / Math.max(1, g.j.usage.completion_tokens - 1));
}
const step = med(steps), ta = med(tas.map((x) => x.ms));
console.log(`typing-ahead: prefill median ${med(pres.map((x) => x.ms)).toFixed(0)} ms, then final TTFT ${range(tas.map((x) => x.ms))} (cached ${tas.map(cachedOf).join('/')}) ${phases(tas)}`);
console.log(`decode step:  median ${step.toFixed(0)} ms (${Math.min(...steps).toFixed(0)}–${Math.max(...steps).toFixed(0)}) at depth ~${conv.length}` +
  `  -> typing-ahead TTFT = ${(ta / step).toFixed(2)} decode steps`);
console.log(`summary: cold ${(cold / 1e3).toFixed(2)} s | prefix hit ${(pc / 1e3).toFixed(3)} s (${(cold / pc).toFixed(1)}x) | ` +
  `session ${(se / 1e3).toFixed(3)} s (${(cold / se).toFixed(1)}x) | typing-ahead ${(ta / step).toFixed(2)} decode steps`);
