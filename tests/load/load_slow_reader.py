#!/usr/bin/env python3
"""load_slow_reader.py — a client that stops reading a long stream (a tiny
receive window, so the server's socket buffer fills) does not stall the
other streams: while it sits, eight streams of 64 tokens each run to a
clean end with no gap between two of their events longer than 2 s, the
engine keeps stepping, and after the idle timeout the server gives the
stalled stream's slot back (nothing running, KV usage 0) and closes it.
usage: load_slow_reader.py BIN ROOT [SERVER ARGS...]"""
import sys
import threading
import time

from loadlib import Server, Stream, stream_body, verdict

BIN, ROOT = sys.argv[1], sys.argv[2]
IDLE = 4


def main():
    srv = Server(BIN, ROOT + "/models/stories260K.gguf",
                 ["-t", "1", "--parallel", "4", "--ctx", "256", "--kv-policy", "window", "--idle-timeout", str(IDLE)]
                 + sys.argv[3:])
    failures = []
    try:
        # the stalled client: reads its headers and one event, then nothing
        # (end of sequence banned: it ends only when the server cuts it)
        slow = Stream(srv, "openai", stream_body("Once upon a time", 1 << 20, logit_bias={"2": -100}), timeout=60,
                      rcvbuf=1024)
        if slow.status != 200:
            raise SystemExit("the long stream was refused: %d %r" % (slow.status, slow.body))
        slow.next_event()
        t_stall = time.time()
        steps0 = srv.metrics().get("zerolayer_engine_steps_total", 0)
        time.sleep(1.0)  # let its socket buffers fill
        gaps, ends = [], []

        def other(i):
            s = Stream(srv, "anthropic" if i % 2 else "openai", stream_body("The little dog", 64, seed=i), timeout=30)
            last = time.time()
            worst = 0.0
            while s.next_event() is not None:
                now = time.time()
                worst = max(worst, now - last)
                last = now
            gaps.append(worst)
            ends.append(s.finished_cleanly())

        for rnd in range(2):
            ts = [threading.Thread(target=other, args=(i,)) for i in range(4)]
            for t in ts:
                t.start()
            for t in ts:
                t.join(60)
        m = srv.metrics()
        steps = m.get("zerolayer_engine_steps_total", 0) - steps0
        print("while one stream is stalled: %d streams ended cleanly of %d, worst gap %.2f s, %d engine steps" % (
            sum(ends), len(ends), max(gaps) if gaps else -1, steps), flush=True)
        if len(ends) != 8 or not all(ends):
            failures.append("the other streams did not all end cleanly: %r" % ends)
        if gaps and max(gaps) > 2.0:
            failures.append("a stream waited %.2f s between two events while another was stalled" % max(gaps))
        # the stalled stream is cut after the idle timeout: its slot comes back
        m = srv.wait_idle(IDLE + 15)
        waited = time.time() - t_stall
        if m.get("zerolayer_requests_running", 1) != 0 or m.get("zerolayer_kv_usage_ratio", 1) != 0:
            failures.append("%.1f s after it stalled the stream still holds its slot: %r" % (
                waited, {k: v for k, v in m.items() if "running" in k or "kv_usage" in k}))
        # and its connection was closed: draining it reaches the end of the stream (within 20 s)
        slow.c.sock.settimeout(10)
        n, t_read = 0, time.time()
        try:
            while time.time() - t_read < 20 and slow.next_event() is not None:
                n += 1
        except Exception as e:  # noqa: BLE001 - a reset is a close too
            print("stalled stream after the timeout: %r" % e)
        if time.time() - t_read >= 20:
            failures.append("the stalled stream was still open 20 s after its slot should have come back")
        print("stalled stream: slot back %.1f s after the stall; %d more events were buffered" % (waited, n))
        if slow.finished_cleanly():
            failures.append("the stalled stream ended by itself (%r): the check proves nothing" % slow.events[-1:])
        if waited < IDLE:
            failures.append("the stalled stream was cut after %.1f s, before the idle timeout" % waited)
        if m.get("zerolayer_requests_cancelled_total", 0) < 1:
            failures.append("the stalled stream was not cancelled")
    finally:
        rc = srv.stop()
    return verdict(failures, rc)


sys.exit(main())
