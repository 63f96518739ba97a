#!/usr/bin/env bash
# need_loopback.sh CMD... — runs CMD when this machine can listen on and
# connect to 127.0.0.1 (every server test talks to `zerolayer serve` there);
# otherwise one SKIPPED line and exit 77, which ctest reports as skipped, or a
# failure with ZL_TEST_STRICT=1 (CI).  Owns only that one check: a network
# namespace without loopback (`unshare -n` leaves lo down) is the case it is
# for; an offline machine has loopback and runs these tests.
set -u
why=
if ! command -v python3 >/dev/null 2>&1; then
    why="python3 is missing"
else
    why=$(python3 - 2>&1 <<'PY'
import socket
try:
    s = socket.socket(); s.bind(("127.0.0.1", 0)); s.listen(1)
    c = socket.create_connection(s.getsockname(), timeout=2); c.close(); s.close()
except OSError as e:
    print("cannot listen on and connect to 127.0.0.1 (%s; bring loopback up: ip link set lo up)" % e.strerror)
PY
)
fi
if [ -n "$why" ]; then
    [ "${ZL_TEST_STRICT:-0}" = 1 ] && { echo "FAIL: $why (ZL_TEST_STRICT=1)"; exit 1; }
    echo "SKIPPED: $why"; exit 77
fi
exec "$@"
