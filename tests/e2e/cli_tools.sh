#!/usr/bin/env bash
# End-to-end: inspect, quantize and synth through the real binary.  Quantized
# and synthesized files must load and generate; type choices show in inspect;
# synth is deterministic per seed; every bad argument or bad file exits
# non-zero with exactly one "zerolayer: ..." line on stderr, nothing on
# stdout, and no output or temporary file left behind.
set -u
ZL="$1"; ROOT="$2"; FIX="$ROOT/tests/fixtures"
STORIES="$FIX/models/stories260K.gguf"; SMALL="$FIX/logits/synth-small-F16.gguf"
fail=0
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
check() { if [ "$1" = ok ]; then echo "ok   $2"; else echo "FAIL $2"; fail=1; fi; }
t() { local desc="$1"; shift; if "$@"; then check ok "$desc"; else check bad "$desc"; fi; }
expect_err() { # desc, expected message substring, command...
  local desc="$1" want="$2"; shift 2
  local out rc lines
  out=$("$@" 2>"$tmp/err"); rc=$?
  lines=$(wc -l < "$tmp/err")
  if [ $rc -ne 0 ] && [ -z "$out" ] && [ "$lines" -eq 1 ] && grep -q '^zerolayer: ' "$tmp/err" &&
     grep -qF -- "$want" "$tmp/err"; then
    check ok "$desc: $(cat "$tmp/err")"
  else
    check bad "$desc (rc=$rc, stderr: $(head -3 "$tmp/err"))"
  fi
}
type_of() { "$ZL" inspect "$1" | awk -v n="$2" '$1 == n { print $2 }'; }

# --help: usage on stdout, exit 0
for c in quantize synth inspect; do
  t "$c --help" bash -c "\"$ZL\" $c --help | grep -q 'usage: zerolayer $c'"
done

# quantize synth-small F16 -> Q4_K_M: llama.cpp's mix, loads and generates
"$ZL" quantize "$SMALL" "$tmp/q4km.gguf" Q4_K_M 2> "$tmp/q.log" > "$tmp/q.out"; rc=$?
t "quantize Q4_K_M exits 0 with nothing on stdout" test $rc -eq 0 -a ! -s "$tmp/q.out"
t "quantize prints progress per tensor" test "$(grep -c '^\[ *[0-9]*/39\]' "$tmp/q.log")" -eq 39
t "quantize prints a size summary" grep -q '^quantized 39 tensors to Q4_K_M: .* MiB -> .* MiB' "$tmp/q.log"
t "Q4_K_M: output.weight Q6_K" test "$(type_of "$tmp/q4km.gguf" output.weight)" = Q6_K
t "Q4_K_M: token_embd Q4_K" test "$(type_of "$tmp/q4km.gguf" token_embd.weight)" = Q4_K
t "Q4_K_M: blk.3.attn_v Q6_K, blk.1.attn_v Q4_K" test "$(type_of "$tmp/q4km.gguf" blk.3.attn_v.weight)$(type_of "$tmp/q4km.gguf" blk.1.attn_v.weight)" = Q6_KQ4_K
t "Q4_K_M: norms F32" test "$(type_of "$tmp/q4km.gguf" blk.0.attn_norm.weight)" = F32
t "Q4_K_M: general.file_type 15" bash -c "\"$ZL\" inspect \"$tmp/q4km.gguf\" | grep -Eq '^general.file_type +u32 +15$'"
out=$("$ZL" run -m "$tmp/q4km.gguf" -n 16 --temp 0 2>/dev/null); rc=$?
t "Q4_K_M model generates" test $rc -eq 0 -a -n "$out"
t "no temporary file left" test ! -e "$tmp/q4km.gguf.tmp"

# each type loads and runs
for ty in F32 F16 BF16 Q8_0 Q4_0 Q4_1 Q5_0 Q5_1 Q4_K Q5_K Q6_K Q4_K_S Q5_K_S Q5_K_M; do
  "$ZL" quantize -t 2 "$SMALL" "$tmp/x.gguf" $ty 2>/dev/null &&
    out=$("$ZL" run -m "$tmp/x.gguf" -n 4 --temp 0 2>/dev/null) && [ -n "$out" ] && r=ok || r=bad
  check $r "quantize to $ty loads and generates"
done

# stories260K: 172-column ffn_down fits no block type -> F16 with a note; greedy text unchanged at Q8_0
"$ZL" quantize "$STORIES" "$tmp/s8.gguf" Q8_0 2> "$tmp/s.log"; rc=$?
t "stories260K Q8_0 quantizes" test $rc -eq 0
t "fallback note names the tensor" grep -q 'note: blk.0.ffn_down.weight: row length 172 .* using F16' "$tmp/s.log"
t "ffn_down stored F16" test "$(type_of "$tmp/s8.gguf" blk.4.ffn_down.weight)" = F16
a=$("$ZL" run -m "$STORIES" -n 40 --temp 0 2>/dev/null); b=$("$ZL" run -m "$tmp/s8.gguf" -n 40 --temp 0 2>/dev/null)
t "stories260K Q8_0 greedy text equals F32's" test -n "$a" -a "$a" = "$b"
# requantizing a quantized file works (source of any type)
t "quantize from Q4_K_M to Q8_0" "$ZL" quantize "$tmp/q4km.gguf" "$tmp/back.gguf" Q8_0 2>/dev/null
t "requantized model generates" bash -c "[ -n \"\$(\"$ZL\" run -m \"$tmp/back.gguf\" -n 4 2>/dev/null)\" ]"

# synth: tokenizer from another file, deterministic per seed
S=(synth --vocab-from "$STORIES" --dim 128 --ffn 256 --layers 2 --heads 4 --kv-heads 2)
"$ZL" "${S[@]}" --type Q8_0 -o "$tmp/syn1.gguf" --seed 3 2> "$tmp/syn.log"; rc=$?
t "synth exits 0" test $rc -eq 0
t "synth reports what it wrote" grep -q "^wrote $tmp/syn1.gguf: 21 tensors, Q8_0" "$tmp/syn.log"
"$ZL" "${S[@]}" --type Q8_0 -o "$tmp/syn2.gguf" --seed 3 -t 1 2>/dev/null
"$ZL" "${S[@]}" --type Q8_0 -o "$tmp/syn3.gguf" --seed 4 2>/dev/null
t "same seed, same file (any thread count)" cmp -s "$tmp/syn1.gguf" "$tmp/syn2.gguf"
t "other seed, other file" bash -c "! cmp -s \"$tmp/syn1.gguf\" \"$tmp/syn3.gguf\""
t "synth copies the tokenizer" bash -c "\"$ZL\" inspect \"$tmp/syn1.gguf\" | grep -q '^tokenizer.ggml.tokens .*\[string x 512\]'"
t "synth sets the shape" bash -c "\"$ZL\" inspect \"$tmp/syn1.gguf\" | grep -Eq '^llama.attention.head_count_kv +u32 +2$'"
out=$("$ZL" run -m "$tmp/syn1.gguf" -p "Once upon a time" -n 8 --seed 1 2>/dev/null); rc=$?
t "synth model generates" test $rc -eq 0 -a -n "$out"
"$ZL" synth --vocab-from "$STORIES" --dim 256 --ffn 512 --layers 3 --heads 8 --type Q4_K_M --ctx 128 --rope-base 50000 -o "$tmp/syn4.gguf" 2>/dev/null
t "synth Q4_K_M mix" test "$(type_of "$tmp/syn4.gguf" output.weight)$(type_of "$tmp/syn4.gguf" blk.2.ffn_down.weight)$(type_of "$tmp/syn4.gguf" blk.0.ffn_up.weight)" = Q6_KQ6_KQ4_K
t "synth --ctx/--rope-base" bash -c "\"$ZL\" inspect \"$tmp/syn4.gguf\" | grep -Eq '^llama.context_length +u32 +128$' && \"$ZL\" inspect \"$tmp/syn4.gguf\" | grep -Eq '^llama.rope.freq_base +f32 +50000$'"

# errors
head -c $(( $(stat -c %s "$SMALL") - 100 )) "$SMALL" > "$tmp/cut.gguf"  # cuts into the last tensor
head -c 3000 "$SMALL" > "$tmp/cut2.gguf"                                 # cuts into the metadata
cp "$SMALL" "$tmp/magic.gguf"; printf 'XXXX' | dd of="$tmp/magic.gguf" conv=notrunc 2>/dev/null
expect_err "quantize without arguments" "expected IN.gguf OUT.gguf TYPE" "$ZL" quantize
expect_err "quantize with two arguments" "expected IN.gguf OUT.gguf TYPE" "$ZL" quantize "$SMALL" "$tmp/o.gguf"
expect_err "quantize with four arguments" "unexpected argument" "$ZL" quantize "$SMALL" "$tmp/o.gguf" Q8_0 extra
expect_err "quantize unknown type" "unknown type 'Q3_K'" "$ZL" quantize "$SMALL" "$tmp/o.gguf" Q3_K
expect_err "quantize unknown option" "unknown option '--fast'" "$ZL" quantize --fast "$SMALL" "$tmp/o.gguf" Q8_0
expect_err "quantize bad thread count" "-t" "$ZL" quantize -t 0 "$SMALL" "$tmp/o.gguf" Q8_0
expect_err "quantize -t without value" "-t needs a value" "$ZL" quantize "$SMALL" "$tmp/o.gguf" Q8_0 -t
expect_err "quantize missing input" "cannot open" "$ZL" quantize "$tmp/absent.gguf" "$tmp/o.gguf" Q8_0
expect_err "quantize truncated input" "extends past end of file" "$ZL" quantize "$tmp/cut.gguf" "$tmp/o.gguf" Q8_0
expect_err "quantize bad magic" "bad magic" "$ZL" quantize "$tmp/magic.gguf" "$tmp/o.gguf" Q8_0
expect_err "quantize into a missing directory" "cannot create" "$ZL" quantize "$SMALL" "$tmp/no/dir/o.gguf" Q8_0
t "no output after failures" test ! -e "$tmp/o.gguf" -a ! -e "$tmp/o.gguf.tmp"
expect_err "inspect truncated file" "extends past end of file" "$ZL" inspect "$tmp/cut.gguf"
expect_err "inspect file cut in its metadata" "cut2.gguf: " "$ZL" inspect "$tmp/cut2.gguf"
expect_err "quantize file cut in its metadata" "cut2.gguf: " "$ZL" quantize "$tmp/cut2.gguf" "$tmp/o.gguf" Q4_0
expect_err "inspect bad magic" "bad magic" "$ZL" inspect "$tmp/magic.gguf"
expect_err "run on a truncated file" "" "$ZL" run -m "$tmp/cut.gguf" -n 1
expect_err "synth without --vocab-from" "--vocab-from" "$ZL" synth --dim 64 --ffn 64 --layers 1 --heads 2 -o "$tmp/o.gguf"
expect_err "synth without -o" "-o OUT.gguf" "$ZL" synth --vocab-from "$STORIES" --dim 64 --ffn 64 --layers 1 --heads 2
expect_err "synth without --dim" "--dim" "$ZL" synth --vocab-from "$STORIES" --ffn 64 --layers 1 --heads 2 -o "$tmp/o.gguf"
expect_err "synth --dim abc" "--dim: 'abc'" "$ZL" synth --vocab-from "$STORIES" --dim abc --ffn 64 --layers 1 --heads 2 -o "$tmp/o.gguf"
expect_err "synth --dim 0" "--dim: '0'" "$ZL" synth --vocab-from "$STORIES" --dim 0 --ffn 64 --layers 1 --heads 2 -o "$tmp/o.gguf"
expect_err "synth --layers without value" "--layers needs a value" "$ZL" synth --vocab-from "$STORIES" --dim 64 --ffn 64 --heads 2 -o "$tmp/o.gguf" --layers
expect_err "synth heads not dividing dim" "not a multiple of heads" "$ZL" synth --vocab-from "$STORIES" --dim 64 --ffn 64 --layers 1 --heads 3 -o "$tmp/o.gguf"
expect_err "synth kv-heads not dividing heads" "kv-heads 3" "$ZL" synth --vocab-from "$STORIES" --dim 64 --ffn 64 --layers 1 --heads 4 --kv-heads 3 -o "$tmp/o.gguf"
expect_err "synth unknown type" "unknown type 'Q2_K'" "$ZL" synth --vocab-from "$STORIES" --dim 64 --ffn 64 --layers 1 --heads 2 --type Q2_K -o "$tmp/o.gguf"
expect_err "synth bad seed" "--seed" "$ZL" synth --vocab-from "$STORIES" --dim 64 --ffn 64 --layers 1 --heads 2 --seed -1 -o "$tmp/o.gguf"
expect_err "synth bad rope base" "--rope-base" "$ZL" synth --vocab-from "$STORIES" --dim 64 --ffn 64 --layers 1 --heads 2 --rope-base 0 -o "$tmp/o.gguf"
expect_err "synth unknown option" "unexpected argument '--bogus'" "$ZL" synth --bogus --vocab-from "$STORIES" --dim 64 --ffn 64 --layers 1 --heads 2 -o "$tmp/o.gguf"
expect_err "synth corrupted vocabulary file" "cut2.gguf: " "$ZL" synth --vocab-from "$tmp/cut2.gguf" --dim 64 --ffn 64 --layers 1 --heads 2 -o "$tmp/o.gguf"
printf 'GGUF\x03\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00' > "$tmp/empty.gguf"
expect_err "synth vocabulary without tokens" "tokenizer.ggml.tokens" "$ZL" synth --vocab-from "$tmp/empty.gguf" --dim 64 --ffn 64 --layers 1 --heads 2 -o "$tmp/o.gguf"
t "no synth output after failures" test ! -e "$tmp/o.gguf" -a ! -e "$tmp/o.gguf.tmp"

# test hooks are not user flags: the installed binary has no --debug-step-ms
"$ZL" serve --port 0 --debug-step-ms 5 -m "$STORIES" >/dev/null 2>"$tmp/err"; rc=$?
t "serve refuses the test-only --debug-step-ms" test $rc -ne 0
t "  and says it is unknown" grep -qF "unknown option '--debug-step-ms'" "$tmp/err"

exit $fail
