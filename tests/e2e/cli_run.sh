#!/usr/bin/env bash
# End-to-end: the real binary reproduces the reference greedy text byte for
# byte (F32 and F16 stories260K, 1 and 2 threads, every ISA level), the
# CLI contract (stdout = continuation only), and clean errors on bad input.
set -u
ZL="$1"; ROOT="$2"; FIX="$ROOT/tests/fixtures"
fail=0
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
check() { if [ "$1" = ok ]; then echo "ok   $2"; else echo "FAIL $2"; fail=1; fi; }
for model in stories260K.gguf stories260K-F16.gguf; do
  for isa in scalar avx2 avx512; do
    for t in 1 2; do
      out=$(ZL_ISA=$isa "$ZL" run -m "$FIX/models/$model" --temp 0 -n 200 -t $t 2>"$tmp/load")
      # the level actually used (ZL_ISA only caps it): from run's load line
      used=$(sed -n 's/^zerolayer: .*, isa \([a-z0-9]*\), loaded in .*/\1/p' "$tmp/load")
      if [ "$out" = "$(cat "$FIX/models/stories260K.greedy200.txt")" ] && [ -n "$used" ]; then r=ok; else r=bad; fi
      if [ "$used" = "$isa" ]; then check $r "greedy200 $model isa=$used t=$t"
      else check $r "greedy200 $model isa=$used (asked ZL_ISA=$isa; this CPU has no more) t=$t"; fi
    done
  done
done
# default model (no -m) and ids of the greedy text
out=$("$ZL" run --temp 0 -n 200 2>/dev/null)
[ "$out" = "$(cat "$FIX/models/stories260K.greedy200.txt")" ] && check ok "default model" || check bad "default model"
# seeded sampling is reproducible, different seeds differ
a=$("$ZL" run --seed 7 -n 50 2>/dev/null); b=$("$ZL" run --seed 7 -n 50 2>/dev/null); c=$("$ZL" run --seed 8 -n 50 2>/dev/null)
[ "$a" = "$b" ] && [ "$a" != "$c" ] && check ok "seeded sampling" || check bad "seeded sampling"
# tokenize reproduces the fixture ids (BOS + greedy ids)
ids=$("$ZL" tokenize -m "$FIX/models/stories260K.gguf" "$(cat "$FIX/models/stories260K.greedy200.txt")" 2>/dev/null)
want="1 $(tr '\n' ' ' < "$FIX/models/stories260K.greedy200.ids" | sed 's/ *$//')"
[ "$ids" = "$want" ] && check ok "tokenize(greedy text) = BOS + greedy ids" || check bad "tokenize(greedy text) = BOS + greedy ids"
# perplexity --dump-logits writes [201][512] floats matching the reference shape
"$ZL" perplexity -m "$FIX/models/stories260K.gguf" --ids "$FIX/logits/ids.txt" --dump-logits "$tmp/l.f32" > "$tmp/ppl" 2>/dev/null
sz=$(stat -c %s "$tmp/l.f32" 2>/dev/null || echo 0)
[ "$sz" = $((201*512*4)) ] && grep -q '^perplexity: ' "$tmp/ppl" && check ok "perplexity dump ($(cat "$tmp/ppl"))" || check bad "perplexity dump"
# errors: non-zero exit, one line on stderr, nothing on stdout
expect_err() {
  local desc="$1"; shift
  local out err rc
  out=$("$@" 2>"$tmp/err"); rc=$?
  lines=$(wc -l < "$tmp/err")
  if [ $rc -ne 0 ] && [ -z "$out" ] && [ "$lines" -ge 1 ] && grep -q '^zerolayer: ' "$tmp/err"; then check ok "$desc: $(head -1 "$tmp/err")"; else check bad "$desc (rc=$rc)"; fi
}
printf 'GGUF\x03\x00\x00\x00garbage' > "$tmp/bad.gguf"
expect_err "truncated gguf" "$ZL" run -m "$tmp/bad.gguf" -n 5
expect_err "missing file" "$ZL" run -m "$tmp/nope.gguf"
expect_err "vocab-only file" "$ZL" run -m "$FIX/tokenizer/ggml-vocab-gpt-2.gguf"
expect_err "bad -n" "$ZL" run -n abc
expect_err "unknown option" "$ZL" run --frobnicate
expect_err "unknown command" "$ZL" frobnicate
expect_err "bad ids file" "$ZL" perplexity --ids "$tmp/bad.gguf"
expect_err "bad --ring-cost" "$ZL" run -n 5 --ring-cost 1,abc
expect_err "empty --ring-cost" "$ZL" run -n 5 --ring-cost
expect_err "bad --kv-layer-max" "$ZL" run -n 1 --kv-layer-max 0
# --kv-layer-max reaches the per-layer plan: a cap below the deepest layer's share changes the result,
# one above every share does not
pp() { "$ZL" perplexity -m "$FIX/models/stories260K.gguf" --ids "$FIX/logits/ids.txt" --ctx 256 --kv-policy anchor \
         --kv-budget 100 "$@" 2>/dev/null | sed -n 's/^perplexity: \([0-9.]*\).*/\1/p'; }
p0=$(pp); p1=$(pp --kv-layer-max 100); p2=$(pp --kv-layer-max 1000)
[ -n "$p0" ] && [ "$p0" != "$p1" ] && [ "$p0" = "$p2" ] && check ok "--kv-layer-max: $p0 / capped at 100: $p1 / at 1000: $p2" \
  || check bad "--kv-layer-max ($p0 / $p1 / $p2)"
# the ring with a verify-cost curve (given and measured) still reproduces the greedy text
for rc in 1,1.1,1.2,1.3 measure; do
  out=$("$ZL" run -m "$FIX/models/stories260K.gguf" --temp 0 -n 200 --spec lookup --ring-cost $rc 2>/dev/null)
  [ "$out" = "$(cat "$FIX/models/stories260K.greedy200.txt")" ] && check ok "greedy200 --ring-cost $rc" || check bad "greedy200 --ring-cost $rc"
done
# self-speculation drafts in the target's cache: same greedy text, and its verify passes resume after the draft
err=$(mktemp)
out=$("$ZL" run -m "$FIX/models/stories260K.gguf" --temp 0 -n 200 --spec draft --draft-layers 3 --ring-cost 1,1.1,1.2,1.3 2>"$err")
[ "$out" = "$(cat "$FIX/models/stories260K.greedy200.txt")" ] && grep -q "resumed after the draft's layers" "$err" \
  && check ok "greedy200 --draft-layers 3 ($(grep -o '[0-9]* verify passes resumed' "$err"))" || check bad "greedy200 --draft-layers 3"
rm -f "$err"
for c in run tokenize perplexity quantize synth inspect bench; do
  "$ZL" $c --help >/dev/null 2>&1 && check ok "$c --help" || check bad "$c --help"
done
exit $fail
