// serve.mjs — what the node test scripts share: start `zerolayer serve` on a
// free port (its stderr kept for failure messages), read /metrics, and the
// ok/FAIL checker.
import { spawn } from 'node:child_process';

// BIN serve --port 0 ARGS... with ENV added; resolves when it listens.
export async function startServer(bin, args, env = {}) {
  const p = spawn(bin, ['serve', '--port', '0', ...args], { stdio: ['ignore', 'ignore', 'pipe'], env: { ...process.env, ...env } });
  let log = '';
  const port = await new Promise((resolve, reject) => {
    const timer = setTimeout(() => { p.kill('SIGKILL'); reject(new Error('server did not start:\n' + log)); }, 30000);
    p.stderr.on('data', (d) => {
      log += d.toString();
      const m = log.match(/listening on http:\/\/[^:]+:(\d+)/);
      if (m) { clearTimeout(timer); resolve(Number(m[1])); }
    });
    p.on('exit', (code) => { clearTimeout(timer); reject(new Error(`server exited (${code}):\n${log}`)); });
  });
  p.removeAllListeners('exit');
  return { url: `http://127.0.0.1:${port}`, proc: p, log: () => log };
}

// A Prometheus counter or gauge without labels from URL/metrics (NaN: absent).
export async function metric(url, name) {
  const text = await (await fetch(url + '/metrics')).text();
  const m = text.match(new RegExp('^' + name + ' ([0-9.e+-]+)$', 'm'));
  return m ? Number(m[1]) : NaN;
}

// check(name, fn) runs one named check and prints ok/FAIL; counts() says how many of each.
export function checker() {
  let passed = 0, failed = 0;
  async function check(name, fn) {
    const t0 = Date.now();
    try { await fn(); passed++; console.log(`ok   ${name} (${Date.now() - t0} ms)`); }
    catch (e) { failed++; console.log(`FAIL ${name}\n     ${(e && e.stack) || e}`); }
  }
  return { check, counts: () => ({ passed, failed }) };
}
