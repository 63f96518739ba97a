// session_turns.mjs — a session's turns one after another, each request shown
// with the server's phases and, per server thread, the page faults and CPU
// time it cost (from /proc/PID/task/*/stat, so the server must run on this
// machine).  Counts and CPU time, unlike wall time, stay readable on a loaded
// machine: work that runs beside a turn (a thread mapping memory, a second
// tokenization) shows up on its own thread.
//
// usage: node bench/session_turns.mjs URL SERVER_PID [HISTORY_TOKENS=1867] [TURN_TOKENS=17] [TURNS=4] [MODE=direct]
//   MODE direct: the session's first request carries the whole history (cold), then TURNS short turns;
//   MODE cache:  a stateless cold request and two prefix-cache hits first (as bench/sessions_ttft.mjs).
// e.g. zerolayer serve -m SmolLM2-135M-Instruct.Q4_1.gguf -t 2 --ctx 4096 --port 8080 & node bench/session_turns.mjs http://127.0.0.1:8080 $!
// Requests go back to back (as an agent's or a fast client's turns do); GAP_MS=N waits between them.
import fs from 'fs';
const URL_ = process.argv[2], PID = process.argv[3];
if (!URL_ || !PID) { console.error('usage: node bench/session_turns.mjs URL SERVER_PID [HISTORY] [TURN] [TURNS] [direct|cache]'); process.exit(2); }
const NH = Number(process.argv[4] || 1867), NT = Number(process.argv[5] || 17), TURNS = Number(process.argv[6] || 4);
const MODE = process.argv[7] || 'direct', GAP = Number(process.env.GAP_MS || 0);
const HZ = 100; // USER_HZ: /proc times are in ticks of 10 ms
function snap() {
  const o = {};
  for (const t of fs.readdirSync(`/proc/${PID}/task`)) {
    try {
      const s = fs.readFileSync(`/proc/${PID}/task/${t}/stat`, 'utf8');
      const f = s.slice(s.lastIndexOf(')') + 2).split(' ');
      o[t] = { min: +f[7], maj: +f[9], ut: +f[11], st: +f[12] };
    } catch {} // a connection thread that just ended
  }
  return o;
}
function diff(a, b) {
  const out = [];
  for (const t of Object.keys(b)) {
    const x = a[t] || { min: 0, maj: 0, ut: 0, st: 0 }, y = b[t];
    const min = y.min - x.min, maj = y.maj - x.maj, cpu = (y.ut - x.ut + y.st - x.st) * 1e3 / HZ, sys = (y.st - x.st) * 1e3 / HZ;
    if (min || maj || cpu) out.push(`${t}: ${min}${maj ? '+' + maj + 'maj' : ''} flt ${cpu} ms cpu (${sys} sys)`);
  }
  return out.join(' | ');
}
let seed = 12345;
const rnd = () => (seed = (seed * 1103515245 + 12345) % 2147483648) / 2147483648;
const toks = (n) => Array.from({ length: n }, () => 300 + Math.floor(rnd() * 20000));
const USER = 'turns-' + Date.now();
const H = [1, ...toks(NH - 1)];
const rows = [];
async function post(label, path, body, headers = {}) {
  const a = snap();
  const t0 = performance.now();
  const r = await fetch(URL_ + path, { method: 'POST', headers: { 'content-type': 'application/json', ...headers }, body: JSON.stringify(body) });
  const j = await r.json();
  const ms = performance.now() - t0;
  const b = snap();
  if (r.status !== 200) throw new Error(`${path}: ${r.status} ${JSON.stringify(j)}`);
  const tm = j.timings;
  if (tm) {
    const prep = tm.prep_ms || 0, outside = ms - prep - tm.queue_ms - tm.prefill_ms;
    console.log(`${label.padEnd(7)} ${ms.toFixed(0).padStart(6)} ms: prep ${prep.toFixed(1)} queue ${tm.queue_ms.toFixed(1)} kv ${tm.kv_ms.toFixed(1)} ` +
      `prefill ${tm.prefill_ms.toFixed(0)} rest ${outside.toFixed(1)} (cached ${j.usage.prompt_tokens_details?.cached_tokens})\n        ${diff(a, b)}`);
    rows.push({ label, ms, pf: tm.prefill_ms });
  }
  if (GAP) await new Promise((res) => setTimeout(res, GAP));
  return j;
}
const comp = (label, prompt, headers = {}) => post(label, '/v1/completions', { model: 'm', prompt, max_tokens: 1, temperature: 0, user: USER }, headers);
if (MODE === 'cache') {
  await comp('cold', [...H, ...toks(NT)]);
  for (let i = 0; i < 2; i++) await comp('hit' + i, [...H, ...toks(NT)]);
}
const s = await post('create', '/v1/sessions', { user: USER });
const SH = { 'X-Zerolayer-Session': s.token };
let conv = [...H, ...toks(NT)];
await comp('seed', conv, SH);
for (let i = 0; i < TURNS; i++) {
  conv = [...conv, ...toks(NT)];
  await comp('turn' + i, conv, SH);
}
const t = rows.filter((r) => r.label.startsWith('turn'));
if (t.length > 1) {
  const med = (a) => { const x = [...a].sort((p, q) => p - q), m = x.length >> 1; return x.length % 2 ? x[m] : (x[m - 1] + x[m]) / 2; };
  const later = med(t.slice(1).map((r) => r.ms)), laterPf = med(t.slice(1).map((r) => r.pf));
  console.log(`first continuation / later turns: wall ${(t[0].ms / later).toFixed(2)}x, prefill ${(t[0].pf / laterPf).toFixed(2)}x`);
}
