"""scale_lib.py — a zerolayer scale-out cluster on loopback for tests and benchmarks:
redis-server, N replicas of `serve --state-store redis://...` and nginx running
deploy/nginx.conf + deploy/nginx/zerolayer.conf as shipped (only the ports
rewritten), each started as an ordinary process with its own directory under
one temporary dir; and the HTTP helpers that talk to them (stdlib only).
Used by tests/e2e/scale_failover.py and bench/scale_out.py."""
import http.client
import json
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time


def free_port():
    with socket.socket() as s:
        s.bind(('127.0.0.1', 0))
        return s.getsockname()[1]


def wait_port(port, proc, secs=60):
    end = time.time() + secs
    while time.time() < end:
        if proc is not None and proc.poll() is not None:
            return False
        try:
            socket.create_connection(('127.0.0.1', port), 0.2).close()
            return True
        except OSError:
            time.sleep(0.05)
    return False


class Cluster:
    """redis (port rp), replicas (ports[i]) and nginx (port np) under self.dir."""

    def __init__(self, bin, root, model, n=3, replica_args=(), env=None):
        self.bin, self.root, self.model = bin, root, model
        self.replica_args, self.env = list(replica_args), dict(os.environ, **(env or {}))
        self.dir = tempfile.mkdtemp(prefix='zl_scale_')
        self.rp, self.np = free_port(), free_port()
        self.ports = [free_port() for _ in range(n)]
        self.replicas = [None] * n
        self.redis = self.nginx = None
        self.procs = []
        self.fail_timeout = 10
        self.key, self.secret = os.path.join(self.dir, 'state.key'), os.path.join(self.dir, 'session.secret')
        with open(self.key, 'wb') as f:
            f.write(os.urandom(48))
        with open(self.secret, 'wb') as f:
            f.write(os.urandom(32))

    def log(self, name):
        return os.path.join(self.dir, name + '.log')

    def start_redis(self):
        os.makedirs(os.path.join(self.dir, 'redis'), exist_ok=True)
        self.redis = subprocess.Popen(['redis-server', '--port', str(self.rp), '--bind', '127.0.0.1', '--save', '',
                                       '--appendonly', 'no', '--dir', os.path.join(self.dir, 'redis')],
                                      stdout=open(self.log('redis'), 'w'), stderr=subprocess.STDOUT)
        self.procs.append(self.redis)
        if not wait_port(self.rp, self.redis):
            sys.exit('FAIL: redis-server did not start: ' + open(self.log('redis')).read())

    def start_replica(self, i, args=None):
        p = subprocess.Popen([self.bin, 'serve', '-m', self.model, '--port', str(self.ports[i]),
                              '--state-store', 'redis://127.0.0.1:%d/0' % self.rp, '--state-key-file', self.key,
                              '--session-secret-file', self.secret] + (self.replica_args if args is None else args),
                             stdout=subprocess.DEVNULL, stderr=open(self.log('replica%d' % i), 'a'), env=self.env)
        self.procs.append(p)
        self.replicas[i] = p
        if not wait_port(self.ports[i], p, 300):
            sys.exit('FAIL: replica %d did not start:\n%s' % (i, open(self.log('replica%d' % i)).read()))
        return p

    def start_nginx(self, ports=None):
        """nginx in front of the replicas on `ports` (default: all)."""
        ports = self.ports if ports is None else ports
        pre = os.path.join(self.dir, 'nginx')
        for d in ('logs', 'tmp', 'nginx'):
            os.makedirs(os.path.join(pre, d), exist_ok=True)
        shutil.copy(os.path.join(self.root, 'deploy', 'nginx.conf'), os.path.join(pre, 'nginx.conf'))
        site = open(os.path.join(self.root, 'deploy', 'nginx', 'zerolayer.conf')).read()
        n_listen = site.count('listen 127.0.0.1:8080;')
        site = site.replace('listen 127.0.0.1:8080;', 'listen 127.0.0.1:%d;' % self.np)
        lines = [l for l in site.splitlines() if re.match(r'\s*server 127\.0\.0\.1:808[1-3] ', l)]
        if n_listen != 1 or len(lines) != 3:
            sys.exit('FAIL: deploy/nginx/zerolayer.conf no longer has the shape this rewrites (listen 8080, '
                     'servers 8081-8083)')
        mine = [re.sub(r'127\.0\.0\.1:808[1-3]', '127.0.0.1:%d' % p, lines[0]) for p in ports]
        site = site.replace('\n'.join(lines), '\n'.join(mine))
        ft = re.findall(r'fail_timeout=(\d+)s', site)
        self.fail_timeout = max(int(x) for x in ft) if ft else 10
        with open(os.path.join(pre, 'nginx', 'zerolayer.conf'), 'w') as f:
            f.write(site)
        glob = 'daemon off;' + (' user root;' if os.geteuid() == 0 else '')  # root: workers may write PREFIX/tmp
        self.nginx = subprocess.Popen(['nginx', '-p', pre + '/', '-c', os.path.join(pre, 'nginx.conf'), '-g', glob],
                                      stdout=open(self.log('nginx'), 'w'), stderr=subprocess.STDOUT)
        self.procs.append(self.nginx)
        if not wait_port(self.np, self.nginx):
            sys.exit('FAIL: nginx did not start: ' + open(self.log('nginx')).read())

    def stop_nginx(self):
        if self.nginx and self.nginx.poll() is None:
            self.nginx.send_signal(signal.SIGQUIT)
            self.nginx.wait()

    def alive(self):
        return [i for i, p in enumerate(self.replicas) if p is not None and p.poll() is None]

    def tails(self, n=15):
        out = ''
        for i in range(len(self.ports)):
            if os.path.exists(self.log('replica%d' % i)):
                out += '--- replica %d log (tail)\n' % i + ''.join(open(self.log('replica%d' % i)).readlines()[-n:])
        path = os.path.join(self.dir, 'nginx', 'logs', 'error.log')
        if os.path.exists(path):
            out += '--- nginx error.log (tail)\n' + ''.join(open(path).readlines()[-25:])
        return out

    def close(self):
        # nginx's workers outlive a SIGKILLed master (still listening): it gets SIGTERM, its fast shutdown, first
        for p in self.procs:
            if p.poll() is None and p is self.nginx:
                p.send_signal(signal.SIGTERM)
                try:
                    p.wait(timeout=10)
                except subprocess.TimeoutExpired:
                    pass
            if p.poll() is None:
                p.send_signal(signal.SIGKILL)
                p.wait()
        if not os.environ.get('ZL_KEEP_TMP'):
            shutil.rmtree(self.dir, ignore_errors=True)


def request(port, method, path, body=None, user=None, token=None, timeout=60):
    h = {'content-type': 'application/json'}
    if user:
        h['X-Zerolayer-User'] = user
    if token:
        h['X-Zerolayer-Session'] = token
    c = http.client.HTTPConnection('127.0.0.1', port, timeout=timeout)
    try:
        c.request(method, path, json.dumps(body) if body is not None else None, h)
        r = c.getresponse()
        data = r.read()
        try:
            j = json.loads(data) if data else None
        except ValueError:
            j = {'raw': data[:200].decode('latin-1')}
        return r.status, j
    finally:
        c.close()


def stream(port, prompt, user, token=None, max_tokens=20, timeout=60):
    """A streamed greedy completion: dict(status, text, finish, first (s after start), cached, error)."""
    h = {'content-type': 'application/json', 'X-Zerolayer-User': user}
    if token:
        h['X-Zerolayer-Session'] = token
    body = {'prompt': prompt, 'max_tokens': max_tokens, 'temperature': 0, 'stream': True,
            'stream_options': {'include_usage': True}}
    out = {'status': 0, 'text': '', 'finish': None, 'first': None, 'cached': None, 'error': None, 'done': False}
    t0 = time.time()
    c = http.client.HTTPConnection('127.0.0.1', port, timeout=timeout)
    try:
        c.request('POST', '/v1/completions', json.dumps(body), h)
        r = c.getresponse()
        out['status'] = r.status
        if r.status != 200:
            out['error'] = r.read()[:300].decode('utf-8', 'replace')
            out['retry_after'] = r.getheader('Retry-After')
            return out
        while True:
            line = r.readline()
            if not line:
                break
            line = line.strip()
            if not line.startswith(b'data: '):
                continue
            data = line[6:]
            if data == b'[DONE]':
                out['done'] = True
                break
            j = json.loads(data)
            if 'error' in j:
                out['error'] = str(j['error'])
                continue
            for ch in j.get('choices', []):
                if ch.get('text'):
                    if out['first'] is None:
                        out['first'] = time.time() - t0
                    out['text'] += ch['text']
                if ch.get('finish_reason'):
                    out['finish'] = ch['finish_reason']
            if j.get('usage'):
                out['cached'] = j['usage'].get('prompt_tokens_details', {}).get('cached_tokens')
                out['prompt_tokens'] = j['usage'].get('prompt_tokens')
    except (OSError, http.client.HTTPException, ValueError) as e:
        out['error'] = '%s: %s' % (type(e).__name__, e)
    finally:
        c.close()
    return out


def metrics(port):
    try:
        c = http.client.HTTPConnection('127.0.0.1', port, timeout=5)
        c.request('GET', '/metrics')
        text = c.getresponse().read().decode()
        c.close()
    except OSError:
        return {}
    m = {}
    for line in text.splitlines():
        if line and not line.startswith('#'):
            k, _, v = line.rpartition(' ')
            m[k] = float(v)
    return m


