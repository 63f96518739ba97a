#!/usr/bin/env python3
# needs: test-hooks (ZL_TEST_STEP_MS)
"""load_kv_exhaust.py — when every KV slot and queue place is taken, a new
request is refused before it starts, in its API's shape (OpenAI 429
rate_limit_error-style error, Anthropic 529 overloaded_error) with
Retry-After; an admitted request is never failed mid-stream: each one ends
as its API ends a stream, with no error event, also one asking for more
tokens than its context holds (it ends with finish_reason "length" /
stop_reason "max_tokens" when the context is full).  A prompt that cannot
fit the context is a 400 before any byte of a stream.
usage: load_kv_exhaust.py BIN ROOT [SERVER ARGS...]"""
import json
import sys
import threading

from loadlib import Server, Stream, stream_body, verdict

BIN, ROOT = sys.argv[1], sys.argv[2]
N = 16


def main():
    srv = Server(BIN, ROOT + "/models/stories260K.gguf",
                 ["-t", "1", "--parallel", "2", "--queue", "2", "--ctx", "256"] + sys.argv[3:],
                 env={"ZL_TEST_STEP_MS": "5"})
    failures, results = [], [None] * N
    lock = threading.Lock()
    try:
        def client(i):
            api = "openai" if i % 2 else "anthropic"
            # some ask for more than the 256-token context can hold
            s = Stream(srv, api, stream_body("Once upon a time", 1000 if i % 4 == 0 else 120), timeout=60)
            if s.status == 200:
                s.read_all()
            with lock:
                results[i] = (api, s)

        ts = [threading.Thread(target=client, args=(i,)) for i in range(N)]
        for t in ts:
            t.start()
        for t in ts:
            t.join(90)
        admitted = refused = 0
        for i, r in enumerate(results):
            if r is None:
                failures.append("client %d hung" % i)
                continue
            api, s = r
            if s.status == 200:
                admitted += 1
                if not s.finished_cleanly():
                    failures.append("client %d (%s): admitted, but the stream did not end cleanly: %r" % (
                        i, api, s.events[-3:]))
                continue
            refused += 1
            want = 429 if api == "openai" else 529
            if s.status != want or "retry-after" not in s.headers:
                failures.append("client %d (%s): %d, retry-after %r (want %d with Retry-After)" % (
                    i, api, s.status, s.headers.get("retry-after"), want))
                continue
            j = json.loads(s.body)
            shape = (j.get("error", {}).get("message") if api == "openai" else
                     j.get("type") == "error" and j.get("error", {}).get("type") == "overloaded_error")
            if not shape:
                failures.append("client %d (%s): the refusal is not in the API's error shape: %r" % (i, api, j))
        print("%d admitted, %d refused of %d" % (admitted, refused, N), flush=True)
        if admitted < 2 or refused < 1:
            failures.append("the check proves nothing: %d admitted, %d refused" % (admitted, refused))
        # a stream asking for more than its context: ends at the context's end, cleanly
        for api in ("openai", "anthropic"):
            s = Stream(srv, api, stream_body("Once upon a time", 100000), timeout=60)
            if s.status != 200:
                failures.append("%s: a long max_tokens was refused with %d %r" % (api, s.status, s.body))
                continue
            s.read_all()
            last = [json.loads(e) for e in s.events if e != "[DONE]"]
            reason = [c.get("finish_reason") for e in last for c in e.get("choices", [])] if api == "openai" else \
                [e.get("delta", {}).get("stop_reason") for e in last if e.get("type") == "message_delta"]
            if not s.finished_cleanly() or not any(reason):
                failures.append("%s: max_tokens past the context did not end cleanly: %r" % (api, s.events[-3:]))
            else:
                print("%s: max_tokens past the context ends with %r" % (api, [x for x in reason if x][-1]))
        # a prompt longer than the context: a 400 before any stream
        st, _, j = srv.request("POST", "/v1/chat/completions",
                               stream_body("Once upon a time " * 200, 8))
        if st != 400:
            failures.append("a prompt longer than the context: %d %r" % (st, j))
        m = srv.wait_idle()
        if m.get("zerolayer_requests_running", 1) or m.get("zerolayer_kv_usage_ratio", 1):
            failures.append("slots or KV not back: %r" % m)
    finally:
        rc = srv.stop()
    return verdict(failures, rc)


sys.exit(main())
