#!/usr/bin/env python3
"""scale_out.py BIN ROOT [MODEL] — issue 23's item 6 on loopback: replicas behind
nginx (deploy/ as shipped) with Redis as the state store (tests/e2e/scale_lib.py).

  1. aggregate tokens/s of 1, 2, 3 replicas (-t 1 each; and 1 replica -t 2):
     8 concurrent greedy streams of distinct users for DURATION s, tokens counted
     by the replicas (zerolayer_generated_tokens_total);
  2. failover time: a session conversation grown to ~CTX tokens on one replica
     (--store-every 1), that replica SIGKILLed, the next turn timed from the kill
     to its first token on another replica (which loads the session from Redis);
     beside it the same turn's time to first token on the replica that holds it;
  3. the cost of a snapshot write per turn: sealing (exact rows, AES-GCM) and the
     Redis SET, per write, with the record's size and token count.
Prints one table per part.  MODEL defaults to models/stories260K.gguf; use a real
one (tools/models.sh smollm2-135m) for figures that mean something.
Env: DURATION (default 15), REPEAT (failover repeats, default 5), TURNS (default 6)."""
import os
import signal
import statistics
import sys
import threading
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), '..', 'tests', 'e2e'))
from scale_lib import Cluster, metrics, request, stream  # noqa: E402

BIN, ROOT = os.path.abspath(sys.argv[1]), os.path.abspath(sys.argv[2])
MODEL = os.path.abspath(sys.argv[3]) if len(sys.argv) > 3 else os.path.join(ROOT, 'models', 'stories260K.gguf')
DURATION = float(os.environ.get('DURATION', 15))
REPEAT = int(os.environ.get('REPEAT', 5))
TURNS = int(os.environ.get('TURNS', 6))
PROMPTS = ['Once upon a time', 'The little dog', 'In a small town', 'One sunny day', 'The old man said',
           'A girl named Mia', 'Tom had a red ball', 'At the park']


def total(ports, name):
    return sum(metrics(p).get(name, 0) for p in ports)


def throughput(n, threads):
    c = Cluster(BIN, ROOT, MODEL, 3, ['-t', str(threads), '--ctx', '1024', '--parallel', '8'])
    try:
        c.start_redis()
        for i in range(n):
            c.start_replica(i)
        c.start_nginx(c.ports[:n])
        for u in range(8):  # warm: page the weights in, first requests' allocations
            stream(c.np, PROMPTS[u], 'warm%d' % u, max_tokens=8)
        stop = threading.Event()
        errors = []

        def client(u):
            k = 0
            while not stop.is_set():
                r = stream(c.np, PROMPTS[(u + k) % 8] + ' %d' % k, 'user%d' % u, max_tokens=64, timeout=300)
                k += 1
                if r['status'] != 200 or not r['done']:
                    errors.append(r['status'])
        g0, t0 = total(c.ports[:n], 'zerolayer_generated_tokens_total'), time.time()
        th = [threading.Thread(target=client, args=(u,)) for u in range(8)]
        for t in th:
            t.start()
        time.sleep(DURATION)
        g1, t1 = total(c.ports[:n], 'zerolayer_generated_tokens_total'), time.time()
        stop.set()
        for t in th:
            t.join()
        return (g1 - g0) / (t1 - t0), len(errors)
    finally:
        c.close()


P = [' One day, she went to the park.', ' Then the sun came out and they played.', ' At night, they went home.',
     ' The next morning, the bird sang.', ' Her mother smiled at her.', ' They ate cake together.',
     ' The dog ran after the ball.', ' It was a happy day.']


def settle(port, key, since, secs=30):
    """Wait until metric key on port passed `since` and then stayed put for 0.5 s."""
    end, last, t_last = time.time() + secs, None, time.time()
    while time.time() < end:
        v = metrics(port).get(key, 0)
        if v != last:
            last, t_last = v, time.time()
        elif v > since and time.time() - t_last > 0.5:
            break
        time.sleep(0.05)
    return metrics(port)


def turn(c, text, user, token, max_tokens=48):
    r = stream(c.np, text, user, token, max_tokens=max_tokens, timeout=300)
    assert r['status'] == 200 and r['done'], r
    return r


def served(c):
    return {i: metrics(c.ports[i]).get('zerolayer_requests_total{route="/v1/completions",status="200"}', 0)
            for i in c.alive()}


def failover():
    c = Cluster(BIN, ROOT, MODEL, 3, ['-t', '1', '--ctx', '2048', '--parallel', '4', '--store-every', '1',
                                      '--store-idle', '600'])
    rows, writes = [], []
    try:
        c.start_redis()
        for i in range(3):
            c.start_replica(i)
        c.start_nginx()
        for rep in range(REPEAT):
            user = 'fo%d' % rep
            st, s = request(c.np, 'POST', '/v1/sessions', {}, user=user)
            assert st == 200, s
            before = served(c)
            text = 'Once upon a time'
            for k in range(TURNS - 1):
                r = turn(c, text, user, s['token'])
                text += r['text'] + P[k % len(P)]
            now = served(c)
            holder = [i for i in now if now[i] > before[i]][0]
            m0 = settle(c.ports[holder], 'zerolayer_sessions_persisted_total', -1)
            r = turn(c, text, user, s['token'])
            text += r['text'] + P[(TURNS - 1) % len(P)]
            m1 = settle(c.ports[holder], 'zerolayer_sessions_persisted_total',
                        m0.get('zerolayer_sessions_persisted_total', 0))
            d = {k: m1.get(k, 0) - m0.get(k, 0) for k in m1}
            n_ok = d.get('zerolayer_state_store_writes_total{result="ok"}', 0)
            if n_ok:
                writes.append((r['prompt_tokens'] + 48, d['zerolayer_sessions_persist_seal_seconds_total'] * 1e3 / n_ok,
                               d['zerolayer_state_store_put_seconds_total'] * 1e3 / n_ok,
                               d['zerolayer_state_store_put_bytes_total'] / n_ok))
            # SIGKILL the holder between turns; the next turn goes elsewhere and loads the session
            t_kill = time.time()
            c.replicas[holder].send_signal(signal.SIGKILL)
            c.replicas[holder].wait()
            t_req = time.time()
            r = stream(c.np, text, user, s['token'], max_tokens=8, timeout=300)
            fo = None if r['first'] is None else (t_req - t_kill + r['first']) * 1e3
            text += r['text'] + ' The end.'
            # baseline: the next turn where the session is now held
            r2 = stream(c.np, text, user, s['token'], max_tokens=8, timeout=300)
            rows.append((r.get('prompt_tokens'), r.get('cached'), fo, r['status'],
                         None if r2['first'] is None else r2['first'] * 1e3, r2.get('cached')))
            c.start_replica(holder)
            time.sleep(c.fail_timeout + 0.3)
        return rows, writes
    finally:
        c.close()


def main():
    print('model %s, %d CPUs, load average %s' % (os.path.basename(MODEL), os.cpu_count(),
                                                  open('/proc/loadavg').read().split()[:3]))
    print('\n1. aggregate tokens/s, 8 streams of 64 tokens, %.0f s each' % DURATION)
    print('| replicas | threads each | tokens/s | failed requests |\n|---|---|---|---|')
    for n, t in ((1, 2), (1, 1), (2, 1), (3, 1)):
        tps, err = throughput(n, t)
        print('| %d | %d | %.1f | %d |' % (n, t, tps, err), flush=True)
    rows, writes = failover()
    print('\n2. failover (SIGKILL between turns -> first token of the next turn on another replica), %d repeats '
          'after %d turns' % (REPEAT, TURNS))
    print('| repeat | prompt tokens | cached after failover | kill -> first token ms | next turn where held: first '
          'token ms | cached there | status |\n|---|---|---|---|---|---|---|')
    for k, (pt, cached, fms, st, base, bc) in enumerate(rows):
        print('| %d | %s | %s | %s | %s | %s | %d |' % (k, pt, cached, '%.1f' % fms if fms else '-',
                                                       '%.1f' % base if base else '-', bc, st))
    f = [r[2] for r in rows if r[2]]
    b = [r[4] for r in rows if r[4]]
    if f and b:
        print('median: failover %.1f ms, held %.1f ms' % (statistics.median(f), statistics.median(b)))
    print('\n3. snapshot write of the last turn (--store-every 1): exact rows sealed (AES-256-GCM) + Redis SET')
    print('| tokens | seal ms | SET ms | record KiB |\n|---|---|---|---|')
    for tok, sm, pm, nb in writes:
        print('| %d | %.2f | %.2f | %.0f |' % (tok, sm, pm, nb / 1024))


main()
