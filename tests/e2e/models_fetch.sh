#!/usr/bin/env bash
# models_fetch.sh — tools/models.sh on a made-up registry (ZL_MODELS_TSV) of
# small files packed as wheels in a local folder, so the whole fetch path runs
# offline: cached paths printed without pip or hashing, download + assembly in
# the registry's order, sha256 mismatch (nothing installed or replaced, no
# temporary left), an unreachable index, unknown names, --help.
# usage: models_fetch.sh BIN ROOT   (BIN is unused)
# Skipped (exit 77) without python3 -m pip; ZL_TEST_STRICT=1 (CI) fails instead.
# needs: loopback
# labels: pip
set -uo pipefail
if ! python3 -m pip --version >/dev/null 2>&1; then
    [ "${ZL_TEST_STRICT:-0}" = 1 ] && { echo "FAIL: python3 -m pip is missing (ZL_TEST_STRICT=1)"; exit 1; }
    echo "SKIPPED: python3 -m pip is missing (Debian: apt-get install python3-pip)"; exit 77
fi
ROOT=$(cd "$2" && pwd)
M="$ROOT/tools/models.sh"
T=$(mktemp -d)
trap 'rm -rf "$T"' EXIT
fails=0 passes=0
ok()   { passes=$((passes + 1)); echo "ok   $1"; }
fail() { fails=$((fails + 1)); echo "FAIL $1"; [ -f "$T/err" ] && sed 's/^/     stderr: /' "$T/err"; }
# run ARGS...: tools/models.sh with stdout in $T/out, stderr in $T/err, status in $rc
run() { "$M" "$@" > "$T/out" 2> "$T/err"; rc=$?; }

# no index, no config file, no network: pip sees only $T/wheels
export PIP_CONFIG_FILE=/dev/null PIP_NO_INDEX=1 PIP_FIND_LINKS="$T/wheels" PIP_RETRIES=0 PIP_NO_CACHE_DIR=1
unset PIP_INDEX_URL PIP_EXTRA_INDEX_URL

# three data files; fake-a is part one + part two, fake-b one whole file
mkdir -p "$T/wheels" "$T/src"
head -c 300000 /dev/urandom > "$T/src/a1"; head -c 123457 /dev/urandom > "$T/src/a2"; head -c 4096 /dev/urandom > "$T/src/b"
cat "$T/src/a1" "$T/src/a2" > "$T/src/a"
python3 - "$T" <<'PY' || { echo "FAIL cannot build the test wheels"; exit 1; }
import sys, zipfile
t = sys.argv[1]
for dist, member, src in [('zl_fake_a_part1', 'data/part01.bin', 'a1'), ('zl_fake_a_part2', 'data/part02.bin', 'a2'),
                          ('zl_fake_b', 'model.gguf', 'b')]:
    with zipfile.ZipFile('%s/wheels/%s-1.0.0-py3-none-any.whl' % (t, dist), 'w', zipfile.ZIP_DEFLATED) as z:
        z.writestr(dist + '/__init__.py', '')
        z.write('%s/src/%s' % (t, src), '%s/%s' % (dist, member))
        info = dist + '-1.0.0.dist-info/'
        z.writestr(info + 'METADATA', 'Metadata-Version: 2.1\nName: %s\nVersion: 1.0.0\n' % dist.replace('_', '-'))
        z.writestr(info + 'WHEEL', 'Wheel-Version: 1.0\nGenerator: test\nRoot-Is-Purelib: true\nTag: py3-none-any\n')
        z.writestr(info + 'RECORD', '')
PY
sha() { sha256sum "$1" | cut -d' ' -f1; }
printf '# name\tfile\tsha256\tpackages\n' > "$T/reg.tsv"
printf 'fake-a\ta.gguf\t%s\tzl-fake-a-part1==1.0.0 zl-fake-a-part2==1.0.0\n' "$(sha "$T/src/a")" >> "$T/reg.tsv"
printf 'fake-b\tb.gguf\t%s\tzl-fake-b==1.0.0\n' "$(sha "$T/src/b")" >> "$T/reg.tsv"
export ZL_MODELS_TSV="$T/reg.tsv"

# --help, no arguments, unknown names and options (real registry)
ZL_MODELS_TSV= run --help
[ $rc = 0 ] && grep -q '^usage: tools/models.sh NAME' "$T/out" && ok "--help prints usage, exit 0" || fail "--help (rc $rc)"
run
[ $rc = 2 ] && grep -q '^usage:' "$T/err" && ok "no argument: usage on stderr, exit 2" || fail "no argument (rc $rc)"
ZL_MODELS_TSV="$ROOT/tools/models.tsv" ZL_MODELS="$T/none" run smollm2-135m nope
[ $rc = 1 ] && [ "$(wc -l < "$T/err")" = 1 ] && grep -q "^models.sh: unknown model 'nope' (known: smollm2-135m .* all)$" "$T/err" \
    && [ ! -s "$T/out" ] && [ ! -e "$T/none" ] && ok "unknown name: one-line error before anything is fetched" || fail "unknown name (rc $rc)"
run --bogus
[ $rc = 1 ] && grep -q "unknown option '--bogus'" "$T/err" && ok "unknown option rejected" || fail "unknown option (rc $rc)"

# download path: parts assembled in order, stamp written, no temporary left
export ZL_MODELS="$T/cache"
run fake-a
[ $rc = 0 ] && [ "$(cat "$T/out")" = "$T/cache/a.gguf" ] && cmp -s "$T/cache/a.gguf" "$T/src/a" \
    && [ -f "$T/cache/a.gguf.sha256ok" ] && [ -z "$(ls -A "$T/cache" | grep -v '^a\.gguf')" ] \
    && ok "fetch: two wheels concatenated in registry order, verified, stamped" || fail "fetch fake-a (rc $rc)"
run all
[ $rc = 0 ] && [ "$(cat "$T/out")" = "$(printf '%s\n%s' "$T/cache/a.gguf" "$T/cache/b.gguf")" ] && cmp -s "$T/cache/b.gguf" "$T/src/b" \
    && ok "all: every registry model, in registry order" || fail "all (rc $rc)"

# cached: neither pip/python nor the index is touched; the stamp spares the hash
mkdir -p "$T/shim"
for tool in python3 python pip pip3; do printf '#!/bin/sh\necho %s >> "%s/called"\nexit 97\n' "$tool" "$T" > "$T/shim/$tool"; done
chmod +x "$T/shim"/*
PATH="$T/shim:$PATH" PIP_INDEX_URL=http://127.0.0.1:9/ PIP_NO_INDEX= run fake-a fake-b
[ $rc = 0 ] && [ "$(wc -l < "$T/out")" = 2 ] && [ ! -e "$T/called" ] \
    && ok "cached: paths printed offline, no pip or python run" || fail "cached offline (rc $rc, called: $(cat "$T/called" 2>/dev/null))"
printf '#!/bin/sh\necho sha256sum >> "%s/called"\nexit 97\n' "$T" > "$T/shim/sha256sum"; chmod +x "$T/shim/sha256sum"
PATH="$T/shim:$PATH" run fake-a
[ $rc = 0 ] && [ ! -e "$T/called" ] && ok "cached: a valid stamp skips hashing" || fail "stamp reuse (rc $rc)"
touch -d '2001-01-01' "$T/cache/a.gguf"
PATH="$T/shim:$PATH" run fake-a
[ $rc != 0 ] && grep -q sha256sum "$T/called" && ok "cached: a changed mtime invalidates the stamp" || fail "stale stamp was trusted (rc $rc)"
rm -f "$T/called"
run fake-a
[ $rc = 0 ] && grep -q ' 2001-01-01 ' "$T/cache/a.gguf.sha256ok" && ok "re-verified file gets a fresh stamp" || fail "re-stamp (rc $rc)"

# a corrupted cached file is fetched again and replaced by the good one
printf 'X' | dd of="$T/cache/b.gguf" bs=1 seek=100 conv=notrunc 2>/dev/null
run fake-b
[ $rc = 0 ] && cmp -s "$T/cache/b.gguf" "$T/src/b" && grep -q 'fetching it again' "$T/err" \
    && ok "corrupted cache file: fetched again" || fail "corrupted cache (rc $rc)"

# sha256 mismatch: error, nothing installed, nothing replaced, no temporary left
sed "s/\t$(sha "$T/src/a")\t/\t$(printf '0%.0s' {1..64})\t/" "$T/reg.tsv" > "$T/bad.tsv"
ZL_MODELS="$T/cache2" ZL_MODELS_TSV="$T/bad.tsv" run fake-a
[ $rc = 1 ] && grep -q "fake-a: the assembled file has sha256 $(sha "$T/src/a"), the registry says 0\{64\} (nothing installed)" "$T/err" \
    && [ -z "$(ls -A "$T/cache2")" ] && [ ! -s "$T/out" ] \
    && ok "sha mismatch: one-line error, cache left empty" || fail "sha mismatch (rc $rc; cache2: $(ls -A "$T/cache2"))"
cp "$T/src/b" "$T/cache2/a.gguf"
ZL_MODELS="$T/cache2" ZL_MODELS_TSV="$T/bad.tsv" run fake-a
[ $rc = 1 ] && cmp -s "$T/cache2/a.gguf" "$T/src/b" && [ "$(ls -A "$T/cache2")" = a.gguf ] \
    && ok "sha mismatch: an existing file is not replaced" || fail "sha mismatch replaced (rc $rc)"
ZL_MODELS="$T/cache2" ZL_MODELS_TSV="$T/bad.tsv" run fake-b fake-a
[ $rc = 1 ] && [ "$(cat "$T/out")" = "$T/cache2/b.gguf" ] && ok "a failure in a list exits non-zero after the good ones" || fail "list failure (rc $rc)"

# an unreachable index: the clear one-line error, non-zero, nothing left behind
mkdir -p "$T/empty"
ZL_MODELS="$T/cache3" PIP_NO_INDEX= PIP_FIND_LINKS="$T/empty" PIP_INDEX_URL=http://127.0.0.1:9/ run fake-b
[ $rc = 1 ] && [ "$(wc -l < "$T/err")" = 2 ] && grep -q '^models.sh: cannot reach the Python package index (http://127.0.0.1:9/): .*refused.*; fake-b not fetched$' "$T/err" \
    && [ -z "$(ls -A "$T/cache3")" ] && ok "unreachable index: clear error, nothing left" || fail "unreachable index (rc $rc)"

# a package missing from the index
printf 'fake-c\tc.gguf\t%s\tzl-fake-missing==1.0.0\n' "$(printf '1%.0s' {1..64})" >> "$T/reg.tsv"
run fake-c
[ $rc = 1 ] && grep -q '^models.sh: pip download failed for fake-c: ' "$T/err" && ok "missing package: pip's error reported" || fail "missing package (rc $rc)"

echo "$passes passed, $fails failed"
[ $fails = 0 ]
