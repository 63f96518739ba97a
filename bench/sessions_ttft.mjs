// sessions_ttft.mjs — time to first token for a new turn after a long
// history: cold (stateless) vs session vs prefix-cache hit, and typing-ahead
// (TTFT after the final chunk) vs one decode step.
//
// usage: node bench/sessions_ttft.mjs URL [HISTORY_TOKENS=1500] [TURN_TOKENS=20]
// Start the server first, e.g.
//   zerolayer serve -m model.gguf -t 2 --parallel 1 --ctx 2048 --port 8080
// Prompts are token arrays on /v1/completions (exact lengths, any vocabulary).
// One long prefill is paid once (the cold run); the session and the prefix
// cache are seeded from it.  Every request has max_tokens 1, so the response
// time is the time to first token (measured at the client).
const URL_ = process.argv[2] || 'http://127.0.0.1:8080';
const NH = Number(process.argv[3] || 1500), NT = Number(process.argv[4] || 20);

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
const USER = 'bench-' + Date.now(); // a fresh tenant: nothing cached for it yet
const H = [BOS, ...toks(NH - 1)], T1 = toks(NT), T2 = toks(NT), T3 = toks(NT);
const srv = (x) => `[server: queue ${x.j.timings.queue_ms.toFixed(0)} ms, kv ${x.j.timings.kv_ms.toFixed(1)} ms, prefill ${x.j.timings.prefill_ms.toFixed(0)} ms]`;
const comp = (prompt, extra = {}, headers = {}) =>
  post('/v1/completions', { model: 'm', prompt, max_tokens: 1, temperature: 0, user: USER, ...extra }, headers);

const cold = await comp([...H, ...T1]);
console.log(`cold:        ${cold.ms.toFixed(0)} ms  (${NH + NT} prompt tokens, cached ${cold.j.usage.prompt_tokens_details.cached_tokens}) ${srv(cold)}`);
const pc = await comp([...H, ...T2]);
console.log(`prefix hit:  ${pc.ms.toFixed(0)} ms  (cached ${pc.j.usage.prompt_tokens_details.cached_tokens})  ${(cold.ms / pc.ms).toFixed(1)}x ${srv(pc)}`);

const s = (await post('/v1/sessions', { user: USER })).j;
const SH = { 'X-Zerolayer-Session': s.token };
const warm = await comp([...H, ...T1], {}, SH); // first turn (seeded from the prefix cache)
const turn1 = [...H, ...T1];
void warm;
const sess = await comp([...turn1, ...T2], {}, SH);
console.log(`session:     ${sess.ms.toFixed(0)} ms  (cached ${sess.j.usage.prompt_tokens_details.cached_tokens})  ${(cold.ms / sess.ms).toFixed(1)}x ${srv(sess)}`);

// typing-ahead: the client sends all but the last 3 tokens of the new turn while "typing"
const hist2 = [...turn1, ...T2];
const pre = await post(`/v1/sessions/${s.id}/prefill`, { user: USER, prompt: [...hist2, ...T3.slice(0, NT - 3)] }, SH);
let ta;
if (pre) {
  ta = await comp([...hist2, ...T3], {}, SH);
  console.log(`typing-ahead: prefill ${pre.ms.toFixed(0)} ms, then final TTFT ${ta.ms.toFixed(0)} ms (cached ${ta.j.usage.prompt_tokens_details.cached_tokens})`);
}
// one decode step: a 17-token generation on the session, decode time / 16
const g = await comp([...hist2, ...T3], { max_tokens: 17 }, SH);
const step = g.j.timings.decode_ms / Math.max(1, g.j.usage.completion_tokens - 1);
console.log(`decode step: ${step.toFixed(0)} ms` + (ta ? `  -> typing-ahead TTFT = ${(ta.ms / step).toFixed(2)} decode steps` : ''));
