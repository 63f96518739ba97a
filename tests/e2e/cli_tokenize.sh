#!/usr/bin/env bash
# End-to-end: `zerolayer tokenize` on llama.cpp's vocabulary-only test files.
# Every string of every tests/fixtures/tokenizer/NAME.gguf.inp goes through the
# CLI on standard input (--no-bos, no special parsing: how llama.cpp made the
# .out files) and must give exactly the ids on its line of NAME.gguf.out.  The
# files have no tensors and name architectures the engine cannot run (gpt2,
# mpt, starcoder, ...), so this also shows that tokenize reads only the
# vocabulary.  Files without a tokenizer, or with one the tokenizer does not
# support, fail with one "zerolayer: ..." line naming the problem.
set -u
ZL="$1"; ROOT="$2"; FIX="$ROOT/tests/fixtures"
SEP=$'\n__ggml_vocab_test__\n'
fail=0
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
check() { if [ "$1" = ok ]; then echo "ok   $2"; else echo "FAIL $2"; fail=1; fi; }
expect_err() { # desc, expected message substring, command...
  local desc="$1" want="$2"; shift 2
  local out rc lines
  out=$("$@" 2>"$tmp/err"); rc=$?
  lines=$(wc -l < "$tmp/err")
  if [ $rc -ne 0 ] && [ -z "$out" ] && [ "$lines" -eq 1 ] && grep -q '^zerolayer: ' "$tmp/err" &&
     grep -qF -- "$want" "$tmp/err"; then
    check ok "$desc: $(cat "$tmp/err")"
  else
    check bad "$desc (rc=$rc, stdout: ${out:0:80}, stderr: $(head -3 "$tmp/err"))"
  fi
}

total=0
for inp in "$FIX"/tokenizer/*.gguf.inp; do
  name=$(basename "$inp" .inp)
  gguf="$FIX/tokenizer/$name"
  [ -f "$gguf" ] || gguf="$ROOT/models/$name"
  if [ ! -f "$gguf" ]; then check bad "$name: no vocabulary file for $inp"; continue; fi
  mapfile -t want < "${inp%.inp}.out"
  rest=$(cat "$inp"; printf x); rest=${rest%x}
  n=0 good=0
  while [[ "$rest" == *"$SEP"* ]]; do
    s=${rest%%"$SEP"*}; rest=${rest#*"$SEP"}
    got=$(printf '%s' "$s" | "$ZL" tokenize -m "$gguf" --no-bos --stdin 2>"$tmp/err")
    exp=$(echo ${want[$n]-MISSING})  # the .out lines start with a space
    if [ "$got" = "$exp" ]; then
      good=$((good + 1))
    else
      echo "  $name string $n: got '$got' want '$exp' $(head -1 "$tmp/err")"
    fi
    n=$((n + 1))
  done
  [ -z "$rest" ] && [ "$n" -gt 0 ] && [ "$n" -eq "${#want[@]}" ] && [ "$good" -eq "$n" ] \
    && check ok "$name: $good/$n strings" || check bad "$name: $good/$n strings (${#want[@]} expected lines)"
  total=$((total + n))
done
[ "$total" -ge 460 ] && check ok "$total strings in all" || check bad "only $total strings"

# the model's own framing: BOS where the metadata asks for it, special-token text only with --special
V="$FIX/tokenizer"
got=$("$ZL" tokenize -m "$V/ggml-vocab-llama-spm.gguf" "Hello world")
[ "$got" = "1 15043 3186" ] && check ok "llama-spm adds BOS: $got" || check bad "llama-spm adds BOS: $got"
got=$("$ZL" tokenize -m "$V/ggml-vocab-gpt-2.gguf" "Hello world")
[ "$got" = "15496 995" ] && check ok "gpt-2 adds nothing: $got" || check bad "gpt-2 adds nothing: $got"
got=$("$ZL" tokenize -m "$V/ggml-vocab-gpt-2.gguf" --special "a<|endoftext|>b")
[ "$got" = "64 50256 65" ] && check ok "gpt-2 --special: $got" || check bad "gpt-2 --special: $got"
got=$("$ZL" tokenize -m "$V/ggml-vocab-gpt-2.gguf" "a<|endoftext|>b")
[ "$got" != "64 50256 65" ] && [ -n "$got" ] && check ok "gpt-2 plain keeps the text: $got" || check bad "gpt-2 plain: $got"
got=$(printf '' | "$ZL" tokenize -m "$V/ggml-vocab-llama-spm.gguf" --stdin)
[ "$got" = "1" ] && check ok "empty text is BOS alone" || check bad "empty text: '$got'"

# files that have no usable tokenizer
printf 'GGUF\x03\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00' > "$tmp/empty.gguf"
expect_err "no tokenizer metadata" "has no tokenizer" "$ZL" tokenize -m "$tmp/empty.gguf" hi
# one key: tokenizer.ggml.model = "bert"
printf 'GGUF\x03\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x01\x00\x00\x00\x00\x00\x00\x00\x14\x00\x00\x00\x00\x00\x00\x00tokenizer.ggml.model\x08\x00\x00\x00\x04\x00\x00\x00\x00\x00\x00\x00bert' > "$tmp/bert.gguf"
expect_err "unsupported tokenizer model" "tokenizer.ggml.model 'bert'" "$ZL" tokenize -m "$tmp/bert.gguf" hi
# tokenizer.ggml.model = "llama" but no token list
printf 'GGUF\x03\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x01\x00\x00\x00\x00\x00\x00\x00\x14\x00\x00\x00\x00\x00\x00\x00tokenizer.ggml.model\x08\x00\x00\x00\x05\x00\x00\x00\x00\x00\x00\x00llama' > "$tmp/notok.gguf"
expect_err "tokenizer without tokens" "tokenizer.ggml.tokens" "$ZL" tokenize -m "$tmp/notok.gguf" hi
printf 'GGUF\x03\x00\x00\x00garbage' > "$tmp/bad.gguf"
expect_err "truncated file" "zerolayer: " "$ZL" tokenize -m "$tmp/bad.gguf" hi
expect_err "missing file" "nope.gguf" "$ZL" tokenize -m "$tmp/nope.gguf" hi
expect_err "run on a vocabulary-only file" "has no weights" "$ZL" run -m "$V/ggml-vocab-llama-spm.gguf" -n 1
expect_err "no text" "exactly one of" "$ZL" tokenize -m "$V/ggml-vocab-gpt-2.gguf"
exit $fail
