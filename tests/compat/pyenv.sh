#!/usr/bin/env bash
# pyenv.sh — the Python virtual environment with the SDKs pinned in
# tests/compat/requirements.txt; prints its python3 path on stdout.
# usage: pyenv.sh           create or refresh it (pip: needs the network)
#        pyenv.sh --check   only say whether it is ready (exit 1 if not)
# Owns: creating and refreshing that venv (at $ZL_PYENV, default
# ${XDG_CACHE_HOME:-~/.cache}/zerolayer/pyenv).  It is rebuilt when the
# requirements change (a stamp holds their sha256); never touches the system
# Python's packages.
set -euo pipefail
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
REQ="$HERE/requirements.txt"
VENV="${ZL_PYENV:-${XDG_CACHE_HOME:-$HOME/.cache}/zerolayer/pyenv}"
want=$(sha256sum "$REQ" | cut -d' ' -f1)
if [ -x "$VENV/bin/python3" ] && [ "$(cat "$VENV/.requirements.sha256" 2>/dev/null)" = "$want" ]; then
    echo "$VENV/bin/python3"
    exit 0
fi
[ "${1:-}" = --check ] && { echo "pyenv.sh: no venv for today's requirements at $VENV (run tests/compat/pyenv.sh)" >&2; exit 1; }
echo "pyenv.sh: installing the Python SDKs of $REQ into $VENV" >&2
rm -rf "$VENV"
python3 -m venv "$VENV" >&2 || { echo "pyenv.sh: python3 -m venv failed (Debian: apt-get install python3-venv)" >&2; exit 1; }
"$VENV/bin/python3" -m pip install -q --disable-pip-version-check -r "$REQ" >&2 \
    || { echo "pyenv.sh: pip install -r $REQ failed" >&2; rm -rf "$VENV"; exit 1; }
echo "$want" > "$VENV/.requirements.sha256"
echo "$VENV/bin/python3"
