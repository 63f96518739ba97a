#!/usr/bin/env bash
# server_props.sh — GET /props (llama.cpp's shape) of `zerolayer serve` on
# stories260K: every field against what the server was started with and the
# model file's metadata (read here by a small GGUF reader of its own):
# slots, context, alias, path, the chat template (the built-in family's
# name without a template, a --chat-template-file's exact source, a forced
# family), BOS/EOS text, the ring default, the defaults a request gets; and
# POST /props is refused (read-only).  With MODEL (tests/real/props.sh) the
# one case is that model with its own template: chat_template must be the
# file's tokenizer.chat_template.
# usage: server_props.sh BIN ROOT [MODEL]
# needs: loopback
set -uo pipefail
BIN=$(cd "$(dirname "$1")" && pwd)/$(basename "$1")
ROOT=$(cd "$2" && pwd)
. "$ROOT/tests/real/serve_lib.sh"
MODEL="${3:-$ROOT/models/stories260K.gguf}"
TPLF="$ROOT/tests/fixtures/templates/tpl/gemma3.jinja"
fails=0
stop_server() { kill "$SRV" 2>/dev/null; wait "$SRV" 2>/dev/null; SRV=; }

run_case() { # name, python expectations (dict literal), serve args...
    local name="$1" want="$2"; shift 2
    zl_serve_start -m "$MODEL" "$@" || { fails=$((fails + 1)); return; }
    python3 - "$URL" "$MODEL" "$name" "$want" "$("$BIN" --version)" <<'PY' || fails=$((fails + 1))
import json, struct, sys, urllib.request, urllib.error
URL, MODEL, NAME, WANT, VERSION = sys.argv[1:6]
want = eval(WANT)

def gguf_meta(path):
    """general/tokenizer metadata of a GGUF v3 file (scalars and string arrays)."""
    f = open(path, 'rb')
    rd = lambda fmt: struct.unpack('<' + fmt, f.read(struct.calcsize('<' + fmt)))[0]
    rs = lambda: f.read(rd('Q')).decode('utf-8')
    assert f.read(4) == b'GGUF' and rd('I') == 3
    rd('Q'); n_kv = rd('Q')
    sizes = {0: 'B', 1: 'b', 2: 'H', 3: 'h', 4: 'I', 5: 'i', 6: 'f', 7: '?', 10: 'Q', 11: 'q', 12: 'd'}
    def val(t):
        if t == 8: return rs()
        if t == 9:
            et, n = rd('I'), rd('Q')
            return [val(et) for _ in range(n)]
        return rd(sizes[t])
    meta = {}
    for _ in range(n_kv):
        k = rs()
        meta[k] = val(rd('I'))
    return meta

m = gguf_meta(MODEL)
arch = m['general.architecture']
p = json.load(urllib.request.urlopen(URL + '/props', timeout=60))
fails = 0
def check(ok, what):
    global fails
    print(('ok   ' if ok else 'FAIL ') + NAME + ': ' + what)
    fails += 0 if ok else 1
toks = m['tokenizer.ggml.tokens']
dgs = p['default_generation_settings']
check(p['total_slots'] == want['slots'] and dgs['n_ctx'] == want['ctx'], 'total_slots %d, n_ctx %d' % (p['total_slots'], dgs['n_ctx']))
check(p['model_path'] == MODEL and p['model_alias'] == want.get('alias', MODEL.rsplit('/', 1)[1]),
      'model_path %s, model_alias %s' % (p['model_path'], p['model_alias']))
if want['template'] is None: want['template'] = m['tokenizer.chat_template']
check(p['chat_template'] == want['template'], 'chat_template %r...' % p['chat_template'][:40])
check(p['bos_token'] == toks[m['tokenizer.ggml.bos_token_id']] and p['eos_token'] == toks[m['tokenizer.ggml.eos_token_id']],
      'bos %r, eos %r from the file' % (p['bos_token'], p['eos_token']))
z = p['zerolayer']
check(z['architecture'] == arch and z['n_ctx_train'] == m[arch + '.context_length'] and
      z['n_embd'] == m[arch + '.embedding_length'] and z['n_vocab'] == len(toks),
      'architecture %s, n_ctx_train %d, n_embd %d, n_vocab %d from the file' % (arch, z['n_ctx_train'], z['n_embd'], z['n_vocab']))
pr = dgs['params']
check(pr['speculative'] == want['spec'] and pr['temperature'] == 1.0 and pr['top_k'] == 0 and pr['top_p'] == 1.0 and
      pr['min_p'] == 0.0 and pr['n_predict'] == -1 and pr['repeat_penalty'] == 1.0 and pr['seed'] == 0xFFFFFFFF,
      'params: speculative %s, temperature %s, top_k %s, top_p %s, min_p %s' %
      (pr['speculative'], pr['temperature'], pr['top_k'], pr['top_p'], pr['min_p']))
check(p['build_info'] == VERSION and p['is_sleeping'] is False and p['modalities'] == {'vision': False, 'audio': False},
      'build_info %r = zerolayer --version' % p['build_info'])
try:
    urllib.request.urlopen(urllib.request.Request(URL + '/props', b'{}', {'content-type': 'application/json'}), timeout=60)
    check(False, 'POST /props accepted')
except urllib.error.HTTPError as e:
    check(e.code == 405, 'POST /props -> %d' % e.code)
sys.exit(1 if fails else 0)
PY
    stop_server
}

if [ $# -ge 3 ]; then
    run_case model "{'slots': 2, 'ctx': 1024, 'template': None, 'spec': False}" --parallel 2 --ctx 1024
    exit $((fails > 0))
fi
run_case default "{'slots': 3, 'ctx': 256, 'template': 'plain', 'spec': False}" --parallel 3 --ctx 256 -t 1
run_case file "{'slots': 1, 'ctx': 128, 'template': open('$TPLF').read(), 'spec': True, 'alias': 'tiny'}" \
    --parallel 1 --ctx 128 -t 1 --chat-template-file "$TPLF" --model-id tiny --compute balanced
run_case family "{'slots': 2, 'ctx': 64, 'template': 'chatml', 'spec': False}" --parallel 2 --ctx 64 -t 1 --chat-template chatml
exit $((fails > 0))
