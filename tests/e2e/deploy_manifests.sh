#!/usr/bin/env bash
# deploy_manifests.sh — what deploy/ ships is valid for the tools that read it:
#   - deploy/k8s/*.yaml against the Kubernetes JSON schemas, strict (unknown
#     fields are errors), with kubernetes-validate from the pinned Python venv
#     (tests/compat/requirements.txt, make sdks);
#   - deploy/nginx.conf + nginx/zerolayer.conf with `nginx -t` (Debian's nginx);
#   - the systemd unit: systemd-analyze verify where systemd is installed,
#     and in any case its sections and keys parsed;
#   - every zerolayer flag the unit and the manifests pass is one `serve`
#     knows (serve --help), so the examples cannot drift from the binary.
# Without the venv or nginx: SKIPPED (exit 77), a failure under ZL_TEST_STRICT=1.
# labels: python
# usage: deploy_manifests.sh BIN ROOT
set -u
BIN=$1
ROOT=$(cd "$2" && pwd)
PATH="$PATH:/usr/sbin:/sbin"
"$ROOT/tests/compat/need_sdks.sh" python || exit $?
if ! command -v nginx >/dev/null 2>&1; then
  [ "${ZL_TEST_STRICT:-0}" = 1 ] && { echo "FAIL: nginx is missing (ZL_TEST_STRICT=1)"; exit 1; }
  echo "SKIPPED: nginx is missing (apt-get install nginx, or make deps)"; exit 77
fi
PY=$("$ROOT/tests/compat/pyenv.sh" --check)
T=$(mktemp -d)
trap 'rm -rf "$T"' EXIT
fails=0
check() { if [ "$1" = 0 ]; then echo "ok   $2"; else echo "FAIL $2"; fails=$((fails + 1)); fi; }

out=$("$PY" -m kubernetes_validate --strict "$ROOT"/deploy/k8s/*.yaml 2>&1)
rc=$?
n=$(grep -c ' passed for resource ' <<<"$out")
[ $rc = 0 ] && [ "$n" -ge 7 ] && ! grep -q ERROR <<<"$out"; check $? "kubernetes-validate --strict: $n resources pass"
# the checker itself refuses an unknown field (it is not a parser that accepts anything)
sed 's/periodSeconds: 5$/periodSecondz: 5/' "$ROOT/deploy/k8s/zerolayer.yaml" >"$T/bad.yaml"
! "$PY" -m kubernetes_validate --strict --quiet "$T/bad.yaml" >/dev/null 2>&1; check $? "and refuses a misspelt field"

mkdir -p "$T/ngx/logs" "$T/ngx/tmp"
out=$(nginx -t -p "$T/ngx/" -c "$ROOT/deploy/nginx.conf" -g "error_log $T/ngx/logs/t.log;" 2>&1)
grep -q "test is successful" <<<"$out"; check $? "nginx -t deploy/nginx.conf: $(tail -1 <<<"$out")"

U="$ROOT/deploy/systemd/zerolayer@.service"
"$PY" - "$U" <<'PY'
import configparser, sys
c = configparser.ConfigParser(strict=False, interpolation=None)
c.optionxform = str
c.read(sys.argv[1])
need = {'Unit': ['Description'], 'Service': ['ExecStart', 'KillSignal', 'TimeoutStopSec'], 'Install': ['WantedBy']}
bad = [s + '.' + k for s, ks in need.items() for k in ks if not c.has_option(s, k)]
if bad:
    print('missing: %s' % bad)
sys.exit(1 if bad else 0)
PY
check $? "the systemd unit parses with its sections and keys"
if command -v systemd-analyze >/dev/null 2>&1; then
  sed "s|/usr/local/bin/zerolayer|$(command -v true)|" "$U" >"$T/zerolayer@.service"
  out=$(systemd-analyze verify "$T/zerolayer@.service" 2>&1)
  [ -z "$out" ]; check $? "systemd-analyze verify: ${out:-clean}"
fi

help=$("$BIN" serve --help)
flags=$( (sed -n '/^ExecStart=/,/^[^ ]/p' "$U"; grep -E '^ +- --' "$ROOT"/deploy/k8s/*.yaml) | grep -oE -- '--[a-z][a-z-]+' | sort -u)
unknown=
for f in $flags; do grep -qE -- "(^| )$f( |,|$)" <<<"$help" || unknown="$unknown $f"; done
[ -n "$flags" ] && [ -z "$unknown" ]; check $? "every flag the unit and manifests pass is a serve flag ($(echo $flags | wc -w) flags)${unknown:+; unknown:$unknown}"
echo "fails: $fails"
[ $fails = 0 ]
