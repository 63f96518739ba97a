#!/usr/bin/env bash
# fuzz_tokenizer.sh — zerolayer's tokenizer against llama.cpp on random strings.
#
#   tools/ref/fuzz_tokenizer.sh LLAMA_TOKENIZE BUILD MODEL.gguf... [-- SEED N [--invalid]]
#
# LLAMA_TOKENIZE: llama-tokenize in a llama.cpp build tree (its libllama is
# used); BUILD: zerolayer's CMake build folder (libzerolayer.a).  Makes N
# random strings (tools/ref/fuzz_corpus.py, default seed 1, 4000 strings),
# tokenizes them with libllama (llama_tokenize_corpus.c) and with zerolayer
# (zl_tokenize_corpus.c) in the four modes of tokenize_ref.sh, and prints the
# number of differing strings per model and mode, with the first few
# differences.  Exits 1 if any string differs.  A development tool: nothing
# it makes is kept.
set -euo pipefail
TOOL="$1"; BUILD="$2"; shift 2
models=()
while [ $# -gt 0 ] && [ "$1" != "--" ]; do models+=("$1"); shift; done
[ $# -gt 0 ] && shift
SEED="${1:-1}"; N="${2:-4000}"; INV="${3:-}"
BIN=$(cd "$(dirname "$TOOL")" && pwd); SRC="$BIN/../.."
HERE=$(cd "$(dirname "$0")" && pwd); ROOT="$HERE/../.."
export LD_LIBRARY_PATH="$BIN${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
cc -O2 -std=c11 -o "$tmp/ref" "$HERE/llama_tokenize_corpus.c" -I"$SRC/include" -I"$SRC/ggml/include" -L"$BIN" -lllama
cc -O2 -std=c11 -o "$tmp/zl" "$HERE/zl_tokenize_corpus.c" -I"$ROOT/src" -I"$ROOT/include" "$BUILD/libzerolayer.a" -lm -lpthread
python3 "$HERE/fuzz_corpus.py" "$SEED" "$N" $INV > "$tmp/corpus"
bad=0
for model in "${models[@]}"; do
  "$tmp/ref" "$model" "$tmp/corpus" "$tmp/r" > /dev/null
  "$tmp/zl" "$model" "$tmp/corpus" "$tmp/z"
  for m in plain special bos-plain bos-special; do
    d=$(paste -d '\n' "$tmp/z.$m.out" "$tmp/r.$m.out" | awk 'NR % 2 { z = $0; next } z != $0 { n++ } END { print n + 0 }')
    echo "$(basename "$model") $m: $d of $N strings differ"
    if [ "$d" -gt 0 ]; then
      bad=1
      paste -d '\n' "$tmp/z.$m.out" "$tmp/r.$m.out" |
        awk 'NR % 2 { z = $0; next } z != $0 && k++ < 3 { printf "  string %d\n    zerolayer: %s\n    llama.cpp: %s\n", NR / 2 - 1, z, $0 }'
    fi
  done
done
exit $bad
