// api.js — the page's only way to the server: the public HTTP API (the same
// routes any client uses), the API key header, errors turned into readable
// messages, and the SSE reader of /v1/chat/completions.  Knows nothing of
// the DOM.
import { getKey } from './store.js';

const STATUS = {
  400: 'Bad request', 401: 'Unauthorized', 403: 'Forbidden', 404: 'Not found', 405: 'Method not allowed',
  409: 'Conflict', 410: 'Gone', 413: 'Request too large', 415: 'Unsupported media type',
  429: 'Server busy', 500: 'Server error', 503: 'Unavailable', 529: 'Overloaded',
};

export class ApiError extends Error {
  constructor(status, message, param, type, retryAfter) {
    super(message);
    this.status = status;
    this.param = param || null;
    this.type = type || null;
    this.retryAfter = retryAfter || null;
  }
  // One line a person can act on: "400 Bad request — temperature: expected ... (field: temperature)".
  readable() {
    let s = `${this.status ? this.status + ' ' : ''}${STATUS[this.status] || 'Error'} — ${this.message}`;
    if (this.param && !this.message.includes(this.param)) s += ` (field: ${this.param})`;
    if (this.status === 401) s += '. Enter the server\'s API key (the key button).';
    if (this.retryAfter) s += ` Retry after ${this.retryAfter} s.`;
    return s;
  }
}

// Both error shapes the server speaks: OpenAI {error:{message,type,param}} and
// Anthropic {type:"error", error:{type,message}}; sessions add `reason`.
async function errorOf(r) {
  let j = null;
  try { j = await r.json(); } catch { /* not JSON */ }
  const e = j && j.error;
  const msg = (e && (typeof e === 'string' ? e : e.message)) || (j && j.message) || r.statusText || 'request failed';
  const reason = j && (j.reason || (e && e.reason));
  return new ApiError(r.status, reason && !msg.includes(reason) ? `${msg} (${reason})` : msg, e && e.param,
    e && (e.type || e.code), r.headers.get('Retry-After'));
}

function headersFor(extra, json) {
  const h = { ...extra };
  const key = getKey();
  if (key) h.Authorization = 'Bearer ' + key;
  if (json) h['Content-Type'] = 'application/json';
  return h;
}

export async function call(path, { method = 'GET', body, headers = {}, signal } = {}) {
  let r;
  try {
    r = await fetch(path, {
      method, signal, headers: headersFor(headers, body !== undefined),
      body: body !== undefined ? JSON.stringify(body) : undefined,
    });
  } catch (e) {
    if (e.name === 'AbortError') throw e;
    throw new ApiError(0, `cannot reach the server (${e.message})`);
  }
  if (!r.ok) throw await errorOf(r);
  return r;
}

export const getJSON = async (path) => (await call(path)).json();
export const postJSON = async (path, body, headers) => (await call(path, { method: 'POST', body, headers })).json();

// Stream one chat completion.  on.delta(text, timings) for each content piece
// with the timings so far (timings_per_token), on.timings(t) from the last
// chunk (stream_options.include_usage), on.event(name, data) for named events
// (session_expired).  Resolves when the
// stream ends ([DONE], or the server closes it); rejects with ApiError or AbortError.
export async function streamChat(body, headers, signal, on) {
  const r = await call('/v1/chat/completions', {
    method: 'POST', headers, signal,
    body: { ...body, stream: true, stream_options: { include_usage: true }, timings_per_token: true },
  });
  const reader = r.body.getReader();
  const dec = new TextDecoder();
  let buf = '', done = false;
  const handle = (block) => {
    let event = null, data = '';
    for (const line of block.split('\n')) {
      if (line.startsWith('event:')) event = line.slice(6).trim();
      else if (line.startsWith('data:')) data += line.slice(5).trimStart();
    }
    if (!data) return;
    if (data === '[DONE]') { done = true; return; }
    const j = JSON.parse(data);
    if (event) { on.event(event, j); return; }
    if (j.error) throw new ApiError(500, j.error.message || 'generation failed', null, j.error.type);
    const c = j.choices && j.choices[0];
    if (c && c.delta && c.delta.content) on.delta(c.delta.content, j.timings || null);
    if (c && c.finish_reason) on.finish(c.finish_reason);
    if (j.timings && Array.isArray(j.choices) && !j.choices.length) on.timings(j.timings);
  };
  while (!done) {
    const { value, done: end } = await reader.read();
    if (end) break;
    buf += dec.decode(value, { stream: true });
    let i;
    while (!done && (i = buf.indexOf('\n\n')) >= 0) {
      handle(buf.slice(0, i));
      buf = buf.slice(i + 2);
    }
  }
  if (done) reader.cancel().catch(() => {});
}
