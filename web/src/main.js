// main.js — the chat page: conversations, the composer, settings, sessions
// and snapshots, wired to the DOM of index.html.  Talks to the server only
// through api.js; renders model text only through markdown.js.
import { ApiError, call, getJSON, postJSON, streamChat } from './api.js';
import { renderMarkdown, copyButton } from './markdown.js';
import { Meter, renderFigures, drawChart } from './stats.js';
import * as store from './store.js';

const $ = (id) => document.getElementById(id);
const settings = store.loadSettings();
let convs = store.loadConvs();
let conv = convs.find((c) => c.id === store.loadCurrent()) || null;
let running = null; // {ctl: AbortController} while an answer streams
let pendingRetry = null; // what to run again once a key is entered
// the server keeps sessions on its first model (the others have no session routes)
let homeModel = null;
const sessionOn = () => settings.session && settings.model === homeModel;

// ---------- errors and the key ----------
function showError(e) {
  const box = $('error');
  if (!e) { box.hidden = true; box.textContent = ''; return; }
  box.textContent = e instanceof ApiError ? e.readable() : String(e.message || e);
  box.dataset.status = e.status || '';
  box.hidden = false;
  if (e.status === 401) askKey();
}
function askKey() {
  $('keyin').value = store.getKey();
  if (!$('keydlg').open) $('keydlg').showModal();
}
$('key').addEventListener('click', askKey);
$('key-ok').addEventListener('click', () => {
  store.setKey($('keyin').value.trim());
  $('keydlg').close();
  showError(null);
  loadModels();
  if (pendingRetry) { const f = pendingRetry; pendingRetry = null; f(); }
});
$('key-clear').addEventListener('click', () => { store.setKey(''); $('keyin').value = ''; $('keydlg').close(); });
$('key-cancel').addEventListener('click', () => $('keydlg').close());

// ---------- models and /props ----------
async function loadModels() {
  try {
    const j = await getJSON('/v1/models');
    const sel = $('model');
    sel.replaceChildren(...j.data.map((m) => new Option(m.id, m.id)));
    homeModel = j.data.length ? j.data[0].id : null;
    if (j.data.some((m) => m.id === settings.model)) sel.value = settings.model;
    settings.model = sel.value;
    loadProps();
    showSession();
  } catch (e) { showError(e); }
}
async function loadProps() {
  try {
    const p = await getJSON('/props?model=' + encodeURIComponent(settings.model));
    const z = p.zerolayer || {};
    $('props').textContent = [p.model_alias || '', z.architecture || '', p.default_generation_settings &&
      `ctx ${p.default_generation_settings.n_ctx}`, z.kv_policy && `KV ${z.kv_policy}`].filter(Boolean).join(' · ');
  } catch { $('props').textContent = ''; }
}
$('model').addEventListener('change', () => {
  settings.model = $('model').value;
  store.saveSettings(settings);
  loadProps();
  showSession();
});

// ---------- settings ----------
const FIELDS = ['system', 'temperature', 'top_p', 'top_k', 'min_p', 'max_tokens', 'seed', 'grammar', 'passphrase',
  'validation', 'ring', 'compute', 'kv_policy', 'kv_budget'];
for (const f of FIELDS) {
  const el = $('s-' + f);
  el.value = settings[f];
  el.addEventListener('change', () => { settings[f] = el.value; store.saveSettings(settings); });
}
$('s-session').checked = settings.session;
$('s-session').addEventListener('change', () => { settings.session = $('s-session').checked; store.saveSettings(settings); showSession(); });
const toggleSettings = () => { $('settings').hidden = !$('settings').hidden; };
$('gear').addEventListener('click', toggleSettings);
$('close-settings').addEventListener('click', toggleSettings);
$('menu').addEventListener('click', () => document.body.classList.toggle('side-open'));

const num = (v) => (v === '' || v === null || v === undefined ? undefined : Number(v));
function requestBody(messages) {
  const b = { model: settings.model || undefined, messages, max_tokens: num(settings.max_tokens), temperature: num(settings.temperature),
    top_p: num(settings.top_p), top_k: num(settings.top_k), min_p: num(settings.min_p), seed: num(settings.seed) };
  if (settings.grammar.trim()) b.grammar = settings.grammar;
  for (const k of Object.keys(b)) if (b[k] === undefined) delete b[k];
  return b;
}
// the layer's controls travel as the documented X-Zerolayer-* headers
function controlHeaders() {
  const h = {};
  if (settings.validation) h['X-Zerolayer-Validation'] = settings.validation;
  if (settings.ring) h['X-Zerolayer-Ring'] = settings.ring;
  if (settings.compute) h['X-Zerolayer-Compute'] = settings.compute;
  if (settings.kv_policy) h['X-Zerolayer-KV-Policy'] = settings.kv_policy;
  if (settings.kv_budget) h['X-Zerolayer-KV-Budget'] = settings.kv_budget;
  return h;
}

// ---------- conversations ----------
function persist() { store.saveConvs(convs); store.saveCurrent(conv && conv.id); }
function ensureConv() {
  if (!conv) { conv = store.newConv(); convs.unshift(conv); }
  return conv;
}
function renderConvs() {
  const ul = $('convs');
  ul.replaceChildren(...convs.map((c) => {
    const li = document.createElement('li');
    li.className = c === conv ? 'active' : '';
    const a = document.createElement('button');
    a.type = 'button';
    a.className = 'conv';
    a.textContent = c.title;
    a.addEventListener('click', () => { if (running) return; conv = c; persist(); renderAll(); document.body.classList.remove('side-open'); });
    const del = document.createElement('button');
    del.type = 'button';
    del.className = 'icon del';
    del.title = 'Delete';
    del.textContent = '×';
    del.addEventListener('click', () => {
      if (running && c === conv) return;
      dropSession(c);
      convs = convs.filter((x) => x !== c);
      if (conv === c) conv = null;
      persist();
      renderAll();
    });
    li.append(a, del);
    return li;
  }));
}
$('new').addEventListener('click', () => { if (running) return; conv = null; persist(); renderAll(); $('input').focus(); });

function messageEl(m, i, last) {
  const d = document.createElement('div');
  d.className = 'msg ' + m.role + (m.stopped ? ' stopped' : '') + (m.error ? ' failed' : '');
  const body = document.createElement('div');
  body.className = 'body';
  if (m.role === 'assistant') renderMarkdown(body, m.content); else body.textContent = m.content;
  d.append(body);
  const bar = document.createElement('div');
  bar.className = 'bar';
  bar.append(copyButton(() => m.content));
  if (last && m.role === 'assistant') bar.append(button('Regenerate', 'regen', regenerate));
  if (m.role === 'user' && i === lastUserIndex()) bar.append(button('Edit', 'edit', editLast));
  if (m.stopped) bar.append(tag('stopped'));
  if (m.error) bar.append(tag(m.error));
  d.append(bar);
  if (m.role === 'assistant') {
    const figs = document.createElement('div');
    figs.className = 'figs';
    renderFigures(figs, m.live || {}, m.timings);
    const cv = document.createElement('canvas');
    cv.className = 'chart';
    d.append(figs, cv);
    requestAnimationFrame(() => drawChart(cv, (m.live && m.live.series) || []));
  }
  return d;
}
const button = (text, cls, fn) => {
  const b = document.createElement('button');
  b.type = 'button'; b.className = cls; b.textContent = text;
  b.addEventListener('click', () => { if (!running) fn(); });
  return b;
};
const tag = (t) => { const s = document.createElement('span'); s.className = 'tag'; s.textContent = t; return s; };
const lastUserIndex = () => (conv ? conv.messages.map((m) => m.role).lastIndexOf('user') : -1);

function renderMsgs() {
  const box = $('msgs');
  const ms = conv ? conv.messages : [];
  box.replaceChildren(...ms.map((m, i) => messageEl(m, i, i === ms.length - 1)));
  if (!ms.length) {
    const p = document.createElement('p');
    p.className = 'muted empty';
    p.textContent = 'Say something. Each answer shows what the layer did: time to first token, tokens/s, cached prompt tokens, the ring, the KV policy and the server\'s phases.';
    box.append(p);
  }
  box.scrollTop = box.scrollHeight;
}
function renderAll() { renderConvs(); renderMsgs(); showSession(); }

// ---------- sessions ----------
function showSession() {
  const s = conv && conv.session;
  $('sess-info').textContent = !settings.session ? 'off: every turn sends the whole history and the prefix cache may help'
    : !sessionOn() ? `sessions live on the server's first model (${homeModel}): answers from this one run without`
      : s ? `session ${s.id}` : 'a session is opened with the next message';
  for (const id of ['flush', 'snap']) $(id).disabled = !s;
}
const sessHeaders = (c) => (c.session ? { 'X-Zerolayer-Session': c.session.token } : {});
async function openSession(c) {
  const j = await postJSON('/v1/sessions', {});
  c.session = { id: j.id, token: j.token };
  persist();
  showSession();
}
function dropSession(c) {
  if (!c.session) return;
  call('/v1/sessions/' + c.session.id, { method: 'DELETE', headers: sessHeaders(c) }).catch(() => {});
  c.session = null;
}
$('flush').addEventListener('click', async () => {
  try {
    await call(`/v1/sessions/${conv.session.id}/flush`, { method: 'POST', headers: sessHeaders(conv) });
    $('sess-info').textContent = `session ${conv.session.id}: flushed (its KV is dropped and zeroed)`;
  } catch (e) { showError(e); }
});
$('snap').addEventListener('click', async () => {
  try {
    const body = settings.passphrase ? { passphrase: settings.passphrase } : {};
    const j = await postJSON(`/v1/sessions/${conv.session.id}/snapshot`, body, sessHeaders(conv));
    const file = { zerolayer_snapshot: 1, model: j.model, tokens: j.tokens, bytes: j.bytes, codec: j.codec,
      sealed_with: j.sealed_with, state: j.state, title: conv.title, messages: conv.messages };
    const a = document.createElement('a');
    a.href = URL.createObjectURL(new Blob([JSON.stringify(file)], { type: 'application/json' }));
    a.download = `zerolayer-${conv.session.id}.json`;
    document.body.append(a);
    a.click();
    a.remove();
    $('sess-info').textContent = `snapshot: ${j.tokens} tokens, ${j.bytes} bytes (${j.codec}, sealed with ${j.sealed_with})`;
  } catch (e) { showError(e); }
});
$('upload').addEventListener('change', async (ev) => {
  const f = ev.target.files[0];
  ev.target.value = '';
  if (!f || running) return;
  try {
    const file = JSON.parse(await f.text());
    if (!file.state) throw new Error('this file is not a zerolayer snapshot (no "state")');
    const body = { state: file.state };
    if (settings.passphrase) body.passphrase = settings.passphrase;
    const j = await postJSON('/v1/sessions', body);
    conv = { ...store.newConv(), title: (file.title || 'Restored') + ' (restored)', messages: file.messages || [],
      session: { id: j.id, token: j.token } };
    convs.unshift(conv);
    settings.session = true;
    $('s-session').checked = true;
    store.saveSettings(settings);
    persist();
    renderAll();
    $('sess-info').textContent = `restored into session ${j.id}: ${j.tokens} tokens (${j.codec})`;
  } catch (e) { showError(e); }
});

// ---------- sending ----------
function history(c) {
  const ms = [];
  if (settings.system.trim()) ms.push({ role: 'system', content: settings.system });
  for (const m of c.messages) if (!m.error || m.content) ms.push({ role: m.role, content: m.content });
  return ms;
}

async function answer() {
  const c = ensureConv();
  showError(null);
  const msgs = history(c);
  const m = { role: 'assistant', content: '', live: null, timings: null };
  c.messages.push(m);
  renderAll();
  const el = $('msgs').lastElementChild;
  const body = el.querySelector('.body'), figs = el.querySelector('.figs'), cv = el.querySelector('.chart');
  el.classList.add('streaming');
  const ctl = new AbortController();
  running = { ctl };
  setBusy(true);
  const meter = new Meter(performance.now());
  let frame = 0;
  const paint = () => {
    frame = 0;
    renderMarkdown(body, m.content);
    renderFigures(figs, { ttft_ms: meter.ttft() }, m.timings);
    drawChart(cv, meter.series());
    $('msgs').scrollTop = $('msgs').scrollHeight;
  };
  const run = async (retried) => {
    try {
      if (sessionOn() && !c.session) await openSession(c);
      await streamChat(requestBody(msgs), { ...controlHeaders(), ...(sessionOn() ? sessHeaders(c) : {}) }, ctl.signal, {
        delta: (text, t) => {
          meter.piece(performance.now(), t && t.generated_tokens);
          m.content += text;
          if (t) m.timings = t;
          if (!frame) frame = requestAnimationFrame(paint);
        },
        finish: (r) => { m.finish = r; },
        timings: (t) => { m.timings = t; m.complete = true; },
        event: (name, j) => { if (name === 'session_expired') { m.error = `session expired (${j.reason})`; c.session = null; } },
      });
    } catch (e) {
      if (e.name === 'AbortError') { m.stopped = true; return; }
      // a session the server no longer has: open a new one once and send again
      if (!retried && sessionOn() && c.session && (e.status === 404 || e.status === 410)) {
        c.session = null;
        return run(true);
      }
      m.error = e instanceof ApiError ? `${e.status || ''} ${e.type || 'error'}`.trim() : 'error';
      if (e.status === 401) pendingRetry = () => { c.messages.pop(); answer(); };
      showError(e);
    }
  };
  await run(false);
  if (frame) cancelAnimationFrame(frame);
  m.live = meter.toJSON();
  running = null;
  setBusy(false);
  persist();
  renderAll();
}

function setBusy(b) {
  $('send').hidden = b;
  $('stop').hidden = !b;
  document.body.classList.toggle('busy', b);
}

function send() {
  const text = $('input').value.trim();
  if (!text || running) return;
  const c = ensureConv();
  if (c.title === 'New chat') c.title = text.slice(0, 48);
  c.messages.push({ role: 'user', content: text });
  $('input').value = '';
  persist();
  answer();
}
function regenerate() {
  if (!conv || conv.messages[conv.messages.length - 1].role !== 'assistant') return;
  conv.messages.pop();
  answer();
}
function editLast() {
  const i = lastUserIndex();
  if (i < 0) return;
  $('input').value = conv.messages[i].content;
  conv.messages.splice(i);
  persist();
  renderAll();
  $('input').focus();
}
$('send').addEventListener('click', send);
$('stop').addEventListener('click', () => running && running.ctl.abort());
$('input').addEventListener('keydown', (e) => {
  if (e.key === 'Enter' && !e.shiftKey && !e.isComposing) { e.preventDefault(); send(); }
});

renderAll();
loadModels();
