// node bench/compare.js: app CPU µs per request of builds of this library (and the peer) side by
// side, in interleaved rounds on one private redis-server, medians: for A/B comparisons of
// changes, faster than a whole `npm run bench`. Build the libraries to compare first, e.g. a
// commit's dist/ copied into bench/peer/lib-before (then NestJS resolves from bench/peer, the
// peer's NestJS 10). Env:
//   APPS   'name=LIBRARY_DIR[#{module options JSON}]' or 'name=x@peer', separated by ';'
//   SCEN   scenarios, default baseline,floor,first,replay (also mismatch: 422)
//   ROUNDS (5), DUR seconds per measurement (3), NODE_BIN the Node to run the apps with,
//   COMPARE_REDIS_PORT (6391)
const { spawn, execFileSync } = require('node:child_process');
const { readFileSync } = require('node:fs');
const { join } = require('node:path');
const http = require('node:http');
const NODE = process.env.NODE_BIN || process.execPath;
const ROOT = join(__dirname, '..');
const ROUNDS = Number(process.env.ROUNDS || 5),
  DUR = Number(process.env.DUR || 3),
  CONN = 20;
const SCEN = (process.env.SCEN || 'baseline,floor,first,replay').split(',');
const PATHS = {
  baseline: 'baseline',
  floor: 'intercepted',
  first: 'idempotent',
  replay: 'idempotent',
  mismatch: 'idempotent',
};
const TICK = Number(execFileSync('getconf', ['CLK_TCK']).toString()) || 100;
const cpu = (pid) => {
  const f = readFileSync(`/proc/${pid}/stat`, 'utf8').split(') ')[1].split(' ');
  return ((+f[11] + +f[12]) * 1e6) / TICK;
};
const kids = [];
process.on('exit', () => kids.forEach((k) => k.kill('SIGKILL')));
function start(cmd, args, env, re) {
  const c = spawn(cmd, args, {
    env: { ...process.env, ...env },
    stdio: ['ignore', 'pipe', 'inherit'],
  });
  kids.push(c);
  return new Promise((res, rej) => {
    let out = '';
    c.stdout.on('data', (d) => {
      out += d;
      const m = re.exec(out);
      if (m) res({ m, pid: c.pid });
    });
    c.on('exit', (code) => rej(new Error('exit ' + code + out)));
  });
}
function post(base, path, key, body = '{"amount":100}') {
  return new Promise((res, rej) => {
    const r = http.request(
      base + path,
      {
        method: 'POST',
        headers: { 'content-type': 'application/json', ...(key && { 'idempotency-key': key }) },
      },
      (s) => {
        s.resume();
        s.on('end', () => res(s.statusCode));
      },
    );
    r.on('error', rej);
    r.end(body);
  });
}
function load(url, key, unique, dur, body = '{"amount":100}') {
  const cfg = JSON.stringify({
    url,
    connections: CONN,
    duration: dur,
    headers: key ? { 'idempotency-key': key } : {},
    body,
    uniqueKey: unique,
  });
  return JSON.parse(
    execFileSync(NODE, [join(ROOT, 'bench/load/http.js'), cfg], { maxBuffer: 64 << 20 }).toString(),
  );
}
const median = (v) => {
  const s = [...v].sort((a, b) => a - b);
  const m = s.length >> 1;
  return s.length % 2 ? s[m] : (s[m - 1] + s[m]) / 2;
};
(async () => {
  const rport = Number(process.env.COMPARE_REDIS_PORT ?? 6391);
  await start(
    'redis-server',
    ['--port', String(rport), '--save', '', '--appendonly', 'no'],
    {},
    /Ready to accept/,
  );
  const apps = [];
  for (const spec of (process.env.APPS || 'cur=' + join(ROOT, 'dist')).split(';')) {
    const [name, rest0] = spec.split('=');
    const [rest, opts] = rest0.split('#');
    const [lib, kind] = rest.split('@');
    const script =
      kind === 'peer' ? join(ROOT, 'bench/peer/app.js') : join(ROOT, 'bench/apps/http.js');
    const env = {
      STORE: process.env.STORE || 'redis',
      REDIS_URL: `redis://127.0.0.1:${rport}`,
      KEY_PREFIX: `ab-${name}:`,
      PORT: '0',
      ...(kind === 'peer' ? {} : { LIBRARY: lib }),
      BENCH_MODULE_OPTIONS: opts || process.env.OPTS || '{}',
    };
    const { m, pid } = await start(NODE, [script], env, /READY (\d+)/);
    apps.push({ name, pid, base: `http://127.0.0.1:${m[1]}` });
  }
  const runs = [];
  for (const app of apps)
    for (const s of SCEN) {
      let key;
      if (s === 'replay') {
        key = `r-${app.name}-${Date.now()}`;
        await post(app.base, '/idempotent', key);
      }
      if (s === 'mismatch') {
        key = `m-${app.name}-${Date.now()}`;
        await post(app.base, '/idempotent', key, '{"amount":1}');
      }
      runs.push({ app, s, key, cpu: [], rps: [] });
    }
  for (const r of runs) load(`${r.app.base}/${PATHS[r.s]}`, r.key, r.s === 'first', 1);
  for (let i = 0; i < ROUNDS; i++) {
    for (const r of i % 2 ? [...runs].reverse() : runs) {
      const before = cpu(r.app.pid);
      const res = load(
        `${r.app.base}/${PATHS[r.s]}`,
        r.key,
        r.s === 'first',
        DUR,
        r.s === 'mismatch' ? '{"amount":2}' : undefined,
      );
      r.cpu.push((cpu(r.app.pid) - before) / res.requests.total);
      r.rps.push(res.requests.average);
    }
  }
  for (const r of runs) {
    const base = runs.find((x) => x.app === r.app && x.s === 'baseline');
    const ratio = base ? median(r.rps.map((v, i) => v / base.rps[i])) : NaN;
    console.log(
      `${r.app.name.padEnd(10)} ${r.s.padEnd(9)} cpu ${median(r.cpu).toFixed(0).padStart(4)} µs  (${Math.min(...r.cpu).toFixed(0)}-${Math.max(...r.cpu).toFixed(0)})  rps ${median(r.rps).toFixed(0).padStart(6)}  ratio ${ratio.toFixed(2)}`,
    );
  }
  process.exit(0);
})();
