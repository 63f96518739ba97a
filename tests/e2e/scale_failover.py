#!/usr/bin/env python3
"""scale_failover.py BIN ROOT — three replicas behind nginx, sessions in Redis.

Started here, on free loopback ports, each with its own directory: redis-server
(--save '', no persistence), three `BIN serve --state-store redis://...` on
models/stories260K.gguf (same --state-key-file and --session-secret-file,
--store-every 2 so that some turns are written and some are not), and nginx
(-p PREFIX -c conf: deploy/nginx.conf + deploy/nginx/zerolayer.conf as
shipped, only the ports rewritten).  Checks:
  1. readiness: each replica listens once its model is loaded; /health 200;
  2. failover: a 5-turn greedy conversation (full mode: the client sends the
     history) on a session; the replica holding it is SIGKILLed after turn 2
     (its snapshot, taken at codec exact after turn 2, is in Redis) -> turn 3
     is served by another replica from that snapshot; that one is SIGKILLed
     after turn 3, which was never written -> turn 4 is served by the third
     replica, re-prefilled from the history the client sends; every turn's
     text equals an uninterrupted run's;
  3. tenants: two tenants' sessions and prefix caches never cross (tokens are
     refused across tenants, cached-token counts, outputs, Redis keys under
     each tenant's digest);
  4. rolling restart under 8 streams (6 stateless, 2 session conversations):
     each replica in turn gets SIGTERM while a stream runs on it; its /health
     answers 503 while it drains, the stream finishes, it exits 0 and comes
     back; no request is lost: each completes or gets a retryable 503 before
     its first token, and the conversations' texts equal the uninterrupted run;
  5. spilling into Redis: a replica restarted with --session-kv-mb 1 spills
     its least recently used idle session into the session's Redis record
     instead of evicting it; the next turn brings it back from there (greedy
     text as a stateless run) and the record stays;
  6. Redis outage: stateless requests still succeed; the replicas warn once
     and show zerolayer_state_store_up 0.
Prints the failover time (kill -> first token of the next turn elsewhere)."""
import hashlib
import os
import signal
import subprocess
import sys
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from scale_lib import Cluster, metrics, request, stream  # noqa: E402

BIN, ROOT = os.path.abspath(sys.argv[1]), os.path.abspath(sys.argv[2])
# streams last long enough to be caught by a SIGTERM (ZL_TEST_STEP_MS: the test build's engine step)
C = Cluster(BIN, ROOT, os.path.join(ROOT, 'models', 'stories260K.gguf'), 3,
            ['-t', '1', '--ctx', '512', '--parallel', '8', '--store-every', '2', '--store-idle', '600',
             '--drain-timeout', '20'], {'ZL_TEST_STEP_MS': '6'})
PORTS, replicas = C.ports, C.replicas
fails = []


def check(ok, what):
    print(('ok   ' if ok else 'FAIL ') + what, flush=True)
    if not ok:
        fails.append(what)


def served(i):
    """Completions answered 200 by replica i so far."""
    return metrics(PORTS[i]).get('zerolayer_requests_total{route="/v1/completions",status="200"}', 0)


def which_served(before):
    """The one replica whose count moved; a replica counts a stream once it has sent its end, which a loaded
    machine may let the client see first, so the counts are read again for up to 2 s."""
    end = time.time() + 2
    while True:
        alive = C.alive()
        now = {i: served(i) for i in alive}
        moved = [i for i in alive if now[i] > before.get(i, 0)]
        if len(moved) == 1 or time.time() > end:
            return moved[0] if len(moved) == 1 else None, now
        time.sleep(0.05)


P = ['Once upon a time', ' One day, she went to the park', ' Then the sun came out', ' At night, they went home',
     ' The next morning']


def prompt_of(k, outs):
    s = ''
    for j in range(k):
        s += P[j] + outs[j]
    return s + P[k]


def new_session(user):
    st, j = request(C.np, 'POST', '/v1/sessions', {}, user=user)
    assert st == 200, (st, j)
    return j


def tenant_digest(user):
    return 'user:' + hashlib.sha256(user.encode()).hexdigest()


def session_key(keys, tenant, sid):
    """The store key of session sid of tenant among keys: zerolayer:session:<model>:<tenant>:<id>, or None."""
    hits = [k for k in keys if k.startswith('zerolayer:session:') and k.endswith(':%s:%s' % (tenant, sid))
            and len(k.split(':')[2]) == 16]
    return hits[0] if len(hits) == 1 else None


def redis_keys():
    out = subprocess.run(['redis-cli', '-p', str(C.rp), '--raw', 'KEYS', 'zerolayer:session:*'], capture_output=True,
                         text=True, timeout=10)
    return set(out.stdout.split())


def main():
    t_start = time.time()
    C.start_redis()
    for i in range(3):
        C.start_replica(i)
    C.start_nginx()

    # 1. readiness
    for i in range(3):
        log = open(C.log('replica%d' % i)).read()
        st, j = request(PORTS[i], 'GET', '/health')
        check(st == 200 and j.get('status') == 'ok' and log.find('listening on') > log.find('layers'),
              'replica %d listens once its model is loaded, /health 200' % i)
    st, _ = request(C.np, 'GET', '/health')
    check(st == 200, 'nginx /health 200')

    # the uninterrupted run
    ref_sess = new_session('ref')
    R = []
    for k in range(5):
        r = stream(C.np, prompt_of(k, R), 'ref', ref_sess['token'])
        assert r['status'] == 200 and r['done'], r
        R.append(r['text'])
    check(all(R), 'the uninterrupted 5-turn conversation: %r' % R[:2])

    # 2. failover
    alice = new_session('alice')
    before = {i: served(i) for i in range(3)}
    persisted0 = {i: metrics(PORTS[i]).get('zerolayer_sessions_persisted_total', 0) for i in range(3)}
    outs, cached = [], []
    for k in range(2):
        r = stream(C.np, prompt_of(k, outs), 'alice', alice['token'])
        outs.append(r['text'])
        cached.append(r['cached'])
    y, before = which_served(before)
    check(y is not None and outs == R[:2], 'turns 1-2 on one replica (%s), text as uninterrupted' % y)
    if y is None:
        return
    # turn 2 completed the second turn: --store-every 2 writes it (sweeper, within ~100 ms)
    end = time.time() + 10
    while time.time() < end and metrics(PORTS[y]).get('zerolayer_sessions_persisted_total', 0) <= persisted0[y]:
        time.sleep(0.05)
    check(metrics(PORTS[y]).get('zerolayer_sessions_persisted_total', 0) > persisted0[y],
          'replica %d wrote the session after turn 2 (exact snapshot)' % y)
    t_kill = time.time()
    replicas[y].send_signal(signal.SIGKILL)
    replicas[y].wait()
    t_req = time.time()
    r = stream(C.np, prompt_of(2, outs), 'alice', alice['token'])
    outs.append(r['text'])
    z, before = which_served(before)
    check(r['status'] == 200 and z is not None and z != y and r['text'] == R[2] and (r['cached'] or 0) > 0,
          'SIGKILL of replica %d: turn 3 on replica %s from the snapshot (%s tokens cached), text identical: %r'
          % (y, z, r['cached'], r['text']))
    m = metrics(PORTS[z]) if z is not None else {}
    check(m.get('zerolayer_state_store_loads_total{result="loaded"}', 0) >= 1, 'replica %s loaded it from Redis' % z)
    cached3 = r['cached'] or 0
    if r['first'] is not None:
        print('failover: SIGKILL -> first token of the next turn on another replica: %.1f ms'
              % ((t_req - t_kill + r['first']) * 1e3))
    if z is None:
        return
    # turn 3 was the restored session's first: not written (--store-every 2)
    replicas[z].send_signal(signal.SIGKILL)
    replicas[z].wait()
    r = stream(C.np, prompt_of(3, outs), 'alice', alice['token'])
    outs.append(r['text'])
    w, before = which_served(before)
    check(r['status'] == 200 and w is not None and w not in (y, z) and r['text'] == R[3] and 0 < (r['cached'] or 0)
          <= cached3 + 1, 'SIGKILL of replica %d before turn 3 was written: turn 4 on replica %s re-prefilled from the '
          'history (only %s of %s prompt tokens from the snapshot), text identical' % (z, w, r['cached'],
                                                                                      r.get('prompt_tokens')))
    r = stream(C.np, prompt_of(4, outs), 'alice', alice['token'])
    outs.append(r['text'])
    check(outs == R, 'all 5 turns equal the uninterrupted run')

    # 3. tenants
    bob = new_session('bob')
    st, j = request(C.np, 'POST', '/v1/completions', {'prompt': P[0], 'max_tokens': 4}, user='bob',
                    token=alice['token'])
    check(st == 403, "bob with alice's token: %d" % st)
    st, j = request(C.np, 'POST', '/v1/completions', {'prompt': P[0], 'max_tokens': 4}, user='alice',
                    token=bob['token'])
    check(st == 403, "alice with bob's token: %d" % st)
    st, j = request(C.np, 'GET', '/v1/sessions/' + alice['id'], user='bob', token=alice['token'])
    check(st == 403, "bob reading alice's session: %d" % st)
    a1 = stream(C.np, P[0] + R[0], 'alice')
    a2 = stream(C.np, P[0] + R[0], 'alice')
    b1 = stream(C.np, P[0] + R[0], 'bob')
    bs = stream(C.np, P[0], 'bob', bob['token'])
    check(a2['cached'] and a2['cached'] > 0 and b1['cached'] == 0 and b1['text'] == a1['text'] == a2['text'],
          "alice's prefix cache serves alice (%s cached), never bob (%s cached); same text" % (a2['cached'],
                                                                                            b1['cached']))
    check(bs['cached'] == 0 and bs['text'] == R[0], "bob's new session starts empty (%s cached), its own text"
          % bs['cached'])
    keys = redis_keys()
    ka = session_key(keys, tenant_digest('alice'), alice['id'])
    kb = session_key(keys, tenant_digest('bob'), bob['id'])
    check(ka and kb and ka.split(':')[2] == kb.split(':')[2] and not any(alice['id'] in k and tenant_digest('alice') not in k for k in keys),
          'Redis holds each session under its own tenant digest (%d keys)' % len(keys))
    vals = subprocess.run(['redis-cli', '-p', str(C.rp), '--raw', 'GET', ka], capture_output=True, timeout=10).stdout
    check(len(vals) > 1000 and b'Once upon' not in vals and R[0].encode()[:12] not in vals,
          'the stored session is sealed (%d bytes, no plain text)' % len(vals))

    # 4. rolling restart under 8 streams
    for i in (y, z):
        C.start_replica(i)
    time.sleep(C.fail_timeout + 0.3)  # nginx takes back the replicas that were down
    stop = threading.Event()
    results, bad, lock = [], [], threading.Lock()

    def stateless(u):
        n = 0
        while not stop.is_set():
            r = stream(C.np, P[n % 5] + ' and user %d' % u, 'load%d' % u, max_tokens=48)
            n += 1
            with lock:
                results.append(r)
                if not ((r['status'] == 200 and r['done'] and r['finish'] and not r['error'])
                        or (r['status'] == 503 and r['first'] is None)):
                    bad.append(r)
            if r['status'] != 200:
                time.sleep(0.05)  # a client backs off before it retries

    conv_ok = []

    def conversation(u):
        user = 'conv%d' % u
        while not stop.is_set():
            st, s = request(C.np, 'POST', '/v1/sessions', {}, user=user)
            if st != 200:
                with lock:
                    if st != 503:
                        bad.append({'status': st, 'error': s, 'why': 'session create'})
                time.sleep(0.05)
                continue
            o = []
            while len(o) < 5 and not stop.is_set():
                r = stream(C.np, prompt_of(len(o), o), user, s['token'])
                with lock:
                    results.append(r)
                if r['status'] == 200 and r['done'] and not r['error']:
                    with lock:
                        conv_ok.append(r['text'] == R[len(o)])
                        if r['text'] != R[len(o)]:
                            bad.append(dict(r, why='turn %d differs from the uninterrupted run' % len(o)))
                    o.append(r['text'])
                elif r['status'] == 503 and r['first'] is None:
                    time.sleep(0.05)  # retryable: the same turn again
                else:
                    with lock:
                        bad.append(r)
                    break

    threads = [threading.Thread(target=stateless, args=(u,)) for u in range(6)]
    threads += [threading.Thread(target=conversation, args=(u,)) for u in range(2)]
    for t in threads:
        t.start()
    time.sleep(1.0)
    exits = []
    for i in range(3):
        direct = {}
        th = threading.Thread(target=lambda: direct.update(stream(PORTS[i], P[0], 'direct', max_tokens=120)))
        th.start()
        time.sleep(0.3)  # the direct stream is running
        replicas[i].send_signal(signal.SIGTERM)
        saw503 = False
        while replicas[i].poll() is None:
            try:
                st, _ = request(PORTS[i], 'GET', '/health', timeout=2)
                saw503 = saw503 or st == 503
            except OSError:
                pass
            time.sleep(0.02)
        th.join()
        exits.append(replicas[i].returncode)
        check(saw503, 'replica %d: /health 503 while draining' % i)
        check(direct.get('done') and direct.get('finish') == 'length',
              'replica %d: the stream running at SIGTERM finished (%s)' % (i, direct.get('finish') or direct))
        C.start_replica(i)
        # the rolling procedure (deploy/README.md): the next replica goes once nginx has taken this one back,
        # fail_timeout after its failure
        time.sleep(C.fail_timeout + 0.3)
    time.sleep(0.5)
    stop.set()
    for t in threads:
        t.join(60)
    n_ok = sum(1 for r in results if r['status'] == 200 and r['done'])
    n_503 = sum(1 for r in results if r['status'] == 503)
    check(exits == [0, 0, 0], 'every replica exited 0 after its drain: %s' % exits)
    check(not bad and n_ok >= 16 and conv_ok and all(conv_ok),
          'rolling restart under 8 streams: %d completed, %d retryable 503 before a token, %d lost%s; '
          '%d conversation turns equal the uninterrupted run' % (n_ok, n_503, len(bad),
                                                                  (': %r' % bad[:3]) if bad else '', len(conv_ok)))

    # 5. spilling into Redis (replica 0, talked to directly)
    C.replicas[0].send_signal(signal.SIGTERM)
    C.replicas[0].wait()
    C.start_replica(0, C.replica_args + ['--session-kv-mb', '1'])
    long_p = (P[0] + ' there was a little girl named Lily. She loved to play outside in the sun with her friends.') * 11

    def turn0(prompt, token=None):
        st, j = request(PORTS[0], 'POST', '/v1/completions', {'prompt': prompt, 'max_tokens': 16, 'temperature': 0},
                        user='spill', token=token)
        assert st == 200, (st, j)
        return j['choices'][0]['text'], j.get('timings', {}).get('state', {})

    def spilled(s):  # live, its tokens counted, none of them in memory
        st, j = request(PORTS[0], 'GET', '/v1/sessions/' + s['id'], user='spill', token=s['token'])
        return st == 200 and j['cached_tokens'] > 0 and j['kv_bytes'] == 0

    def key(s, keys):
        return session_key(keys, tenant_digest('spill'), s['id'])

    ss, texts = [], []
    for _ in range(5):  # ~400 tokens of 640 bytes each: the fourth goes over 1 MB
        st, s = request(PORTS[0], 'POST', '/v1/sessions', {}, user='spill')
        assert st == 200, (st, s)
        ss.append(s)
        texts.append(turn0(long_p, s['token'])[0])
    for _ in range(100):
        if metrics(PORTS[0]).get('zerolayer_sessions_spilled', 0) >= 1:
            break
        time.sleep(0.1)
    out = [s for s in ss if spilled(s)]
    m, keys = metrics(PORTS[0]), redis_keys()
    check(out and m.get('zerolayer_sessions_evicted_total', 1) == 0 and all(key(s, keys) for s in out),
          'over --session-kv-mb %d sessions spilled into their Redis records, none evicted' % len(out))
    a = out[0] if out else ss[0]
    k = ss.index(a)
    t2, state = turn0(long_p + texts[k] + P[1], a['token'])
    ref, _ = turn0(long_p + texts[k] + P[1])
    check(t2 == ref and state.get('from') == 'spill' and state.get('rebuilt') is True and key(a, redis_keys()),
          'the next turn brings the spilled session back from Redis (%s), text as stateless: %r; the record stays'
          % (state, t2))

    # 6. Redis outage
    C.redis.send_signal(signal.SIGKILL)
    C.redis.wait()
    rs = [stream(C.np, P[1], 'outage%d' % u, max_tokens=8) for u in range(4)]
    check(all(r['status'] == 200 and r['done'] for r in rs), 'Redis down: stateless requests succeed (%s)'
          % [r['status'] for r in rs])
    st, s = request(C.np, 'POST', '/v1/sessions', {}, user='outage')
    check(st == 200, 'Redis down: a session can still be created (local only): %d' % st)
    downs = [metrics(p).get('zerolayer_state_store_up', 1) for p in PORTS]
    logs = ''.join(open(C.log('replica%d' % i)).read() for i in range(3))
    check(0 in downs and 'warning: state store redis://' in logs,
          'the replica that tried warns and shows zerolayer_state_store_up 0 (%s)' % downs)
    print('elapsed %.1f s' % (time.time() - t_start))


try:
    main()
except SystemExit:
    raise
except Exception as e:  # an unexpected exception is a failure with its reason
    import traceback
    traceback.print_exc()
    fails.append(repr(e))
finally:
    if fails:
        print(C.tails())
    C.close()
print('fails: %d' % len(fails))
sys.exit(1 if fails else 0)
