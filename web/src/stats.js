// stats.js — what the layer did for one answer: the live figures while it
// streams (client clock: TTFT, pieces/s) and, from the last chunk, the
// server's own `timings` (the same phases as its Server-Timing header:
// prep, queue, prefill, decode, kv, sample), tokens/s, prompt and cached
// tokens, the ring's drafted/accepted counts, the KV policy and what it
// evicted; and a small chart of tokens/s over the answer.
const PHASES = ['prep', 'queue', 'prefill', 'decode', 'kv', 'sample'];
const fmt = (x, d = 1) => (typeof x === 'number' && isFinite(x) ? x.toFixed(d) : '–');

// A live meter for one streaming answer (browser clock): t0 is when the
// request went out; each piece comes with the server's count of tokens so
// far (its live timings), or counts as one.
export class Meter {
  constructor(t0) { this.t0 = t0; this.first = null; this.pts = []; }
  piece(now, tokens) {
    if (this.first === null) this.first = now;
    this.pts.push([now, tokens || (this.pts.length ? this.pts[this.pts.length - 1][1] + 1 : 1)]);
  }
  ttft() { return this.first === null ? null : this.first - this.t0; }
  // tokens per second in buckets of bucketMs from the first piece
  series(bucketMs = 250) {
    if (!this.pts.length) return [];
    const start = this.pts[0][0], out = [];
    let prev = this.pts[0][1];
    for (const [t, n] of this.pts) {
      const b = Math.floor((t - start) / bucketMs);
      while (out.length <= b) out.push(0);
      out[b] += (n - prev) * 1000 / bucketMs;
      prev = n;
    }
    return out;
  }
  toJSON() { return { ttft_ms: this.ttft(), series: this.series() }; }
}

function item(k, label, value, title) {
  const s = document.createElement('span');
  s.className = 'fig';
  s.dataset.k = k;
  if (title) s.title = title;
  const b = document.createElement('b');
  b.textContent = value;
  s.append(label + ' ', b);
  return s;
}

// Fill el with the figures: live.ttft_ms from the browser's clock; t = the
// server's timings, so far while the answer streams, final once it is done.
export function renderFigures(el, live, t) {
  el.replaceChildren();
  if (live.ttft_ms !== null && live.ttft_ms !== undefined) el.append(item('ttft', 'TTFT', fmt(live.ttft_ms, 0) + ' ms', 'first token, measured in the browser'));
  if (!t) return;
  el.append(item('tokens_per_second', 'tok/s', fmt(t.tokens_per_second), 'decode tokens per second (server timings)'));
  el.append(item('generated_tokens', 'tokens', String(t.generated_tokens)));
  el.append(item('prompt_tokens', 'prompt', String(t.prompt_tokens)));
  el.append(item('cached_tokens', 'cached', String(t.cached_tokens), 'prompt tokens reused from a session or the prefix cache'));
  if (t.ring) {
    el.append(item('ring', 'ring', `${t.ring_accepted_tokens}/${t.ring_drafted_tokens} accepted (${fmt(100 * t.ring_acceptance, 0)}%)`,
      'drafted tokens the model verified and kept'));
  } else {
    el.append(item('ring', 'ring', 'off'));
  }
  el.append(item('kv_policy', 'KV', t.kv_policy + (t.kv_policy !== 'full' ? `, ${t.kv_evicted_tokens} evicted of budget ${t.kv_budget}` : '')));
  const ph = document.createElement('span');
  ph.className = 'phases';
  ph.dataset.k = 'phases';
  for (const p of PHASES) ph.append(item('phase_' + p, p, fmt(t[p + '_ms']) + ' ms'));
  el.append(ph);
}

// A bar chart of tokens/s over the answer, in quarter seconds.
export function drawChart(canvas, series) {
  const dpr = window.devicePixelRatio || 1, w = canvas.clientWidth || 240, h = canvas.clientHeight || 40;
  canvas.width = w * dpr;
  canvas.height = h * dpr;
  const g = canvas.getContext('2d');
  g.scale(dpr, dpr);
  g.clearRect(0, 0, w, h);
  if (!series.length) return;
  const vals = series, max = Math.max(...vals, 1);
  const bw = w / Math.max(series.length, 20);
  g.fillStyle = getComputedStyle(canvas).color;
  vals.forEach((v, i) => { const bh = (v / max) * (h - 12); g.fillRect(i * bw, h - bh, Math.max(bw - 1, 1), bh); });
  g.font = '10px sans-serif';
  g.fillText(`${max.toFixed(0)} tok/s`, 2, 10);
}
