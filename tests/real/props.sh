#!/usr/bin/env bash
# props.sh — GET /props on SmolLM2-135M: tests/e2e/server_props.sh's checks
# on a model with a Jinja template (chat_template = the file's own source).
# usage: props.sh ZL_BINARY ROOT   (run through need_models.sh)
# needs: loopback
set -uo pipefail
ROOT=$(cd "$2" && pwd)
FILE=$(awk -F'\t' '$1 == "smollm2-135m" { print $2 }' "$ROOT/tools/models.tsv")
exec bash "$ROOT/tests/e2e/server_props.sh" "$1" "$ROOT" "${ZL_MODELS:?run through need_models.sh}/$FILE"
