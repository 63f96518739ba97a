#!/usr/bin/env python3
# needs: test-hooks (ZL_TEST_STEP_MS)
"""load_drain.py — SIGTERM drains: the streams running when it arrives run
to their end, while every new request (and /health) gets a 503 in its API's
shape with Retry-After; the process then exits 0.  A stream longer than
--drain-timeout is ended when the timeout passes (and the exit is still 0);
a second SIGTERM ends the drain at once.  usage: load_drain.py BIN ROOT"""
import json
import signal
import sys
import threading
import time

from loadlib import Server, Stream, stream_body

BIN, ROOT = sys.argv[1], sys.argv[2]
MODEL = ROOT + "/models/stories260K.gguf"
failures = []


def fail(msg):
    failures.append(msg)
    print("FAIL " + msg, flush=True)


def start_streams(srv, n, max_tokens, **extra):
    out = []
    for i in range(n):
        s = Stream(srv, "openai" if i % 2 else "anthropic", stream_body("Once upon a time", max_tokens, **extra))
        if s.status != 200:
            raise SystemExit("a stream was refused before the drain: %d %r" % (s.status, s.body))
        s.next_event()
        out.append(s)
    return out


def read_in_thread(streams):
    ts = [threading.Thread(target=s.read_all) for s in streams]
    for t in ts:
        t.start()
    return ts


def drain_finishes_running_streams():
    srv = Server(BIN, MODEL, ["-t", "1", "--parallel", "2", "--ctx", "256",
                              "--drain-timeout", "30"], env={"ZL_TEST_STEP_MS": "25"})
    streams = start_streams(srv, 2, 80, logit_bias={"2": -100})
    ts = read_in_thread(streams)
    t0 = time.time()
    srv.proc.send_signal(signal.SIGTERM)
    time.sleep(0.3)
    st, h, j = srv.request("GET", "/health")
    if st != 503:
        fail("/health while draining: %d %r" % (st, j))
    st, h, j = srv.request("POST", "/v1/chat/completions", stream_body("Hi", 4))
    if st != 503 or "retry-after" not in h or not isinstance(j, dict) or "error" not in j:
        fail("a new OpenAI request while draining: %d %r %r" % (st, h.get("retry-after"), j))
    st, h, j = srv.request("POST", "/v1/messages", stream_body("Hi", 4), headers={"anthropic-version": "2023-06-01"})
    if st != 503 or not isinstance(j, dict) or j.get("type") != "error":
        fail("a new Anthropic request while draining: %d %r" % (st, j))
    for t in ts:
        t.join(30)
    for s in streams:
        if not s.finished_cleanly():
            fail("a stream running at SIGTERM was cut: %r" % s.events[-2:])
    try:
        rc = srv.proc.wait(15)
    except Exception:  # noqa: BLE001
        rc = srv.stop()
        fail("the server did not exit after its streams ended")
    if rc != 0:
        fail("exit status after a drain: %r" % rc)
    print("drain: %d streams finished, exit %r, %.1f s after SIGTERM" % (
        sum(s.finished_cleanly() for s in streams), rc, time.time() - t0), flush=True)


def drain_timeout_ends_long_streams():
    srv = Server(BIN, MODEL, ["-t", "1", "--parallel", "2", "--ctx", "256", "--kv-policy", "window",
                              "--drain-timeout", "2"], env={"ZL_TEST_STEP_MS": "20"})
    streams = start_streams(srv, 1, 1 << 20, logit_bias={"2": -100})
    ts = read_in_thread(streams)
    t0 = time.time()
    srv.proc.send_signal(signal.SIGTERM)
    for t in ts:
        t.join(20)
    try:
        rc = srv.proc.wait(15)
    except Exception:  # noqa: BLE001
        rc = srv.stop()
        fail("the server did not exit after the drain timeout")
    dt = time.time() - t0
    if rc != 0:
        fail("exit status after a drain timeout: %r" % rc)
    if dt < 1.5 or dt > 12:
        fail("a 2 s drain timeout ended after %.1f s" % dt)
    errs = [e for e in streams[0].events if e != "[DONE]" and "error" in json.loads(e)]
    print("drain timeout: exit %r %.1f s after SIGTERM; the long stream got %d events%s" % (
        rc, dt, len(streams[0].events), ", an error event" if errs else ""), flush=True)


def second_signal_stops_at_once():
    srv = Server(BIN, MODEL, ["-t", "1", "--parallel", "2", "--ctx", "256", "--kv-policy", "window",
                              "--drain-timeout", "60"], env={"ZL_TEST_STEP_MS": "20"})
    streams = start_streams(srv, 1, 1 << 20, logit_bias={"2": -100})
    ts = read_in_thread(streams)
    srv.proc.send_signal(signal.SIGTERM)
    time.sleep(0.5)
    t0 = time.time()
    srv.proc.send_signal(signal.SIGTERM)
    try:
        rc = srv.proc.wait(10)
    except Exception:  # noqa: BLE001
        rc = srv.stop()
        fail("a second SIGTERM did not end the drain")
    for t in ts:
        t.join(10)
    if rc != 0:
        fail("exit status after a second SIGTERM: %r" % rc)
    print("second SIGTERM: exit %r after %.1f s" % (rc, time.time() - t0), flush=True)


drain_finishes_running_streams()
drain_timeout_ends_long_streams()
second_signal_stops_at_once()
print("FAILED %d" % len(failures) if failures else "all passed")
sys.exit(1 if failures else 0)
