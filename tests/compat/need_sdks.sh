#!/usr/bin/env bash
# need_sdks.sh WHAT... — whether the SDK clients a test drives are installed.
# Owns: the one check (and the one SKIPPED message) for tests that need the
# npm clients or the Python venv; never installs anything and never touches
# the network (`make sdks` installs both; CI does it before the suite).
#   node    node and tests/compat/node_modules with the pinned openai and
#           @anthropic-ai/sdk (package-lock.json)
#   python  the venv of tests/compat/pyenv.sh, built for today's requirements
#   webui   node, web/node_modules with the pinned playwright-core (make webui)
#           and Debian's chromium (ZL_CHROMIUM, default /usr/bin/chromium)
# When something is missing: one SKIPPED line and exit 77, which ctest reports
# as skipped (SKIP_RETURN_CODE), never as passed.  ZL_TEST_STRICT=1 (CI) turns
# that into a failure (exit 1).
set -u
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
missing=
for what in "$@"; do
    case "$what" in
    node)
        command -v node >/dev/null 2>&1 || { missing="$missing node"; continue; }
        for m in openai @anthropic-ai/sdk; do
            [ -f "$HERE/node_modules/$m/package.json" ] || missing="$missing tests/compat/node_modules/$m"
        done ;;
    webui)
        command -v node >/dev/null 2>&1 || missing="$missing node"
        [ -f "$HERE/../../web/node_modules/playwright-core/package.json" ] || missing="$missing web/node_modules/playwright-core"
        [ -x "${ZL_CHROMIUM:-/usr/bin/chromium}" ] || missing="$missing chromium" ;;
    python)
        "$HERE/pyenv.sh" --check >/dev/null 2>&1 || missing="$missing the-python-sdk-venv" ;;
    *) echo "need_sdks.sh: unknown requirement '$what' (expected node, python or webui)" >&2; exit 2 ;;
    esac
done
[ -z "$missing" ] && exit 0
if [ "${ZL_TEST_STRICT:-0}" = 1 ]; then
    echo "FAIL: missing:$missing (ZL_TEST_STRICT=1: CI installs them with make deps and make sdks)"
    exit 1
fi
echo "SKIPPED: missing:$missing (install them with: make deps && make sdks)"
exit 77
