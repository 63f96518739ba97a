#!/usr/bin/env bash
# json_schema_cli.sh — constrained sampling on SmolLM2-135M:
#   - outputs sampled at temperature 1 (no truncation) under each schema of
#     tests/fixtures/schemas, through the batched scheduler (schema_bench),
#     all parse and validate under python3-jsonschema (an independent
#     validator) and all end at the end token;
#   - `zerolayer run --json-schema` gives a valid document too;
#   - an unsupported keyword is an error naming it, a malformed grammar names
#     its line and column, and a grammar with the ring on is refused.
# ZL_SCHEMA_SAMPLES (default 4) samples per schema; the report line gives the
# count, the validation rate and the sampling cost per token.
# usage: json_schema_cli.sh ZL_BINARY ROOT   (run through need_models.sh)
# labels: python
set -uo pipefail
BIN=$1
ROOT=$(cd "$2" && pwd)
SAMPLER="$(dirname "$BIN")/schema_bench"
python3 -c 'import jsonschema' 2>/dev/null || { echo "SKIPPED: python3-jsonschema is missing (apt-get install python3-jsonschema)"; exit 77; }
[ -x "$SAMPLER" ] || { echo "SKIPPED: $SAMPLER is not built (configure with -DZL_BENCHES=ON)"; exit 77; }
MODEL="$ZL_MODELS/$(awk -F'\t' '$1 == "smollm2-135m" { print $2 }' "$ROOT/tools/models.tsv")"
N=${ZL_SCHEMA_SAMPLES:-4}
OUT=$(mktemp -d)
trap 'rm -rf "$OUT"' EXIT
fail=0
declare -A prompt=([person]="Describe a person as JSON." [order]="Write a shop order as JSON."
                   [tree]="Write a small tree of labelled nodes as JSON.")
for s in person order tree; do
  "$SAMPLER" "$MODEL" "$ROOT/tests/fixtures/schemas/$s.json" "${prompt[$s]}" "$N" 4 384 >"$OUT/$s.out" 2>"$OUT/$s.err" \
    || { echo "FAIL: schema_bench $s: $(tail -1 "$OUT/$s.err")"; fail=1; }
  cat "$OUT/$s.err"
done
"$BIN" run -m "$MODEL" --chat -p "${prompt[person]}" --json-schema "$ROOT/tests/fixtures/schemas/person.json" \
  --temp 1 --seed 5 -n 256 >"$OUT/cli.out" 2>"$OUT/cli.err" || { echo "FAIL: run --json-schema: $(tail -1 "$OUT/cli.err")"; fail=1; }
grep "grammar:" "$OUT/cli.err"
python3 - "$ROOT" "$OUT" <<'PY' || fail=1
import json, sys, re, jsonschema
root, out = sys.argv[1], sys.argv[2]
ok = total = 0
bad = []
def check(name, text):
    global ok, total
    total += 1
    schema = json.load(open(f"{root}/tests/fixtures/schemas/{name}.json"))
    try:
        jsonschema.validate(json.loads(text), schema, cls=jsonschema.Draft202012Validator)
        ok += 1
    except Exception as e:
        bad.append((name, text[:160], str(e)[:160]))
for name in ("person", "order", "tree"):
    err = open(f"{out}/{name}.err").read()
    m = re.search(r"(\d+) jobs: (\d+) ended at the end token", err)
    if not m or m.group(1) != m.group(2):
        bad.append((name, "", "not every job ended at the end token: " + err.strip()))
    for line in open(f"{out}/{name}.out", encoding="utf-8"):
        check(name, line.strip())
check("person", open(f"{out}/cli.out", encoding="utf-8").read().strip())
for b in bad[:6]:
    print("FAIL: %s: %r: %s" % b)
print(f"json_schema_cli: {ok}/{total} outputs valid ({100.0 * ok / max(total, 1):.1f}%)")
sys.exit(0 if ok == total and not bad else 1)
PY
printf '{"type":"string","pattern":"^a"}' >"$OUT/bad.json"
msg=$("$BIN" run -m "$MODEL" -p x --json-schema "$OUT/bad.json" -n 1 2>&1 >/dev/null)
echo "$msg" | grep -q "unsupported keyword 'pattern'" || { echo "FAIL: unsupported keyword not named: $msg"; fail=1; }
printf 'root ::= "a" (\n' >"$OUT/bad.gbnf"
msg=$("$BIN" run -m "$MODEL" -p x --grammar "$OUT/bad.gbnf" -n 1 2>&1 >/dev/null)
echo "$msg" | grep -q "line 1 column 14" || { echo "FAIL: grammar error lacks line/column: $msg"; fail=1; }
msg=$("$BIN" run -m "$MODEL" -p x --grammar "$OUT/bad.gbnf" --spec lookup -n 1 2>&1 >/dev/null)
echo "$msg" | grep -q "ring off" || { echo "FAIL: --grammar with the ring: $msg"; fail=1; }
[ $fail = 0 ] && echo "PASS"
exit $fail
