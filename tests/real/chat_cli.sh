#!/usr/bin/env bash
# `zerolayer chat` on SmolLM2-135M: two turns read from stdin, greedy, each
# answered with the model's own template (the right capitals, no template
# tokens), the second turn evaluating only its own tokens (the history is
# taken from the KV cache), /reset forgetting the conversation, and a bad
# option a one-line error.
set -u
ZL="$1"; ROOT="$2"
M="$ZL_MODELS/$(awk -F'\t' '$1 == "smollm2-135m" { print $2 }' "$ROOT/tools/models.tsv")"
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
fail=0
check() { if eval "$2"; then echo "ok   $1"; else echo "FAIL $1"; fail=1; fi; }
printf 'What is the capital of France?\nAnd of Germany?\n/reset\nWhat is the capital of France?\n' |
  "$ZL" chat -m "$M" --temp 0 -t 2 -n 60 -s "You are a helpful assistant." >"$tmp/out" 2>"$tmp/err"
rc=$?
check "exit 0" '[ $rc -eq 0 ]'
check "three answers" '[ "$(wc -l < "$tmp/out")" -eq 3 ]'
check "Paris" 'sed -n 1p "$tmp/out" | grep -q Paris'
check "Berlin in the second turn" 'sed -n 2p "$tmp/out" | grep -q Berlin'
check "the same answer after /reset" '[ "$(sed -n 1p "$tmp/out")" = "$(sed -n 3p "$tmp/out")" ]'
check "no template tokens" '! grep -qE "<\|im_(start|end)\|>|<\|endoftext\|>" "$tmp/out"'
check "the model's own template" 'grep -q "chat template jinja" "$tmp/err"'
cached=$(grep -o '([0-9]* cached)' "$tmp/err" | tr -dc '0-9\n' | sed -n 2p)
check "second turn reuses the history (cached=$cached)" '[ "${cached:-0}" -gt 20 ]'
out=$("$ZL" chat -m "$M" --bogus 2>"$tmp/err2" </dev/null); rc=$?
check "bad option: one line, non-zero" '[ $rc -ne 0 ] && [ -z "$out" ] && [ "$(wc -l < "$tmp/err2")" -eq 1 ] && grep -q "unknown option" "$tmp/err2"'
[ $fail -eq 0 ] && echo "chat_cli: all passed" || { cat "$tmp/err"; exit 1; }
