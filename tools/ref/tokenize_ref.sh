#!/usr/bin/env bash
# tokenize_ref.sh — reference token ids for a corpus from llama.cpp.
#
#   tools/ref/tokenize_ref.sh LLAMA_TOKENIZE MODEL.gguf CORPUS OUT_PREFIX [STRIDE]
#
# LLAMA_TOKENIZE is llama-tokenize in a llama.cpp build tree (BUILD/bin; the
# sources are BUILD/..).  CORPUS holds strings each followed by
# "\n__ggml_vocab_test__\n" (llama.cpp's .inp layout).  Writes, one line per
# string (ids separated by single spaces):
#   OUT_PREFIX.plain.out        no BOS/EOS, special-token text not parsed
#   OUT_PREFIX.special.out      no BOS/EOS, special-token text parsed
#   OUT_PREFIX.bos-plain.out    BOS/EOS as the model's metadata asks, not parsed
#   OUT_PREFIX.bos-special.out  BOS/EOS as the metadata asks, parsed
#
# The ids come from tools/ref/llama_tokenize_corpus.c, compiled here against
# that build's libllama: it loads the vocabulary once and makes, per string,
# the llama_tokenize call llama-tokenize makes (llama-tokenize itself reloads
# the vocabulary for every string, seconds per call for large vocabularies).
# Then every STRIDE-th string (default 1: all of them) is run through
# llama-tokenize itself in all four modes,
#   llama-tokenize -m MODEL -f FILE --ids --no-escape --log-disable FLAGS
#   FLAGS: plain "--no-bos --no-parse-special", special "--no-bos",
#          bos-plain "--no-parse-special", bos-special ""
# with the string written byte for byte to FILE, and must print the same ids;
# any difference is an error and no output file is kept.
set -euo pipefail
if [ $# -lt 4 ] || [ $# -gt 5 ]; then
  echo "usage: $0 LLAMA_TOKENIZE MODEL.gguf CORPUS OUT_PREFIX [STRIDE]" >&2
  exit 2
fi
TOOL="$1"; MODEL="$2"; CORPUS="$3"; PREFIX="$4"; STRIDE="${5:-1}"
BIN=$(cd "$(dirname "$TOOL")" && pwd); SRC="$BIN/../.."
HERE=$(cd "$(dirname "$0")" && pwd)
SEP=$'\n__ggml_vocab_test__\n'
export LD_LIBRARY_PATH="$BIN${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT

cc -O2 -std=c11 -o "$tmp/corpus" "$HERE/llama_tokenize_corpus.c" -I"$SRC/include" -I"$SRC/ggml/include" \
   -L"$BIN" -lllama
"$tmp/corpus" "$MODEL" "$CORPUS" "$tmp/out" > /dev/null

# the corpus, read with its trailing newlines intact
rest=$(cat "$CORPUS"; printf x); rest=${rest%x}
n=0
while [[ "$rest" == *"$SEP"* ]]; do
  printf '%s' "${rest%%"$SEP"*}" > "$tmp/s$n"
  rest=${rest#*"$SEP"}
  n=$((n + 1))
done
if [ -n "$rest" ]; then echo "$0: $CORPUS does not end with the separator" >&2; exit 1; fi

modes=(plain special bos-plain bos-special)
flags=("--no-bos --no-parse-special" "--no-bos" "--no-parse-special" "")
checked=0
for m in 0 1 2 3; do
  mapfile -t got < "$tmp/out.${modes[$m]}.out"
  if [ "${#got[@]}" -ne "$n" ]; then echo "$0: ${#got[@]} lines for $n strings" >&2; exit 1; fi
  for ((i = 0; i < n; i += STRIDE)); do
    # shellcheck disable=SC2086
    ids=$("$TOOL" -m "$MODEL" -f "$tmp/s$i" --ids --no-escape --log-disable ${flags[$m]} 2>"$tmp/err") || {
      echo "$0: llama-tokenize failed on string $i (${modes[$m]}): $(head -3 "$tmp/err")" >&2
      exit 1
    }
    if [[ "$ids" != \[*\] ]]; then echo "$0: unexpected llama-tokenize output for string $i: $ids" >&2; exit 1; fi
    ids=${ids#[}; ids=${ids%]}; ids=${ids//, / }
    if [ "$ids" != "${got[$i]}" ]; then
      echo "$0: string $i (${modes[$m]}): llama-tokenize gives '$ids', libllama '${got[$i]}'" >&2
      exit 1
    fi
    checked=$((checked + 1))
  done
done
for m in "${modes[@]}"; do cp "$tmp/out.$m.out" "$PREFIX.$m.out"; done
echo "$PREFIX.*.out: $n strings x 4 modes; $checked of them re-checked with llama-tokenize, all equal"
