#!/usr/bin/env bash
# End-to-end: `synth --embed-from` through the real binary.  stories260K
# embedded in a bigger shape generates stories260K's greedy text; as a draft
# model, stories260K (and the embed's own first 5 layers) are accepted 100%;
# --perturb makes a different model (other greedy text; the ring's acceptance
# counts depend on timing, so they are not asserted for it); every
# bad argument exits non-zero with exactly one "zerolayer: ..." line naming
# the problem and leaves no file.
set -u
ZL="$1"; ROOT="$2"
STORIES="$ROOT/tests/fixtures/models/stories260K.gguf"
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
     grep -qF -- "$want" "$tmp/err" && [ ! -e "$tmp/x.gguf" ] && [ ! -e "$tmp/x.gguf.tmp" ]; then
    check ok "$desc: $(cat "$tmp/err")"
  else
    check bad "$desc (rc=$rc, stderr: $(head -3 "$tmp/err"))"
  fi
}
ring_stats() { sed -nE 's/.*drafted ([0-9]+), accepted ([0-9]+).*/\1 \2/p' "$1"; }

t "synth --help documents --embed-from" bash -c "\"$ZL\" synth --help | grep -q -- '--embed-from SMALL.gguf'"

SHAPE=(--dim 256 --ffn 512 --layers 7 --heads 16 --kv-heads 4)
"$ZL" synth --embed-from "$STORIES" "${SHAPE[@]}" --type F16 -o "$tmp/e.gguf" 2> "$tmp/s.log"; rc=$?
t "embed exits 0" test $rc -eq 0
t "embed reports what it wrote" grep -q "^wrote $tmp/e.gguf: 66 tensors, F16" "$tmp/s.log"
t "embed has the big shape" bash -c "\"$ZL\" inspect \"$tmp/e.gguf\" | grep -Eq '^llama.embedding_length +u32 +256$'"
t "embed copies the tokenizer" bash -c "\"$ZL\" inspect \"$tmp/e.gguf\" | grep -q '^tokenizer.ggml.tokens .*\[string x 512\]'"

a=$("$ZL" run -m "$STORIES" -p "Once upon a time" -n 64 --temp 0 --spec off -t 2 2>/dev/null)
b=$("$ZL" run -m "$tmp/e.gguf" -p "Once upon a time" -n 64 --temp 0 --spec off -t 2 2>/dev/null)
t "embed greedy text equals stories260K's" test -n "$a" -a "$a" = "$b"

c=$("$ZL" run -m "$tmp/e.gguf" -p "Once upon a time" -n 64 --temp 0 -t 2 --spec draft --draft-model "$STORIES" 2>"$tmp/d.log")
read -r dr ac < <(ring_stats "$tmp/d.log")
t "stories260K drafting the embed: same text" test "$c" = "$a"
t "stories260K drafting the embed: every draft accepted ($ac/$dr)" test "${dr:-0}" -gt 0 -a "${ac:-x}" = "${dr:-y}"
"$ZL" run -m "$tmp/e.gguf" -p "Once upon a time" -n 64 --temp 0 -t 2 --spec draft --draft-layers 5 >/dev/null 2>"$tmp/l.log"
read -r dr ac < <(ring_stats "$tmp/l.log")
t "the embed's first 5 layers drafting it: every draft accepted ($ac/$dr)" test "${dr:-0}" -gt 0 -a "${ac:-x}" = "${dr:-y}"

# (only 2 extra layers here, so it takes a large P to move the greedy text)
"$ZL" synth --embed-from "$STORIES" "${SHAPE[@]}" --type F16 --perturb 5 -o "$tmp/p.gguf" 2>/dev/null
t "--perturb is recorded" bash -c "\"$ZL\" inspect \"$tmp/p.gguf\" | grep -Eq '^zerolayer.embed.perturb +f32 +5$'"
c=$("$ZL" run -m "$tmp/p.gguf" -p "Once upon a time" -n 64 --temp 0 -t 2 --spec draft --draft-model "$STORIES" 2>/dev/null)
d=$("$ZL" run -m "$tmp/p.gguf" -p "Once upon a time" -n 64 --temp 0 -t 2 --spec off 2>/dev/null)
t "perturbed: greedy text differs from stories260K's" test -n "$d" -a "$d" != "$a"
t "perturbed, drafted by stories260K: the ring is still lossless" test "$c" = "$d"

B=(synth --embed-from "$STORIES" "${SHAPE[@]}" -o "$tmp/x.gguf")
expect_err "head dimension not a multiple" "is not a multiple of the small model's head dimension 8" \
  "$ZL" synth --embed-from "$STORIES" --dim 256 --ffn 512 --layers 7 --heads 64 --kv-heads 4 -o "$tmp/x.gguf"
expect_err "too few layers" "--layers 4 is fewer than the small model's 5 layers" \
  "$ZL" synth --embed-from "$STORIES" --dim 256 --ffn 512 --layers 4 --heads 16 --kv-heads 4 -o "$tmp/x.gguf"
expect_err "too few kv heads" "--kv-heads 2 is fewer than the small model's 4 kv heads" \
  "$ZL" synth --embed-from "$STORIES" --dim 256 --ffn 512 --layers 7 --heads 16 --kv-heads 2 -o "$tmp/x.gguf"
expect_err "narrower than the small model" "--dim 32 is smaller" \
  "$ZL" synth --embed-from "$STORIES" --dim 32 --ffn 512 --layers 7 --heads 4 --kv-heads 4 -o "$tmp/x.gguf"
expect_err "--perturb without extra layers" "--layers must exceed the small model's 5" \
  "$ZL" synth --embed-from "$STORIES" --dim 256 --ffn 512 --layers 5 --heads 16 --kv-heads 4 --perturb 1 -o "$tmp/x.gguf"
expect_err "negative --perturb" "--perturb" "$ZL" "${B[@]}" --perturb -1
expect_err "--perturb without --embed-from" "--perturb needs --embed-from" \
  "$ZL" synth --vocab-from "$STORIES" "${SHAPE[@]}" --perturb 1 -o "$tmp/x.gguf"
expect_err "--embed-from with --vocab-from" "exclude each other" "$ZL" "${B[@]}" --vocab-from "$STORIES"
expect_err "--embed-from with --rope-base" "--rope-base cannot be set with --embed-from" "$ZL" "${B[@]}" --rope-base 50000
expect_err "missing small model" "absent.gguf" \
  "$ZL" synth --embed-from "$tmp/absent.gguf" "${SHAPE[@]}" -o "$tmp/x.gguf"
printf 'GGUF\003\000\000\000garbage' > "$tmp/junk.gguf"
expect_err "corrupt small model" "junk.gguf" "$ZL" synth --embed-from "$tmp/junk.gguf" "${SHAPE[@]}" -o "$tmp/x.gguf"
expect_err "--embed-from needs a value" "--embed-from needs a value" "$ZL" synth "${SHAPE[@]}" -o "$tmp/x.gguf" --embed-from

exit $fail
