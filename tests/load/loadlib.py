"""loadlib.py — what the load and fault tests share: a `zerolayer serve` on
127.0.0.1 with stories260K, SSE streams over http.client (chunked decoding,
an abrupt close or a TCP reset at any event), /metrics as numbers, the
server's RSS.  Nothing here decides a test's outcome."""
import http.client
import json
import os
import re
import socket
import struct
import subprocess
import threading
import time

CHAT = "/v1/chat/completions"
MESSAGES = "/v1/messages"


class Server:
    def __init__(self, bin_path, model, args, env=None):
        cmd = [bin_path, "serve", "--port", "0", "-m", model] + args
        self.proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
                                     env=dict(os.environ, **(env or {})))
        self.log = []
        deadline = time.time() + 60
        self.port = None
        while time.time() < deadline:
            line = self.proc.stderr.readline()
            if not line:
                break
            self.log.append(line)
            m = re.search(r"listening on http://[^:]+:(\d+)", line)
            if m:
                self.port = int(m.group(1))
                break
        if not self.port:
            raise SystemExit("server did not start: %s\n%s" % (" ".join(cmd), "".join(self.log)))
        threading.Thread(target=self._drain_log, daemon=True).start()

    def _drain_log(self):
        for line in self.proc.stderr:
            self.log.append(line)

    def conn(self, timeout=30.0, rcvbuf=None):
        c = http.client.HTTPConnection("127.0.0.1", self.port, timeout=timeout)
        if rcvbuf:  # before connect, so the window the server sees is small from the start
            s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, rcvbuf)
            s.settimeout(timeout)
            s.connect(("127.0.0.1", self.port))
            c.sock = s
        return c

    def request(self, method, path, body=None, headers=None, timeout=30.0):
        c = self.conn(timeout)
        h = {"Content-Type": "application/json"} if body is not None else {}
        h.update(headers or {})
        c.request(method, path, body=None if body is None else json.dumps(body), headers=h)
        r = c.getresponse()
        data = r.read()
        c.close()
        try:
            j = json.loads(data)
        except ValueError:
            j = data
        return r.status, dict((k.lower(), v) for k, v in r.getheaders()), j

    def metrics(self):
        st, _, body = self.request("GET", "/metrics")
        if st != 200:
            raise AssertionError("/metrics: %d" % st)
        text = body.decode() if isinstance(body, bytes) else str(body)
        out = {}
        for line in text.splitlines():
            m = re.match(r"^([a-z_]+) ([-+0-9.eE]+|nan|inf)$", line)
            if m:
                out[m.group(1)] = float(m.group(2))
        return out

    def rss_kib(self):
        with open("/proc/%d/status" % self.proc.pid) as f:
            for line in f:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1])
        return 0

    def wait_idle(self, secs=15.0):
        """Poll /metrics until nothing runs, waits or holds KV; the last reading."""
        deadline = time.time() + secs
        while True:
            m = self.metrics()
            if m.get("zerolayer_requests_running", 1) == 0 and m.get("zerolayer_requests_waiting", 1) == 0 and \
                    m.get("zerolayer_kv_usage_ratio", 1) == 0:
                return m
            if time.time() > deadline:
                return m
            time.sleep(0.1)

    def stop(self, sig=None, timeout=30.0):
        if self.proc.poll() is None:
            if sig:
                self.proc.send_signal(sig)
            else:
                self.proc.terminate()
        try:
            return self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
            return None


def verdict(failures, rc):
    """The end of a load test: the server's exit status rc (0 expected) joins
    the failures, each is printed, and the result is the test's exit code."""
    if rc != 0:
        failures.append("server exit status %r" % rc)
    for f in failures:
        print("FAIL " + f)
    print("FAILED %d" % len(failures) if failures else "all passed")
    return 1 if failures else 0


def stream_body(prompt, max_tokens, **extra):
    """A streamed request both APIs accept as it is."""
    b = {"model": "x", "stream": True, "max_tokens": max_tokens, "messages": [{"role": "user", "content": prompt}]}
    b.update(extra)
    return b


class Stream:
    """One SSE stream: status, headers, the events read, how it ended."""

    def __init__(self, server, api, body, timeout=30.0, rcvbuf=None, headers=None):
        self.api, self.events, self.ended = api, [], None
        self.c = server.conn(timeout, rcvbuf)
        h = {"Content-Type": "application/json"}
        if api == "anthropic":
            h["anthropic-version"] = "2023-06-01"
        h.update(headers or {})
        self.c.request("POST", CHAT if api == "openai" else MESSAGES, body=json.dumps(body), headers=h)
        self.r = self.c.getresponse()
        self.status = self.r.status
        self.headers = dict((k.lower(), v) for k, v in self.r.getheaders())
        self.body = self.r.read() if self.status != 200 else None

    def next_event(self):
        """The next event's data (a string), or None at the end of the stream."""
        data = []
        while True:
            line = self.r.readline()
            if not line:
                return None
            line = line.decode("utf-8", "replace").rstrip("\r\n")
            if not line:
                if data:
                    ev = "\n".join(data)
                    self.events.append(ev)
                    return ev
                continue
            if line.startswith("data:"):
                data.append(line[5:].lstrip(" "))

    def read_all(self):
        while self.next_event() is not None:
            pass
        self.ended = "eof"
        self.c.close()

    def finished_cleanly(self):
        """Ended as its API ends a stream, with no error event anywhere."""
        for ev in self.events:
            if ev == "[DONE]":
                continue
            j = json.loads(ev)
            if "error" in j or j.get("type") == "error":
                return False
        if self.api == "openai":
            return bool(self.events) and self.events[-1] == "[DONE]"
        return bool(self.events) and json.loads(self.events[-1]).get("type") == "message_stop"

    def close(self):
        self.ended = "close"
        self.c.sock.shutdown(socket.SHUT_RDWR)
        self.c.close()

    def reset(self):
        self.ended = "reset"
        self.c.sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
        self.c.sock.close()
        self.c.close()
