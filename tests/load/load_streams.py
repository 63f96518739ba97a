#!/usr/bin/env python3
"""load_streams.py — 64 concurrent SSE streams, six rounds, with random
disconnects and resets: after every round every slot and every KV position
is back (/metrics: nothing running or waiting, KV usage 0, no session KV),
every stream that was read to its end ended as its API ends one (no error
event), the disconnects were counted as cancellations, and the server's RSS
after the last round is within 8 MiB (and 10%) of the one after the first
(not under a sanitizer: ZL_TEST_SANITIZER set).
The prefix cache is 4 MiB, so it is full after the first round and has to
stay within its bound in real memory, not only in its own accounting.
usage: load_streams.py BIN ROOT [SERVER ARGS...]"""
import os
import random
import sys
import threading
import time

from loadlib import Server, Stream, stream_body, verdict

BIN, ROOT = sys.argv[1], sys.argv[2]
N, ROUNDS = 64, 6
PROMPTS = ["Once upon a time", "The little dog", "Lily saw a big", "Tom and his mom", "One day, a bird",
           "The sun was hot", "In the park", "She had a red ball"]


def client(srv, rnd, i, results):
    rng = random.Random(rnd * 1000 + i)
    api = "openai" if i % 2 else "anthropic"
    fate = rng.choice(["read", "read", "close", "reset"])
    at = rng.randint(1, 12)
    # streams cut early ask for long generations, so the cut lands while they run
    n_tok = rng.randint(16, 96) if fate == "read" else rng.randint(400, 900)
    try:
        s = Stream(srv, api, stream_body(PROMPTS[i % len(PROMPTS)], n_tok, temperature=0.8, seed=i))
        if s.status != 200:
            results[i] = ("status", s.status, s.body[:200])
            return
        n = 0
        while s.next_event() is not None:
            n += 1
            if fate != "read" and n == at:
                s.close() if fate == "close" else s.reset()
                results[i] = (fate, n)
                return
        results[i] = ("read", s.finished_cleanly(), s.events[-1:] if s.events else None)
    except Exception as e:  # noqa: BLE001 - reported as the client's result
        results[i] = ("exception", repr(e))


def main():
    srv = Server(BIN, ROOT + "/models/stories260K.gguf",
                 ["-t", "1", "--parallel", "16", "--queue", "64", "--ctx", "1024", "--idle-timeout", "10",
                  "--prefix-cache-mb", "4"] + sys.argv[3:])
    failures, rss = [], []
    try:
        for rnd in range(ROUNDS):
            t0 = time.time()
            results = [None] * N
            ts = [threading.Thread(target=client, args=(srv, rnd, i, results)) for i in range(N)]
            for t in ts:
                t.start()
            for t in ts:
                t.join(60)
            kinds = {}
            for i, r in enumerate(results):
                kinds[r[0] if r else "hung"] = kinds.get(r[0] if r else "hung", 0) + 1
                if r is None or r[0] in ("status", "exception") or (r[0] == "read" and not r[1]):
                    failures.append("round %d client %d: %r" % (rnd, i, r))
            m = srv.wait_idle()
            for k in ("zerolayer_requests_running", "zerolayer_requests_waiting", "zerolayer_kv_usage_ratio",
                      "zerolayer_sessions_kv_bytes"):
                if m.get(k, -1) != 0:
                    failures.append("round %d: %s = %r after the round" % (rnd, k, m.get(k)))
            if m.get("zerolayer_prefix_cache_bytes", 1 << 30) > 4 << 20:
                failures.append("round %d: prefix cache holds %r bytes, over its 4 MiB" % (
                    rnd, m.get("zerolayer_prefix_cache_bytes")))
            rss.append(srv.rss_kib())
            print("round %d: %s in %.1f s; cancelled so far %d; prefix cache %d entries, %d bytes; RSS %d KiB" % (
                rnd, kinds, time.time() - t0, m.get("zerolayer_requests_cancelled_total", -1),
                m.get("zerolayer_prefix_cache_entries", -1), m.get("zerolayer_prefix_cache_bytes", -1), rss[-1]),
                flush=True)
        grow = rss[-1] - rss[0]
        if os.environ.get("ZL_TEST_SANITIZER"):  # its allocator and shadow memory make RSS meaningless
            print("RSS not checked under %s" % os.environ["ZL_TEST_SANITIZER"])
        elif grow > max(8192, rss[0] // 10):
            failures.append("RSS grew %d KiB from round 1 to round %d: %r" % (grow, ROUNDS, rss))
        if m.get("zerolayer_requests_cancelled_total", 0) < 1:
            failures.append("no generation was cancelled by a disconnect")
    finally:
        rc = srv.stop()
    return verdict(failures, rc)


sys.exit(main())
