#!/usr/bin/env bash
# codec.sh — the learned KV state codec on SmolLM2-135M over GPL-3 text
# (/usr/share/common-licenses/GPL-3, see tests/fixtures/real/README.md):
#   - `codec train` fits on the text's first 512 tokens and writes a .zlc;
#   - `codec eval` on other tokens of the text (after the first 4096) at 1/2
#     and 1/16: the byte figures are the budget's (11520 and 1440 per token of
#     23040 f16 bytes), 1/2 stays within 2% of the exact perplexity and
#     agrees on at least 90% of the greedy tokens, 1/16 costs more than 1/2,
#     the entropy never exceeds the allocated bits;
#   - the codec loaded with another model is a clear model_mismatch error;
#     a damaged .zlc is refused with a message naming the damage.
# usage: codec.sh ZL_BINARY ROOT   (run through need_models.sh)
set -uo pipefail
BIN=$1
ROOT=$(cd "$2" && pwd)
TEXT=/usr/share/common-licenses/GPL-3
[ -f "$TEXT" ] || { echo "SKIPPED: $TEXT is missing (Debian base-files)"; exit 77; }
file=$(awk -F'\t' '$1 == "smollm2-135m" { print $2 }' "$ROOT/tools/models.tsv")
MODEL="${ZL_MODELS:?run through tests/real/need_models.sh}/$file"
T=$(mktemp -d)
trap 'rm -rf "$T"' EXIT
fails=0
check() { if [ "$1" = 0 ]; then echo "ok   $2"; else echo "FAIL $2"; fails=$((fails + 1)); fi; }

"$BIN" codec train -m "$MODEL" -f "$TEXT" --tokens 512 --ratio 1/16 -t 2 -o "$T/s.zlc" >"$T/train.out" 2>"$T/train.err"
check $? "codec train exits 0: $(cat "$T/train.out" "$T/train.err")"
grep -q "1440 bytes per token (f16 23040)" "$T/train.out"; check $? "train reports 1/16 of the f16 bytes"

"$BIN" codec eval -m "$MODEL" --codec "$T/s.zlc" -f "$TEXT" --skip 4096 --tokens 320 --prompt 128 --gen 48 \
  --ratio 1/2,1/16 -t 2 >"$T/eval.out" 2>"$T/eval.err"
check $? "codec eval exits 0: $(cat "$T/eval.err")"
cat "$T/eval.out"
python3 - "$T/eval.out" <<'PY'
import re, sys
lines = open(sys.argv[1]).read().splitlines()
fails = 0
def check(ok, what):
    global fails
    print(('ok   ' if ok else 'FAIL ') + what)
    fails += 0 if ok else 1
exact = float(re.search(r'^exact: perplexity ([0-9.]+)', lines[0]).group(1))
rows = {}
for l in lines[1:]:
    m = re.match(r'ratio ([0-9.]+) .*perplexity ([0-9.]+) .*greedy agreement (\d+)/(\d+) .* (\d+) bytes per token '
                 r'\(f16 (\d+).*entropy ([0-9.]+) bits per element \(allocated ([0-9.]+)\)', l)
    check(m is not None, 'a ratio line parses: ' + l)
    if m:
        rows[float(m.group(1))] = [float(x) for x in m.groups()[1:]]
check(set(rows) == {0.5, 0.0625}, 'one line per ratio')
h, s = rows.get(0.5), rows.get(0.0625)
if h and s:
    check(h[3] == 11520 and s[3] == 1440 and h[4] == 23040, 'bytes per token: 11520 and 1440 of 23040')
    check(abs(h[0] / exact - 1) < 0.02, f'1/2 within 2% of the exact perplexity ({h[0]} vs {exact})')
    check(h[1] >= 0.9 * h[2], f'1/2 agrees on >= 90% of the greedy tokens ({h[1]:.0f}/{h[2]:.0f})')
    check(s[0] > h[0], f'1/16 costs more than 1/2 ({s[0]} vs {h[0]})')
    check(all(r[5] <= r[6] + 1e-9 and r[5] > 0.3 * r[6] for r in (h, s)), 'entropy within the allocated bits')
sys.exit(1 if fails else 0)
PY
check $? "eval figures"

"$BIN" codec eval -m "$ROOT/models/stories260K.gguf" --codec "$T/s.zlc" -f "$TEXT" --tokens 64 >"$T/mm.out" 2>"$T/mm.err"
rc=$?
[ $rc = 1 ] && grep -q "^zerolayer: .*model_mismatch" "$T/mm.err"; check $? "another model: exit 1 with model_mismatch ($(cat "$T/mm.err"))"
[ "$(wc -l <"$T/mm.err")" = 1 ] && [ ! -s "$T/mm.out" ]; check $? "one error line, nothing on stdout"

head -c 1000 "$T/s.zlc" >"$T/short.zlc"
"$BIN" codec eval -m "$MODEL" --codec "$T/short.zlc" -f "$TEXT" --tokens 64 2>"$T/short.err" >/dev/null
[ $? = 1 ] && grep -q "short.zlc: codec file truncated" "$T/short.err"; check $? "truncated .zlc: $(cat "$T/short.err")"
"$BIN" codec eval -m "$MODEL" --codec "$T/s.zlc" -f "$TEXT" --ratio 2 2>"$T/ratio.err" >/dev/null
[ $? = 1 ] && grep -q "not in (0, 1\]" "$T/ratio.err"; check $? "bad ratio: $(cat "$T/ratio.err")"
echo "fails: $fails"
[ $fails = 0 ]
