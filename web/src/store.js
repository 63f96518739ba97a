// store.js — what the page keeps in the browser's localStorage: the
// conversations (messages, their figures, the session token), the settings
// and the API key.  Nothing here is sent anywhere.
const K_CONVS = 'zl.convs', K_CURRENT = 'zl.current', K_SETTINGS = 'zl.settings', K_KEY = 'zl.apiKey';

function read(k, dflt) {
  try { const v = localStorage.getItem(k); return v === null ? dflt : JSON.parse(v); } catch { return dflt; }
}
function write(k, v) {
  try { localStorage.setItem(k, JSON.stringify(v)); } catch { /* storage full or off: the page still works */ }
}

export const getKey = () => read(K_KEY, '');
export const setKey = (k) => (k ? write(K_KEY, k) : localStorage.removeItem(K_KEY));

export const DEFAULT_SETTINGS = {
  system: '', temperature: 0.7, top_p: 0.95, top_k: 40, min_p: 0.05, max_tokens: 512, seed: '', grammar: '',
  session: false, passphrase: '', validation: '', ring: '', compute: '', kv_policy: '', kv_budget: '', model: '',
};
export const loadSettings = () => ({ ...DEFAULT_SETTINGS, ...read(K_SETTINGS, {}) });
// the passphrase stays in memory only
export const saveSettings = (s) => write(K_SETTINGS, { ...s, passphrase: '' });

export const loadConvs = () => read(K_CONVS, []);
export const saveConvs = (convs) => write(K_CONVS, convs);
export const loadCurrent = () => read(K_CURRENT, null);
export const saveCurrent = (id) => write(K_CURRENT, id);

export function newConv() {
  return { id: 'c' + Date.now().toString(36) + Math.random().toString(36).slice(2, 6), title: 'New chat',
    created: Date.now(), messages: [], session: null };
}
